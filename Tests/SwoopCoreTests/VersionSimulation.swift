import SwoopTestSupport
@testable import SwoopCore

/// A download against a server whose headers lie, in virtual time: the plan, the overlap
/// requests and the ledger of the core, driven as the transfer drives them, against a modelled
/// server that replaces its object, keeps stale or fixed validators, or is a pool of nodes with
/// other validators (and maybe other bytes). Crashes lose what no checkpoint recorded.
///
/// The property: a download that ends without an error holds one version, byte for byte.
final class VersionSimulation {
    /// How the modelled server lies.
    struct Server {
        /// Replacements of the object, at these steps.
        var replacements: [Int]
        /// After a replacement, the old validators for this many steps.
        var staleSteps: Int
        /// Validators computed once: the first version's, forever.
        var fixedValidators: Bool
        /// Nodes in a round-robin pool (1: no pool); each has its own validators.
        var nodes: Int
        /// The nodes serve different versions (node i: the version + i).
        var nodesDiffer: Bool
    }

    /// How a run ended.
    enum Outcome: Equatable {
        case finished
        case failed(String)
    }

    private var random: SplitMix64
    let size: Int64
    let server: Server
    let connections: Int
    private let layout: ChunkLayout
    private let maxTries = 5

    // The server's state.
    private var step = 0
    private var version = 0
    private var replacedAt = -1_000_000
    private var requestsServed = 0

    // The client's state for one try.
    private var file: [UInt8]
    /// Chunks the last checkpoint recorded (they survive a crash).
    private var recorded: ChunkSet
    private var plan: SegmentScheduler
    private var ledger: AgreementLedger
    private var identity: ObjectIdentity
    /// The first response of the try (the probe's): the bytes the others must agree with.
    private var anchor: Int?
    /// The validators a crashed try's map recorded: a resumed try knows them too.
    private var mapValidators: [ObjectIdentity.Validators] = []
    private var workers: [Worker?]
    private var unconditional: Set<ObjectIdentifier> = []
    private var changes = 0
    private var versionsSeen: [ObjectIdentity.Validators] = []
    private var responseValidators: [Int: ObjectIdentity.Validators] = [:]
    private var refusedInARow = 0
    private(set) var crashes = 0
    private(set) var restarts = 0

    /// A response in flight.
    private struct Worker {
        var segment: Segment?
        var request: RangeRequest
        var received: Int64 = 0
        /// The bytes it carries: the version its node served when it answered.
        var version: Int
        var validators: ObjectIdentity.Validators
        var rate: Int64
    }

    init(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        size = random.logUniform(20_000...1_500_000)
        connections = Int(random.logUniform(1...8))
        var server = Server(replacements: [], staleSteps: 0, fixedValidators: false, nodes: 1, nodesDiffer: false)
        switch random.next() % 6 {
        case 0: server.replacements = [Int(random.next() % 60)]
        case 1: server.replacements = [Int(random.next() % 60)]; server.staleSteps = Int(random.next() % 40)
        case 2: server.replacements = [Int(random.next() % 60)]; server.fixedValidators = true
        case 3: server.nodes = 2
        case 4: server.nodes = 2; server.nodesDiffer = true
        default:
            server.replacements = (0..<Int(random.next() % 4)).map { _ in Int(random.next() % 120) }
            server.staleSteps = Int(random.next() % 30)
            server.nodes = 1 + Int(random.next() % 3)
            server.nodesDiffer = random.chance(0.5)
        }
        self.server = server
        self.random = random
        layout = ChunkLayout(objectSize: size)
        file = [UInt8](repeating: 0, count: Int(size))
        recorded = ChunkSet(count: layout.chunkCount)
        plan = SegmentScheduler(layout: layout, missing: [ByteRange(0, size)], minimumSegmentSize: 64 << 10)
        ledger = AgreementLedger(size: size)
        identity = ObjectIdentity(size: size)
        workers = Array(repeating: nil, count: connections)
    }

    /// The bytes version `version` has at `offset`: two versions differ at every offset.
    static func byte(_ version: Int, _ offset: Int64) -> UInt8 {
        UInt8(truncatingIfNeeded: (offset &* 2_654_435_761) >> 9) &+ UInt8(truncatingIfNeeded: version &* 37 &+ 1)
    }

    // MARK: The server

