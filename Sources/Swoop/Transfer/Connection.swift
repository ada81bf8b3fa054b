import SwoopStore
import SwoopCurl

/// Hears how a connection's exchanges go. Only events travel up: body bytes go to the store.
protocol ConnectionDelegate: AnyObject {
    /// The head of a probe's response arrived: decide what becomes of its body. The delegate may
    /// give the connection a new job (``Connection/adopt(_:store:object:)``) before answering
    /// ``BodyDisposition/deliver``.
    func connection(
        _ connection: Connection, didReceiveProbeHead head: ResponseHead, requested: RequestedRange
    ) -> BodyDisposition
    /// A segment's response head passed its checks: the server answers, and its bytes follow.
    func connectionWasAnswered(_ connection: Connection)
    /// An exchange ended; `job` is what it was doing, `outcome` how it went.
    func connection(_ connection: Connection, didFinish job: Connection.Job, with outcome: Connection.Outcome)
}

extension ConnectionDelegate {
    func connectionWasAnswered(_ connection: Connection) {}

    /// A delegate that sends no probes (the transfer's segments) never gets a probe's head.
    func connection(
        _ connection: Connection, didReceiveProbeHead head: ResponseHead, requested: RequestedRange
    ) -> BodyDisposition {
        .abort
    }
}

/// One connection slot of a download: a permit from the downloader's budget, one exchange at a
/// time (the probe, a segment request or the single stream) and a meter of its throughput. Each
/// response is read by the ``ResponseHandler`` its ``Job`` makes: its head checked against the
/// request, its body written straight to the ``DownloadStore`` or kept in memory; the connection
/// reports one ``Outcome`` per exchange to its delegate.
final class Connection: ExchangeDelegate {
    /// What an exchange of this connection is for.
    enum Job {
        /// The download's first request.
        case probe(RequestedRange)
        /// Filling `segment` with `request`'s own bytes; its overlap is compared with the bytes
        /// of the responses next to it (``AgreementLedger``).
        case segment(Segment, request: RangeRequest)
        /// Only overlap: bytes on both sides of a break between two pieces that never met, to
        /// compare with both (``AgreementLedger/breaks``).
        case bridge(RangeRequest)
        /// The first bytes of the response, kept in memory (at most `range`'s count) to compare
        /// with bytes held locally (``ProbeDecision/Step/compareHeld(_:range:)``).
        case confirmation(ByteRange)
        /// The whole of a small object in the probe's response, kept in memory (at most `range`'s
        /// count) until it ends: finished without a transfer, or handed to one (``replay(_:)``).
        case whole(ByteRange)
        /// The whole object in one response (the server ignores ranges).
        case stream
        /// Bytes of another source, kept in memory to compare with what the first source served
        /// (``MirrorCheck``); they never reach the store.
        case sample(RequestedRange)
        /// A small document whole, kept in memory up to `limit` bytes (an S3 listing page,
        /// ``DocumentFetch``).
        case document(limit: Int)
    }

    /// How an exchange ended, as the connection saw it.
    enum Outcome {
        /// The response arrived whole (for a segment: every byte it asked for was stored).
        case completed
        /// Stopped on purpose: the store wanted no more of this response, or the probe's head
        /// decided to drop it.
        case stopped
        /// Cancelled (a replacement, a hedge partner that won, a download that stops).
        case cancelled
        /// The exchange failed: the transport, a response that does not match its request, or
        /// storing its bytes. `retryAfter` is the server's `Retry-After`, if it sent one.
        case failed(DownloadError, retryAfter: Int?)
    }

    let id: Int
    /// This connection among every download's: whose request a down host's trial is.
    var token: Int { ObjectIdentifier(self).hashValue }
    private let loop: TransferLoop
    weak var delegate: (any ConnectionDelegate)?
    private(set) var exchange: HTTPExchange?
    /// Reads the current (or last) exchange's response.
    private var response: (any ResponseHandler)?
    /// Where a segment's or the stream's bytes go, and the object they must belong to.
    private var store: DownloadStore?
    private var object: RemoteObject?
    /// The URL of the current (or last) request.
    private(set) var url: RemoteURL?
    /// The service that reads the current (or last) request's error responses, if any.
    private var service: (any ObjectService)?
    /// How the last exchange ended, as libcurl said.
    private var lastEnd: ExchangeOutcome?
    /// What the current (or last) exchange brought, whatever its job: reset as each one begins.
    private var current = ExchangeState()
    /// Throughput and first-byte time, sampled by the transfer and at each request's end.
    private var meter = ConnectionMeter()
    /// The host whose connection permit this slot holds while its exchange runs.
    private var permit = ConnectionPermit()

