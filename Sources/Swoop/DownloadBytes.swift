import SwoopStore

extension Downloader {
    /// The object's bytes, strictly in order, fetched over many connections: like
    /// `URLSession.bytes(for:)`, with the speed of a segmented download.
    ///
    /// ```swift
    /// var hasher = SHA256()
    /// for try await chunk in try downloader.bytes(for: DownloadRequest(url: "https://example.com/big.tar")) {
    ///     hasher.update(data: chunk)
    /// }
    /// ```
    ///
    /// Segments are fetched in parallel only inside `window` bytes ahead of what the consumer has
    /// taken, lowest first, and a late one is hedged on another connection; memory stays about
    /// the window whatever the consumer's speed (a slow consumer slows the fetching). Nothing is
    /// written to disk and nothing can resume. The object changing mid-stream is a failure
    /// (``DownloadError/Kind/objectChanged``): bytes already handed over cannot be taken back.
    /// Cancelling the consuming task, or dropping the iterator, stops the download.
    ///
    /// - Parameters:
    ///   - window: Bytes fetched ahead of the consumer, at least 4 MiB (default 64 MiB).
    ///   - progress: Called on the transfer thread as bytes arrive; it must return quickly.
    /// - Throws: ``DownloadError`` for a request that cannot be sent; the iteration throws the
    ///   download's failure, after the bytes that arrived in order before it.
    public func bytes(
        for request: DownloadRequest, window: Int = 64 << 20, progress: (@Sendable (DownloadProgress) -> Void)? = nil
    ) throws(DownloadError) -> DownloadBytes {
        guard window >= DownloadBytes.minimumWindow else {
            throw .invalidRequest(
                "the stream window must be at least \(DownloadBytes.minimumWindow >> 20) MiB (got \(window) bytes)")
        }
        var configuration = self.configuration
        configuration.files.onObjectChange = .fail
        configuration.files.checkpointInterval = nil
        let buffer = StreamBuffer(capacity: window)
        let name = "-" + Downloader.suggestedFileName(for: request.url)
        let task = try start(request, to: name, configuration: configuration, sink: .stream(buffer), progress: progress)
        return DownloadBytes(buffer: buffer, task: task)
    }
}

/// The bytes of one download in order, as chunks (see ``Downloader/bytes(for:window:)``).
public struct DownloadBytes: AsyncSequence, Sendable {
    public typealias Element = [UInt8]
    /// The smallest window: the first request alone asks for 1 MiB.
    public static let minimumWindow = 4 << 20
    /// The most bytes one chunk holds.
    static let chunkSize = 1 << 20

    let buffer: StreamBuffer
    /// The download, for its result and for cancelling it.
    public let task: DownloadTask

    public func makeAsyncIterator() -> Iterator {
        Iterator(reader: Reader(buffer: buffer, task: task))
    }

    public struct Iterator: AsyncIteratorProtocol {
        let reader: Reader

        /// The next chunk; `nil` after the last byte. Throws the download's failure, or
        /// ``DownloadError/Kind/cancelled`` when the consuming task was cancelled.
        public mutating func next() async throws -> [UInt8]? {
            try await reader.next()
        }
    }

    /// Stops the download when the consumer goes away without reading to the end.
    final class Reader: Sendable {
        let buffer: StreamBuffer
        let task: DownloadTask

        init(buffer: StreamBuffer, task: DownloadTask) {
            self.buffer = buffer
            self.task = task
        }

        deinit {
            if task.state == .running || task.state == .paused { task.cancel() }
        }

        func next() async throws(DownloadError) -> [UInt8]? {
            let next = await withTaskCancellationHandler {
                await buffer.read(maximum: DownloadBytes.chunkSize)
            } onCancel: { [task, buffer] in
                task.cancel()
                buffer.close()
            }
            switch next {
            case .bytes(let bytes):
                if Task.isCancelled { throw DownloadError(.cancelled, "the stream's consumer was cancelled") }
                return bytes
            case .end:
                return nil
            case .stopped:
                if Task.isCancelled { throw DownloadError(.cancelled, "the stream's consumer was cancelled") }
                // The download ended short: say why.
                _ = try await task.result()
                throw DownloadError(.invalidResponse, "the download ended before its last byte")
            }
        }
    }
}
