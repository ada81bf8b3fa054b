import Testing
@testable import SwoopCore

private let MiB: Int64 = 1 << 20

/// The transfer's choices, from measurements alone.
@Suite("TransferPolicy")
struct TransferPolicyTests {
    private let policy = TransferPolicy(minimumSegmentSize: MiB)

    private func connection(
        _ id: Int, rate: Double, ttfb: Double = 0.01, since: Double? = 5, replacements: Int = 0,
        segment: SegmentSample? = SegmentSample(frontier: 0, end: 64 * MiB, isHedged: false)
    ) -> ConnectionSample {
        ConnectionSample(
            id: id, rate: rate, timeToFirstByte: ttfb, isTransferring: true, secondsSinceFirstByte: since,
            replacements: replacements, segment: segment)
    }

    @Test func chooseSourceSpreadsOverSourcesUnderTheirLimits() {
        func source(
            _ active: Int, cap: Int? = nil, failures: Int = 0, usable: Bool = true, resting: Bool = false
        ) -> SourceSample {
            SourceSample(active: active, cap: cap, failures: failures, isUsable: usable, isResting: resting)
        }
        // The fewest requests in flight; ties go to fewer failures, then to the earlier URL.
        #expect(TransferPolicy.chooseSource([source(3), source(1), source(2)]) == 1)
        #expect(TransferPolicy.chooseSource([source(1, failures: 2), source(1)]) == 1)
        #expect(TransferPolicy.chooseSource([source(1), source(1)]) == 0)
        // A learned limit, a dropped source and one backing off are skipped.
        #expect(TransferPolicy.chooseSource([source(4, cap: 4), source(6)]) == 1)
        #expect(TransferPolicy.chooseSource([source(0, usable: false), source(5)]) == 1)
        #expect(TransferPolicy.chooseSource([source(0, resting: true), source(5)]) == 1)
        #expect(TransferPolicy.chooseSource([source(4, cap: 4), source(0, usable: false)]) == nil)
        // A hedge prefers another source than the straggler's, but takes the same one if it must.
        #expect(TransferPolicy.chooseSource([source(0), source(3)], avoiding: 0) == 1)
        #expect(TransferPolicy.chooseSource([source(0), source(3, cap: 3)], avoiding: 0) == 0)
    }

