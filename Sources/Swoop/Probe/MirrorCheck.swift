import Logging
import SwoopTransfer

/// Hears how a mirror's check ends.
protocol MirrorCheckDelegate: AnyObject {
    /// The mirror serves an object of the right size and sent `sample`, the bytes at the check's
    /// range: compare them with the first source's before the mirror contributes anything.
    func mirrorCheck(_ check: MirrorCheck, sampled object: RemoteObject, headers: RequestHeaders, bytes: [UInt8])
    /// The mirror cannot be used: why, in a sentence.
    func mirrorCheck(_ check: MirrorCheck, failed reason: String)
}

/// Another source of the same file, checked before it may contribute a byte: it is probed on its
/// own (its own redirects, its own `ETag` or `Last-Modified`, which become its precondition), must
/// report the object's size, and sends the bytes of one range the first source has served, which
/// the transfer compares with what was written (same size is not the same bytes). Its bytes are
/// kept in memory for that and never reach the store. Transfer thread only.
final class MirrorCheck: ConnectionDelegate {
    let url: RemoteURL
    /// The bytes to compare.
    let range: ByteRange
    private let size: Int64
    private let loop: TransferLoop
    private let options: TransferOptions
    private let policy: FailurePolicy
    private let logger: Logger
    weak var delegate: (any MirrorCheckDelegate)?

    private var decision: ProbeDecision
    private var headers: RequestHeaders
    private var connection: Connection!
    private var tries = 0
    private var retryTimer: LoopTimer?
    private var pending: ProbeDecision.Step?
    private var found: RemoteObject?
    private var headRetryAfter: Int?
    /// The head showed the mirror cannot serve this object (no retry helps).
    private var unusable: String?
    /// It serves an object of another size: another object, not a passing failure.
    private(set) var servesOtherObject = false
    private(set) var stopped = false

    init(
        url: RemoteURL, headers: [(name: String, value: String)], size: Int64, range: ByteRange, target: String,
        configuration: Downloader.Configuration, loop: TransferLoop, logger: Logger
    ) {
        self.url = url
        self.range = range
        self.size = size
        self.loop = loop
        self.options = TransferOptions(configuration)
        self.policy = FailurePolicy(configuration)
        self.logger = logger
        // A mirror the user named gets the request's headers; a redirect elsewhere does not.
        self.headers = RequestHeaders(headers, originalURL: url)
        self.decision = ProbeDecision(
            url: url, originalURL: url, basis: .fresh, redirects: 0,
            maxRedirects: configuration.redirect.maxRedirects, target: target, resolve: RemoteURL.resolve)
        self.connection = Connection(id: -1, loop: loop, delegate: self)
    }

    /// Asks the mirror for the range (once a connection permit is free).
    func start() {
        guard !stopped else { return }
        let url = decision.url
        guard connection.acquirePermit(for: url, owner: self, retry: { [weak self] in self?.start() }) else { return }
        pending = nil
        found = nil
        unusable = nil
        headRetryAfter = nil
        let request = headers.request(for: url, range: .bounded(range), options: options)
        connection.begin(.sample(.bounded(range)), url: url, request: request)
    }

    func stop() {
        stopped = true
        retryTimer?.cancel()
        loop.budget.cancelWait(self)
        connection.cancel()
    }

    /// A request is in flight (for the watchdog).
    var isBusy: Bool { connection.isBusy }

    // MARK: ConnectionDelegate

    func connection(_ connection: Connection, didReceiveProbeHead head: ResponseHead, requested: RequestedRange) -> BodyDisposition {
        headRetryAfter = head.retryAfterSeconds
        let (step, body) = decision.decide(head, requested: requested)
        pending = step
        if case .ranged(let object, let served) = step {
            guard object.size == size else {
                unusable = "it reports \(object.size.map(String.init) ?? "no") bytes, not \(size)"
                servesOtherObject = object.size != nil
                return .abort
            }
            guard served == range else {
                unusable = "it answered bytes \(served) to a request for \(range)"
                return .abort
            }
            found = object
        }
        return body
    }

    func connection(_ connection: Connection, didFinish job: Connection.Job, with outcome: Connection.Outcome) {
        guard !stopped else { return }
        let step = pending
        pending = nil
        if let unusable { return fail(unusable) }
        switch (step, outcome) {
        case (.redirect(let next)?, .completed), (.redirect(let next)?, .stopped):
            headers.follow(to: next)
            decision.followed(to: next)
            start()
        case (.ranged?, .completed):
            guard let found else { return fail("no object") }
            delegate?.mirrorCheck(self, sampled: found, headers: headers, bytes: connection.takeSample())
        case (.fail(let error)?, _):
            retryOrFail(error, retryAfter: headRetryAfter)
        case (_, .failed(let error, let retryAfter)):
            retryOrFail(error, retryAfter: retryAfter)
        case (.stream?, _):
            fail("it does not serve byte ranges")
        case (_, .cancelled):
            break
        default:
            fail("its response to a range request cannot be used")
        }
    }

    private func retryOrFail(_ error: DownloadError, retryAfter: Int?) {
        tries += 1
        guard let delay = policy.retryDelay(after: tries, error, retryAfter: retryAfter) else {
            return fail(error.reason)
        }
        logger.debug("mirror check failed; retrying", metadata: ["mirror": "\(url.redacted)", "error": "\(error)"])
        retryTimer = loop.schedule(after: delay) { [weak self] in self?.start() }
    }

    private func fail(_ reason: String) {
        guard !stopped else { return }
        stopped = true
        delegate?.mirrorCheck(self, failed: reason)
    }
}
