/// How often one run of a download starts over: within ``FailurePolicy/maxTries`` when its
/// object changed (its validators went, or the bytes of two responses differed), and when a
/// single stream (a server without ranges) broke off, after a backoff.
struct Restarts {
    /// Times it started over because its object changed.
    private(set) var changes = 0
    /// Bytes held when it started over, fetched again on the new version.
    private(set) var bytesRefetched: Int64 = 0

    /// The object changed with `held` bytes of it on disk: whether it may start over once more
    /// within `maxTries`.
    mutating func objectChanged(held: Int64, maxTries: Int) -> Bool {
        guard changes < max(1, maxTries) else { return false }
        changes += 1
        bytesRefetched += held
        return true
    }

    /// Tries of the single stream so far.
    private(set) var streamTries = 0

    /// The single stream broke off with `error`: the wait before it starts over from the first
    /// byte (its probe waits for it), or `nil` when it may not (tries used up, or a failure no try
    /// can mend).
    mutating func streamBroke(_ error: DownloadError, policy: FailurePolicy) -> Duration? {
        streamTries += 1
        return policy.retryDelay(after: streamTries, error, retryAfter: nil)
    }
}