    /// The node answering the next request, the version it serves and its validators.
    private func answer() -> (version: Int, validators: ObjectIdentity.Validators) {
        let node = requestsServed % server.nodes
        requestsServed += 1
        let served = version + (server.nodesDiffer ? node : 0)
        var named = served
        if server.fixedValidators { named = 0 }
        if step - replacedAt < server.staleSteps { named = max(0, named - 1) }
        return (served, .init(etag: "\"v\(named)-n\(node)\"", lastModified: nil))
    }

    private func advanceServer() {
        step += 1
        if server.replacements.contains(step) {
            version += 1
            replacedAt = step
        }
    }

    // MARK: Running

    /// Runs until the download ends, crashing now and then.
    func run() -> Outcome {
        if let failure = probe() { return failure }
        for _ in 0..<20_000 {
            advanceServer()
            if random.chance(0.01) && crashes < 3 { crash() }
            if let outcome = tick() { return outcome }
        }
        return .failed("did not finish in 20 000 steps")
    }

    /// A new try: its first request (the probe's) tells the object's validators.
    private func probe() -> Outcome? {
        anchor = nil
        return nil
    }

    private func tick() -> Outcome? {
        dispatch()
        for index in workers.indices where workers[index] != nil {
            if let outcome = deliver(index) { return outcome }
        }
        if refusedInARow > 16 { return .failed("the server serves two versions") }
        if plan.isComplete && workers.allSatisfy({ $0 == nil }) {
            if ledger.isStitched { return finish() }
            bridge()
        }
        return nil
    }

    private func dispatch() {
        for index in workers.indices where workers[index] == nil {
            guard let segment = plan.claim(now: .now, ownerID: index) else { return }
            send(segment, on: index)
        }
    }

    private func send(_ segment: Segment, on index: Int) {
        let size = Int64(random.logUniform(16_384...600_000))
        let own = ByteRange(segment.position, min(segment.end, segment.position + size))
        plan.noteRequested(segment, upTo: own.upperBound)
        let request = RangeRequest.overlapping(
            own, size: self.size, window: 4096, heldAfter: ledger.isHeld(own.upperBound),
            response: ledger.beginResponse())
        let conditional = unconditional.remove(ObjectIdentifier(segment)) == nil
        let (served, validators) = answer()
        responseValidators[request.response] = validators
        if anchor == nil {
            // The probe: its validators are the object's, with those of the map it resumes.
            anchor = request.response
            identity = ObjectIdentity(size: size, etag: validators.etag)
            for known in mapValidators { identity.learn(known) }
            identity.otherVersions = versionsSeen.filter { !identity.isKnown($0) }
        } else if conditional && !identity.isKnown(validators) {
            // 412: asked again at once without the precondition.
            unconditional.insert(ObjectIdentifier(segment))
            plan.release(segment, failed: false)
            return
        }
        if identity.isOtherVersion(validators) {
            refusedInARow += 1
            plan.release(segment, failed: false)
            return
        }
        workers[index] = Worker(
            segment: segment, request: request, version: served, validators: validators,
            rate: random.logUniform(2_000...200_000))
    }

    /// Bridges every break with a response of only overlap.
    private func bridge() {
        for (index, point) in zip(workers.indices, ledger.breaks) {
            let request = RangeRequest.bridge(at: point, size: size, window: 4096, response: ledger.beginResponse())
            let (served, validators) = answer()
            responseValidators[request.response] = validators
            workers[index] = Worker(segment: nil, request: request, version: served, validators: validators, rate: 8192)
        }
    }