    deinit {
        // A download that stops cancels its exchanges and lets its connections go: an exchange's
        // end then reaches no one (its delegate is weak), and its permit would be lost to every
        // later download of the downloader (swoop bench, whose passes end by cancelling, measured
        // 0 B/s once they had spent the budget). It goes back here, on the loop thread.
        guard let host = permit.host else { return }
        let loop = self.loop
        loop.execute { loop.budget.release(host: host) }
    }

    /// What one exchange brought besides what its job reads.
    private struct ExchangeState {
        /// A response head arrived: a failure came after the server answered (``FailureScope``).
        var wasAnswered = false
        var retryAfter: Int?
        /// The first bytes of an error response, kept for the request's service to read
        /// (``ObjectService``); `nil`: not kept.
        var errorBody: [UInt8]?
        /// The body waits (paused, libcurl keeps it) until ``releaseBody()``.
        var bodyHeld = false
    }

    /// A response head arrived for the current (or last) exchange (see ``FailureScope``).
    var wasAnswered: Bool { current.wasAnswered }
    /// Why the current (or last) segment response was refused at its head, if it was.
    var refusal: RequestEnd.Refusal? { (response as? RangeResponse)?.refusal }
    /// The current (or last) response's head carried its source's pinned validators.
    var servedPinned: Bool { (response as? RangeResponse)?.servedPinned ?? false }
    /// Bytes per second, smoothed; 0 until measured.
    var recentRate: Double { meter.rate }
    /// Seconds from sending a request to its first body byte, smoothed; 0 until measured.
    var timeToFirstByte: Double { meter.timeToFirstByte }

    /// Whether this slot has sent a request yet.
    private var hasSentRequest = false
    /// When the current (or last) request was sent: its answer says nothing of failures heard
    /// after (``SourceHealth/answered(sentAt:)``).
    private(set) var sentAt = Moment.now
    /// The next request opens a new connection (this one was too slow).
    var wantsFreshConnection = false
    /// How often this slot's connection was replaced for being slow.
    var replacements = 0

    init(id: Int, loop: TransferLoop, delegate: (any ConnectionDelegate)?) {
        self.id = id
        self.loop = loop
        self.delegate = delegate
    }

    var isBusy: Bool { exchange != nil }

    /// Busy with a segment or the stream (not the probe).
    var isTransferring: Bool { exchange != nil && response?.isTransferring == true }

    /// Bytes the current (or just finished) request delivered.
    var bytesThisRequest: Int64 { meter.requestBytes }

    /// Hands over the bytes a sample or confirmation collected.
    func takeSample() -> [UInt8] {
        (response as? SampleResponse)?.take() ?? []
    }

    /// Hands over the document the last exchange brought.
    func takeDocument() -> [UInt8] {
        (response as? DocumentResponse)?.take() ?? []
    }

    /// The segment the current exchange fills.
    var segment: Segment? {
        exchange == nil ? nil : (response as? RangeResponse)?.segment
    }

    // MARK: Permits

    /// Takes a permit for a connection to `url`'s host from the downloader's shared budget; without
    /// one, registers `owner` to have `retry` run (outside callbacks) when a permit frees up.
    func acquirePermit(for url: RemoteURL, owner: AnyObject, retry: @escaping () -> Void) -> Bool {
        permit.acquire(for: url, on: loop, owner: owner, retry: retry)
    }

    /// Returns the slot's connection permit, if it holds one, to the shared budget.
    func releasePermit() {
        permit.release(on: loop)
    }

    // MARK: Exchanges

