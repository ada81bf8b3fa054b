import Testing
@testable import SwoopCore

private let KiB = 1024
private let MiB = 1 << 20

/// The byte-rate cap's arithmetic, with a clock the test moves.
///
/// (`#expect` cannot call a mutating method, so each `take` is stored first.)
@Suite("TokenBucket")
struct TokenBucketTests {
    private let start = Moment.now

    private func at(_ seconds: Double) -> Moment {
        start + .nanoseconds(Int64(seconds * 1e9))
    }

    @Test func burstIsATenthOfASecondAndAtLeastOneWrite() {
        let fast = TokenBucket(bytesPerSecond: Int64(16 * MiB), now: start)
        #expect(fast.burst == Double(16 * MiB) / 10)
        #expect(fast.resumeLevel == Double(16 * MiB) / 100, "10 ms of the rate")
        #expect(fast.tokens == fast.burst, "it starts full")

        let slow = TokenBucket(bytesPerSecond: 1000, now: start)
        #expect(slow.burst == Double(16 * KiB), "one libcurl write at least")
        #expect(slow.resumeLevel == 10)

        let middling = TokenBucket(bytesPerSecond: 100 * 1024, now: start)
        #expect(middling.resumeLevel <= middling.burst / 2)
    }

    @Test func aWriteMayGoIntoDebtWhileAnyTokensAreLeft() {
        var bucket = TokenBucket(bytesPerSecond: 100_000, now: start)  // burst 16 KiB
        let first = bucket.take(16 * KiB - 1, now: start)
        #expect(first)
        #expect(bucket.tokens == 1)
        let lastToken = bucket.take(16 * KiB, now: start)
        #expect(lastToken, "one token left is enough to take a whole write")
        #expect(bucket.tokens == Double(1 - 16 * KiB))
        let inDebt = bucket.take(1, now: start)
        #expect(!inDebt, "in debt: refused")
        #expect(bucket.tokens == Double(1 - 16 * KiB), "a refused write takes nothing")
    }

    @Test func debtIsPaidBackAtTheRate() {
        var bucket = TokenBucket(bytesPerSecond: 100_000, now: start)
        let first = bucket.take(16 * KiB + 50_000, now: start)
        #expect(first)  // 50,000 bytes of debt
        let early = bucket.take(1, now: at(0.49))
        #expect(!early, "still 1,000 bytes in debt")
        let even = bucket.take(1, now: at(0.5))
        #expect(!even, "exactly even is not yet positive")
        let paidBack = bucket.take(1, now: at(0.5001))
        #expect(paidBack)
    }

    @Test func timeUntilResumeCoversTheDebtAndTheResumeLevel() {
        var bucket = TokenBucket(bytesPerSecond: 1_000_000, now: start)  // burst 100 kB, resume at 10 kB
        #expect(bucket.timeUntilResume(now: start) == .zero, "full")
        let first = bucket.take(100_000 + 40_000, now: start)
        #expect(first)  // 40 kB of debt
        let inDebt = bucket.take(1, now: start)
        #expect(!inDebt)
        let wait = bucket.timeUntilResume(now: start)
        #expect(abs(wait.seconds - 0.05) < 1e-6, "40 kB of debt and 10 kB of level at 1 MB/s: 50 ms, got \(wait)")
        #expect(abs(bucket.timeUntilResume(now: at(0.02)).seconds - 0.03) < 1e-6, "the wait shrinks as time passes")
        #expect(bucket.timeUntilResume(now: at(0.05)) == .zero)
        let resumed = bucket.take(16 * KiB, now: at(0.05))
        #expect(resumed)
    }

    @Test func aQuietSpellFillsTheBucketOnlyToTheBurst() {
        var bucket = TokenBucket(bytesPerSecond: 1_000_000, now: start)
        let first = bucket.take(100_000, now: start)
        #expect(first)
        #expect(bucket.tokens == 0)
        let afterAMinute = bucket.take(1, now: at(60))
        #expect(afterAMinute)
        #expect(bucket.tokens == bucket.burst - 1, "a minute idle is worth 100 ms, not 60 s")
    }

    /// Writers as libcurl drives them: 16 KiB writes as fast as they are let through; a refused
    /// one waits until the bucket says (plus some lateness) and tries again.
    @Test(arguments: [500 * 1024, 8 * MiB, 16 * MiB], [0.0, 0.003])
    func theAverageIsTheRate(rate: Int, lateness: Double) {
        var bucket = TokenBucket(bytesPerSecond: Int64(rate), now: start)
        var now = 0.0
        var admitted = 0
        let write = 16 * KiB
        var wakeUps = 0
        while now < 10 {
            if bucket.take(write, now: at(now)) {
                admitted += write
                now += 0.000_01  // a write takes a little time
            } else {
                now += bucket.timeUntilResume(now: at(now)).seconds + lateness
                wakeUps += 1
            }
        }
        let expected = Double(rate) * 10
        // Never more than the rate plus the burst and one write; late wake-ups lose only what
        // overflows the bucket, which a few milliseconds do not.
        #expect(Double(admitted) <= expected + bucket.burst + Double(write))
        #expect(Double(admitted) >= expected * 0.99, "admitted \(admitted) of \(Int(expected))")
        #expect(wakeUps <= 10 * 110, "about one wake-up per 10 ms or per write, whichever is rarer: \(wakeUps)")
    }

    @Test func aClockThatSeemsToGoBackAddsNothing() {
        var bucket = TokenBucket(bytesPerSecond: 1_000_000, now: at(1))
        let first = bucket.take(100_000, now: at(1))
        #expect(first)
        let earlier = bucket.take(1, now: at(0.5))
        #expect(!earlier)
        #expect(bucket.tokens == 0)
    }
}
