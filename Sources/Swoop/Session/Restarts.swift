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

    /// The single stream broke off with `error`: the wait before it starts over from the first
    /// byte (its probe waits for it), or `nil` when it may not (tries used up, or a failure no try
    /// can mend).
    mutating func streamBroke(_ error: DownloadError, policy: FailurePolicy) -> Duration? {
        streamTries += 1
        return policy.retryDelay(after: streamTries, error, retryAfter: nil)
    }
}
