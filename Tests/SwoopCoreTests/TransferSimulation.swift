import SwoopTestSupport
@testable import SwoopCore

/// The ``TransferMachine`` against model servers, in virtual time: the simulation is its
/// environment (sources with real ``SourceHealth``, a permit budget, connections that measure
/// their rates), performs its actions, and moves time in steps of 10 ms. Bytes are written into
/// the machine's plan as the store writes them. No socket, no clock, no thread.
final class TransferSimulation: TransferEnvironment {
    /// One model server.
    struct Server {
        /// Bytes per second each connection gets.
        var rate: Double = 16 * 1_048_576
        /// From request to first byte.
        var firstByte: Duration = .milliseconds(20)
        /// Seconds (from the start) during which connections are refused.
        var outages: [Range<Double>] = []
        /// Answers 503 to a request beyond this many in flight.
        var connectionLimit: Int?
        /// How a request sent at a time answers instead of serving (`nil`: it serves).
        var answer: ((_ seconds: Double, _ request: TransferSend) -> RequestEnd?)?
        /// The rate of slot `n`'s connection instead of `rate` (a slow path).
        var slotRates: [Int: Double] = [:]
        /// Breaks this many responses' connections where their trail would begin.
        var cutsTrails = 0

        // What the machine's environment keeps for it.
        var health = SourceHealth()
        var active = 0
        var bytes: Int64 = 0
        var dropped: String?
        var held = false
        /// Requests sent, and those sent while it was down.
        var requests = 0
        var attemptsWhileDown = 0
    }

    private struct Flight {
        var send: TransferSend
        var answerAt: Moment
        /// Set when it answers with a failure (or a refusal) instead of bytes.
        var failure: RequestEnd?
        var rate: Double
        var answered = false
        var received: Int64 = 0
        var cancelled = false
        var firstByteAt: Moment?
    }

    let start = Moment.now
    private(set) var now: Moment
    let step = Duration.milliseconds(10)
    var servers: [Server]
    let policy = FailurePolicy(
        baseDelay: .milliseconds(250), maxDelay: .seconds(30), maxTries: 8, maxOutage: .seconds(120))
    private(set) var machine: TransferMachine!
    private var flights: [Int: Flight] = [:]
    /// Connection permits free (the downloader's budget), and who waits for one.
    var permits: Int
    private var holders: Set<Int> = []
    private var waitsForPermit = false
    private var wake: Moment?
    private var random = SplitMix64(seed: 7)

    // What happened.
    private(set) var completed = false
    private(set) var failure: DownloadError?
    private(set) var changed: String?
    private(set) var sends: [TransferSend] = []
    private var sendTimes: [Double] = []
    private(set) var cancels = 0
    /// Requests the machine asked to send on a new connection.
    private(set) var renewals = 0
    private(set) var refreshes = 0
    private(set) var retries = 0
    private(set) var mostInFlight = 0
    /// Requests sent to the first server after it refused an expired URL, before the fresh URL
    /// was checked.
    private(set) var sendsAwaitingFreshURL = 0
    private var awaitsFreshURL = false
    /// Body bytes written by more than one response (a hedge's overlap).
    private(set) var bytesReceived: Int64 = 0
    /// Called on `.refresh`: the test's fresh URL (return the seconds it takes to check it).
    var onRefresh: ((TransferSimulation) -> Double)?
    private var refreshDoneAt: Moment?

    var seconds: Double { (now - start).seconds }

    /// A download of `size` bytes of which `held` (sorted) are an earlier run's; with `comparing`,
    /// requests overlap the bytes around them and an ``AgreementLedger`` compares them.
    init(
        size: Int64, servers: [Server], target: Int, permits: Int = 64, hedges: Bool = true,
        minimumSegmentSize: Int64 = 1 << 20, held: [ByteRange] = [], comparing: Bool = false
    ) {
        now = start
        self.servers = servers
        self.permits = permits
        let layout = ChunkLayout(objectSize: size)
        var missing: [ByteRange] = []
        var cursor: Int64 = 0
        for stretch in held + [ByteRange(size, size)] {
            if stretch.lowerBound > cursor { missing.append(ByteRange(cursor, stretch.lowerBound)) }
            cursor = stretch.upperBound
        }
        let plan = SegmentScheduler(layout: layout, missing: missing, minimumSegmentSize: minimumSegmentSize)
        machine = TransferMachine(
            plan: plan, ledger: comparing ? AgreementLedger(size: size, held: held) : nil,
            settings: .init(
                policy: TransferPolicy(minimumSegmentSize: minimumSegmentSize), failures: policy,
                hedgesSlowTail: hedges),
            target: target, environment: self, random: SplitMix64(seed: 11))
    }

