import SwoopTransfer

/// One server a download fetches from: the first URL's, or a mirror that passed its check. Each
/// has its own object identity (mirrors do not share `ETag`s), so its own precondition, and its
/// own ``SourceHealth``.
final class Source {
    let index: Int
    /// Its URL and identity; the first source's URL changes when a fresh one replaces it.
    var object: RemoteObject
    let headers: RequestHeaders
    /// Requests in flight to it.
    var active = 0
    /// Body bytes it delivered.
    var bytes: Int64 = 0
    /// Whether it answers, what it may be sent, and its failures.
    var health = SourceHealth()
    /// Its last failure.
    var lastError: DownloadError?
    /// Why it is no longer used.
    var dropped: String?

    init(index: Int, object: RemoteObject, headers: RequestHeaders) {
        self.index = index
        self.object = object
        self.headers = headers
    }

    func sample(at now: ContinuousClock.Instant) -> SourceSample {
        let limit = health.limit(at: now)
        return SourceSample(
            active: active, cap: limit.count, failures: health.failuresInARow + health.failedAnswers,
            isUsable: dropped == nil, isResting: limit.isHeldBack)
    }

    /// `host:port`, for progress and messages.
    var hostAndPort: String { object.url.hostAndPort }
}
