/// A byte-rate cap as a token bucket: tokens accrue at ``rate`` per second up to ``burst``, and
/// each body write takes as many as it has bytes.
///
/// A write is allowed whenever the bucket holds any tokens at all, even if it takes more than
/// that: libcurl hands over whole writes (up to 16 KiB) and a write callback can only take all of
/// one or pause, so the bucket goes into debt instead, and the next writes wait until the debt is
/// paid back. That keeps the long-run average exact: over any span, the bytes admitted are at most
/// `rate × span + burst + one write`.
///
/// Writers that were refused wait until the bucket has refilled to ``resumeLevel`` rather than to
/// just above zero, so at a high rate the paused transfers are woken about every 10 ms with room
/// for several writes, not once per write.
///
/// Pure: it reads no clock; the caller passes `now`.
package struct TokenBucket {
    /// Bytes per second.
    package let rate: Double
    /// The most tokens the bucket holds: what may go at once after a quiet spell. 100 ms of the
    /// rate, so a wake-up a few tens of milliseconds late loses nothing, and at least one libcurl
    /// write (16 KiB), so a tiny cap still lets the first write through at once.
    package let burst: Double
    /// The level at which refused writers are let go again: 10 ms of the rate, at most half the burst.
    package let resumeLevel: Double
    /// May be negative: the debt of the last write.
    package private(set) var tokens: Double
    private var updatedAt: Moment

    /// A full bucket for `bytesPerSecond` (more than 0).
    package init(bytesPerSecond: Int64, now: Moment) {
        precondition(bytesPerSecond > 0, "a token bucket needs a positive rate")
        rate = Double(bytesPerSecond)
        burst = max(16 * 1024, rate / 10)
        resumeLevel = min(burst / 2, rate / 100)
        tokens = burst
        updatedAt = now
    }

    /// Takes `bytes` tokens if the bucket holds any (going into debt when `bytes` is more than it
    /// holds); `false`, taking nothing, when it is empty or in debt.
    package mutating func take(_ bytes: Int, now: Moment) -> Bool {
        tokens = level(at: now)
        updatedAt = max(updatedAt, now)
        guard tokens > 0 else { return false }
        tokens -= Double(bytes)
        return true
    }

    /// How long until the bucket is back at ``resumeLevel``; zero if it is already.
    package func timeUntilResume(now: Moment) -> Duration {
        let missing = resumeLevel - level(at: now)
        guard missing > 0 else { return .zero }
        return .nanoseconds(Int64((missing / rate * 1e9).rounded(.up)))
    }

    /// The tokens at `now`: the stored level plus what accrued since, at most ``burst``.
    private func level(at now: Moment) -> Double {
        guard now > updatedAt else { return tokens }
        return min(burst, tokens + rate * (now - updatedAt).seconds)
    }
}