    /// Runs from a probe whose first request (slot 0, server 0) asks for `first` bytes, until the
    /// transfer ends or `limit` seconds of virtual time pass. Returns whether it ended.
    @discardableResult
    func run(first: Int64 = 1 << 20, limit: Double = 600) -> Bool {
        guard let missing = machine.plan.missingRanges.first else { return false }
        let own = ByteRange(missing.lowerBound, min(missing.upperBound, missing.lowerBound + first))
        let size = machine.plan.layout.objectSize
        let request =
            machine.ledger.map {
                RangeRequest.overlapping(
                    own, size: size, window: $0.window, heldAfter: $0.needsTrail(at: own.upperBound),
                    response: $0.beginResponse())
            } ?? RangeRequest(own: own)
        guard let segment = startTransfer(first: request) else { return false }
        let probe = TransferSend(slot: 0, source: 0, work: .segment(segment, request))
        servers[0].requests += 1
        flights[0] = flight(for: probe)
        machine.planAhead(window: nil, hashesInOrder: false)
        perform(machine.dispatch(at: now))
        var nextTick = now + .milliseconds(100)
        while !isOver, seconds < limit {
            now += step
            advanceFlights()
            if let refreshDoneAt, refreshDoneAt <= now {
                self.refreshDoneAt = nil
                servers[0].held = false
                awaitsFreshURL = false
                perform(machine.dispatch(at: now))
            }
            if let wake, wake <= now {
                self.wake = nil
                perform(machine.dispatch(at: now))
            }
            if nextTick <= now {
                nextTick = now + .milliseconds(100)
                perform(machine.hedge(at: now))
            }
        }
        return isOver
    }

    var isOver: Bool { completed || failure != nil || changed != nil }

    /// The probe's request (slot 0, server 0, in flight already) becomes the transfer's first, as
    /// the shell starts it: it holds a permit and counts at its server (maybe as its trial).
    func startTransfer(first request: RangeRequest, at instant: Moment? = nil) -> Segment? {
        guard let segment = machine.start(first: request, at: instant ?? now) else { return nil }
        willSend(to: 0, from: 0, at: instant ?? now)
        return segment
    }

    /// The transfer stops, as the shell stops it.
    func stopTransfer() {
        perform(machine.stop())
    }

    /// Requests sent before `seconds` of virtual time.
    func sendsBefore(seconds: Double) -> Int? {
        sendTimes.firstIndex { $0 >= seconds } ?? sendTimes.count
    }

    // MARK: Actions

    private func perform(_ actions: [TransferAction]) {
        for action in actions {
            guard !isOver else { return }
            switch action {
            case .send(let send):
                willSend(to: send.source, from: send.slot)
                sends.append(send)
                sendTimes.append(self.seconds)
                servers[send.source].requests += 1
                if servers[send.source].isDown(at: seconds) { servers[send.source].attemptsWhileDown += 1 }
                if send.source == 0 && awaitsFreshURL { sendsAwaitingFreshURL += 1 }
                flights[send.slot] = flight(for: send)
                mostInFlight = max(mostInFlight, flights.count)
            case .waitForPermit:
                waitsForPermit = true
            case .dropSource(let source, let reason):
                servers[source].dropped = servers[source].dropped ?? reason
            case .abandonTrial(let source, let slot):
                servers[source].health.abandonTrial(by: slot)
            case .cancel(let slot):
                flights[slot]?.cancelled = true
                cancels += 1
            case .renew:
                renewals += 1
            case .replace(let slot):
                flights[slot]?.cancelled = true
                cancels += 1
            case .checkpoint, .note:
                break
            case .retried:
                retries += 1
            case .refresh:
                refreshes += 1
                servers[0].held = true
                if refreshDoneAt == nil { refreshDoneAt = now + .seconds(onRefresh?(self) ?? 0.2) }
                perform(machine.dispatch(at: now))
            case .wake(let instant):
                wake = instant
            case .complete:
                completed = true
            case .objectChanged(let message):
                changed = message
            case .fail(let error):
                failure = error
            }
        }
    }

