import Synchronization

/// One file of a bulk download: what to fetch and where to put it.
public struct BulkItem: Sendable {
    public var request: DownloadRequest
    /// The target file path.
    public var destination: String

    public init(_ request: DownloadRequest, to destination: String) {
        self.request = request
        self.destination = destination
    }
}

/// What happens to the files of a bulk download, in order for each file.
public enum BulkEvent: Sendable {
    /// The file's download started (`index` is its position in the input).
    case started(index: Int)
    /// Progress of one file, every ``Downloader/Configuration/progressInterval``.
    case progress(index: Int, DownloadProgress)
    /// The file is complete at its destination (or already was).
    case finished(index: Int, DownloadResult)
    /// The file failed; the others go on.
    case failed(index: Int, DownloadError)
    /// Every file has ended: the last event.
    case completed(BulkSummary)
}

/// The outcome of a bulk download.
public struct BulkSummary: Sendable {
    /// A file that failed.
    public struct Failure: Sendable {
        public var index: Int
        /// The URL without credentials or query.
        public var url: String
        public var destination: String
        public var error: DownloadError
    }

    public var files: Int
    public var succeeded: Int
    /// Succeeded without downloading: the file was already complete.
    public var alreadyComplete: Int
    public var failures: [Failure]
    /// Bytes of the files that succeeded.
    public var bytes: Int64
    /// Bytes received over the network.
    public var bytesReceived: Int64
    public var duration: Duration

    public var failed: Int { failures.count }
}

extension Downloader {
    /// Downloads many files, at most `maxConcurrentFiles` at a time, all sharing this downloader's
    /// connections (``Configuration/connectionPool``).
    ///
    /// Small files arrive in a single request; large ones are split over several connections.
    /// One failure never stops the others. The same URL to the same destination is fetched once,
    /// even if it appears twice or another caller is downloading it. Files already complete
    /// are not downloaded again, and partial ones resume.
    ///
    /// ```swift
    /// for await event in downloader.downloadAll(items, maxConcurrentFiles: 16) {
    ///     if case .completed(let summary) = event { print(summary.failed, "failed") }
    /// }
    /// ```
    ///
    /// Stopping the iteration (or cancelling its task) pauses the downloads in flight.
    public func downloadAll(_ items: [BulkItem], maxConcurrentFiles: Int = 8) -> AsyncStream<BulkEvent> {
        let (stream, continuation) = AsyncStream.makeStream(of: BulkEvent.self, bufferingPolicy: .unbounded)
        let producer = Task {
            let summary = await runAll(items, limit: max(1, maxConcurrentFiles), continuation: continuation)
            continuation.yield(.completed(summary))
            continuation.finish()
        }
        continuation.onTermination = { _ in producer.cancel() }
        return stream
    }

    private func runAll(_ items: [BulkItem], limit: Int, continuation: AsyncStream<BulkEvent>.Continuation) async -> BulkSummary {
        let started = ContinuousClock.now
        var summary = BulkSummary(files: items.count, succeeded: 0, alreadyComplete: 0, failures: [], bytes: 0, bytesReceived: 0, duration: .zero)
        // A duplicate item shares its twin's download and result: count the bytes once.
        var counted = Set<String>()
        // An item repeating an earlier one's URL and destination shares its download.
        var leaders: [String: Int] = [:]
        var followers: [Int: [Int]] = [:]
        for (index, item) in items.enumerated() {
            // The URL as the downloader keys it (parsed: no fragment, no surrounding spaces).
            let url = (try? RemoteURL(item.request.url))?.absoluteString ?? item.request.url
            let key = Self.downloadKey(url: url, path: item.destination)
            if let leader = leaders[key] {
                followers[leader, default: []].append(index)
            } else {
                leaders[key] = index
            }
        }
        let following = Set(followers.values.joined())
        let runs = items.indices.filter { !following.contains($0) }
        await withTaskGroup(of: (Int, Result<DownloadResult, DownloadError>).self) { group in
            var cursor = 0
            func startNext() {
                guard cursor < runs.count, !Task.isCancelled else { return }
                let index = runs[cursor]
                let item = items[index]
                cursor += 1
                continuation.yield(.started(index: index))
                for follower in followers[index, default: []] { continuation.yield(.started(index: follower)) }
                group.addTask {
                    do throws(DownloadError) {
                        let result = try await self.download(item.request, to: item.destination) { progress in
                            continuation.yield(.progress(index: index, progress))
                        }
                        return (index, .success(result))
                    } catch {
                        return (index, .failure(error))
                    }
                }
            }
            for _ in 0..<min(limit, runs.count) { startNext() }
            while let (leader, outcome) = await group.next() {
                for index in [leader] + followers[leader, default: []] {
                    switch outcome {
                    case .success(let result):
                        summary.succeeded += 1
                        if result.alreadyComplete { summary.alreadyComplete += 1 }
                        if counted.insert(FileName.absolute(result.path)).inserted {
                            summary.bytes += result.bytes
                            summary.bytesReceived += result.bytesReceived
                        }
                        continuation.yield(.finished(index: index, result))
                    case .failure(let error):
                        let url = (try? RemoteURL(items[index].request.url))?.redacted ?? RemoteURL.strippingQuery(items[index].request.url)
                        summary.failures.append(.init(index: index, url: url, destination: items[index].destination, error: error))
                        continuation.yield(.failed(index: index, error))
                    }
                }
                startNext()
            }
        }
        summary.failures.sort { $0.index < $1.index }
        summary.duration = .now - started
        return summary
    }
}
