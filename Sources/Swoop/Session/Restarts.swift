import SwoopTransfer

/// How often one run of a download starts over: once when its object changed (a second change
/// fails), and within ``FailurePolicy/maxTries`` when a single stream (a server without ranges)
/// broke off, after a backoff.
struct Restarts {
    /// It started over once because its object changed.
    var restartedAfterChange = false
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
