import SwoopTestSupport
import Testing
@testable import SwoopCore

/// One run of the simulation.
final class SchedulerSimulation {
    struct Worker {
        let segment: Segment
        /// One past the last byte the connection asked for (the server sends up to here).
        let requestEnd: Int64
    }

    var random: SplitMix64
    let seed: UInt64
    let layout: ChunkLayout
    let minimumSegmentSize: Int64
    let scheduler: SegmentScheduler
    /// The byte ranges the plan had to fetch.
    let missing: IntervalSet
    /// Bytes written so far, by any connection.
    var written = IntervalSet()
    /// Per chunk, bytes present (chunks outside `missing` start full).
    var chunkBytes: [Int64]
    var completeChunks = 0
    var workers: [Worker?]
    /// What the model knows a segment's former hedge partner wrote (the survivor's `coveredUpTo`).
    var covered: [ObjectIdentifier: (segment: Segment, offset: Int64)] = [:]
    var now: Moment
    let reHedgeSurvivors: Bool
    /// How often an idle connection may cut a request in flight.
    let cutRate: Double
    var steps = 0
    private(set) var failed = false
    /// A broken invariant, for the test to record: the simulation runs on a thread of its own, where
    /// no test is current.
    struct Problem: Sendable {
        var message: String
        var sourceLocation: SourceLocation
    }
    private(set) var problems: [Problem] = []
    var strictClaimViolations: [String] = []

    init(seed: UInt64, reHedgeSurvivors: Bool) {
        self.seed = seed
        self.reHedgeSurvivors = reHedgeSurvivors
        var random = SplitMix64(seed: seed)

        // An object of 0 ... 512 MiB (8 192 production chunks), often just off a chunk boundary.
        let shape = random.weighted([(3, 0), (3, 1), (1, 2), (3, 3)])
        var size: Int64
        switch shape {
        case 0: size = random.logUniform(0...(512 << 20))
        case 1: size = Int64(random.logUniform(1...512)) << 20 + Int64.random(in: -1...1, using: &random)
        case 2: size = Int64.random(in: 0...3, using: &random)
        default: size = Int64.random(in: 1 << 20...(512 << 20), using: &random)
        }
        size = max(0, min(size, 512 << 20))
        // Either the production layout (64 KiB chunks up to 4 GiB) or another chunk size, still keeping
        // the bitmap to a few thousand chunks.
        let layout: ChunkLayout
        if random.chance(0.5) {
            layout = ChunkLayout(objectSize: size)
        } else {
            var chunk: Int64 = 1 << Int64.random(in: 0...20, using: &random)
            while size / chunk > 4096 { chunk *= 2 }
            if random.chance(0.3) { chunk += Int64.random(in: 0...(chunk / 2), using: &random) }  // not a power of two
            layout = ChunkLayout(objectSize: size, chunkSize: chunk)
        }
        self.layout = layout
        let chunkSize = layout.chunkSize
        minimumSegmentSize = random.weighted([
            (3, chunkSize), (1, max(1, chunkSize / 2)), (1, 2 * chunkSize), (1, chunkSize * 3 / 2),
            (1, 1), (1, random.logUniform(1...(4 * chunkSize))),
        ])

        // Missing chunks: everything, or random runs of them.
        var missingChunks = ChunkSet(count: layout.chunkCount)
        let everything = random.chance(0.4)
        if !everything {
            let density = Double.random(in: 0...1, using: &random)
            var chunk = 0
            while chunk < layout.chunkCount {
                let run = Int(random.logUniform(1...512))
                if random.chance(density) {
                    missingChunks.insert(contentsOf: chunk..<min(layout.chunkCount, chunk + run))
                }
                chunk += run
            }
        } else {
            missingChunks.insert(contentsOf: 0..<layout.chunkCount)
        }
        // ChunkSet marks "complete"; here its members are the missing chunks.
        let runs = Self.runs(of: missingChunks)
        let missingRanges = runs.map { layout.byteRange(ofChunks: $0) }
        missing = IntervalSet(missingRanges.map { $0.lowerBound..<$0.upperBound })
        // Hand the ranges over in random order: the scheduler sorts them.
        scheduler = SegmentScheduler(
            layout: layout, missing: missingRanges.shuffled(using: &random), minimumSegmentSize: minimumSegmentSize)

        chunkBytes = (0..<layout.chunkCount).map { chunk in
            missingChunks.contains(chunk) ? 0 : layout.byteRange(ofChunks: chunk..<chunk + 1).count
        }
        completeChunks = layout.chunkCount - missingChunks.completedCount
        workers = Array(repeating: nil, count: Int.random(in: 1...6, using: &random))
        cutRate = random.weighted([(1, 0.0), (1, 0.3), (1, 1.0)])
        now = Moment.now
        self.random = random
    }