    /// Sends `request` to `url` for `job`. A slot's first request (other than the very first of
    /// the download) opens its own connection, so N slots really are N connections; later ones
    /// reuse pooled connections.
    func begin(_ job: Job, url: RemoteURL, request: ExchangeRequest) {
        precondition(exchange == nil, "connection \(id) is busy")
        var request = request
        if (!hasSentRequest && id > 0) || wantsFreshConnection { request.freshConnection = true }
        // A replacement is a new connection on a new path: measured anew.
        meter.beginRequest(freshConnection: wantsFreshConnection)
        wantsFreshConnection = false
        hasSentRequest = true
        sentAt = .now
        self.url = url
        self.service = request.service
        current = ExchangeState()
        lastEnd = nil
        response = job.response(store: store, object: object, url: url, expecting: nil)
        let exchange = HTTPExchange(request, delegate: self)
        self.exchange = exchange
        loop.start(exchange)
    }

    /// Gives the exchange under way a new job, whose bytes go to `store` and must belong to
    /// `object`: the probe's response becomes the first segment or the stream. Its head was judged
    /// already; a segment's bytes are checked against the object's digest if the store wants it.
    func adopt(_ job: Job, store: DownloadStore, object: RemoteObject) {
        assert(!loop.isInsideCallbacks, "a connection is handed over inside libcurl's callbacks")
        self.store = store
        self.object = object
        response = job.response(
            store: store, object: object, url: url, expecting: object.digests.preferredForResponse)
    }

    /// The response under way becomes a confirmation: its first bytes, up to `range`'s count,
    /// are kept for ``takeSample()``.
    func collect(_ range: ByteRange) {
        response = SampleResponse(confirmation: range)
    }

    /// The response under way is the whole of a small object: its bytes, up to `range`'s count,
    /// are kept for ``takeWhole()``.
    func keepWhole(_ range: ByteRange) {
        response = WholeResponse(range)
    }

    /// The bytes a response kept whole has brought so far.
    var bytesKept: Int64 { (response as? WholeResponse)?.count ?? 0 }

    /// Hands over the bytes a response kept whole brought.
    func takeWhole() -> [UInt8] {
        (response as? WholeResponse)?.take() ?? []
    }

    /// Gives the job handed over after its exchange ended (``adopt(_:store:object:)``) the bytes
    /// that exchange brought, kept whole meanwhile, as if they arrived now; then
    /// ``reportEndedExchange()`` tells how it ended.
    func replay(_ bytes: [UInt8]) {
        guard exchange == nil, let response, !bytes.isEmpty else { return }
        _ = bytes.withUnsafeBytes { response.body($0) }
    }

    /// Points the slot at the store and object its segment requests serve.
    func attach(to store: DownloadStore, object: RemoteObject) {
        self.store = store
        self.object = object
    }

    func cancel() {
        if let exchange { loop.cancel(exchange) }
    }

    /// Lets a paused single stream go on (its sink has room again).
    func resumeIfPaused() {
        if let exchange { loop.resume(exchange) }
    }

    /// Holds the body of the exchange in flight back until ``releaseBody()``: the probe's
    /// response while its download's part file is created on the disk queue.
    func holdBody() {
        current.bodyHeld = true
    }

    /// Lets a held body go on, to whoever the connection serves now.
    func releaseBody() {
        current.bodyHeld = false
        resumeIfPaused()
    }

    // MARK: Measurements

    /// Updates ``recentRate`` from the bytes delivered since the last sample.
    func sampleRate(at now: Moment) {
        meter.sample(at: now, firstByteAt: exchange?.firstByteAt)
    }

    /// What the transfer policy needs to know about this connection.
    func sample(at now: Moment) -> ConnectionSample {
        ConnectionSample(
            id: id, rate: recentRate, timeToFirstByte: timeToFirstByte, isTransferring: isTransferring,
            secondsSinceFirstByte: exchange?.firstByteAt.map { (now - $0).seconds }, replacements: replacements,
            segment: segment.map { SegmentSample(frontier: $0.frontier, end: $0.end, isHedged: $0.partner != nil) })
    }

    /// Folds a finished request's throughput and first-byte time into the estimates.
    private func measure(_ exchange: HTTPExchange) {
        guard let started = exchange.startedAt, let first = exchange.firstByteAt else { return }
        meter.finishRequest(startedAt: started, firstByteAt: first, now: .now)
    }

