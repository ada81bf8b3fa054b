import SwoopStore
import SwoopTransfer

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

/// One connection slot of a download: runs one exchange at a time (the probe, a segment request
/// or the single stream), checks each response head against its request, writes the body
/// straight to the ``DownloadStore``, and reports one ``Outcome`` per exchange to its delegate.
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
        /// The whole object in one response (the server ignores ranges).
        case stream
        /// Bytes of another source, kept in memory to compare with what the first source served
        /// (``MirrorCheck``); they never reach the store.
        case sample(RequestedRange)
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
    private(set) var job: Job?
    /// Where the current job's bytes go, and the object they must belong to.
    private var store: DownloadStore?
    private var object: RemoteObject?
    /// The URL of the current (or last) request.
    private(set) var url: RemoteURL?
    /// The service that reads the current (or last) request's error responses, if any.
    private var service: (any ObjectService)?
    /// What the current (or last) exchange brought: reset as each one begins.
    private var current = ExchangeState()
    /// Throughput and first-byte time, sampled by the transfer and at each request's end.
    private var meter = ConnectionMeter()

    /// Why a segment's response was refused at its head, for the transfer to act on.
    enum Refusal: Equatable {
        /// `412`: the server's copy has none of the validators sent (a pool's node with another
        /// mtime, or a changed object): ask again without them; the bytes decide.
        case preconditionFailed
        /// Validators known to be another version's (a pool serving two).
        case otherVersion(ObjectIdentity.Validators)
    }

    /// What one exchange brought besides its body's bytes.
    private struct ExchangeState {
        /// Set by the head or body handlers when the exchange must fail.
        var failure: DownloadError?
        /// The head was refused, and why.
        var refusal: Refusal?
        /// The head's validators are new ones: its overlap decides whether they join the
        /// object's (``ObjectIdentity/learn(_:)``).
        var variant: ObjectIdentity.Validators?
        /// Body bytes received so far.
        var received: Int64 = 0
        /// A response head arrived: a failure came after the server answered (``FailureScope``).
        var wasAnswered = false
        var retryAfter: Int?
        /// A sample job's bytes (see ``Job/sample(_:)``).
        var sampled: [UInt8] = []
        /// The first bytes of an error response, kept for the request's service to read
        /// (``ObjectService``); `nil`: not kept.
        var errorBody: [UInt8]?
        /// The response's own digest (`Content-Digest`) and the hash of its bytes so far:
        /// checked at its end before its bytes count (see ``DownloadStore/checksEachResponse``).
        var responseCheck: (expected: PublishedDigest, hasher: DigestHasher)?
        /// The body waits (paused, libcurl keeps it) until ``releaseBody()``.
        var bodyHeld = false
    }

    /// A response head arrived for the current (or last) exchange (see ``FailureScope``).
    var wasAnswered: Bool { current.wasAnswered }
    /// Why the current (or last) segment response was refused at its head, if it was.
    var refusal: Refusal? { current.refusal }
    /// The new validators the current (or last) response carried, if they were new.
    var variant: ObjectIdentity.Validators? { current.variant }
    /// Bytes per second, smoothed; 0 until measured.
    var recentRate: Double { meter.rate }
    /// Seconds from sending a request to its first body byte, smoothed; 0 until measured.
    var timeToFirstByte: Double { meter.timeToFirstByte }

    /// Whether this slot has sent a request yet.
    private var hasSentRequest = false
    /// The next request opens a new connection (this one was too slow).
    var wantsFreshConnection = false
    /// How often this slot's connection was replaced for being slow.
    var replacements = 0
    /// The host whose connection permit this slot holds while its exchange runs.
    private var permitHost: String?

    init(id: Int, loop: TransferLoop, delegate: (any ConnectionDelegate)?) {
        self.id = id
        self.loop = loop
        self.delegate = delegate
    }

    var isBusy: Bool { exchange != nil }

    /// Busy with a segment or the stream (not the probe).
    var isTransferring: Bool {
        guard exchange != nil, let job else { return false }
        switch job {
        case .probe, .sample, .confirmation, .bridge: return false
        case .segment, .stream: return true
        }
    }

    /// Bytes the current (or just finished) request delivered.
    var bytesThisRequest: Int64 { meter.requestBytes }

    /// Hands over the bytes a sample job collected.
    func takeSample() -> [UInt8] {
        defer { current.sampled = [] }
        return current.sampled
    }

    /// The segment the current exchange fills.
    var segment: Segment? {
        if case .segment(let segment, _)? = job { return segment }
        return nil
    }

    // MARK: Permits

    /// Takes a permit for a connection to `url`'s host from the downloader's shared budget; without
    /// one, registers `owner` to have `retry` run (outside callbacks) when a permit frees up.
    func acquirePermit(for url: RemoteURL, owner: AnyObject, retry: @escaping () -> Void) -> Bool {
        let key = "\(url.host):\(url.port)"
        if loop.budget.acquire(host: key) {
            permitHost = key
            return true
        }
        let loop = self.loop
        loop.budget.wait(owner) { loop.afterCallbacks(retry) }
        return false
    }

    /// Returns the slot's connection permit, if it holds one, to the shared budget.
    func releasePermit() {
        if let host = permitHost {
            permitHost = nil
            loop.budget.release(host: host)
        }
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
        self.job = job
        self.url = url
        self.service = request.service
        current = ExchangeState()
        let exchange = HTTPExchange(request, delegate: self)
        self.exchange = exchange
        loop.start(exchange)
    }

    /// Gives the exchange under way (or the next one) a new job, whose bytes go to `store` and
    /// must belong to `object`: the probe's response becomes the first segment or the stream.
    func adopt(_ job: Job, store: DownloadStore, object: RemoteObject) {
        self.job = job
        self.store = store
        self.object = object
        if case .segment(let segment, _) = job { expectDigest(object.digests.preferredForResponse, for: segment) }
    }

    /// Checks this response's bytes against `digest` before they count, if the store wants it.
    private func expectDigest(_ digest: PublishedDigest?, for segment: Segment) {
        current.responseCheck = nil
        guard let digest, let store, store.checksEachResponse, let plan = store.plan, segment.partner == nil else {
            return
        }
        current.responseCheck = (digest, DigestHasher(digest.checksum.algorithm))
        plan.hold(segment)
    }

    /// The response under way becomes a confirmation: its first bytes, up to `range`'s count,
    /// are kept for ``takeSample()``.
    func collect(_ range: ByteRange) {
        job = .confirmation(range)
        current.sampled = []
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
    func sampleRate(at now: ContinuousClock.Instant) {
        meter.sample(at: now, firstByteAt: exchange?.firstByteAt)
    }

    /// What the transfer policy needs to know about this connection.
    func sample(at now: ContinuousClock.Instant) -> ConnectionSample {
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
        switch job {
        case .probe(let requested), .sample(let requested):
            let disposition = delegate?.connection(self, didReceiveProbeHead: head, requested: requested) ?? .abort
            return keepingErrorBody(of: head, instead: disposition)
        case .segment(let segment, let request):
            guard let checked = check(head, for: request) else { return keepingErrorBody(of: head, instead: .abort) }
            job = .segment(segment, request: checked)
            if store?.checksEachResponse == true {
                expectDigest(PublishedDigests(head, bodyIsWholeObject: false).preferredForResponse, for: segment)
            }
            delegate?.connectionWasAnswered(self)
            return .deliver
        case .bridge(let request):
            guard let checked = check(head, for: request) else { return keepingErrorBody(of: head, instead: .abort) }
            job = .bridge(checked)
            delegate?.connectionWasAnswered(self)
            return .deliver
        case .stream, .confirmation, nil:
            return .abort
        }
    }

    /// Checks a range response's head (``ResponseValidator/segment(_:requested:object:)``):
    /// the request as the response answers it (fewer bytes, when the server caps them), or `nil`
    /// when it is refused (``current`` says why).
    private func check(_ head: ResponseHead, for request: RangeRequest) -> RangeRequest? {
        guard let object else { return nil }
        do {
            let (verdict, holds) = try ResponseValidator.segment(head, requested: request.sent, object: object)
            guard let answered = request.truncated(to: holds) else {
                current.failure = .invalidResponse(
                    "the server sent bytes \(holds) for a request of bytes \(request.sent): too few to use "
                        + "(\(object.url))")
                return nil
            }
            let validators = ObjectIdentity.Validators(etag: head.etag, lastModified: head.lastModified)
            store?.note(validators, of: request.response)
            switch verdict {
            case .known:
                break
            case .variant(let validators) where store?.ledger == nil:
                // Nothing held can be read back here (a pipe, a measurement): the bytes cannot
                // decide, so other validators are another object, as the validators say.
                current.failure = DownloadError(
                    .objectChanged,
                    "the object changed on the server: its validators became \(validators) (\(object.url))")
                return nil
            case .variant(let validators):
                current.variant = validators
            case .otherVersion(let validators):
                current.refusal = .otherVersion(validators)
                current.failure = DownloadError(
                    .objectChanged,
                    "the server answered with \(validators), known to be another version of the object (\(object.url))")
                return nil
            }
            return answered
        } catch {
            if error.kind == .objectChanged, error.httpStatus == 412, store?.ledger != nil {
                current.refusal = .preconditionFailed
            }
            current.failure = error
            return nil
        }
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
        if case .stream = job, let store, !store.hasRoom(for: body.count) {
            return .pause
        }
        meter.deliver(body.count)
        switch job {
        case .sample(let requested):
            guard case .bounded(let range) = requested, Int64(current.sampled.count + body.count) <= range.count else {
                current.failure = .invalidResponse("the server sent more bytes than asked for (\(url?.redacted ?? ""))")
                return .stop
            }
            current.sampled.append(contentsOf: body)
            return .take
        case .confirmation(let range):
            current.sampled.append(contentsOf: body.prefix(Int(range.count) - current.sampled.count))
            return Int64(current.sampled.count) < range.count ? .take : .stop
        case .segment(let segment, let request):
            guard let store else { return .stop }
            if current.responseCheck != nil { current.responseCheck!.hasher.update(body) }
            return deliver(body, of: request, to: store, segment: segment)
        case .bridge(let request):
            guard let store else { return .stop }
            return deliver(body, of: request, to: store, segment: nil)
        case .stream:
            guard let store else { return .stop }
            return verdict(store.writeStream(body))
        case .probe, nil:
            return .stop
        }
    }

    /// A range response's body: its overlap is compared (``DownloadStore/compareOverlap(_:at:response:)``),
    /// its own bytes written to `segment`.
    @inline(__always)
    private func deliver(
        _ body: UnsafeRawBufferPointer, of request: RangeRequest, to store: DownloadStore, segment: Segment?
    ) -> BodyVerdict {
        let received = current.received
        current.received += Int64(body.count)
        let parts = request.parts(received: received, count: body.count)
        let start = request.sent.lowerBound + received
        if !parts.lead.isEmpty, let failure = store.compareOverlap(
            UnsafeRawBufferPointer(rebasing: body[parts.lead]), at: start, response: request.response)
        {
            current.failure = failure
            return .stop
        }
        if !parts.own.isEmpty, let segment {
            let own = UnsafeRawBufferPointer(rebasing: body[parts.own])
            let written = store.write(own, for: segment, requestEnd: request.own.upperBound, response: request.response)
            guard case .more = written else { return verdict(written) }
        }
        if !parts.trail.isEmpty, let failure = store.compareOverlap(
            UnsafeRawBufferPointer(rebasing: body[parts.trail]), at: start + Int64(parts.trail.lowerBound),
            response: request.response)
        {
            current.failure = failure
            return .stop
        }
        return .take
    }

    private func verdict(_ written: DownloadStore.WriteVerdict) -> BodyVerdict {
        switch written {
        case .more:
            return .take
        case .enough:
            return .stop
        case .failed(let error):
            current.failure = error
            return .stop
        }
    }

    func exchange(_ exchange: HTTPExchange, didCompleteWith outcome: ExchangeOutcome) {
        guard exchange === self.exchange, let job else { return }
        self.exchange = nil
        self.job = nil
        releasePermit()
        measure(exchange)
        var outcome = report(outcome, of: job)
        if case .segment(let segment, let request) = job, let check = current.responseCheck {
            outcome = settle(check, of: segment, requested: request.sent, outcome: outcome)
        }
        delegate?.connection(self, didFinish: job, with: outcome)
    }

    /// A checked response ended: its bytes count if it arrived whole and matches its digest;
    /// otherwise they are fetched again (a mismatch is a bad response, retried).
    private func settle(
        _ check: (expected: PublishedDigest, hasher: DigestHasher), of segment: Segment, requested: ByteRange,
        outcome: Outcome
    ) -> Outcome {
        current.responseCheck = nil
        guard let plan = store?.plan else { return outcome }
        guard case .completed = outcome else {
            store?.rewind(segment)
            return outcome
        }
        let computed = check.hasher.finalize()
        guard computed == check.expected.checksum else {
            store?.rewind(segment)
            let location = object?.url.redacted ?? url?.redacted ?? ""
            let message =
                "the response for bytes \(requested) does not match its \(check.expected.header): it says "
                + "\(check.expected.written(check.expected.checksum)), "
                + "its bytes give \(check.expected.written(computed)); fetching them again (\(location))"
            return .failed(.invalidResponse(message), retryAfter: current.retryAfter)
        }
        plan.confirm(segment)
        return outcome
    }

    /// The one outcome of an exchange: the transfer's end, judged against what the job asked for.
    private func report(_ outcome: ExchangeOutcome, of job: Job) -> Outcome {
        if case .cancelled = outcome { return .cancelled }
        if let failure = current.failure { return .failed(interpreted(failure), retryAfter: current.retryAfter) }
        let location = object?.url.redacted ?? url?.redacted ?? ""
        switch outcome {
        case .cancelled:
            return .cancelled
        case .aborted:
            return .stopped
        case .failed(let transport):
            let isProbe =
                switch job {
                case .probe, .sample, .confirmation: true
                default: false
                }
            // A host that answered before (this download or another of the downloader) and now
            // refuses is down, not wrongly named: that is retried, as the failure policy says.
            let hostAnswered = url.map { loop.hosts.entry(for: $0).health.hasAnswered } ?? false
            return .failed(
                .transport(transport, url: location, beforeAnyResponse: isProbe && !hostAnswered),
                retryAfter: current.retryAfter)
        case .completed:
            if case .sample(.bounded(let range)) = job, Int64(current.sampled.count) != range.count {
                return .failed(
                    .invalidResponse(
                        "the server sent \(current.sampled.count) of the \(Wording.bytes(range.count)) asked for "
                            + "(\(location))"
                    ),
                    retryAfter: current.retryAfter)
            }
            if case .segment(let segment, let request) = job,
                !segment.isDone, segment.position < min(request.own.upperBound, segment.end)
            {
                let message =
                    "the server closed the response after \(current.received) of \(Wording.bytes(request.sent.count)) "
                    + "(\(location))"
                return .failed(.invalidResponse(message), retryAfter: current.retryAfter)
            }
            if case .bridge(let request) = job, current.received < request.sent.count {
                let message =
                    "the server closed the response after \(current.received) of \(Wording.bytes(request.sent.count)) "
                    + "(\(location))"
                return .failed(.invalidResponse(message), retryAfter: current.retryAfter)
            }
            return .completed
        }
    }
}
