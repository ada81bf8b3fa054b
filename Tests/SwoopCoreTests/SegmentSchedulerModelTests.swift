import SwoopTestSupport
import Testing
@testable import SwoopCore

/// Drives a ``SegmentScheduler`` the way a download session does — several simulated connections
/// claiming, stealing, hedging, delivering bytes in random amounts, failing and finishing, in a
/// random order — and after every step checks it against an independent record of which bytes were
/// actually written.
///
/// The simulations are CPU-bound and synchronous: the suite runs one case at a time and yields
/// between simulations, so it never holds the shared test thread pool (two threads on a 2-core
/// machine) for seconds while timed download tests wait for it.
@Suite("SegmentScheduler model", .serialized)
struct SegmentSchedulerModelTests {
    @Test("random interleavings keep every invariant", arguments: 0..<6)
    func randomInterleavings(batch: Int) async {
        var strictViolations: [String] = []
        for run in 0..<14 {
            await Task.yield()
            let seed = UInt64(batch) << 32 | UInt64(run) | 0x5EED_0000_0000_0000
            let simulation = SchedulerSimulation(seed: seed, reHedgeSurvivors: true)
            simulation.run()
            strictViolations += simulation.strictClaimViolations
            if simulation.failed { break }
        }
        // `claim` never returns nil while an unrequested tail somewhere could still be split.
        #expect(
            strictViolations.isEmpty, "claim returned nil while work could be stolen: \(strictViolations.prefix(3))")
    }

    @Test("re-hedging the survivor of a broken hedge pair writes no byte twice")
    func reHedgingSurvivors() async {
        // Same simulation, but hedges may also target a segment that survived a broken pair whose
        // other half had got ahead of it. See SegmentSchedulerTests.reHedgeAfterBrokenPair.
        for run in 0..<32 {
            await Task.yield()
            let simulation = SchedulerSimulation(seed: 0xBAD5_EED0_0000 | UInt64(run), reHedgeSurvivors: true)
            simulation.run()
            if simulation.failed { break }
        }
    }
}

/// One run of the simulation.
final class SchedulerSimulation {
    struct Worker {
        let segment: Segment
        /// One past the last byte the connection asked for (the server sends up to here).
        let requestEnd: Int64
    }

    private var random: SplitMix64
    let seed: UInt64
    let layout: ChunkLayout
    let minimumSegmentSize: Int64
    let scheduler: SegmentScheduler
    /// The byte ranges the plan had to fetch.
    let missing: IntervalSet
    /// Bytes written so far, by any connection.
    private var written = IntervalSet()
    /// Per chunk, bytes present (chunks outside `missing` start full).
    private var chunkBytes: [Int64]
    private var completeChunks = 0
    private var workers: [Worker?]
    /// What the model knows a segment's former hedge partner wrote (the survivor's `coveredUpTo`).
    private var covered: [ObjectIdentifier: (segment: Segment, offset: Int64)] = [:]
    private var now: ContinuousClock.Instant
    private let reHedgeSurvivors: Bool
    /// How often an idle connection may cut a request in flight.
    private let cutRate: Double
    private var steps = 0
    private(set) var failed = false
    private(set) var strictClaimViolations: [String] = []

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
        now = ContinuousClock.now
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

    private var context: String {
        "seed \(String(seed, radix: 16)) step \(steps): size \(layout.objectSize), chunk \(layout.chunkSize), min "
            + "\(minimumSegmentSize), segments \(scheduler.segments)"
    }

