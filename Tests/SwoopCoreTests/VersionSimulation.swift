import SwoopTestSupport
@testable import SwoopCore

/// A download against a server whose object changes, in virtual time, decided as the library
/// decides it: the core's ``TransferMachine`` (its plan, its ``AgreementLedger``, a
/// ``ValidatorWatch`` per source, the confirmation at the end), its ``ProbeMachine`` over the heads
/// the server sends, judged by ``ProbeDecision`` (a new download pins the validators of its first
/// answer; a resumed one asks under the segment map's, and the decision's watch tells a pool from a
/// change: VersionSimulation+Probe.swift), and its ``SessionMachine`` (start over on a change,
/// within `maxTries`; ask again when a handover is lost). The bytes are written and compared as
/// the store does.
///
/// The modelled server changes its object whole, or in a few 4 KiB blocks (mostly away from every
/// seam), in place (responses under way read the new bytes) or not; its validators are honest,
/// stale for a while after a change, fixed at the first version's, or absent; it may be a pool of
/// nodes with validators of their own and maybe a version of their own, and may ignore
/// preconditions. A download may start from an earlier run's partial download (of one node's
/// version, under its validators). Crashes lose what no checkpoint recorded; the next try resumes
/// from the segment map, which the session writes as the transfer starts.
///
/// The property: a download that ends without an error holds one version, byte for byte, unless
/// the validators lie or are absent and a change left every byte compared as it was (what cannot
/// be known). ``Rule/overlapDecides`` is the rule before issue 54 (an answer under other
/// validators is used when its overlap agrees), kept to show that the property catches it.
final class VersionSimulation: TransferEnvironment {
    /// How the client treats an answer under other validators than the pinned ones.
    enum Rule {
        /// The library's: refused and asked again until the watch tells a pool from a change.
        case pinned
        /// Before issue 54: used, when its overlap agrees with the bytes held.
        case overlapDecides
    }

    /// How the modelled server behaves.
    struct Server: CustomStringConvertible {
        enum Validators: Equatable {
            /// New validators with every version (and a node's own, in a pool).
            case honest
            /// The version before's validators for this many steps after a change.
            case stale(steps: Int)
            /// The first version's validators for ever.
            case fixed
            /// None at all.
            case none
        }

        /// Steps at which the object changes.
        var changes: [Int] = []
        /// A change rewrites a few 4 KiB blocks, not every byte.
        var partial = false
        /// Responses under way read the new bytes after a change (a file rewritten in place).
        var inPlace = false
        var validators = Validators.honest
        /// The validators are dates (`Last-Modified`), not ETags.
        var datesOnly = false
        /// Nodes of a pool, each with its own validators; with `nodesDiffer`, node i serves the
        /// version after the current by i (a deploy half done).
        var nodes = 1
        var nodesDiffer = false
        /// The balancer picks a node at random, not in turn.
        var randomNode = false
        /// Answers a request whatever its precondition, with its own validators.
        var ignoresPreconditions = false

        /// A change that no byte compared may show, under validators that do not say it: a few
        /// blocks, or a change inside one response (in place).
        var canHideAChange: Bool {
            validators != .honest && (partial || inPlace) && (!changes.isEmpty || nodesDiffer)
        }

        var description: String {
            var parts = ["\(validators)" + (datesOnly ? " dates" : "")]
            if !changes.isEmpty {
                parts.append("changes at \(changes)" + (partial ? " (blocks)" : "") + (inPlace ? " in place" : ""))
            }
            if nodes > 1 {
                parts.append(
                    "\(nodes) nodes" + (nodesDiffer ? " with other versions" : "") + (randomNode ? " at random" : ""))
            }
            if ignoresPreconditions { parts.append("ignores preconditions") }
            return parts.joined(separator: ", ")
        }
    }

    enum Outcome: Equatable {
        case finished
        case failed(String)
        /// Neither, after 20 000 steps (200 s of virtual time): a download left waiting.
        case unfinished
    }

    /// One request of the transfer under way.
    struct Flight {
        var send: TransferSend
        var node: Int
        /// The version it serves (the one of its answer; the node's current one when in place).
        var version: Int
        /// Its end without bytes (a refusal), if any.
        var refused: RequestEnd?
        var answerAt: Int
        var received: Int64 = 0
        var bytesPerStep: Int64
        var cancelled = false
    }

