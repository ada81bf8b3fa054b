import SwoopTransfer

/// How often one run of a download starts over: within ``FailurePolicy/maxTries`` when its
/// object changed (the bytes of two responses differed, or the validators did), and when a single
/// stream (a server without ranges) broke off, after a backoff.
struct Restarts {
    /// Times it started over because its object changed.
    private(set) var changes = 0
    /// Validators seen on both sides of bytes that differed: after starting over, those other
    /// than the new probe's are another version's (a pool serving two), refused at once.
    private(set) var versionsSeen: [ObjectIdentity.Validators] = []

    /// The object changed (`versions`: the two responses' validators, if known and different):
    /// whether it may start over once more within `maxTries`.
    mutating func objectChanged(versions: [ObjectIdentity.Validators], maxTries: Int) -> Bool {
        if Set(versions).count > 1 {
            for version in versions where !versionsSeen.contains(version) { versionsSeen.append(version) }
        }
        guard changes < max(1, maxTries) else { return false }
        changes += 1
        return true
    }

    /// The versions other than `found`'s known from earlier tries of this download.
    func otherVersions(than found: ObjectIdentity) -> [ObjectIdentity.Validators] {
        versionsSeen.filter { !found.isKnown($0) }
    }
    /// Tries of the single stream so far.
    private(set) var streamTries = 0
    /// What the next try of the stream waits for, and until when.
    private var streamRetry: (wait: DownloadProgress.Wait, at: ContinuousClock.Instant)?
    /// The timer of that try.
    var streamTimer: LoopTimer?

    /// The single stream from `url` broke off with `error`: the wait before it starts over from
    /// the first byte, or `nil` when it may not (tries used up, or a failure no try can mend).
    mutating func streamBroke(_ error: DownloadError, policy: FailurePolicy, url: RemoteURL) -> Duration? {
        streamTries += 1
        guard let delay = policy.retryDelay(after: streamTries, error, retryAfter: nil) else { return nil }
        let wait = DownloadProgress.Wait(
            server: "\(url.host):\(url.port)", cause: error.shortCause, duration: .zero, nextTry: delay, limit: nil)
        streamRetry = (wait, .now + delay)
        return delay
    }

    /// What the download waits for while the stream's next try is due, for progress.
    var streamWait: DownloadProgress.Wait? {
        guard var retry = streamRetry?.wait, let at = streamRetry?.at, at > .now else { return nil }
        retry.nextTry = at - .now
        return retry
    }
}