    /// One step of worker `index`'s response: its next bytes, routed as the connection routes them.
    private func deliver(_ index: Int) -> Outcome? {
        guard var worker = workers[index] else { return nil }
        let request = worker.request
        let count = Int(min(worker.rate, request.sent.count - worker.received))
        let start = request.sent.lowerBound + worker.received
        let body = (start..<(start + Int64(count))).map { Self.byte(worker.version, $0) }
        let parts = request.parts(received: worker.received, count: count)
        worker.received += Int64(count)
        var disagreement: AgreementLedger.Disagreement?
        var cut = false
        body.withUnsafeBytes { bytes in
            let read = { (range: ByteRange) -> [UInt8]? in
                Array(self.file[Int(range.lowerBound)..<Int(range.upperBound)])
            }
            if !parts.lead.isEmpty {
                disagreement = ledger.compare(
                    UnsafeRawBufferPointer(rebasing: bytes[parts.lead]), at: start, from: request.response, read: read)
            }
            if disagreement == nil, !parts.own.isEmpty, let segment = worker.segment {
                let own = UnsafeRawBufferPointer(rebasing: bytes[parts.own])
                let planned = plan.plannedWrite(segment, count: own.count)
                if !planned.write.isEmpty {
                    let slice = UnsafeRawBufferPointer(rebasing: own[planned.write])
                    disagreement = ledger.write(slice, at: planned.offset, by: request.response)
                    if disagreement == nil {
                        file.replaceSubrange(
                            Int(planned.offset)..<(Int(planned.offset) + slice.count), with: Array(slice))
                    }
                }
                if disagreement == nil { plan.advance(segment, by: planned.accepted) }
                cut = planned.accepted < own.count
            }
            if disagreement == nil, !cut, !parts.trail.isEmpty {
                disagreement = ledger.compare(
                    UnsafeRawBufferPointer(rebasing: bytes[parts.trail]), at: start + Int64(parts.trail.lowerBound),
                    from: request.response, read: read)
            }
        }
        if let disagreement { return changed(disagreement) }
        workers[index] = worker
        if cut || worker.received >= request.sent.count { end(index) }
        return nil
    }

    private func end(_ index: Int) {
        guard let worker = workers[index] else { return }
        workers[index] = nil
        refusedInARow = 0
        if let anchor, ledger.agree(worker.request.response, anchor) { identity.learn(worker.validators) }
        guard let segment = worker.segment else { return }
        if segment.isDone { plan.finish(segment) } else { plan.release(segment, failed: false) }
        if random.chance(0.3) { recorded = recordable() }
    }

    /// The chunks a checkpoint records: the written ones less the chunk before each break.
    private func recordable() -> ChunkSet {
        var chunks = plan.written
        for point in ledger.breaks where point > 0 { chunks.remove(Int((point - 1) / layout.chunkSize)) }
        return chunks
    }

    /// Bytes of two responses differed: start over within `maxTries`, remembering both sides'
    /// validators when they differ.
    private func changed(_ disagreement: AgreementLedger.Disagreement) -> Outcome? {
        let sides = [disagreement.earlier, disagreement.later].compactMap { responseValidators[$0] }
        if Set(sides).count > 1 { for side in sides where !versionsSeen.contains(side) { versionsSeen.append(side) } }
        guard changes < maxTries else { return .failed("the object kept changing") }
        changes += 1
        restarts += 1
        mapValidators = []
        startOver(keeping: [])
        return probe()
    }

    /// A crash: what the last checkpoint recorded is kept, in pieces that agree with nothing.
    private func crash() {
        crashes += 1
        mapValidators = identity.knownValidators
        startOver(keeping: completeRanges(recorded))
        _ = probe()
    }

    private func completeRanges(_ chunks: ChunkSet) -> [ByteRange] {
        var ranges: [ByteRange] = []
        var cursor: Int64 = 0
        for run in chunks.missingRuns {
            let missing = layout.byteRange(ofChunks: run)
            if missing.lowerBound > cursor { ranges.append(ByteRange(cursor, missing.lowerBound)) }
            cursor = missing.upperBound
        }
        if cursor < size { ranges.append(ByteRange(cursor, size)) }
        return ranges
    }

    private func startOver(keeping held: [ByteRange]) {
        workers = Array(repeating: nil, count: connections)
        unconditional = []
        let missing = held.isEmpty ? [ByteRange(0, size)] : recorded.missingRuns.map { layout.byteRange(ofChunks: $0) }
        if held.isEmpty {
            file = [UInt8](repeating: 0, count: Int(size))
            recorded = ChunkSet(count: layout.chunkCount)
        }
        plan = SegmentScheduler(layout: layout, missing: missing, minimumSegmentSize: 64 << 10)
        ledger = AgreementLedger(size: size, held: held)
        plan.split(into: connections)
    }

    private func finish() -> Outcome {
        .finished
    }

    /// Whether the file is one version byte for byte (and which).
    func heldVersion() -> Int? {
        let candidate = (0...(version + 3)).first { Self.byte($0, 0) == file.first }
        guard let candidate else { return nil }
        for offset in file.indices where file[offset] != Self.byte(candidate, Int64(offset)) { return nil }
        return candidate
    }
}
