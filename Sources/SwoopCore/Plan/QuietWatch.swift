/// The session's watchdog: a download that has gone longer than any legitimate wait with no
/// request in flight and no new byte is stuck (a bug), and ends naming what it waited for rather
/// than wait forever. Waiting for a connection that other downloads hold is not quiet: they are
/// the ones progressing. Pure: the caller looks every progress tick, with the time.
package struct QuietWatch {
    /// The longest legitimate quiet: the timeouts and every retry's backoff; while a server is
    /// down, that and the longest outage waited for.
    package let limit: Duration
    package let outageLimit: Duration
    /// Since when nothing has been in flight and no byte arrived (`nil`: something has).
    private var quietSince: Moment?
    private var bytesAtLastLook: Int64 = 0

    /// A watch that allows `limit` of quiet, and `outageLimit` while a server is down.
    package init(limit: Duration, outageLimit: Duration) {
        self.limit = limit
        self.outageLimit = outageLimit
    }

    /// One look: `idle` is what the download waits for with nothing in flight (`nil`: a request
    /// is in flight), `bytes` what it received so far. Returns the failure once quiet too long.
    package mutating func look(
        idle: IdleWait?, bytes: Int64, othersActive: Bool, now: Moment
    ) -> DownloadError? {
        defer { bytesAtLastLook = bytes }
        guard let idle, bytes == bytesAtLastLook, !(idle == .permit && othersActive) else {
            quietSince = nil
            return nil
        }
        guard let since = quietSince else {
            quietSince = now
            return nil
        }
        guard now - since > (idle == .outage ? outageLimit : limit) else { return nil }
        let seconds = Int((now - since).seconds.rounded())
        return DownloadError(
            .network,
            "no request in flight and no progress for \(seconds) s while waiting for \(idle.description); "
                + "stopped rather than wait forever (a bug: please report it)",
            remedy: .resume)
    }
}

/// What a stage waits for while it has no request in flight.
package enum IdleWait: Equatable {
    /// A retry's backoff timer.
    case retry
    /// A down server's next trial (see ``SourceHealth``): an outage, which the failure policy
    /// bounds itself.
    case outage
    /// A connection permit (the downloader's connection caps are reached).
    case permit
    /// Nothing: no request and no timer will come (a bug, which the watchdog ends).
    case nothing

    package var description: String {
        switch self {
        case .retry: "the next retry"
        case .outage: "a server that does not answer"
        case .permit: "a free connection (the connection limits are reached)"
        case .nothing: "nothing: no request was pending and no retry was scheduled"
        }
    }
}