    private func flight(for send: TransferSend) -> Flight {
        let server = servers[send.source]
        let at = seconds
        if server.isDown(at: at) {
            let refused = DownloadError(.network, "connection refused", curlCode: 7)
            return Flight(
                send: send, answerAt: now + .milliseconds(1), failure: RequestEnd(.failed(refused, retryAfter: nil)),
                rate: 0)
        }
        // The server counts the requests it serves (the environment's count runs ahead: the machine
        // counts a batch of requests before the shell sends any).
        let serving = flights.values.count { $0.send.source == send.source && $0.failure == nil && !$0.cancelled }
        if let limit = server.connectionLimit, serving >= limit {
            let busy = DownloadError(.httpStatus, "503 Service Unavailable", httpStatus: 503)
            return Flight(
                send: send, answerAt: now + server.firstByte,
                failure: RequestEnd(.failed(busy, retryAfter: nil), answered: true), rate: 0)
        }
        let failure = server.answer?(at, send)
        return Flight(
            send: send, answerAt: now + server.firstByte, failure: failure,
            rate: server.slotRates[send.slot] ?? server.rate)
    }

    /// Every request in flight moves on by one step: answers, bytes, ends.
    private func advanceFlights() {
        for slot in flights.keys.sorted() {
            guard var flight = flights[slot] else { continue }
            if flight.cancelled {
                end(slot, RequestEnd(.cancelled, bytes: flight.received, answered: flight.answered))
                continue
            }
            guard flight.answerAt <= now else { continue }
            if let failure = flight.failure {
                var failure = failure
                failure.bytes = 0
                end(slot, failure)
                continue
            }
            if !flight.answered {
                flight.answered = true
                flight.firstByteAt = now
                let before = servers[flight.send.source].health.state
                servers[flight.send.source].health.answered()
                flights[slot] = flight
                // A recovering source may take more requests now.
                if before != servers[flight.send.source].health.state { perform(machine.dispatch(at: now)) }
                guard flights[slot] != nil else { continue }
            }
            let range = flight.send.work.range
            var count = min(range.count - flight.received, Int64(flight.rate * step.seconds))
            if case .segment(_, let request) = flight.send.work, request.trail > 0,
                servers[flight.send.source].cutsTrails > 0
            {
                // The connection breaks where the trail would begin.
                let trailStart = request.lead + request.own.count
                count = min(count, trailStart - flight.received)
                if flight.received == trailStart {
                    servers[flight.send.source].cutsTrails -= 1
                    let reset = DownloadError(.network, "connection reset", curlCode: 56)
                    end(
                        slot,
                        RequestEnd(
                            .failed(reset, retryAfter: nil), bytes: flight.received, answered: true, pinned: true))
                    continue
                }
            }
            let (enough, failure) = deliver(count, of: flight)
            flight.received += count
            bytesReceived += count
            flights[slot] = flight
            // Its head carried the source's pinned validators (a model server's answer says otherwise).
            if let failure {
                end(
                    slot,
                    RequestEnd(.failed(failure, retryAfter: nil), bytes: flight.received, answered: true, pinned: true))
            } else if enough || flight.received >= range.count {
                end(slot, RequestEnd(.completed, bytes: flight.received, answered: true, pinned: true))
            }
        }
    }

    /// The next `count` body bytes of `flight`'s response, taken as the store takes them: overlap
    /// compared in the ledger (or left waiting there), own bytes written into the plan and the
    /// ledger, bytes a hedge partner wrote already compared. Returns whether the store wants no
    /// more of the response, or the difference it found.
    private func deliver(_ count: Int64, of flight: Flight) -> (enough: Bool, failure: DownloadError?) {
        let request: RangeRequest
        let segment: Segment?
        switch flight.send.work {
        case .segment(let piece, let asked): (segment, request) = (piece, asked)
        case .bridge(let asked): (segment, request) = (nil, asked)
        }
        let start = request.sent.lowerBound + flight.received
        let parts = request.parts(received: flight.received, count: Int(count))
        func at(_ part: Range<Int>) -> ByteRange {
            ByteRange(start + Int64(part.lowerBound), start + Int64(part.upperBound))
        }
        for part in [parts.lead, parts.trail] where !part.isEmpty {
            if let difference = compare(at(part), from: request.response) { return (false, difference) }
        }
        guard let segment else { return (false, nil) }
        let own = parts.own.count
        let planned = machine.plan.plannedWrite(segment, count: own)
        if planned.write.lowerBound > 0,
            let difference = compare(at(parts.own.prefix(planned.write.lowerBound)), from: request.response)
        {
            return (false, difference)
        }
        if !planned.write.isEmpty, let ledger = machine.ledger {
            let bytes = content(ByteRange(planned.offset, planned.offset + Int64(planned.write.count)))
            let disagreement = bytes.withUnsafeBytes { ledger.write($0, at: planned.offset, by: request.response) }
            if let disagreement { return (false, changed(disagreement)) }
        }
        machine.plan.advance(segment, by: planned.accepted)
        return (planned.accepted < own || (segment.isDone && request.own.upperBound > segment.end), nil)
    }