    // MARK: ExchangeDelegate

    func exchange(_ exchange: HTTPExchange, didReceiveHead head: ResponseHead) -> BodyDisposition {
        current.retryAfter = head.retryAfterSeconds
        current.wasAnswered = true
        guard let response else { return .abort }
        return keepingErrorBody(of: head, instead: response.head(head, on: self))
    }

    /// Error bodies worth reading are small documents (S3's `<Error>`); a longer one is cut here.
    private static let errorBodyLimit = 16 << 10

    /// An error response (status 400 or more) to a request that has a service: its body is kept
    /// for the service to read (``interpreted(_:)``) instead of `disposition`.
    private func keepingErrorBody(of head: ResponseHead, instead disposition: BodyDisposition) -> BodyDisposition {
        guard head.status >= 400, service != nil, disposition != .deliver else { return disposition }
        current.errorBody = []
        return .deliver
    }

    /// `error`, the current (or last) request's failure, as its service reads it from the error
    /// body kept; as it is without a service or a body.
    func interpreted(_ error: DownloadError) -> DownloadError {
        guard let service, let body = current.errorBody else { return error }
        return service.interpret(error, body: body)
    }

    @inline(__always)
    func exchange(_ exchange: HTTPExchange, didReceive body: UnsafeRawBufferPointer) -> BodyVerdict {
        if current.errorBody != nil {
            current.errorBody!.append(contentsOf: body.prefix(Self.errorBodyLimit - current.errorBody!.count))
            return current.errorBody!.count < Self.errorBodyLimit ? .take : .stop
        }
        if current.bodyHeld { return .pause }
        guard let response else { return .stop }
        let verdict = response.body(body)
        if verdict != .pause { meter.deliver(body.count) }
        return verdict
    }

    func exchange(_ exchange: HTTPExchange, didCompleteWith outcome: ExchangeOutcome) {
        guard exchange === self.exchange else { return }
        self.exchange = nil
        releasePermit()
        measure(exchange)
        lastEnd = outcome
        finish(outcome)
    }

    /// The last exchange ended, and received its response whole (a probe's response without a
    /// body, which ends in the same round as its head).
    var endedWhole: Bool {
        guard exchange == nil, case .completed? = lastEnd else { return false }
        return true
    }

    /// The exchange ended before the job it was handed over for was given (``adopt(_:store:object:)``):
    /// a probe's response without a body ends in the same round as its head. Its new delegate
    /// hears how it ended, judged by the new job, as if it ended now.
    func reportEndedExchange() {
        guard exchange == nil, let lastEnd else { return }
        finish(lastEnd)
    }

    private func finish(_ outcome: ExchangeOutcome) {
        guard let response else { return }
        let location = object?.url.redacted ?? url?.redacted ?? ""
        var outcome = report(outcome, of: response, location: location)
        let whole = if case .completed = outcome { true } else { false }
        if let failure = response.settle(completed: whole, location: location) {
            outcome = .failed(failure, retryAfter: current.retryAfter)
        }
        delegate?.connection(self, didFinish: response.job, with: outcome)
    }

    /// The one outcome of an exchange: the transfer's end, judged against what the job asked for.
    private func report(_ outcome: ExchangeOutcome, of response: any ResponseHandler, location: String) -> Outcome {
        if case .cancelled = outcome { return .cancelled }
        if let failure = response.failure { return .failed(interpreted(failure), retryAfter: current.retryAfter) }
        switch outcome {
        case .cancelled:
            return .cancelled
        case .aborted:
            return .stopped
        case .failed(let transport):
            // A host that answered before (this download or another of the downloader) and now
            // refuses is down, not wrongly named: that is retried, as the failure policy says.
            let hostAnswered = url.map { loop.hosts.entry(for: $0).health.hasAnswered } ?? false
            return .failed(
                .transport(transport, url: location, beforeAnyResponse: response.asksAboutObject && !hostAnswered),
                retryAfter: current.retryAfter)
        case .completed:
            if let shortfall = response.shortfall(location: location) {
                return .failed(shortfall, retryAfter: current.retryAfter)
            }
            return .completed
        }
    }
}
