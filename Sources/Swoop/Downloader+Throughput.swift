import Synchronization

/// How fast an object came in with a given number of connections.
public struct ThroughputMeasurement: Sendable {
    /// Connections used.
    public var connections: Int
    /// Bytes received.
    public var bytes: Int64
    /// How long the measurement ran.
    public var duration: Duration
    /// The steady rate in bytes per second: the bytes that arrived after the ramp-up (``rampUp``)
    /// over the time since; the whole run's average when too little is left after it. A mean, not
    /// a median of intervals: a server that answers in bursts (its own work per request, then the
    /// bytes at once) leaves most intervals empty, and their median would read 0 B/s.
    public var bytesPerSecond: Double
    /// The spread of the steady intervals' rates: the 10th and 90th percentiles.
    public var spread: ClosedRange<Double>
    /// How long the start of the run was left out of ``bytesPerSecond`` (connections opening, TCP
    /// slow start).
    public var rampUp: Duration
    /// The length of the intervals ``bytesPerSecond`` is the median of.
    public var interval: Duration
    /// The rate over time, in 100 ms steps: seconds since the start, bytes per second.
    public var timeline: [TimelinePoint]
    /// Whether the whole object arrived before the time was up. It was then fetched again, from
    /// the start, as many times as the window allowed (``passes``), so the figure is the
    /// connections' steady rate and not diluted by one download's start and tail.
    public var completed: Bool
    /// How many times the object was fetched (1 when the window ended first).
    public var passes: Int
    /// The most requests in flight at once: in a pass that ended within the window, every request
    /// counted (``DownloadResult/connectionsUsed``); in one the window cut off, as its progress
    /// reports saw them (``DownloadProgress/activeConnections``, every 100 ms); `nil` when no report
    /// saw one.
    public var peakConnections: Int?
    /// Measured with the adaptive default (``measureAdaptiveThroughput(_:maximum:duration:)``):
    /// ``connections`` is then the count it settled on, at the end of its last pass.
    public var isAdaptive = false

    /// ``bytesPerSecond`` per connection.
    public var bytesPerSecondPerConnection: Double { bytesPerSecond / Double(max(1, connections)) }

    public struct TimelinePoint: Sendable, Equatable {
        public var seconds: Double
        public var bytesPerSecond: Double
    }
}

extension Downloader {
    /// Fetches `request` with exactly `connections` connections for `duration`, counting the
    /// bytes without writing them anywhere (`swoop bench`). An object that arrives before the
    /// time is up is fetched again, back to back (its connections stay open in the pool), until
    /// the window ends, as iperf keeps sending: the figure is what the connections sustain. A
    /// downloader with ``Configuration/ConnectionPool/maximumBytesPerSecond`` measures no more
    /// than its cap.
    ///
    /// With `address`, one of ``addresses(of:)``, every connection goes to that address alone
    /// (`swoop bench` measures each edge of a name this way); without, the download spreads over
    /// the host's addresses as any download does.
    public func measureThroughput(
        _ request: DownloadRequest, connections: Int, duration: Duration, address: String? = nil
    ) async throws(DownloadError) -> ThroughputMeasurement {
        var configuration = self.configuration
        if let address {
            let (url, _) = try remote(request.url, configuration: configuration)
            configuration.addresses.spreadsOverAddresses = false
            configuration.addresses.resolve = ["\(url.host):\(url.port)": [address]]
        }
        configuration.connections = .fixed(max(1, connections))
        return try await measure(request, configuration: configuration, duration: duration).measurement
    }

    /// Fetches `request` with the adaptive default (up to `maximum` connections) for `duration`,
    /// as ``measureThroughput(_:connections:duration:address:)`` does a fixed count: the figure is
    /// what a download without a count gets, and ``ThroughputMeasurement/connections`` the count
    /// it settled on (`swoop bench` shows it next to the knee). Each pass starts adapting afresh.
    public func measureAdaptiveThroughput(
        _ request: DownloadRequest, maximum: Int = 64, duration: Duration
    ) async throws(DownloadError) -> ThroughputMeasurement {
        var configuration = self.configuration
        configuration.connections = .adaptive(maximum: max(1, maximum))
        let (measurement, settled) = try await measure(request, configuration: configuration, duration: duration)
        var adaptive = measurement
        adaptive.connections = settled ?? 1
        adaptive.isAdaptive = true
        return adaptive
    }

    /// The passes of one measurement with `configuration`'s connections, and the adaptive count's
    /// target at the end of the last pass (if it had one).
    private func measure(
        _ request: DownloadRequest, configuration: Configuration, duration: Duration
    ) async throws(DownloadError) -> (measurement: ThroughputMeasurement, settled: Int?) {
        var configuration = configuration
        let connections = configuration.connections.maximum
        configuration.files.checkpointInterval = nil
        configuration.files.resumes = false
        configuration.progressInterval = .milliseconds(100)
        configuration.tuning.hedgesSlowTail = true
        let started = Moment.now
        var points: [(time: Duration, bytes: Int64)] = [(.zero, 0)]
        var passes = 0
        var completed = false
        var settled: Int?
        var peak: Int?
        while Moment.now - started < duration {
            let left = duration - (Moment.now - started)
            let offset = (time: Moment.now - started, bytes: points.last?.bytes ?? 0)
            let pass = try await measurePass(request, configuration: configuration, for: left)
            passes += 1
            points += pass.points.map { (offset.time + $0.time, offset.bytes + $0.bytes) }
            settled = pass.settled ?? settled
            if let used = pass.used { peak = max(peak ?? 0, used) }
            guard pass.completed else { break }
            completed = true
        }
        var measurement = Self.summarize(points, connections: connections, completed: completed, passes: passes)
        measurement.peakConnections = peak
        return (measurement, settled)
    }