    /// The object's bytes at `range` (every server serves the same version).
    func content(_ range: ByteRange) -> [UInt8] {
        (range.lowerBound..<range.upperBound).map { UInt8(truncatingIfNeeded: ($0 &* 0x9E37_79B1) >> 13) }
    }

    private func compare(_ range: ByteRange, from response: AgreementLedger.ResponseID) -> DownloadError? {
        guard let ledger = machine.ledger, !range.isEmpty else { return nil }
        let bytes = content(range)
        let disagreement = bytes.withUnsafeBytes {
            ledger.compare($0, at: range.lowerBound, from: response) { [self] in content($0) }
        }
        return disagreement.map(changed)
    }

    private func changed(_ disagreement: AgreementLedger.Disagreement) -> DownloadError {
        DownloadError(.objectChanged, "the object changed on the server: bytes \(disagreement.range) differ")
    }

    private func end(_ slot: Int, _ end: RequestEnd) {
        if end.urlExpired { awaitsFreshURL = true }
        flights[slot] = nil
        if holders.remove(slot) != nil { permits += 1 }
        perform(machine.requestEnded(slot: slot, hostHeard(end, on: slot), at: now))
        if waitsForPermit, permits > 0 {
            waitsForPermit = false
            perform(machine.dispatch(at: now))
        }
    }

    // MARK: TransferEnvironment

    func sourceSamples(at now: Moment) -> [SourceSample] {
        servers.map { $0.health.sample(active: $0.active, isUsable: $0.dropped == nil, isHeld: $0.held, at: now) }
    }

    /// A request on `slot` goes to `source`: it holds a permit and counts there (maybe as its trial).
    private func willSend(to source: Int, from slot: Int, at instant: Moment? = nil) {
        if holders.insert(slot).inserted { permits -= 1 }
        servers[source].active += 1
        servers[source].health.willSend(by: slot, at: instant ?? now)
    }

    /// What `slot`'s end tells its server, as the shell tells it, with the health's verdict.
    private func hostHeard(_ end: RequestEnd, on slot: Int) -> RequestEnd {
        guard let (source, report) = machine.hostReport(slot: slot, end) else { return end }
        servers[source].active -= 1
        servers[source].bytes += end.bytes
        if end.bytes > 0 { servers[source].health.delivered() }
        var end = end
        switch report {
        case .failed(let error, let answered, let retryAfter):
            guard servers[source].dropped == nil else {
                end.verdict = .rest
                break
            }
            let sharesWork = servers.indices.contains { $0 != source && servers[$0].dropped == nil }
            end.verdict = servers[source].health.failed(
                error, answered: answered, active: servers[source].active, retryAfter: retryAfter,
                sharesWork: sharesWork, policy: policy, at: now, by: slot, using: &random)
        case .nothing:
            servers[source].health.abandonTrial(by: slot)
        }
        return end
    }

    func permits(for source: Int) -> PermitCount {
        PermitCount(free: permits, freeOnHost: permits, host: 0)
    }

    var sourcesNextWake: Moment? {
        servers.filter { $0.dropped == nil }.compactMap(\.health.nextWake).min()
    }

    var whyOthersCannotHelp: String? {
        let reasons = servers.indices.dropFirst().compactMap { index in
            servers[index].dropped.map { "\(index): \($0)" }
        }
        return reasons.isEmpty ? nil : reasons.joined(separator: "; ")
    }

    func connectionSamples(at now: Moment) -> [ConnectionSample] {
        let count = (flights.keys.max() ?? -1) + 1
        return (0..<max(count, machine.target)).map { slot in
            guard let flight = flights[slot], let first = flight.firstByteAt else {
                return ConnectionSample(id: slot, rate: 0, timeToFirstByte: 0, isTransferring: false, replacements: 0)
            }
            return ConnectionSample(
                id: slot, rate: flight.rate, timeToFirstByte: servers[flight.send.source].firstByte.seconds,
                isTransferring: true, secondsSinceFirstByte: (now - first).seconds, replacements: 0)
        }
    }

    func isRateCapped(at now: Moment) -> Bool { false }
}

extension TransferSimulation.Server {
    func isDown(at seconds: Double) -> Bool {
        outages.contains { $0.contains(seconds) }
    }
}
