import Logging
import SwoopCurl

/// Hears how a mirror's check ends.
protocol MirrorCheckDelegate: AnyObject {
    /// The mirror serves an object of the right size and sent `sample`, the bytes at the check's
    /// range: compare them with the first source's before the mirror contributes anything.
    func mirrorCheck(_ check: MirrorCheck, sampled object: RemoteObject, headers: RequestHeaders, bytes: [UInt8])
    /// The mirror cannot be used: why, in a sentence.
    func mirrorCheck(_ check: MirrorCheck, failed reason: String)
}

/// Another source of the same file, checked before it may contribute a byte: it is probed on its
/// own (a ``ProbeExchange``: its own redirects, its own `ETag` or `Last-Modified`, which become its
/// precondition), must report the object's size, and sends the bytes of one range the first
/// source has served, which the transfer compares with what was written (same size is not the
/// same bytes). Its bytes are kept in memory for that and never reach the store. Transfer thread
/// only.
final class MirrorCheck: ProbeExchangeDelegate {
    let url: RemoteURL
    /// The bytes to compare.
    let range: ByteRange
    private let size: Int64
    private let exchange: ProbeExchange
    private let logger: Logger
    weak var delegate: (any MirrorCheckDelegate)?
    /// The object the last head showed, with the right size and range.
    private var found: RemoteObject?
    /// The head showed the mirror cannot serve this object (no retry helps).
    private var unusable: String?
    /// It serves an object of another size: another object, not a passing failure.
    private(set) var servesOtherObject = false
    private(set) var stopped = false

    /// `service`: signs the requests (a store's URL, checked by the task finishing a shared
    /// object); a mirror has none.
    init(
        url: RemoteURL, headers: [(name: String, value: String)], size: Int64, range: ByteRange,
        settings: ExchangeSettings, loop: TransferLoop, logger: Logger, service: (any ObjectService)? = nil
    ) {
        self.url = url
        self.range = range
        self.size = size
        self.logger = logger
        let decision = ProbeDecision(
            url: url, originalURL: url, basis: .fresh, redirects: 0,
            maxRedirects: settings.configuration.redirect.maxRedirects, resolve: RemoteURL.resolve)
        // A mirror the user named gets the request's headers; a redirect elsewhere does not.
        exchange = ProbeExchange(
            decision: decision, headers: RequestHeaders(headers, originalURL: url, service: service),
            options: settings.options, policy: settings.failures, connectionID: -1,
            loop: loop)
        exchange.delegate = self
    }

    /// Asks the mirror for the range (once a connection permit is free).
    func start() {
        found = nil
        unusable = nil
        exchange.start()
    }

    func stop() {
        stopped = true
        exchange.stop()
    }

    /// A request is in flight (for the watchdog).
    var isBusy: Bool { exchange.isBusy }

    // MARK: ProbeExchangeDelegate

    func nextRequest(
        of exchange: ProbeExchange
    ) -> (
        range: RequestedRange?, precondition: (name: String, value: String)?,
        job: Connection.Job
    ) {
        (.bounded(range), nil, .sample(.bounded(range)))
    }

    func probeExchangeWillSend(_ exchange: ProbeExchange) {}

    func probeExchange(
        _ exchange: ProbeExchange, decided step: ProbeDecision.Step, head: ResponseHead,
        body: BodyDisposition
    ) -> BodyDisposition {
        found = nil
        unusable = nil
        guard case .ranged(let object, let served) = step else { return body }
        guard object.size == size else {
            unusable = "it reports \(object.size.map(String.init) ?? "no") bytes, not \(size)"
            servesOtherObject = object.size != nil
            return .abort
        }
        guard served.own == range else {
            unusable = "it answered bytes \(served) to a request for \(range)"
            return .abort
        }
        found = object
        return body
    }

    func probeExchange(_ exchange: ProbeExchange, ended step: ProbeDecision.Step?, outcome: Connection.Outcome) {
        if let unusable { return fail(unusable) }
        switch (step, outcome) {
        case (.ranged?, .completed):
            guard let found else { return fail("no object") }
            delegate?.mirrorCheck(
                self, sampled: found, headers: exchange.headers, bytes: exchange.connection.takeSample())
        case (_, .failed(let error, let retryAfter)):
            guard let final = exchange.retryOrGiveUp(error, retryAfter: retryAfter) else {
                logger.debug(
                    "mirror check failed; retrying", metadata: ["mirror": "\(url.redacted)", "error": "\(error)"])
                return
            }
            fail(final.reason)
        case (.stream?, _):
            fail("it does not serve byte ranges")
        default:
            fail("its response to a range request cannot be used")
        }
    }

    private func fail(_ reason: String) {
        guard !stopped else { return }
        stopped = true
        delegate?.mirrorCheck(self, failed: reason)
    }
}
