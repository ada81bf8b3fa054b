/// One connection slot of a download: runs one exchange at a time (the probe, a segment request
/// or the single stream) and hands its events to the session.
final class SegmentWorker: ExchangeDelegate {
    enum Role {
        case probe(RequestedRange)
        case segment(ByteRange)
        case stream
    }

    unowned let session: DownloadSession
    let id: Int
    private(set) var exchange: HTTPExchange?
    private var role: Role?
    /// The segment this connection fills, and where its current request ends.
    private(set) var segment: Segment?
    private(set) var requestEnd: Int64 = 0
    /// Set by the head or body handlers when the exchange must fail.
    var failure: DownloadError?
    /// Set by the probe's head handler: what to do when the exchange ends.
    var next: ProbeNext?
    private var retryAfter: Int?

    // Throughput of this connection, sampled with the session's progress and at each request's end.
    private var bytesDelivered: Int64 = 0
    private var sampledBytes: Int64 = 0
    private var sampledAt: ContinuousClock.Instant?
    /// Bytes per second, smoothed; 0 until measured.
    private(set) var recentRate: Double = 0
    /// Seconds from sending a request to its first body byte, smoothed; 0 until measured.
    private(set) var timeToFirstByte: Double = 0
    private var requestBytes: Int64 = 0

    init(session: DownloadSession, id: Int) {
        self.session = session
        self.id = id
    }

    var isBusy: Bool { exchange != nil }

    var isTransferring: Bool {
        guard exchange != nil, let role else { return false }
        if case .probe = role { return false }
        return true
    }

    /// Whether this slot has sent a request yet.
    private var hasSentRequest = false
    /// The next request opens a new connection (this one was too slow).
    var wantsFreshConnection = false
    /// How often this slot's connection was replaced for being slow.
    var replacements = 0
    /// The host whose connection permit this slot holds while its exchange runs.
    var permitHost: String?

    /// Returns the slot's connection permit, if it holds one, to the shared budget.
    func releasePermit() {
        if let host = permitHost {
            permitHost = nil
            session.loop.budget.release(host: host)
        }
    }

    /// Sends `request` in `role`. A slot's first request (other than the very first of the
    /// download) opens its own connection; later ones reuse pooled connections.
    func begin(_ role: Role, _ request: ExchangeRequest) {
        precondition(exchange == nil, "worker \(id) is busy")
        var request = request
        if (!hasSentRequest && id > 0) || wantsFreshConnection {
            request.freshConnection = true
            if wantsFreshConnection { recentRate = 0 }  // a new connection, a new path: measure anew
        }
        wantsFreshConnection = false
        hasSentRequest = true
        self.role = role
        failure = nil
        next = nil
        retryAfter = nil
        let exchange = HTTPExchange(request, delegate: self)
        self.exchange = exchange
        sampledAt = nil
        requestBytes = 0
        session.willSend(self)
        session.loop.start(exchange)
    }

    /// Makes this connection responsible for `segment`, its current request covering `request`.
    func adopt(_ segment: Segment, request: ByteRange) {
        self.segment = segment
        requestEnd = request.upperBound
        role = .segment(request)
    }

    /// Makes this connection's current response the whole download.
    func adoptStream() {
        role = .stream
    }

    func cancel() {
        if let exchange { session.loop.cancel(exchange) }
    }

    /// Updates ``recentRate`` from the bytes delivered since the last sample.
    func sampleRate(at now: ContinuousClock.Instant) {
        defer {
            sampledAt = now
            sampledBytes = bytesDelivered
        }
        guard let exchange, exchange.firstByteAt != nil, let previous = sampledAt else { return }
        let elapsed = (now - max(previous, exchange.firstByteAt!)).seconds
        guard elapsed > 0.01 else { return }
        blend(rate: Double(bytesDelivered - sampledBytes) / elapsed)
    }

    private func blend(rate: Double) {
        recentRate = recentRate == 0 ? rate : 0.5 * recentRate + 0.5 * rate
    }

    /// Folds a finished request's throughput and first-byte time into the estimates.
    private func measure(_ exchange: HTTPExchange) {
        guard let started = exchange.startedAt, let first = exchange.firstByteAt else { return }
        let ttfb = (first - started).seconds
        timeToFirstByte = timeToFirstByte == 0 ? ttfb : 0.7 * timeToFirstByte + 0.3 * ttfb
        let elapsed = (ContinuousClock.now - first).seconds
        if elapsed > 0.002 && requestBytes >= 256 << 10 {
            blend(rate: Double(requestBytes) / elapsed)
        }
    }

    // MARK: ExchangeDelegate

    func exchange(_ exchange: HTTPExchange, didReceiveHead head: ResponseHead) -> BodyDisposition {
        retryAfter = head.retryAfterSeconds
        switch role {
        case .probe(let requested):
            return session.probeDidReceiveHead(self, head, requested: requested)
        case .segment(let requested):
            guard let object = session.object else { return .abort }
            do {
                try ResponseValidator.segment(head, requested: requested, object: object)
                return .deliver
            } catch {
                failure = error
                return .abort
            }
        case .stream, nil:
            return .abort
        }
    }

    func exchange(_ exchange: HTTPExchange, didReceive body: UnsafeRawBufferPointer) -> Bool {
        bytesDelivered += Int64(body.count)
        requestBytes += Int64(body.count)
        switch role {
        case .segment:
            guard let segment else { return false }
            return session.write(body, for: self, segment: segment)
        case .stream:
            return session.writeStream(body, for: self)
        case .probe, nil:
            return false
        }
    }

    func exchange(_ exchange: HTTPExchange, didCompleteWith outcome: ExchangeOutcome) {
        guard exchange === self.exchange else { return }
        self.exchange = nil
        releasePermit()
        measure(exchange)
        switch role {
        case .probe:
            session.probeDidComplete(self, outcome: outcome, failure: failure, next: next, retryAfter: retryAfter)
        case .segment(let requested):
            guard let segment else { return }
            self.segment = nil
            session.segmentDidFinish(self, segment: segment, requested: requested, outcome: outcome, failure: failure, retryAfter: retryAfter)
        case .stream:
            session.streamDidFinish(self, outcome: outcome, failure: failure)
        case nil:
            break
        }
    }
}