    static let block: Int64 = 4096
    /// The plan's smallest segment, and how far a new download's probe reaches: small, so that
    /// objects of these sizes split among connections (the library's probe reaches 1 MiB).
    static let minimumSegmentSize: Int64 = 64 << 10
    let size: Int64
    let connections: Int
    let server: Server
    let rule: Rule
    var random: SplitMix64
    let layout: ChunkLayout
    let policy = FailurePolicy(
        baseDelay: .milliseconds(250), maxDelay: .seconds(30), maxTries: 5, maxOutage: .seconds(120))
    private let start = Moment.now

    // The server's state.
    private(set) var step = 0
    private var version = 0
    private var changedAt = -1_000_000
    /// The blocks each version rewrote; `nil`: every byte.
    private var patches: [Int: Set<Int64>?] = [:]

    // The client's state (some of it read and moved by the probe stage, VersionSimulation+Probe.swift).
    var file: [UInt8]
    var recorded: ChunkSet
    /// A segment map is on disk: the session writes one as the transfer starts, unless the object
    /// arrives whole in its first response (`TransferSetup.ranged`), and the next try resumes from it.
    var mapped = false
    /// The validators the segment map recorded (a resumed try asks under them).
    var mapValidators: ObjectIdentity.Validators?
    /// The validators of this try: every byte it uses was served under them.
    var pinned: ObjectIdentity.Validators?
    var machine: TransferMachine?
    /// The probe stage of the current try, until the transfer has its request.
    var prober: Probe?
    var flights: [Int: Flight] = [:]
    private var health = SourceHealth()
    private var active = 0
    private var wake: Int?
    private(set) var outcome: Outcome?
    /// The session's decisions (start over on a change, within `maxTries`), the library's own.
    lazy var session = SessionMachine(
        settings: .init(failures: policy, restartsOnChange: true, inOrder: false))
    private(set) var crashes = 0
    /// The try that finished got every byte in its first response, too quickly to be confirmed
    /// by a request after it (``TransferMachine/Settings/confirmsOneResponseAfter``).
    private(set) var unconfirmedOneResponse = false
    /// When the current try began, and whether its machine sent a request of its own.
    var tryStart = 0
    var machineSent = false
    private(set) var restarts = 0
    /// The restarts a probe's answers decided (a change believed, or bytes held that differ).
    private(set) var restartsByProbe = 0
    private(set) var requests = 0

    init(seed: UInt64, rule: Rule = .pinned) {
        var random = SplitMix64(seed: seed)
        size = random.logUniform(20_000...1_500_000)
        connections = Int(random.logUniform(1...8))
        var server = Server()
        let changeCount = Int(random.next() % 3)
        switch random.next() % 8 {
        case 0, 1: server.changes = [Int(random.next() % 30)]
        case 2: server.changes = [Int(random.next() % 30)]; server.validators = .stale(steps: Int(random.next() % 40))
        case 3: server.changes = [Int(random.next() % 30)]; server.validators = .fixed
        case 4: server.nodes = 2 + Int(random.next() % 2)
        case 5: server.nodes = 2; server.nodesDiffer = true
        case 6: server.changes = [Int(random.next() % 30)]; server.validators = .none
        default:
            server.changes = (0..<max(1, changeCount)).map { _ in Int(random.next() % 60) }.sorted()
            server.validators =
                [.honest, .stale(steps: Int(random.next() % 30)), .fixed, .none][Int(random.next() % 4)]
            server.nodes = 1 + Int(random.next() % 3)
            server.nodesDiffer = random.chance(0.5)
        }
        server.partial = random.chance(0.6)
        server.inPlace = random.chance(0.5)
        server.datesOnly = random.chance(0.3)
        server.randomNode = random.chance(0.3)
        server.ignoresPreconditions = random.chance(0.25)
        self.server = server
        self.rule = rule
        layout = ChunkLayout(objectSize: size)
        file = [UInt8](repeating: 0, count: Int(size))
        recorded = ChunkSet(count: layout.chunkCount)
        let blocks = (size + Self.block - 1) / Self.block
        for version in 1...(server.changes.count + server.nodes + 1) {
            // A few blocks, one in each half and up to two more anywhere (as a file rewritten in
            // place at 10 MiB and at its end): most land away from every seam (the overlap windows).
            guard server.partial else {
                patches[version] = .some(nil)
                continue
            }
            let half = max(1, blocks / 2)
            var rewritten: Set<Int64> = [
                Int64(random.next() % UInt64(half)), half + Int64(random.next() % UInt64(max(1, blocks - half))),
            ]
            for _ in 0..<(random.next() % 3) { rewritten.insert(Int64(random.next() % UInt64(blocks))) }
            patches[version] = rewritten.filter { $0 < blocks }
        }
        self.random = random
    }