    static func runs(of set: ChunkSet) -> [Range<Int>] {
        var result: [Range<Int>] = []
        var start: Int?
        for chunk in 0..<set.count {
            if set.contains(chunk) {
                if start == nil { start = chunk }
            } else if let first = start {
                result.append(first..<chunk)
                start = nil
            }
        }
        if let first = start { result.append(first..<set.count) }
        return result
    }

    var context: String {
        "seed \(String(seed, radix: 16)) step \(steps): size \(layout.objectSize), chunk \(layout.chunkSize), min "
            + "\(minimumSegmentSize), segments \(scheduler.segments)"
    }

    func check(
        _ condition: Bool, _ message: @autoclosure () -> String, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        if !condition {
            failed = true
            problems.append(Problem(message: "\(message()) [\(context)]", sourceLocation: sourceLocation))
        }
    }

    // MARK: Run

    func run() {
        checkInvariants(full: true)
        // Sometimes the probe's connection already holds the first bytes, as in a download session.
        if let first = missing.ranges.first, random.chance(0.5) {
            let probe = random.logUniform(1...max(1, 2 * layout.chunkSize))
            let requestEnd = min(first.upperBound, first.lowerBound + probe)
            let reserved = scheduler.reserve(ByteRange(first.lowerBound, layout.alignUp(requestEnd)), ownerID: 0)
            check(reserved != nil, "reserve of the first missing range failed")
            if let reserved {
                check(
                    reserved.isOwned && reserved.start == first.lowerBound
                        && reserved.end == layout.alignUp(requestEnd), "reserve returned \(reserved)")
                scheduler.noteRequested(reserved, upTo: requestEnd)
                workers[0] = Worker(segment: reserved, requestEnd: requestEnd)
            }
            if random.chance(0.8) { scheduler.split(into: Int.random(in: 0...8, using: &random)) }
            checkInvariants(full: true)
        }

        while !failed {
            if scheduler.isComplete && workers.allSatisfy({ $0 == nil }) { break }
            steps += 1
            if steps > 20_000 {
                check(false, "no progress after \(steps) steps")
                break
            }
            step()
            checkInvariants(full: steps % 128 == 0)
        }
        guard !failed else { return }
        checkInvariants(full: true)
        check(scheduler.written.isComplete, "all work done but written is not complete")
        check(
            scheduler.bytesWritten == missing.count,
            "bytesWritten \(scheduler.bytesWritten) != missing bytes \(missing.count)")
        check(written == missing, "written bytes \(written) != missing \(missing)")
        check(scheduler.missingRanges.isEmpty, "missingRanges not empty: \(scheduler.missingRanges)")
        check(scheduler.remainingBytes == 0, "remainingBytes \(scheduler.remainingBytes) at the end")
        check(scheduler.ownedCount == 0, "owned segments at the end")
    }

    func step() {
        let idle = workers.indices.filter { workers[$0] == nil }
        let busy = workers.indices.filter { workers[$0] != nil }
        var actions: [(Int, Int)] = []
        // deliver, fail, cancel; claim, steal, hedge (more failures and hedges when hunting the
        // re-hedge bug)
        let hedgy = reHedgeSurvivors ? 4 : 1
        if !busy.isEmpty { actions += [(12, 0), (hedgy, 1), (1, 2)] }
        if !idle.isEmpty { actions += [(4, 3), (1, 4), (hedgy, 5)] }
        actions += [(1, 6), (1, 7)]  // time passes, split
        switch random.weighted(actions) {
        case 0: deliver(worker: busy.randomElement(using: &random)!)
        case 1: stop(worker: busy.randomElement(using: &random)!, failed: true)
        case 2: stop(worker: busy.randomElement(using: &random)!, failed: false)
        case 3: claim(worker: idle.randomElement(using: &random)!)
        case 4: steal(worker: idle.randomElement(using: &random)!)
        case 5: hedge(worker: idle.randomElement(using: &random)!)
        case 6: now += .milliseconds(random.logUniform(1...10_000))
        default: split()
        }
    }
}