    /// One download of `request` for at most `limit`: its progress points, whether it ended, the
    /// adaptive count's target, and the most requests it had in flight at once (counted when it
    /// ended, else the most its progress reports saw).
    private func measurePass(
        _ request: DownloadRequest, configuration: Configuration, for limit: Duration
    ) async throws(DownloadError) -> (
        points: [(time: Duration, bytes: Int64)], completed: Bool, settled: Int?, used: Int?
    ) {
        let samples = Mutex<[(time: Duration, bytes: Int64)]>([])
        let target = Mutex<Int?>(nil)
        let seen = Mutex(0)
        // A path that is never created: the discard sink does not touch the file system.
        let path = "/nonexistent/swoop-measurement-\(UInt64.random(in: 0...UInt64.max))"
        let task = try start(request, to: path, configuration: configuration, sink: .discard) { progress in
            samples.withLock { $0.append((progress.elapsed, progress.bytesDone)) }
            if let count = progress.connectionTarget { target.withLock { $0 = count } }
            seen.withLock { $0 = max($0, progress.activeConnections) }
        }
        let outcome = await withTaskGroup(of: Result<DownloadResult, DownloadError>?.self) { group in
            group.addTask {
                do throws(DownloadError) { return .success(try await task.result()) } catch { return .failure(error) }
            }
            group.addTask {
                try? await Task.sleep(for: limit)
                return nil
            }
            let first = await group.next() ?? nil
            task.cancel()
            group.cancelAll()
            return first
        }
        if case .failure(let error)? = outcome, error.kind != DownloadError.Kind.cancelled {
            throw error
        }
        var points = samples.withLock { $0 }
        if case .success(let result)? = outcome {
            points.append((result.duration, result.bytes))
            return (points, true, result.connectionsSettled ?? target.withLock { $0 }, result.connectionsUsed)
        }
        let peak = seen.withLock { $0 }
        return (points, false, target.withLock { $0 }, peak > 0 ? peak : nil)
    }

    /// The measurement of a run's progress `points` (time since the start, bytes so far).
    static func summarize(
        _ points: [(time: Duration, bytes: Int64)], connections: Int, completed: Bool, passes: Int = 1
    ) -> ThroughputMeasurement {
        let interval = Duration.milliseconds(250)
        guard let last = points.last, last.time > .zero else {
            return ThroughputMeasurement(
                connections: connections, bytes: points.last?.bytes ?? 0, duration: .zero, bytesPerSecond: 0,
                spread: 0...0, rampUp: .zero, interval: interval, timeline: [], completed: completed, passes: passes)
        }
        var timeline: [ThroughputMeasurement.TimelinePoint] = []
        for (previous, point) in zip(points, points.dropFirst()) where point.time > previous.time {
            let rate = Double(point.bytes - previous.bytes) / (point.time - previous.time).seconds
            timeline.append(.init(seconds: point.time.seconds, bytesPerSecond: max(0, rate)))
        }
        // Ramp-up: the first second, or a fifth of a shorter run.
        let rampUp = min(.seconds(1), last.time / 5)
        let rates = intervalRates(points, from: rampUp, every: interval).sorted()
        let average = Double(last.bytes) / last.time.seconds
        let steady = (Double(last.bytes) - bytes(at: rampUp, in: points)) / (last.time - rampUp).seconds
        guard rates.count >= 2 else {
            return ThroughputMeasurement(
                connections: connections, bytes: last.bytes, duration: last.time, bytesPerSecond: average,
                spread: average...average, rampUp: .zero, interval: interval, timeline: timeline,
                completed: completed, passes: passes)
        }
        func percentile(_ fraction: Double) -> Double {
            let position = fraction * Double(rates.count - 1)
            let lower = Int(position.rounded(.down))
            let upper = min(rates.count - 1, lower + 1)
            return rates[lower] + (rates[upper] - rates[lower]) * (position - Double(lower))
        }
        return ThroughputMeasurement(
            connections: connections, bytes: last.bytes, duration: last.time, bytesPerSecond: steady,
            spread: percentile(0.1)...percentile(0.9), rampUp: rampUp, interval: interval, timeline: timeline,
            completed: completed, passes: passes)
    }

    /// The rates of consecutive `every`-long intervals from `start` on, each read off the
    /// progress points by linear interpolation.
    private static func intervalRates(
        _ points: [(time: Duration, bytes: Int64)], from start: Duration, every step: Duration
    ) -> [Double] {
        var rates: [Double] = []
        var from = start
        let end = points.last!.time
        while from + step <= end {
            rates.append(max(0, (bytes(at: from + step, in: points) - bytes(at: from, in: points)) / step.seconds))
            from += step
        }
        return rates
    }

    /// The bytes that had arrived at `time`, read off the progress `points` by linear interpolation.
    private static func bytes(at time: Duration, in points: [(time: Duration, bytes: Int64)]) -> Double {
        guard let after = points.firstIndex(where: { $0.time >= time }) else { return Double(points.last?.bytes ?? 0) }
        guard after > 0 else { return Double(points[0].bytes) }
        let (a, b) = (points[after - 1], points[after])
        let span = (b.time - a.time).seconds
        guard span > 0 else { return Double(b.bytes) }
        return Double(a.bytes) + Double(b.bytes - a.bytes) * ((time - a.time).seconds / span)
    }
}
