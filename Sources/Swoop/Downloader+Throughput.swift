import Synchronization

/// How fast an object came in with a given number of connections.
public struct ThroughputMeasurement: Sendable {
    /// Connections used.
    public var connections: Int
    /// Bytes received.
    public var bytes: Int64
    /// How long the measurement ran.
    public var duration: Duration
    /// The steady rate in bytes per second, measured after the first quarter of the run (when
    /// connections are past TCP slow start); the whole run's average for short objects.
    public var bytesPerSecond: Double
    /// The rate over time, in 100 ms steps: seconds since the start, bytes per second.
    public var timeline: [TimelinePoint]
    /// Whether the whole object arrived before the time was up.
    public var completed: Bool

    public struct TimelinePoint: Sendable, Equatable {
        public var seconds: Double
        public var bytesPerSecond: Double
    }
}

extension Downloader {
    /// Fetches `request` with exactly `connections` connections for at most `duration`, counting
    /// the bytes without writing them anywhere (`swoop bench`). A downloader with
    /// ``Configuration/ConnectionPool/maximumBytesPerSecond`` measures no more than its cap.
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
            configuration.addresses.resolve = ["\(url.host.lowercased()):\(url.port)": [address]]
        }
        configuration.connections = .fixed(max(1, connections))
        configuration.files.checkpointInterval = nil
        configuration.files.resumes = false
        configuration.progressInterval = .milliseconds(100)
        configuration.tuning.hedgesSlowTail = true
        let samples = Mutex<[(time: Duration, bytes: Int64)]>([])
        // A path that is never created: the discard sink does not touch the file system.
        let path = "/nonexistent/swoop-measurement-\(UInt64.random(in: 0...UInt64.max))"
        let task = try start(request, to: path, configuration: configuration, sink: .discard) { progress in
            samples.withLock { $0.append((progress.elapsed, progress.bytesDone)) }
        }
        let outcome = await withTaskGroup(of: Result<DownloadResult, DownloadError>?.self) { group in
            group.addTask {
                do throws(DownloadError) { return .success(try await task.result()) } catch { return .failure(error) }
            }
            group.addTask {
                try? await Task.sleep(for: duration)
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
        var completed = false
        var points = samples.withLock { $0 }
        if case .success(let result)? = outcome {
            completed = true
            points.append((result.duration, result.bytes))
        }
        return Self.summarize(points, connections: connections, completed: completed)
    }

    static func summarize(
        _ points: [(time: Duration, bytes: Int64)], connections: Int, completed: Bool
    ) -> ThroughputMeasurement {
        guard let last = points.last else {
            return ThroughputMeasurement(
                connections: connections, bytes: 0, duration: .zero, bytesPerSecond: 0, timeline: [],
                completed: completed)
        }
        var timeline: [ThroughputMeasurement.TimelinePoint] = []
        for (previous, point) in zip(points, points.dropFirst()) where point.time > previous.time {
            let rate = Double(point.bytes - previous.bytes) / (point.time - previous.time).seconds
            timeline.append(.init(seconds: point.time.seconds, bytesPerSecond: max(0, rate)))
        }
        // Steady state: from a quarter of the way in, unless that leaves too little to measure.
        let total = last.time.seconds
        let steadyFrom = points.first(where: { $0.time.seconds >= total / 4 }) ?? points[0]
        var rate = total > 0 ? Double(last.bytes) / total : 0
        if (last.time - steadyFrom.time).seconds >= 0.5 {
            rate = Double(last.bytes - steadyFrom.bytes) / (last.time - steadyFrom.time).seconds
        }
        return ThroughputMeasurement(
            connections: connections, bytes: last.bytes, duration: last.time, bytesPerSecond: rate,
            timeline: timeline, completed: completed)
    }
}
