/// Chooses how many connections an adaptive download uses.
///
/// It starts with a few and measures the throughput over a window long enough for new
/// connections to get past TCP slow start. While an increase still adds throughput (the link is
/// not yet full: per-connection limits, long round trips, loss), it keeps increasing, by 4x when
/// the gain was nearly proportional and 2x otherwise, up to the maximum. When an increase adds
/// nothing (a saturated link, a CPU-bound client, a server that throttles parallelism) it steps
/// back to the previous count and stays there.
///
/// Too few connections on a lossy long link cost far more than a few too many on a fast one, so
/// the rule leans towards growing: only a clear lack of gain stops it.
///
/// While the downloader's byte-rate cap holds bytes back, or a server is down or ramping back
/// up after an outage, throughput says nothing about the path, so the caller does not feed it: it
/// restarts the measurement instead (``restartMeasurement(at:)``), and the count stays where it is
/// until the cap stops being the limit or the server is back. A window in which nothing arrived
/// is no measurement either: the count stays.
///
/// Pure logic: the caller feeds byte counts and instants and applies the returned targets.
package struct ConnectionController {
    package let maximum: Int
    package private(set) var target: Int
    package private(set) var isSettled = false
    /// Why the last decision was taken, for debug logs.
    package private(set) var lastReason = ""

    /// The count and rate before the last increase.
    private var baseline: (count: Int, rate: Double)?
    /// When the current count took effect.
    private var changedAt: ContinuousClock.Instant?
    private var samples: [(time: ContinuousClock.Instant, bytes: Int64)] = []

    /// An increase that gained less than this (rate ratio) did not help.
    package static let noGain = 1.05
    /// An increase that gained at least this is worth another.
    package static let worthGrowing = 1.15
    /// Quadruple rather than double when the gain was at least this fraction of proportional.
    package static let nearlyProportional = 0.8

    package init(initial: Int, maximum: Int) {
        self.maximum = max(1, maximum)
        self.target = min(max(1, initial), self.maximum)
        isSettled = target >= self.maximum
    }

    /// Where to start, given the probe's time to first byte (about two round trips on a new
    /// connection): 8 on a LAN; more on long links, where each connection is slow.
    package static func initialCount(probeTimeToFirstByte seconds: Double, maximum: Int) -> Int {
        let count = seconds >= 0.06 ? 32 : seconds >= 0.02 ? 16 : 8
        return min(max(1, maximum), count)
    }

    /// Discards the measurement under way and starts a new one at `now`, at the same count and
    /// with the same baseline: what was measured is not the path's throughput (the downloader's
    /// byte-rate cap was the limit).
    package mutating func restartMeasurement(at now: ContinuousClock.Instant) {
        samples.removeAll(keepingCapacity: true)
        changedAt = now
    }

    /// Stops adapting: the rest of the download is too short to measure anything.
    package mutating func settle() {
        isSettled = true
    }

    /// Records the running total of bytes received at `now`; returns a new target when the count
    /// should change. `roundTrip` (seconds) sets how long a measurement takes.
    package mutating func observe(
        totalBytes: Int64, remainingBytes: Int64, at now: ContinuousClock.Instant, roundTrip: Double
    ) -> Int? {
        guard !isSettled else { return nil }
        if changedAt == nil { changedAt = now }
        samples.append((now, totalBytes))
        // New connections need a few round trips to get going; then measure over a window.
        let warmUp = Duration.seconds(max(0.25, 4 * roundTrip))
        let window = Duration.seconds(max(0.4, 8 * roundTrip))
        guard let changedAt, now - changedAt >= warmUp + window else { return nil }
        let start = changedAt + warmUp
        guard let first = samples.first(where: { $0.time >= start }), let last = samples.last,
            last.time > first.time
        else { return nil }
        let rate = Double(last.bytes - first.bytes) / (last.time - first.time).seconds
        guard rate > 0 else {
            // Nothing arrived (a server that stopped answering): there is no throughput to
            // compare, and more connections would only knock harder. Measure again.
            restartMeasurement(at: now)
            lastReason = "nothing arrived in the window"
            return nil
        }
        if Double(remainingBytes) < rate * window.seconds {
            // Near the end there is not enough work left to learn anything from more connections.
            isSettled = true
            lastReason = "too little work left (\(Wording.bytes(remainingBytes)) at \(Int(rate)) B/s)"
            return nil
        }
        return decide(rate: rate, at: now)
    }

    private mutating func decide(rate: Double, at now: ContinuousClock.Instant) -> Int? {
        defer { samples.removeAll(keepingCapacity: true) }
        guard let baseline else {
            self.baseline = (target, rate)
            lastReason = "baseline \(Int(rate)) B/s with \(target)"
            return grow(by: 2, at: now)
        }
        let gain = baseline.rate > 0 ? rate / baseline.rate : .infinity
        lastReason = "\(Int(rate)) B/s with \(target), gain \(gain) over \(baseline.count)"
        if gain < Self.noGain {
            // More connections did not help: go back to what worked and stay.
            isSettled = true
            target = baseline.count
            return target
        }
        guard gain >= Self.worthGrowing, target < maximum else {
            isSettled = true
            return nil
        }
        let proportional = Double(target) / Double(baseline.count)
        let efficiency = (gain - 1) / max(proportional - 1, 0.01)
        self.baseline = (target, rate)
        return grow(by: efficiency >= Self.nearlyProportional ? 4 : 2, at: now)
    }

    private mutating func grow(by factor: Int, at now: ContinuousClock.Instant) -> Int? {
        guard target < maximum else {
            isSettled = true
            return nil
        }
        target = min(maximum, target * factor)
        changedAt = now
        return target
    }
}
