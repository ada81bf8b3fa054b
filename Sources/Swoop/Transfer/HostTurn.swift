import SwoopCurl

/// A single request's turn at its host, whose health is the downloader's (``HostTable``): the
/// request is sent only when the host may take it (a host that is down takes one trial at a time,
/// whichever download sends it), and its answer or failure counts for every download of that host.
/// The probe's exchanges (``ProbeExchange``) and documents (``DocumentFetch``) keep one; a byte
/// range's requests go through their ``Source``. Transfer thread only.
struct HostTurn {
    /// The host asked last.
    private(set) var host: HostEntry?
    /// The next request waits for its host, which is down (another request is its trial, or the
    /// next trial is not due).
    private(set) var isHeld = false
    /// The host was given up (down for longer than the policy allows): why.
    private(set) var givenUp: String?

    /// Whether `url`'s host may take a request now. If not, `watcher` hears when it may, and
    /// `retry` runs `send` when its next trial is due.
    mutating func mayAsk(
        _ url: RemoteURL, loop: TransferLoop, watcher: any HostWatcher, retry: inout RetryTimer,
        send: @escaping () -> Void
    ) -> Bool {
        let host = loop.hosts.entry(for: url)
        self.host = host
        isHeld = false
        guard !host.health.mayTake(active: 0, at: .now) else { return true }
        isHeld = true
        host.watch(watcher)
        retry.wait(until: host.health.nextWake, on: loop, send: send)
        return false
    }

    /// The request of the connection numbered `token` is sent: while the host is down, it is the trial.
    func willSend(by token: Int) {
        host?.updateHealth { $0.willSend(by: token) }
    }

    /// A response head arrived for the request sent at `sentAt`: the host answers.
    func answered(sentAt: Moment) {
        host?.updateHealth { $0.answered(sentAt: sentAt) }
    }

    /// The request of the connection numbered `token` delivered its response's body whole.
    func delivered(by token: Int) {
        host?.updateHealth {
            $0.delivered()
            $0.abandonTrial(by: token)
        }
    }

    /// The request ended without saying anything of the host (cancelled, or an answer of no use).
    func abandon(by token: Int) {
        host?.updateHealth { $0.abandonTrial(by: token) }
    }

    /// The request failed (`answered`: after its response head): what it says of its host. A
    /// permanent failure is the request's own end, not the host's.
    mutating func failed(
        _ error: DownloadError, answered: Bool, retryAfter: Int?, policy: FailurePolicy, by token: Int
    ) {
        guard let host, FailurePolicy.scope(of: error, answered: answered) != .permanent else { return }
        let verdict = host.updateHealth {
            $0.failed(
                error, answered: answered, active: 0, retryAfter: retryAfter, sharesWork: false, policy: policy,
                at: .now, by: token)
        }
        if case .giveUp(let reason) = verdict { givenUp = reason }
    }

    /// `error`, unless the host was given up: then the outage's own account.
    func final(_ error: DownloadError) -> DownloadError? {
        guard let givenUp, error.isTransient else { return nil }
        return error.replacing(reason: givenUp, remedy: .resume)
    }

    /// Stops watching the host.
    func leave(_ watcher: any HostWatcher) {
        host?.unwatch(watcher)
    }
}