    // MARK: The server

    /// The bytes of `version` at `range`.
    func bytes(_ version: Int, _ range: ByteRange) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(Int(range.count))
        var offset = range.lowerBound
        while offset < range.upperBound {
            let block = offset / Self.block
            let end = min(range.upperBound, (block + 1) * Self.block)
            var generation = version
            while generation > 0, let patch = patches[generation], let blocks = patch, !blocks.contains(block) {
                generation -= 1
            }
            for at in offset..<end { out.append(Self.byte(generation, at)) }
            offset = end
        }
        return out
    }

    /// Generation `generation`'s byte at `offset`: two generations differ at every offset.
    private static func byte(_ generation: Int, _ offset: Int64) -> UInt8 {
        UInt8(truncatingIfNeeded: (offset &* 2_654_435_761) >> 9) &+ UInt8(truncatingIfNeeded: generation &* 37 &+ 1)
    }

    /// The version node `node` serves now.
    func version(on node: Int) -> Int { version + (server.nodesDiffer ? node : 0) }

    /// The validators node `node` names for the version it serves now.
    func validators(on node: Int) -> ObjectIdentity.Validators? {
        var named = version(on: node)
        switch server.validators {
        case .honest: break
        case .stale(let steps): if step - changedAt < steps { named = max(0, named - 1) }
        case .fixed: named = server.nodesDiffer ? node : 0
        case .none: return nil
        }
        let tag = "\"v\(named)-n\(node)\""
        return server.datesOnly ? .init(etag: nil, lastModified: tag) : .init(etag: tag, lastModified: nil)
    }

    /// The node that answers the next request (counted here).
    func nextNode() -> Int {
        requests += 1
        return server.randomNode ? Int(random.next() % UInt64(server.nodes)) : requests % server.nodes
    }

    /// How node `node` answers a request under `precondition`: `nil` serves it; otherwise the
    /// refusal (a 412, or a head under other validators) as the shell reports it.
    func answer(on node: Int, precondition: ObjectIdentity.Validators?) -> RequestEnd? {
        let named = validators(on: node)
        guard rule == .pinned, let precondition, let named, named != precondition else { return nil }
        if !server.ignoresPreconditions {
            let refused = DownloadError(.objectChanged, "412 Precondition Failed", httpStatus: 412)
            return RequestEnd(.failed(refused, retryAfter: nil), answered: true, refusal: .preconditionFailed)
        }
        let other = DownloadError(.objectChanged, "the server answered with \(named), not \(precondition)")
        return RequestEnd(.failed(other, retryAfter: nil), answered: true, refusal: .otherValidators)
    }

    // MARK: Running

    /// Runs until the download ends, from an earlier run's partial download now and then,
    /// crashing now and then.
    func run() -> Outcome {
        if random.chance(0.3) { resumeEarlierRun() }
        probe()
        while outcome == nil, step < 20_000 {
            step += 1
            if server.changes.contains(step) {
                version += 1
                changedAt = step
            }
            if machine != nil, random.chance(0.01), crashes < 3 { crash() }
            tick()
        }
        return outcome ?? .unfinished
    }

    var now: Moment { start + .milliseconds(10 * step) }

    private func tick() {
        if let wake, wake <= step {
            self.wake = nil
            if let machine { perform(machine.dispatch(at: now)) } else { probe() }
        }
        probeTurn()
        for slot in flights.keys.sorted() {
            guard outcome == nil else { return }
            deliver(slot)
        }
    }

    func perform(_ actions: [TransferAction]) {
        for action in actions {
            guard outcome == nil, machine != nil else { return }
            switch action {
            case .send(let send):
                willSend(from: send.slot)
                machineSent = true
                let node = nextNode()
                flights[send.slot] = Flight(
                    send: send, node: node, version: version(on: node),
                    refused: answer(on: node, precondition: pinned), answerAt: step + 1,
                    bytesPerStep: random.logUniform(2_000...200_000))
            case .cancel(let slot):
                flights[slot]?.cancelled = true
            case .checkpoint:
                if random.chance(0.3), mapped { recorded = recordable() }
            case .wake(let instant):
                wake = Int((instant - start).seconds * 100) + 1
            case .complete:
                finish()
            case .objectChanged:
                changed()
            case .fail(let error):
                outcome = .failed(error.message)
            case .abandonTrial(_, let slot):
                health.abandonTrial(by: slot)
            case .renew, .retried, .refresh, .note, .waitForPermit, .dropSource, .replace:
                break
            }
        }
    }

    /// One step of `slot`'s response: its refusal, or its next bytes routed as the store routes them.
    private func deliver(_ slot: Int) {
        guard var flight = flights[slot], let machine, flight.answerAt <= step else { return }
        if flight.cancelled { return end(slot, RequestEnd(.cancelled, bytes: flight.received, answered: true)) }
        if let refused = flight.refused { return end(slot, refused) }
        if flight.received == 0 {
            // Its head, under the pinned validators: heard at once, as the library hears it.
            perform(machine.pinnedHead(slot: slot))
            guard outcome == nil, flights[slot] != nil else { return }
        }
        if server.inPlace { flight.version = version(on: flight.node) }
        let request: RangeRequest
        let segment: Segment?
        switch flight.send.work {
        case .segment(let piece, let asked): (segment, request) = (piece, asked)
        case .bridge(let asked): (segment, request) = (nil, asked)
        }
        let count = Int(min(flight.bytesPerStep, request.sent.count - flight.received))
        let start = request.sent.lowerBound + flight.received
        let body = bytes(flight.version, ByteRange(start, start + Int64(count)))
        let parts = request.parts(received: flight.received, count: count)
        flight.received += Int64(count)
        flights[slot] = flight
        var failure: DownloadError?
        var enough = false
        body.withUnsafeBytes { body in
            let read = { [self] (range: ByteRange) -> [UInt8]? in
                Array(file[Int(range.lowerBound)..<Int(range.upperBound)])
            }
            func compare(_ part: Range<Int>) {
                guard failure == nil, !part.isEmpty, let ledger = machine.ledger else { return }
                let at = start + Int64(part.lowerBound)
                if ledger.compare(
                    UnsafeRawBufferPointer(rebasing: body[part]), at: at, from: request.response, read: read)
                    != nil
                {
                    failure = DownloadError(.objectChanged, "bytes at \(at) differ between two responses")
                }
            }
            compare(parts.lead)
            if failure == nil, let segment, !parts.own.isEmpty {
                let own = UnsafeRawBufferPointer(rebasing: body[parts.own])
                let planned = machine.plan.plannedWrite(segment, count: own.count)
                if planned.write.lowerBound > 0 {
                    compare(parts.own.lowerBound..<(parts.own.lowerBound + planned.write.lowerBound))
                }
                if failure == nil, !planned.write.isEmpty, let ledger = machine.ledger {
                    let slice = UnsafeRawBufferPointer(rebasing: own[planned.write])
                    if ledger.write(slice, at: planned.offset, by: request.response) != nil {
                        failure = DownloadError(
                            .objectChanged, "bytes at \(planned.offset) differ between two responses")
                    } else {
                        file.replaceSubrange(Int(planned.offset)..<(Int(planned.offset) + slice.count), with: slice)
                    }
                }
                if failure == nil { machine.plan.advance(segment, by: planned.accepted) }
                enough = planned.accepted < own.count || (segment.isDone && request.own.upperBound > segment.end)
            }
            if !enough { compare(parts.trail) }
        }
        if let failure {
            end(
                slot,
                RequestEnd(.failed(failure, retryAfter: nil), bytes: flight.received, answered: true, pinned: true))
        } else if enough || flight.received >= request.sent.count {
            end(slot, RequestEnd(.completed, bytes: flight.received, answered: true, pinned: true))
        }
    }

    private func end(_ slot: Int, _ end: RequestEnd) {
        flights[slot] = nil
        guard let machine else { return }
        perform(machine.requestEnded(slot: slot, hostHeard(end, on: slot, machine: machine), at: now))
    }

    /// The chunks a checkpoint records: the written ones less the chunk before each break.
    private func recordable() -> ChunkSet {
        guard let machine, let ledger = machine.ledger else { return recorded }
        var chunks = machine.plan.written
        for point in ledger.breaks where point > 0 { chunks.remove(Int((point - 1) / layout.chunkSize)) }
        return chunks
    }

    func completeRanges() -> [ByteRange] {
        var ranges: [ByteRange] = []
        var cursor: Int64 = 0
        for run in recorded.missingRuns {
            let missing = layout.byteRange(ofChunks: run)
            if missing.lowerBound > cursor { ranges.append(ByteRange(cursor, missing.lowerBound)) }
            cursor = missing.upperBound
        }
        if cursor < size { ranges.append(ByteRange(cursor, size)) }
        return ranges
    }

    // MARK: The session's rules

    func finish() {
        outcome = .finished
        let threshold = Int(
            TransferMachine.Settings(policy: .init(minimumSegmentSize: 1), failures: policy, hedgesSlowTail: false)
                .confirmsOneResponseAfter.seconds * 100)
        unconfirmedOneResponse = machine != nil && !machineSent && step - tryStart < threshold
    }

    /// The object changed (`byProbe`: the probe's answers said so): the session machine decides
    /// (start over within `maxTries`, or fail).
    func changed(_ reason: String = "the object changed", byProbe: Bool = false) {
        if byProbe { restartsByProbe += 1 }
        perform(session.objectChanged(reason, held: 0, finishedTarget: nil))
    }

    /// What the session machine decided, performed as the session does.
    func perform(_ action: SessionAction) {
        switch action {
        case .startOver: startOver()
        case .probeAgain(let discarding, _):
            // A new probe once the sink has closed, over what it kept (nothing, for a new download).
            stopTry()
            if discarding { discardHeld() }
            wake = step + 1
        case .fail(let error): outcome = .failed(error.message)
        case .finalize: break
        }
    }

    private func startOver() {
        restarts += 1
        stopTry()
        discardHeld()
        wake = step + 1
    }

    /// What the disk held is discarded: no bytes, no segment map.
    private func discardHeld() {
        recorded = ChunkSet(count: layout.chunkCount)
        file = [UInt8](repeating: 0, count: Int(size))
        mapped = false
        mapValidators = nil
    }

    /// A crash: what the last checkpoint recorded is kept, with the validators it was served under.
    private func crash() {
        crashes += 1
        stopTry()
        mapValidators = pinned
        wake = step + 1
    }

    private func stopTry() {
        if let machine {
            for case .abandonTrial(_, let slot) in machine.stop() { health.abandonTrial(by: slot) }
        }
        machine = nil
        prober = nil
        flights = [:]
        active = 0
        health = SourceHealth()
    }

    /// Whether the file is one version byte for byte (and which).
    func heldVersion() -> Int? {
        let last = version + server.nodes + 1
        return (0...last).first { bytes($0, ByteRange(0, size)) == file }
    }

    // MARK: TransferEnvironment

    func sourceSamples(at now: Moment) -> [SourceSample] {
        [health.sample(active: active, isUsable: true, isHeld: false, at: now)]
    }

    /// A request on `slot` goes to the server: it counts there (maybe as its trial).
    func willSend(from slot: Int) {
        active += 1
        health.willSend(by: slot, at: now)
    }

    /// What `slot`'s end tells the server's health, as the shell tells it, with its verdict.
    private func hostHeard(_ end: RequestEnd, on slot: Int, machine: TransferMachine) -> RequestEnd {
        guard let (_, report) = machine.hostReport(slot: slot, end) else { return end }
        active -= 1
        if end.bytes > 0 { health.delivered() }
        var end = end
        switch report {
        case .failed(let error, let answered, let retryAfter):
            end.verdict = health.failed(
                error, answered: answered, active: active, retryAfter: retryAfter, sharesWork: false, policy: policy,
                at: now, by: slot, using: &random)
        case .nothing:
            health.abandonTrial(by: slot)
        }
        return end
    }

    var sourcesNextWake: Moment? { health.nextWake }
    var whyOthersCannotHelp: String? { nil }
    func permits(for source: Int) -> PermitCount { PermitCount(free: .max, freeOnHost: .max, host: 0) }

    func connectionSamples(at now: Moment) -> [ConnectionSample] {
        let count = max((flights.keys.max() ?? -1) + 1, machine?.target ?? 1)
        return (0..<count).map { slot in
            guard let flight = flights[slot], flight.answerAt <= step else {
                return ConnectionSample(id: slot, rate: 0, timeToFirstByte: 0, isTransferring: false, replacements: 0)
            }
            return ConnectionSample(
                id: slot, rate: Double(flight.bytesPerStep * 100), timeToFirstByte: 0.01, isTransferring: true,
                secondsSinceFirstByte: Double(step - flight.answerAt) / 100, replacements: 0)
        }
    }

    func isRateCapped(at now: Moment) -> Bool { false }
}