    private func check(
        _ condition: Bool, _ message: @autoclosure () -> String, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        if !condition {
            failed = true
            Issue.record("\(message()) [\(context)]", sourceLocation: sourceLocation)
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

    private func step() {
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

    // MARK: Actions

    /// A cut at `offset` (rounded up to a chunk boundary) leaves at least the minimum on both
    /// sides of `segment`'s remaining bytes; the cut point if so.
    private func validCut(_ segment: Segment, at offset: Int64) -> Int64? {
        let point = layout.alignUp(offset)
        let minimum = scheduler.minimumStealSize
        return point - segment.frontier >= minimum && segment.end - point >= minimum ? point : nil
    }

    /// Whether some chunk boundary in the part of `segment` nobody has requested yet splits it
    /// leaving at least the minimum on both sides.
    private func unrequestedTailCanBeSplit(_ segment: Segment) -> Bool {
        let minimum = scheduler.minimumStealSize
        let from = max(segment.frontier, segment.requestedUpTo)
        let lowest = layout.alignUp(max(from, segment.frontier + minimum))
        return lowest < segment.end && segment.end - lowest >= minimum
    }

    private var stealCandidates: [Segment] {
        scheduler.segments.filter { $0.isOwned && $0.partner == nil && !$0.isDone }
    }

    /// What a steal may do now, as documented: "the far half of the largest tail not yet
    /// requested, or failing that a part of a request in flight at the point `cut` gives".
    private struct StealForecast {
        /// A steal must find something.
        var mustSucceed: Bool
        /// Acceptable (victim, cut point) outcomes.
        var allowed: [(victim: Segment, point: Int64)]
        /// Something could have been split off an unrequested tail somewhere (the stricter reading).
        var anyTailSplittable: Bool
    }

    private func forecastSteal(cuts: [ObjectIdentifier: Int64]) -> StealForecast {
        let candidates = stealCandidates
        var allowed: [(victim: Segment, point: Int64)] = []
        var tailSure = false
        // Unrequested tails, largest first; within the first size that has a valid cut, any victim
        // with one may be chosen, at the chunk boundary nearest its middle.
        let sizes = Set(candidates.map(\.unrequested).filter { $0 >= scheduler.minimumStealSize }).sorted(by: >)
        for size in sizes {
            let tied = candidates.filter { $0.unrequested == size }
            let points = tied.map { tailPoint($0) }
            for (victim, point) in zip(tied, points) {
                if let point { allowed.append((victim, point)) }
            }
            if !allowed.isEmpty {
                tailSure = true
                break
            }
        }
        // The fallback: the largest candidate with a usable cut.
        let cutting = candidates.compactMap { victim in
            cuts[ObjectIdentifier(victim)].flatMap { validCut(victim, at: $0) }.map { (victim: victim, point: $0) }
        }
        if let largest = cutting.map(\.victim.remaining).max() {
            allowed += cutting.filter { $0.victim.remaining == largest }
        }
        return StealForecast(
            mustSucceed: tailSure || !cutting.isEmpty, allowed: allowed,
            anyTailSplittable: candidates.contains(where: unrequestedTailCanBeSplit))
    }

    /// Where a steal of `victim`'s unrequested tail cuts: the chunk boundary nearest its middle that
    /// leaves a steal's worth on each side and takes no requested byte; `nil` if none does.
    private func tailPoint(_ victim: Segment) -> Int64? {
        let minimum = scheduler.minimumStealSize
        let lowest = layout.alignUp(max(victim.requestedUpTo, victim.frontier + minimum))
        let highest = layout.alignDown(victim.end - minimum)
        guard lowest <= highest, lowest < victim.end else { return nil }
        let half = victim.frontier + (victim.end - victim.frontier) / 2
        let point = min(max(layout.alignUp(half), lowest), highest)
        return point > victim.frontier && point < victim.end ? point : nil
    }

    /// Random cut points for some in-flight segments, as a session's `cutPoint` would give.
    private func randomCuts() -> [ObjectIdentifier: Int64] {
        var cuts: [ObjectIdentifier: Int64] = [:]
        guard random.chance(cutRate) else { return cuts }
        for victim in stealCandidates where random.chance(0.5) {
            cuts[ObjectIdentifier(victim)] = victim.frontier + Int64.random(in: 0...victim.remaining, using: &random)
        }
        return cuts
    }

    /// Checks a stolen piece against the in-flight segments as they were just before the steal.
    private func checkStolen(
        _ piece: Segment, before: [(segment: Segment, frontier: Int64, end: Int64, requested: Int64)],
        forecast: StealForecast, cuts: [ObjectIdentifier: Int64]
    ) {
        guard
            let (victim, _, oldEnd, requested) = before.first(where: {
                $0.segment.end == piece.start && $0.segment !== piece
            })
        else {
            check(false, "stolen piece \(piece) is not the tail of an in-flight segment")
            return
        }
        check(
            forecast.allowed.contains { $0.victim === victim && $0.point == piece.start },
            "stole \(piece) from \(victim); expected one of \(forecast.allowed.map { "\($0.victim)@\($0.point)" })")
        check(piece.end == oldEnd, "piece \(piece) does not end at the victim's old end \(oldEnd)")
        check(piece.start % layout.chunkSize == 0, "steal split at \(piece.start), not a chunk boundary")
        // Without a cut for this victim, requested bytes stay with their connection.
        if cuts[ObjectIdentifier(victim)] == nil {
            check(
                piece.start >= requested,
                "steal took \(piece.start)..<\(requested), which \(victim)'s connection had requested")
        }
        check(
            piece.isOwned && piece.position == piece.start && piece.partner == nil
                && piece.requestedUpTo == piece.start, "stolen piece \(piece) not fresh and owned")
    }

    private func takeSteal(
        _ result: Segment?, forecast: StealForecast,
        before: [(segment: Segment, frontier: Int64, end: Int64, requested: Int64)], cuts: [ObjectIdentifier: Int64]
    ) {
        if let result {
            checkStolen(result, before: before, forecast: forecast, cuts: cuts)
        } else {
            check(
                !forecast.mustSucceed,
                "no piece although one could be taken: \(forecast.allowed.map { "\($0.victim)@\($0.point)" })")
            if forecast.anyTailSplittable {
                // Stricter: an unrequested tail somewhere could still have been split.
                strictClaimViolations.append(
                    "seed \(String(seed, radix: 16)) step \(steps): \(scheduler.segments), min \(minimumSegmentSize), "
                        + "chunk \(layout.chunkSize)"
                )
            }
        }
    }

    private var stealSnapshot: [(segment: Segment, frontier: Int64, end: Int64, requested: Int64)] {
        stealCandidates.map { (segment: $0, frontier: $0.frontier, end: $0.end, requested: $0.requestedUpTo) }
    }

    private func claim(worker: Int) {
        let ready = scheduler.segments.filter { !$0.isOwned && !$0.isDone && ($0.notBefore.map { $0 <= now } ?? true) }
        let cuts = randomCuts()
        let forecast = forecastSteal(cuts: cuts)
        let before = stealSnapshot
        let claimed = scheduler.claim(now: now, ownerID: worker, cut: { cuts[ObjectIdentifier($0)] })
        if let largest = ready.map(\.remaining).max() {
            check(claimed != nil, "claim returned nil with ready unowned segments")
            guard let claimed else { return }
            check(ready.contains { $0 === claimed }, "claim returned \(claimed), which was not ready")
            check(claimed.remaining == largest, "claim returned \(claimed), not the largest ready segment")
            check(claimed.isOwned && claimed.notBefore == nil, "claimed segment \(claimed) not owned or still delayed")
        } else {
            takeSteal(claimed, forecast: forecast, before: before, cuts: cuts)
        }
        if let claimed {
            check(
                claimed.ownerID == worker,
                "claimed segment has owner \(String(describing: claimed.ownerID)), not \(worker)")
            startRequest(worker: worker, claimed)
        }
    }

    private func steal(worker: Int) {
        let cuts = randomCuts()
        let forecast = forecastSteal(cuts: cuts)
        let before = stealSnapshot
        let piece = scheduler.steal(ownerID: worker, cut: { cuts[ObjectIdentifier($0)] })
        takeSteal(piece, forecast: forecast, before: before, cuts: cuts)
        if let piece { startRequest(worker: worker, piece) }
    }

    /// The connection asks for the next part of `segment` (a hedge asks for its whole tail), as
    /// `startSegmentRequest` does.
    private func startRequest(worker: Int, _ segment: Segment) {
        let left = segment.end - segment.position
        let size = segment.partner != nil || left <= 0 || random.chance(0.3) ? left : random.logUniform(1...left)
        let requestEnd = segment.position + size
        scheduler.noteRequested(segment, upTo: requestEnd)
        check(
            segment.requestedUpTo >= min(requestEnd, segment.end),
            "noteRequested did not record \(requestEnd): \(segment.requestedUpTo)")
        workers[worker] = Worker(segment: segment, requestEnd: requestEnd)
    }

    private func hedge(worker: Int) {
        let candidates = scheduler.hedgeCandidates
        let expected = scheduler.segments.filter { $0.isOwned && $0.partner == nil && !$0.isDone }
        check(
            candidates.count == expected.count && zip(candidates, expected).allSatisfy { $0 === $1 },
            "hedgeCandidates \(candidates) != \(expected)")
        let eligible = candidates.filter { victim in
            if reHedgeSurvivors { return true }
            // Without re-hedging, only hedge segments that never lost a partner.
            guard let known = covered[ObjectIdentifier(victim)]?.offset else { return true }
            return known <= victim.position || known % layout.chunkSize == 0 || known >= victim.end
        }
        guard let victim = eligible.randomElement(using: &random) else {
            // Hedging an unowned or finished segment is refused.
            if let unowned = scheduler.segments.first(where: { !$0.isOwned }) {
                check(scheduler.hedge(unowned) == nil, "hedged an unowned segment \(unowned)")
            }
            return
        }
        let frontier = victim.frontier
        guard let hedge = scheduler.hedge(victim, ownerID: worker) else {
            check(false, "hedge refused candidate \(victim)")
            return
        }
        check(
            hedge.isOwned && hedge.isHedge && hedge.partner === victim && victim.partner === hedge,
            "hedge pair not linked: \(victim) / \(hedge)")
        check(
            hedge.start == layout.alignDown(frontier) && hedge.end == victim.end,
            "hedge \(hedge) of \(victim) (frontier \(frontier)) is not its tail from the chunk boundary")
        check(hedge.frontier == victim.frontier, "hedge pair frontiers differ: \(hedge.frontier) vs \(victim.frontier)")
        check(scheduler.hedge(victim) == nil && scheduler.hedge(hedge) == nil, "a segment was hedged twice")
        startRequest(worker: worker, hedge)
    }

    private func split() {
        let count = Int.random(in: 0...10, using: &random)
        let unowned = scheduler.segments.filter { !$0.isOwned }
        let before = unowned.map { ($0, $0.end) }
        scheduler.split(into: count)
        // Only unowned segments were cut, each into aligned pieces covering the same bytes.
        for (segment, oldEnd) in before {
            let pieces = scheduler.segments.filter { $0.start >= segment.start && $0.end <= oldEnd && !$0.isOwned }
            check(
                pieces.first === segment && pieces.last?.end == oldEnd,
                "split lost bytes of \(segment) (ended at \(oldEnd)): \(pieces)")
            for (left, right) in zip(pieces, pieces.dropFirst()) {
                check(left.end == right.start, "split left a gap or overlap: \(left) / \(right)")
            }
            if pieces.count > 1 {
                for piece in pieces {
                    check(piece.remaining >= minimumSegmentSize, "split made a piece \(piece) below the minimum")
                }
            }
        }
    }

    /// The connection gets up to `requestEnd - position` more bytes from the server.
    private func deliver(worker index: Int) {
        guard let worker = workers[index] else { return }
        let segment = worker.segment
        let available = worker.requestEnd - segment.position
        guard available > 0 else {
            endExchange(index)
            return
        }
        // Small pieces (as curl hands them over), a chunk's worth, or a large share of the rest.
        let count: Int64 = random.weighted([
            (1, available), (4, random.logUniform(1...available)),
            (3, Int64.random(in: 1...available, using: &random)), (2, min(available, layout.chunkSize)),
        ])
        let position = segment.position
        let oldEnd = segment.end
        let plan = scheduler.plannedWrite(segment, count: Int(count))
        check(
            plan.accepted == Int(min(count, max(0, oldEnd - position))),
            "plannedWrite accepted \(plan.accepted) of \(count) at \(position) with end \(oldEnd)")
        check(
            plan.write.upperBound == plan.accepted && plan.write.lowerBound >= 0,
            "plannedWrite write range \(plan.write) for \(plan.accepted) accepted")
        check(
            plan.offset == position + Int64(plan.write.lowerBound),
            "plannedWrite offset \(plan.offset) != position \(position) + skip \(plan.write.lowerBound)")
        // Bytes skipped must already be on disk; bytes written must not be.
        let skipped = position..<(position + Int64(plan.write.lowerBound))
        check(written.contains(skipped), "plannedWrite skips \(skipped), which nobody wrote")
        let target = plan.offset..<(plan.offset + Int64(plan.write.count))
        check(
            !written.intersects(target),
            "plannedWrite writes \(target) again (already written: \(written.overlapCount(target)) bytes)")
        check(missing.contains(target), "plannedWrite writes \(target), outside the missing bytes")
        record(target)
        scheduler.advance(segment, by: plan.accepted)
        check(segment.position == position + Int64(plan.accepted), "advance moved position to \(segment.position)")
        checkChunks(around: target)
        if plan.accepted < Int(count) || segment.isDone || segment.position >= worker.requestEnd {
            // The connection stops: its end shrank, its bytes are all in, or the response ended.
            endExchange(index)
        }
    }

    private func endExchange(_ index: Int) {
        guard let worker = workers[index] else { return }
        workers[index] = nil
        if worker.segment.isDone {
            scheduler.finish(worker.segment)
            check(!scheduler.segments.contains { $0 === worker.segment }, "finished segment still planned")
        } else if worker.segment.isOwned && worker.segment.partner == nil && random.chance(0.8) {
            // The request ended inside the segment: the same connection asks for the next part.
            startRequest(worker: index, worker.segment)
        } else {
            let paired = worker.segment.partner != nil
            release(worker.segment, failed: false, retryAt: nil)
            if !paired {
                check(
                    worker.segment.requestedUpTo == worker.segment.frontier,
                    "release left requestedUpTo at \(worker.segment.requestedUpTo), frontier \(worker.segment.frontier)"
                )
            }
        }
    }

    private func stop(worker index: Int, failed: Bool) {
        guard let worker = workers[index] else { return }
        workers[index] = nil
        let retryAt: ContinuousClock.Instant? =
            failed && random.chance(0.7) ? now + .milliseconds(random.logUniform(0...5_000)) : nil
        let segment = worker.segment
        let failuresBefore = segment.failuresWithoutProgress
        let paired = segment.partner != nil
        release(segment, failed: failed, retryAt: retryAt)
        if !paired && !segment.isDone {
            check(
                scheduler.segments.contains { $0 === segment } && !segment.isOwned,
                "released segment \(segment) not back in the plan")
            if failed {
                check(segment.failuresWithoutProgress == failuresBefore + 1, "failure not counted")
                check(segment.notBefore == retryAt, "retry time not kept")
            }
        }
    }

    private func release(_ segment: Segment, failed: Bool, retryAt: ContinuousClock.Instant?) {
        if let partner = segment.partner {
            let offset = max(covered[ObjectIdentifier(partner)]?.offset ?? 0, segment.frontier)
            covered[ObjectIdentifier(partner)] = (partner, offset)
        }
        scheduler.release(segment, failed: failed, retryAt: retryAt)
    }

    private func record(_ range: Range<Int64>) {
        guard !range.isEmpty else { return }
        let first = Int(range.lowerBound / layout.chunkSize)
        let last = Int((range.upperBound - 1) / layout.chunkSize)
        for chunk in first...last {
            let bounds = layout.byteRange(ofChunks: chunk..<chunk + 1)
            let part = max(bounds.lowerBound, range.lowerBound)..<min(bounds.upperBound, range.upperBound)
            chunkBytes[chunk] += Int64(part.count) - written.overlapCount(part)  // count each byte once
            if chunkBytes[chunk] == bounds.count { completeChunks += 1 }
        }
        written.formUnion(range)
    }

    /// The chunks overlapping `range` are in `written` exactly when all their bytes are present.
    private func checkChunks(around range: Range<Int64>) {
        guard !range.isEmpty else { return }
        let first = Int(range.lowerBound / layout.chunkSize)
        let last = Int((range.upperBound - 1) / layout.chunkSize)
        for chunk in first...last {
            let full = chunkBytes[chunk] == layout.byteRange(ofChunks: chunk..<chunk + 1).count
            check(
                scheduler.written.contains(chunk) == full,
                "chunk \(chunk): written says \(!full), but \(chunkBytes[chunk]) bytes are present")
        }
    }

    // MARK: Invariants

    private func checkInvariants(full: Bool) {
        let segments = scheduler.segments
        let chunk = layout.chunkSize
        let size = layout.objectSize
        var inFlight = IntervalSet()
        for segment in segments {
            check(segment.start % chunk == 0, "segment \(segment) starts off a chunk boundary")
            check(segment.end % chunk == 0 || segment.end == size, "segment \(segment) ends off a chunk boundary")
            check(
                segment.start <= segment.position && segment.position <= segment.end && segment.end <= size,
                "segment \(segment) out of order")
            check(
                missing.contains(segment.start..<segment.end), "segment \(segment) covers bytes that were not missing")
            if let partner = segment.partner {
                check(partner.partner === segment, "hedge partners not mutual: \(segment)")
                check(segments.contains { $0 === partner }, "partner of \(segment) is not planned")
                check(
                    partner.end == segment.end && segment.isOwned && partner.isOwned,
                    "hedge pair \(segment) / \(partner) disagree or unowned")
            }
            if !segment.isOwned {
                check(segment.partner == nil, "unowned segment \(segment) still paired")
            }
            // What a segment still has to fetch is not on disk yet (else it would be written twice).
            if segment.frontier < segment.end {
                let ahead = segment.frontier..<segment.end
                check(
                    !written.intersects(ahead),
                    "segment \(segment) (frontier \(segment.frontier)) still plans \(written.overlapCount(ahead)) "
                        + "written bytes"
                )
            }
            // Below its frontier, everything of the segment is on disk.
            check(
                written.contains(segment.start..<min(segment.frontier, segment.end)),
                "segment \(segment) claims \(segment.start)..<\(segment.frontier) written, but it is not")
            inFlight.formUnion(segment.frontier..<max(segment.frontier, segment.end))
        }
        // No two segments overlap, except the two halves of a hedge pair (taken as one span here).
        var spans: [(lower: Int64, upper: Int64, segment: Segment)] = []
        for segment in segments {
            if let partner = segment.partner, ObjectIdentifier(partner) < ObjectIdentifier(segment) { continue }
            spans.append((min(segment.start, segment.partner?.start ?? segment.start), segment.end, segment))
        }
        spans.sort { $0.lower < $1.lower }
        for (left, right) in zip(spans, spans.dropFirst()) where left.upper > right.lower {
            check(false, "segments overlap: \(left.segment) and \(right.segment)")
        }
        // Every missing byte not yet written is some segment's job: nothing falls through the cracks.
        let outstanding = missing.subtracting(written)
        let orphaned = outstanding.subtracting(inFlight)
        check(orphaned.ranges.isEmpty, "bytes \(orphaned) are missing but no segment will fetch them")
        check(
            scheduler.bytesWritten == written.count,
            "bytesWritten \(scheduler.bytesWritten) != bytes written \(written.count)")
        check(
            scheduler.written.completedCount == completeChunks,
            "written has \(scheduler.written.completedCount) chunks, \(completeChunks) are complete")
        check(scheduler.isComplete == segments.isEmpty, "isComplete disagrees with segments")
        check(scheduler.ownedCount == segments.filter(\.isOwned).count, "ownedCount wrong")
        if full {
            for index in 0..<layout.chunkCount {
                let complete = chunkBytes[index] == layout.byteRange(ofChunks: index..<index + 1).count
                if scheduler.written.contains(index) != complete {
                    check(false, "chunk \(index): written says \(!complete), \(chunkBytes[index]) bytes present")
                    break
                }
            }
            let expectedMissing = IntervalSet(scheduler.missingRanges.map { $0.lowerBound..<$0.upperBound })
            var incomplete = IntervalSet()
            for index in 0..<layout.chunkCount
            where chunkBytes[index] != layout.byteRange(ofChunks: index..<index + 1).count {
                let bounds = layout.byteRange(ofChunks: index..<index + 1)
                incomplete.formUnion(bounds.lowerBound..<bounds.upperBound)
            }
            check(expectedMissing == incomplete, "missingRanges \(expectedMissing) != incomplete chunks \(incomplete)")
        }
    }
}
