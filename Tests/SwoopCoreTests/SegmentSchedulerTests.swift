import Testing
@testable import SwoopCore

private let MiB: Int64 = 1 << 20

/// Hand-worked examples of the scheduler's decisions.
@Suite("SegmentScheduler examples")
struct SegmentSchedulerTests {
    private func scheduler(
        size: Int64, chunk: Int64 = MiB, missing: [ByteRange]? = nil, minimum: Int64 = MiB
    ) -> SegmentScheduler {
        SegmentScheduler(
            layout: ChunkLayout(objectSize: size, chunkSize: chunk), missing: missing ?? [ByteRange(0, size)],
            minimumSegmentSize: minimum)
    }

    /// Writes everything `segment` accepts of `count` bytes, as a session does.
    @discardableResult
    private func deliver(
        _ plan: SegmentScheduler, _ segment: Segment, _ count: Int64
    ) -> (accepted: Int, write: Range<Int>, offset: Int64) {
        let step = plan.plannedWrite(segment, count: Int(count))
        plan.advance(segment, by: step.accepted)
        return step
    }

    @Test func initialPlanMarksChunksOutsideMissingAsWritten() {
        let plan = scheduler(
            size: 10 * MiB + 5, missing: [ByteRange(8 * MiB, 10 * MiB + 5), ByteRange(2 * MiB, 4 * MiB)])
        #expect(
            plan.segments.map { ByteRange($0.start, $0.end) } == [
                ByteRange(2 * MiB, 4 * MiB), ByteRange(8 * MiB, 10 * MiB + 5),
            ])
        #expect((0..<11).filter { plan.written.contains($0) } == [0, 1, 4, 5, 6, 7])
        #expect(plan.bytesWritten == 0)
        #expect(plan.remainingBytes == 4 * MiB + 5)
        #expect(plan.missingRanges == [ByteRange(2 * MiB, 4 * MiB), ByteRange(8 * MiB, 10 * MiB + 5)])
    }

    @Test func emptyObjectIsCompleteAtOnce() {
        let plan = scheduler(size: 0, missing: [])
        #expect(plan.isComplete && plan.written.isComplete && plan.missingRanges.isEmpty)
        #expect(plan.claim(now: .now) == nil)
    }

    @Test func splitIntoFourGivesFourEqualAlignedParts() {
        let plan = scheduler(size: 64 * MiB)
        plan.split(into: 4)
        #expect(
            plan.segments.map { ByteRange($0.start, $0.end) } == [
                ByteRange(0, 16 * MiB), ByteRange(16 * MiB, 32 * MiB), ByteRange(32 * MiB, 48 * MiB),
                ByteRange(48 * MiB, 64 * MiB),
            ])
        #expect(plan.segments.allSatisfy { !$0.isOwned })
    }

    static let splitCases: [(Int64, Int)] = [
        (64 * MiB + 12_345, 5), (100 * MiB - 1, 3), (7 * MiB, 7), (33 * MiB + 1, 8), (2048 * MiB, 16),
    ]

    @Test("split(into:) parts are aligned, contiguous and within a chunk of each other", arguments: splitCases)
    func splitIsNearEqual(size: Int64, count: Int) {
        let plan = scheduler(size: size)
        plan.split(into: count)
        let parts = plan.segments
        #expect(parts.count == count)
        #expect(parts.first?.start == 0 && parts.last?.end == size)
        for (left, right) in zip(parts, parts.dropFirst()) {
            #expect(left.end == right.start)
            #expect(right.start % MiB == 0)
        }
        // Each part is within a chunk of an equal share.
        let share = size / Int64(count)
        for part in parts {
            #expect(abs(part.end - part.start - share) < MiB, "part \(part) of \(count) from \(size)")
        }
    }

    @Test func splitNeverGoesBelowTheMinimum() {
        let plan = scheduler(size: 5 * MiB, minimum: 2 * MiB)
        plan.split(into: 8)
        #expect(plan.segments.count == 2)
        #expect(plan.segments.allSatisfy { $0.end - $0.start >= 2 * MiB })
    }

    @Test func splitLeavesOwnedSegmentsAlone() {
        let plan = scheduler(size: 32 * MiB)
        let probe = plan.reserve(ByteRange(0, MiB))
        #expect(probe.map { ByteRange($0.start, $0.end) } == ByteRange(0, MiB))
        #expect(probe?.isOwned == true)
        plan.split(into: 3)
        #expect(
            plan.segments.map { ByteRange($0.start, $0.end) } == [
                ByteRange(0, MiB), ByteRange(MiB, 12 * MiB), ByteRange(12 * MiB, 22 * MiB),
                ByteRange(22 * MiB, 32 * MiB),
            ])
        #expect(plan.segments.filter(\.isOwned).count == 1)
    }

    @Test func reserveNeedsAnUnownedSegmentStartingThere() {
        let plan = scheduler(size: 8 * MiB, missing: [ByteRange(2 * MiB, 8 * MiB)])
        #expect(plan.reserve(ByteRange(0, MiB)) == nil)  // already complete
        #expect(plan.reserve(ByteRange(3 * MiB, 4 * MiB)) == nil)  // not a segment start
        let whole = plan.reserve(ByteRange(2 * MiB, 100 * MiB))  // clipped to the segment
        #expect(whole.map { ByteRange($0.start, $0.end) } == ByteRange(2 * MiB, 8 * MiB))
        #expect(plan.reserve(ByteRange(2 * MiB, 3 * MiB)) == nil)  // now owned
    }

    @Test func claimTakesTheLargestReadySegment() {
        let plan = scheduler(
            size: 20 * MiB,
            missing: [ByteRange(0, 2 * MiB), ByteRange(4 * MiB, 12 * MiB), ByteRange(14 * MiB, 17 * MiB)])
        let now = Moment.now
        #expect(plan.claim(now: now).map { $0.start } == 4 * MiB)
        #expect(plan.claim(now: now).map { $0.start } == 14 * MiB)
        #expect(plan.claim(now: now).map { $0.start } == 0)
        #expect(plan.ownedCount == 3)
    }

    @Test func stealHalvesTheLargestRemaining() {
        let plan = scheduler(
            size: 40 * MiB,
            missing: [ByteRange(0, 8 * MiB), ByteRange(10 * MiB, 30 * MiB), ByteRange(32 * MiB, 40 * MiB)])
        let now = Moment.now
        let a = plan.claim(now: now)!, b = plan.claim(now: now)!, c = plan.claim(now: now)!
        #expect(a.start == 10 * MiB)
        deliver(plan, a, 4 * MiB + 100)  // a: 16 MiB - 100 left, still the largest
        deliver(plan, b, MiB)
        deliver(plan, c, MiB)
        // No unowned work left: claim steals. a's remaining bytes run from 14 MiB + 100 to 30 MiB;
        // the middle is 22 MiB + 50, so the cut is at the next chunk boundary, 23 MiB.
        let piece = plan.claim(now: now)
        #expect(piece.map { ByteRange($0.start, $0.end) } == ByteRange(23 * MiB, 30 * MiB))
        #expect(piece?.isOwned == true)
        #expect(a.end == 23 * MiB)
        #expect(b.end == 8 * MiB && c.end == 40 * MiB)
        // The victim's connection now stops at the cut: it accepts fewer bytes than it gets.
        let step = deliver(plan, a, 10 * MiB)
        #expect(step.accepted == Int(23 * MiB - (14 * MiB + 100)))
        #expect(a.isDone)
    }

    @Test func stealTakesOnlyTheUnrequestedTail() {
        let plan = scheduler(size: 16 * MiB)
        let segment = plan.claim(now: .now)!
        plan.noteRequested(segment, upTo: 10 * MiB)
        deliver(plan, segment, MiB)
        #expect(segment.unrequested == 6 * MiB)
        // The middle of what is left (8.5 MiB) lies inside the request: the cut moves up to its end.
        let piece = plan.steal()
        #expect(piece.map { ByteRange($0.start, $0.end) } == ByteRange(10 * MiB, 16 * MiB))
        #expect(segment.end == 10 * MiB)
        #expect(segment.unrequested == 0)
        // The connection's request is untouched: it still accepts everything it asked for.
        #expect(plan.plannedWrite(segment, count: Int(9 * MiB)).accepted == Int(9 * MiB))
    }

    @Test func stealPrefersUnrequestedBytesOverLargerRequests() {
        let plan = scheduler(size: 16 * MiB, missing: [ByteRange(0, 12 * MiB), ByteRange(12 * MiB, 16 * MiB)])
        let now = Moment.now
        let big = plan.claim(now: now)!
        let small = plan.claim(now: now)!
        #expect(big.start == 0 && small.start == 12 * MiB)
        plan.noteRequested(big, upTo: 12 * MiB)  // all of it asked for
        let piece = plan.claim(now: now)
        #expect(piece.map { ByteRange($0.start, $0.end) } == ByteRange(14 * MiB, 16 * MiB))
        #expect(big.end == 12 * MiB)
    }

    @Test func requestsInFlightAreCutOnlyWhereCutSays() {
        let plan = scheduler(size: 12 * MiB)
        let segment = plan.claim(now: .now, ownerID: 3)!
        #expect(segment.ownerID == 3)
        plan.noteRequested(segment, upTo: 12 * MiB)
        deliver(plan, segment, MiB + 5)
        #expect(plan.steal() == nil)  // nothing unrequested, no cut
        #expect(plan.claim(now: .now, cut: { _ in nil }) == nil)
        var asked: [Segment] = []
        let piece = plan.steal(
            ownerID: 4,
            cut: { victim in
                asked.append(victim)
                return victim.frontier + victim.remaining / 2  // 6.5 MiB + 2.5 bytes: next boundary 7 MiB
            })
        #expect(asked.count == 1 && asked.first === segment)
        #expect(piece.map { ByteRange($0.start, $0.end) } == ByteRange(7 * MiB, 12 * MiB))
        #expect(piece?.ownerID == 4 && piece?.isOwned == true)
        #expect(segment.end == 7 * MiB)
        // The victim's connection now stops early.
        #expect(plan.plannedWrite(segment, count: Int(10 * MiB)).accepted == Int(6 * MiB - 5))
        // A cut leaving less than the minimum on either side is refused.
        plan.noteRequested(piece!, upTo: 12 * MiB)
        #expect(plan.steal(cut: { $0.end - 1 }) == nil)
        #expect(plan.steal(cut: { $0.frontier }) == nil)
    }

    @Test func cutFallbackTakesFromTheLargestRemaining() {
        let plan = scheduler(size: 20 * MiB, missing: [ByteRange(0, 6 * MiB), ByteRange(6 * MiB, 20 * MiB)])
        let now = Moment.now
        let large = plan.claim(now: now)!
        let small = plan.claim(now: now)!
        #expect(large.start == 6 * MiB && small.start == 0)
        plan.noteRequested(large, upTo: 20 * MiB)
        plan.noteRequested(small, upTo: 6 * MiB)
        let piece = plan.claim(now: now, cut: { $0.frontier + $0.remaining / 2 })
        #expect(piece.map { ByteRange($0.start, $0.end) } == ByteRange(13 * MiB, 20 * MiB))
        // Only the smallest can be cut: it is asked too.
        plan.noteRequested(piece!, upTo: 20 * MiB)
        let other = plan.claim(now: now, cut: { $0 === small ? $0.frontier + 3 * MiB : nil })
        #expect(other.map { ByteRange($0.start, $0.end) } == ByteRange(3 * MiB, 6 * MiB))
    }

    @Test func noteRequestedAndRelease() {
        let plan = scheduler(size: 8 * MiB, minimum: 8 * MiB)
        let segment = plan.claim(now: .now, ownerID: 1)!
        #expect(segment.requestedUpTo == 0 && segment.unrequested == 8 * MiB)
        plan.noteRequested(segment, upTo: 3 * MiB)
        plan.noteRequested(segment, upTo: 2 * MiB)  // never backwards
        #expect(segment.requestedUpTo == 3 * MiB)
        plan.noteRequested(segment, upTo: 100 * MiB)  // clamped to the end
        #expect(segment.requestedUpTo == 8 * MiB && segment.unrequested == 0)
        deliver(plan, segment, 2 * MiB)
        plan.release(segment, failed: true)
        // Released: nothing of it is requested any more, and nobody owns it.
        #expect(segment.requestedUpTo == 2 * MiB)
        #expect(segment.unrequested == 6 * MiB)
        #expect(segment.ownerID == nil)
        let again = plan.claim(now: .now, ownerID: 2)
        #expect(again === segment && segment.ownerID == 2)
    }

    @Test func stealsGoDownToOneChunk() {
        // The initial plan keeps segments of at least the minimum; steals go down to one chunk.
        let plan = scheduler(size: 3 * MiB, minimum: 2 * MiB)
        #expect(plan.minimumStealSize == MiB)
        #expect(scheduler(size: 3 * MiB, minimum: MiB / 2).minimumStealSize == MiB / 2)
        plan.split(into: 3)
        #expect(plan.segments.count == 1)
        let only = plan.claim(now: .now)!
        let piece = plan.steal()
        #expect(piece.map { ByteRange($0.start, $0.end) } == ByteRange(2 * MiB, 3 * MiB))
        #expect(only.end == 2 * MiB)
    }

    @Test func stealRefusesPiecesBelowOneChunk() {
        let plan = scheduler(size: 2 * MiB, minimum: 4 * MiB)
        let only = plan.claim(now: .now)!
        deliver(plan, only, MiB / 2)  // 1.5 MiB left: no cut leaves a chunk on both sides
        #expect(plan.steal() == nil)
        #expect(plan.claim(now: .now) == nil)
        #expect(plan.steal(cut: { $0.frontier + $0.remaining / 2 }) == nil)
        #expect(only.end == 2 * MiB)
    }

    @Test func plannedWriteAcceptsFewerBytesWhenTheEndShrank() {
        let plan = scheduler(size: 16 * MiB)
        let segment = plan.claim(now: .now)!
        deliver(plan, segment, 7 * MiB + MiB / 2)
        let piece = plan.steal()!  // remaining 8.5 MiB from 7.5 MiB: cut at 12 MiB
        #expect(piece.start == 12 * MiB && segment.end == 12 * MiB)
        let step = plan.plannedWrite(segment, count: Int(8 * MiB))
        #expect(step.accepted == Int(4 * MiB + MiB / 2))
        #expect(step.write == 0..<step.accepted)
        #expect(step.offset == 7 * MiB + MiB / 2)
        plan.advance(segment, by: step.accepted)
        #expect(segment.isDone)
        #expect(plan.plannedWrite(segment, count: 10).accepted == 0)
        #expect((0..<12).allSatisfy { plan.written.contains($0) })
        #expect(!plan.written.contains(12))
    }

    @Test func hedgePairSharesOneFrontier() {
        let plan = scheduler(size: 8 * MiB, minimum: 8 * MiB)
        let slow = plan.claim(now: .now)!
        deliver(plan, slow, 3 * MiB + MiB / 2)
        let hedge = plan.hedge(slow)!
        #expect(hedge.start == 3 * MiB && hedge.end == 8 * MiB)  // from the chunk boundary below
        #expect(hedge.partner === slow && slow.partner === hedge && hedge.isHedge)
        #expect(plan.hedge(slow) == nil && plan.hedge(hedge) == nil)
        #expect(plan.hedgeCandidates.isEmpty)

        // The hedge re-fetches 3 MiB ..< 3.5 MiB, which the slow side wrote: skipped.
        let first = deliver(plan, hedge, MiB)
        #expect(first.accepted == Int(MiB))
        #expect(first.write == Int(MiB / 2)..<Int(MiB))
        #expect(first.offset == 3 * MiB + MiB / 2)
        #expect(plan.bytesWritten == 4 * MiB)
        #expect(slow.frontier == 4 * MiB)

        // The slow side catches up through bytes the hedge wrote: skipped, then writes new ones.
        let second = deliver(plan, slow, MiB)
        #expect(second.write == Int(MiB / 2)..<Int(MiB))
        #expect(second.offset == 4 * MiB)
        #expect(plan.bytesWritten == 4 * MiB + MiB / 2)

        // The hedge wins; finishing it retires the slow side too.
        deliver(plan, hedge, 8 * MiB)
        #expect(hedge.isDone && slow.isDone)
        plan.finish(hedge)
        #expect(plan.isComplete)
        #expect(plan.written.isComplete)
        #expect(plan.bytesWritten == 8 * MiB)
        #expect(plan.plannedWrite(slow, count: 100).accepted == 0)
    }

    @Test func brokenHedgePairLeavesTheSurvivorCovered() {
        let plan = scheduler(size: 8 * MiB, minimum: 8 * MiB)
        let slow = plan.claim(now: .now)!
        deliver(plan, slow, MiB)
        let hedge = plan.hedge(slow)!
        deliver(plan, hedge, 3 * MiB + 7)  // hedge ahead, at 4 MiB + 7
        plan.release(hedge, failed: true)
        #expect(plan.segments.count == 1 && plan.segments[0] === slow)
        #expect(slow.partner == nil)
        #expect(slow.frontier == 4 * MiB + 7)
        // The survivor's connection skips what the hedge wrote.
        let step = deliver(plan, slow, 4 * MiB)
        #expect(step.write == Int(3 * MiB + 7)..<Int(4 * MiB))
        #expect(step.offset == 4 * MiB + 7)
        #expect(plan.bytesWritten == 5 * MiB)
    }

    @Test(
        "a second hedge of a broken pair's survivor skips what the first hedge wrote"
    )
    func reHedgeAfterBrokenPair() {
        let plan = scheduler(size: 8 * MiB, minimum: 8 * MiB)
        let slow = plan.claim(now: .now)!
        let first = plan.hedge(slow)!
        deliver(plan, first, 2 * MiB + MiB / 2)  // the first hedge writes 0 ..< 2.5 MiB
        plan.release(first, failed: true)  // and fails; `slow` remembers those bytes are written
        #expect(slow.frontier == 2 * MiB + MiB / 2)
        let second = plan.hedge(slow)!
        #expect(second.start == 2 * MiB)
        let step = deliver(plan, second, MiB)
        // Bytes 2 MiB ..< 2.5 MiB are already on disk and must be skipped.
        #expect(step.write == Int(MiB / 2)..<Int(MiB))
        #expect(plan.bytesWritten == 3 * MiB)
        deliver(plan, second, 8 * MiB)
        plan.finish(second)
        #expect(plan.isComplete && plan.written.isComplete)
        #expect(plan.bytesWritten == 8 * MiB)
    }

    @Test(
        "remainingBytes counts a hedge left alone"
    )
    func remainingBytesOfAnOrphanedHedge() {
        let plan = scheduler(size: 8 * MiB, minimum: 8 * MiB)
        let slow = plan.claim(now: .now)!
        deliver(plan, slow, MiB)
        let hedge = plan.hedge(slow)!
        #expect(plan.remainingBytes == 7 * MiB)  // the pair counts once
        plan.release(slow, failed: true)  // the original connection fails; the hedge carries on alone
        #expect(plan.segments.count == 1 && plan.segments[0] === hedge)
        #expect(plan.remainingBytes == 7 * MiB)
    }

    @Test func releaseWithRetryAtDelaysTheNextClaim() {
        let plan = scheduler(size: 4 * MiB, minimum: 4 * MiB)
        let start = Moment.now
        let segment = plan.claim(now: start)!
        deliver(plan, segment, MiB)
        plan.release(segment, failed: true, retryAt: start + .seconds(5))
        #expect(!segment.isOwned)
        #expect(segment.failuresWithoutProgress == 1)
        #expect(plan.worstFailureCount == 1)
        #expect(plan.nextRetryTime == start + .seconds(5))
        #expect(plan.claim(now: start + .seconds(4)) == nil)
        let again = plan.claim(now: start + .seconds(5))
        #expect(again === segment)
        #expect(segment.position == MiB)  // resumes where it stopped
        #expect(plan.nextRetryTime == nil)  // owned again
        // A second failure without progress counts; progress resets the count.
        plan.release(segment, failed: true, retryAt: start + .seconds(6))
        #expect(segment.failuresWithoutProgress == 2)
        _ = plan.claim(now: start + .seconds(6))
        deliver(plan, segment, 1)
        #expect(segment.failuresWithoutProgress == 0)
    }

    @Test func releaseWithoutFailureKeepsTheSegmentReady() {
        let plan = scheduler(size: 4 * MiB, minimum: 4 * MiB)
        let now = Moment.now
        let segment = plan.claim(now: now)!
        plan.release(segment, failed: false)
        #expect(segment.failuresWithoutProgress == 0)
        #expect(plan.nextRetryTime == nil)
        #expect(plan.claim(now: now) === segment)
    }

    @Test func releasingADoneSegmentRemovesIt() {
        let plan = scheduler(size: 4 * MiB, minimum: MiB)
        plan.split(into: 2)
        let first = plan.claim(now: .now)!
        deliver(plan, first, 2 * MiB)
        plan.release(first, failed: false)
        #expect(plan.segments.count == 1)
        #expect(plan.missingRanges == [ByteRange(2 * MiB, 4 * MiB)])
    }

    @Test func writtenTracksOnlyWholeChunksAndTheLastPartialOne() {
        let plan = scheduler(size: 3 * MiB + 10)
        let segment = plan.claim(now: .now)!
        deliver(plan, segment, MiB - 1)
        #expect(!plan.written.contains(0))
        deliver(plan, segment, 1)
        #expect(plan.written.contains(0) && !plan.written.contains(1))
        deliver(plan, segment, 2 * MiB + 9)
        #expect(plan.written.contains(2) && !plan.written.contains(3))
        deliver(plan, segment, 1)
        #expect(plan.written.isComplete)
        #expect(plan.bytesWritten == 3 * MiB + 10)
    }

    /// The default configuration: 1 MiB chunks, 1 MiB minimum segments.
    @Test(
        "claim steals whenever some in-flight segment can be split"
    )
    func claimTriesEveryStealableSegment() {
        let size = 10 * MiB + 6 * MiB / 10
        let plan = scheduler(size: size, missing: [ByteRange(0, 2 * MiB), ByteRange(8 * MiB, size)])
        let now = Moment.now
        let tail = plan.claim(now: now)!
        let head = plan.claim(now: now)!
        #expect(tail.start == 8 * MiB && head.start == 0)
        deliver(plan, tail, 4 * MiB / 10)  // tail: 8.4 MiB ..< 10.6 MiB, 2.2 MiB left, cannot be cut
        // head, 0 ..< 2 MiB untouched, splits cleanly at 1 MiB, but steal only looks at the tail.
        let piece = plan.claim(now: now)
        #expect(piece.map { ByteRange($0.start, $0.end) } == ByteRange(MiB, 2 * MiB))
    }

    @Test(
        "steal uses another chunk boundary when the one above the middle leaves too little"
    )
    func stealTriesTheBoundaryBelowTheMiddle() {
        // Minimum a quarter chunk; 0.5 ..< 2 chunks left. The boundary above the middle (1.25) is
        // the end; the one below, 1, leaves 0.5 and 1 chunk.
        let plan = scheduler(size: 2 * MiB, minimum: MiB / 4)
        let segment = plan.claim(now: .now)!
        deliver(plan, segment, MiB / 2)
        let piece = plan.steal()
        #expect(piece.map { ByteRange($0.start, $0.end) } == ByteRange(MiB, 2 * MiB))
    }
}