    @Test func roundTripIsTheQuickestFirstByte() {
        #expect(
            TransferPolicy.roundTrip([
                connection(0, rate: 1, ttfb: 0.08), connection(1, rate: 1, ttfb: 0.03), connection(2, rate: 1, ttfb: 0),
            ]) == 0.03)
        #expect(TransferPolicy.roundTrip([]) == 0.05)
    }

    @Test func requestSizeIsHalfASecondOrFiftyRoundTrips() {
        #expect(policy.requestSize(rate: 0, timeToFirstByte: 0) == 4 * MiB, "unmeasured: 4 MiB")
        #expect(policy.requestSize(rate: Double(100 * MiB), timeToFirstByte: 0.001) == 50 * MiB)
        #expect(
            policy.requestSize(rate: Double(10 * MiB), timeToFirstByte: 0.04) == 20 * MiB, "50 round trips of 40 ms")
        #expect(policy.requestSize(rate: 1000, timeToFirstByte: 0.001) == MiB, "never below the minimum segment")
        #expect(policy.requestSize(rate: 1e12, timeToFirstByte: 1) == 1 << 30, "never above 1 GiB")
    }

    @Test("in a proven pool, requests grow by the share of answers another node refused")
    func requestSizeInAPool() {
        let rate = Double(10 * MiB)
        #expect(policy.requestSize(rate: rate, timeToFirstByte: 0.001, refused: 0.5) == 10 * MiB, "twice 5 MiB")
        #expect(policy.requestSize(rate: 0, timeToFirstByte: 0, refused: 0.5) == 8 * MiB)
        #expect(policy.requestSize(rate: rate, timeToFirstByte: 0.001, refused: 0.99) == 20 * MiB, "at most 4 times")
        var watch = ValidatorWatch()
        #expect(watch.refusedShare == 0)
        _ = watch.otherAnswer(to: watch.willSend())
        #expect(watch.refusedShare == 0, "a doubt is no pool yet")
        watch.pinnedAnswer(to: watch.willSend())
        #expect(watch.isPool && watch.refusedShare == 0.5)
    }

    @Test func nextRequestTakesSmallRemaindersAlong() {
        #expect(
            policy.nextRequest(position: 0, end: 100 * MiB, hedged: false, size: 10 * MiB) == ByteRange(0, 10 * MiB))
        // 14 MiB left of a 10 MiB request: less than one and a half requests, so all of it.
        #expect(
            policy.nextRequest(position: 86 * MiB, end: 100 * MiB, hedged: false, size: 10 * MiB)
                == ByteRange(86 * MiB, 100 * MiB))
        #expect(
            policy.nextRequest(position: 80 * MiB, end: 100 * MiB, hedged: false, size: 10 * MiB)
                == ByteRange(80 * MiB, 90 * MiB))
        #expect(
            policy.nextRequest(position: 10, end: 100 * MiB, hedged: true, size: MiB) == ByteRange(10, 100 * MiB),
            "a hedge asks for its whole tail")
    }

    @Test func cutsOnlyRequestsWithWellOverARoundTripLeft() {
        let layout = ChunkLayout(objectSize: 1 << 30, chunkSize: 64 << 10)
        let victim = SegmentSample(frontier: 0, end: 8 * MiB, isHedged: false)
        // 8 MiB at 1 MiB/s is 8 s left; the thief runs at the median, 3 MiB/s: cut at a quarter.
        let point = policy.cutPoint(
            victim, rate: Double(MiB), others: [Double(MiB), Double(3 * MiB), Double(3 * MiB)], roundTrip: 0.05,
            minimumStealSize: 64 << 10, layout: layout)
        #expect(point == 2 * MiB)
        // A fraction of a second left: not worth wasting what the server already sent.
        #expect(
            policy.cutPoint(
                victim, rate: Double(64 * MiB), others: [], roundTrip: 0.05, minimumStealSize: 64 << 10, layout: layout)
                == nil)
        // Four round trips of a long path are more than the victim has left.
        #expect(
            policy.cutPoint(
                victim, rate: Double(16 * MiB), others: [], roundTrip: 0.2, minimumStealSize: 64 << 10, layout: layout)
                == nil)
        #expect(
            policy.cutPoint(victim, rate: 0, others: [], roundTrip: 0.05, minimumStealSize: 64 << 10, layout: layout)
                == nil, "unmeasured")
        let sliver = SegmentSample(frontier: 0, end: 100 << 10, isHedged: false)
        #expect(
            policy.cutPoint(sliver, rate: 1000, others: [], roundTrip: 0.05, minimumStealSize: 64 << 10, layout: layout)
                == nil, "less than two steals")
        // Never closer than one steal to either end.
        let edge = policy.cutPoint(
            victim, rate: 1000, others: [1e9], roundTrip: 0.05, minimumStealSize: 64 << 10, layout: layout)
        #expect(edge == 64 << 10)
    }

    @Test func replacesOnlyClearlySlowMeasuredConnections() {
        let fast = (0..<4).map { connection($0, rate: Double(10 * MiB)) }
        let slow = connection(4, rate: Double(MiB))
        #expect(policy.connectionsToReplace(fast + [slow], minimumStealSize: 64 << 10) == [4])
        #expect(
            policy.connectionsToReplace(Array(fast.prefix(2)) + [slow], minimumStealSize: 64 << 10) == [],
            "too few for a median")
        #expect(
            policy.connectionsToReplace(fast + [connection(4, rate: Double(3 * MiB))], minimumStealSize: 64 << 10)
                == [], "a third is not a quarter")
        #expect(
            policy.connectionsToReplace(
                fast + [connection(4, rate: Double(MiB), since: 0.1)], minimumStealSize: 64 << 10) == [],
            "not measured long enough")
        #expect(
            policy.connectionsToReplace(
                fast + [connection(4, rate: Double(MiB), replacements: 3)], minimumStealSize: 64 << 10) == [],
            "replaced three times already")
        let hedged = connection(
            4, rate: Double(MiB), segment: SegmentSample(frontier: 0, end: 64 * MiB, isHedged: true))
        #expect(policy.connectionsToReplace(fast + [hedged], minimumStealSize: 64 << 10) == [])
        let nearlyDone = connection(
            4, rate: Double(MiB), segment: SegmentSample(frontier: 0, end: 100 << 10, isHedged: false))
        #expect(policy.connectionsToReplace(fast + [nearlyDone], minimumStealSize: 64 << 10) == [])
    }

    @Test func hedgesTailsFarBehindTheMedian() {
        let tail = SegmentSample(frontier: 0, end: 4 * MiB, isHedged: false)
        let busy = [
            connection(0, rate: Double(10 * MiB), segment: tail), connection(1, rate: Double(10 * MiB), segment: tail),
            connection(2, rate: Double(MiB), segment: tail),
        ]
        #expect(policy.tailsToHedge(busy: busy, idle: 2, roundTrip: 0.05) == [2])
        #expect(policy.tailsToHedge(busy: busy, idle: 0, roundTrip: 0.05) == [])
        // 4 s left against 0.4 s on a fresh connection, but not if it is nearly done (64 KiB: 62 ms
        // left, against a round trip and 6 ms on a fresh one, times 1.5).
        let short = SegmentSample(frontier: 0, end: 64 << 10, isHedged: false)
        #expect(
            policy.tailsToHedge(
                busy: Array(busy.prefix(2)) + [connection(2, rate: Double(MiB), segment: short)], idle: 2,
                roundTrip: 0.05) == [])
        let paired = SegmentSample(frontier: 0, end: 4 * MiB, isHedged: true)
        #expect(
            policy.tailsToHedge(
                busy: Array(busy.prefix(2)) + [connection(2, rate: Double(MiB), segment: paired)], idle: 2,
                roundTrip: 0.05) == [])
        #expect(policy.tailsToHedge(busy: [busy[2]], idle: 1, roundTrip: 0.05) == [], "one rate is no median")
    }

    @Test func hedgesTheEndGameOfALossyPathLatestFirst() {
        // 16 connections near 512 KB/s over 40 ms: rates within noise are left alone, a tail at
        // half the median (2 s left against 1 s + a round trip on a fresh one) is fetched twice,
        // and the latest expected finish goes first when idle connections are few.
        let left = SegmentSample(frontier: 0, end: 512 << 10, isHedged: false)
        var busy = (0..<14).map { connection($0, rate: 512_000 + Double($0) * 1000, segment: left) }
        #expect(policy.tailsToHedge(busy: busy, idle: 4, roundTrip: 0.04) == [])
        busy.append(connection(14, rate: 256_000, segment: left))
        busy.append(connection(15, rate: 128_000, segment: left))
        #expect(policy.tailsToHedge(busy: busy, idle: 4, roundTrip: 0.04) == [15, 14])
        #expect(policy.tailsToHedge(busy: busy, idle: 1, roundTrip: 0.04) == [15])
        // A connection stalled in a retransmission timeout (its rate falling fast) is the first;
        // one whose response has not begun is not measured yet.
        busy.append(connection(16, rate: 2_000, segment: left))
        #expect(policy.tailsToHedge(busy: busy, idle: 1, roundTrip: 0.04) == [16])
        busy.append(connection(17, rate: 1_000, since: nil, segment: left))
        busy.append(connection(18, rate: 0, segment: left))
        #expect(policy.tailsToHedge(busy: busy, idle: 1, roundTrip: 0.04) == [16])
    }
}
