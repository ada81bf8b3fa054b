import SwoopTestSupport
import Testing
@testable import SwoopCore

/// What the simulated connections and the transfer do to the plan.
extension SchedulerSimulation {
    /// A cut at `offset` (rounded up to a chunk boundary) leaves at least the minimum on both
    /// sides of `segment`'s remaining bytes; the cut point if so.
    func validCut(_ segment: Segment, at offset: Int64) -> Int64? {
        let point = layout.alignUp(offset)
        let minimum = scheduler.minimumStealSize
        return point - segment.frontier >= minimum && segment.end - point >= minimum ? point : nil
    }

    /// Whether some chunk boundary in the part of `segment` nobody has requested yet splits it
    /// leaving at least the minimum on both sides.
    func unrequestedTailCanBeSplit(_ segment: Segment) -> Bool {
        let minimum = scheduler.minimumStealSize
        let from = max(segment.frontier, segment.requestedUpTo)
        let lowest = layout.alignUp(max(from, segment.frontier + minimum))
        return lowest < segment.end && segment.end - lowest >= minimum
    }

    var stealCandidates: [Segment] {
        scheduler.segments.filter { $0.isOwned && $0.partner == nil && !$0.isDone }
    }

    /// What a steal may do now, as documented: "the far half of the largest tail not yet
    /// requested, or failing that a part of a request in flight at the point `cut` gives".
    struct StealForecast {
        /// A steal must find something.
        var mustSucceed: Bool
        /// Acceptable (victim, cut point) outcomes.
        var allowed: [(victim: Segment, point: Int64)]
        /// Something could have been split off an unrequested tail somewhere (the stricter reading).
        var anyTailSplittable: Bool
    }

    func forecastSteal(cuts: [ObjectIdentifier: Int64]) -> StealForecast {
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
    func tailPoint(_ victim: Segment) -> Int64? {
        let minimum = scheduler.minimumStealSize
        let lowest = layout.alignUp(max(victim.requestedUpTo, victim.frontier + minimum))
        let highest = layout.alignDown(victim.end - minimum)
        guard lowest <= highest, lowest < victim.end else { return nil }
        let half = victim.frontier + (victim.end - victim.frontier) / 2
        let point = min(max(layout.alignUp(half), lowest), highest)
        return point > victim.frontier && point < victim.end ? point : nil
    }

    /// Random cut points for some in-flight segments, as a session's `cutPoint` would give.
    func randomCuts() -> [ObjectIdentifier: Int64] {
        var cuts: [ObjectIdentifier: Int64] = [:]
        guard random.chance(cutRate) else { return cuts }
        for victim in stealCandidates where random.chance(0.5) {
            cuts[ObjectIdentifier(victim)] = victim.frontier + Int64.random(in: 0...victim.remaining, using: &random)
        }
        return cuts
    }

    /// Checks a stolen piece against the in-flight segments as they were just before the steal.
    func checkStolen(
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

    func takeSteal(
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

    var stealSnapshot: [(segment: Segment, frontier: Int64, end: Int64, requested: Int64)] {
        stealCandidates.map { (segment: $0, frontier: $0.frontier, end: $0.end, requested: $0.requestedUpTo) }
    }

    func claim(worker: Int) {
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

    func steal(worker: Int) {
        let cuts = randomCuts()
        let forecast = forecastSteal(cuts: cuts)
        let before = stealSnapshot
        let piece = scheduler.steal(ownerID: worker, cut: { cuts[ObjectIdentifier($0)] })
        takeSteal(piece, forecast: forecast, before: before, cuts: cuts)
        if let piece { startRequest(worker: worker, piece) }
    }

    /// The connection asks for the next part of `segment` (a hedge asks for its whole tail), as
    /// `startSegmentRequest` does.
    func startRequest(worker: Int, _ segment: Segment) {
        let left = segment.end - segment.position
        let size = segment.partner != nil || left <= 0 || random.chance(0.3) ? left : random.logUniform(1...left)
        let requestEnd = segment.position + size
        scheduler.noteRequested(segment, upTo: requestEnd)
        check(
            segment.requestedUpTo >= min(requestEnd, segment.end),
            "noteRequested did not record \(requestEnd): \(segment.requestedUpTo)")
        workers[worker] = Worker(segment: segment, requestEnd: requestEnd)
    }

    func hedge(worker: Int) {
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

    func split() {
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
    func deliver(worker index: Int) {
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

    func endExchange(_ index: Int) {
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

    func stop(worker index: Int, failed: Bool) {
        guard let worker = workers[index] else { return }
        workers[index] = nil
        let retryAt: Moment? =
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

    func release(_ segment: Segment, failed: Bool, retryAt: Moment?) {
        if let partner = segment.partner {
            let offset = max(covered[ObjectIdentifier(partner)]?.offset ?? 0, segment.frontier)
            covered[ObjectIdentifier(partner)] = (partner, offset)
        }
        scheduler.release(segment, failed: failed, retryAt: retryAt)
    }

    func record(_ range: Range<Int64>) {
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
    func checkChunks(around range: Range<Int64>) {
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
}
