/// Bytes per second over a sliding window, from byte counts sampled at known instants.
package struct ThroughputMeter {
    private var samples: [(time: Moment, bytes: Int64)] = []
    package let window: Duration

    package init(window: Duration = .seconds(2)) {
        self.window = window
    }

    /// Records the running total of bytes at `time`.
    package mutating func record(totalBytes: Int64, at time: Moment) {
        samples.append((time, totalBytes))
        while samples.count > 2, let first = samples.first, time - first.time > window {
            samples.removeFirst()
        }
    }

    /// The rate across the window, or 0 with fewer than two samples.
    package var bytesPerSecond: Double {
        guard let first = samples.first, let last = samples.last, last.time > first.time else { return 0 }
        return Double(last.bytes - first.bytes) / (last.time - first.time).seconds
    }
}
