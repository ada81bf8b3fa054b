import SwoopStore
import Synchronization

extension Downloader {
    /// The object's bytes, strictly in order, fetched over many connections, with the response's
    /// metadata: like `URLSession.bytes(for:)`, with the speed of a segmented download.
    ///
    /// ```swift
    /// let (bytes, response) = try await downloader.bytes(for: DownloadRequest(url: "https://example.com/big.tar"))
    /// print(response.expectedContentLength ?? -1, response.contentType ?? "?")
    /// var hasher = SHA256()
    /// for try await chunk in bytes {
    ///     hasher.update(data: chunk)
    /// }
    /// ```
    ///
    /// Returns once the server has answered the first request, with what it said about the
    /// object (``DownloadResponse``), before the first chunk is read. Segments are fetched in
    /// parallel only inside `window` bytes ahead of what the consumer has taken, lowest first,
    /// and a late one is hedged on another connection; memory stays about the window whatever the
    /// consumer's speed (a slow consumer slows the fetching). Nothing is written to disk and
    /// nothing can resume. The object changing mid-stream is a failure
    /// (``DownloadError/Kind/objectChanged``): bytes already handed over cannot be taken back.
    /// Cancelling the consuming task, or dropping the iterator, stops the download.
    ///
    /// - Parameters:
    ///   - window: Bytes fetched ahead of the consumer, at least 4 MiB (default 64 MiB).
    ///   - progress: Called on the transfer thread as bytes arrive; it must return quickly.
    /// - Throws: ``DownloadError`` for a request that cannot be sent or a server that refuses it
    ///   (before any byte); the iteration throws the download's failure, after the bytes that
    ///   arrived in order before it.
    public func bytes(
        for request: DownloadRequest, window: Int = 64 << 20, progress: (@Sendable (DownloadProgress) -> Void)? = nil
    ) async throws(DownloadError) -> (DownloadBytes, DownloadResponse) {
        guard window >= DownloadBytes.minimumWindow else {
            throw .invalidRequest(
                "the stream window must be at least \(DownloadBytes.minimumWindow >> 20) MiB "
                    + "(got \(Wording.bytes(window)))"
            )
        }
        var configuration = self.configuration
        configuration.files.onObjectChange = .fail
        configuration.files.checkpointInterval = nil
        // The window, and behind the reader the bytes a response's overlap is compared with.
        let buffer = StreamBuffer(capacity: window + Int(StreamSink.lookback))
        let slot = ResponseSlot()
        let name = "-" + Downloader.suggestedFileName(for: request.url)
        let task = try start(
            request, to: name, configuration: configuration, sink: .stream(buffer, response: slot), progress: progress)
        // A download that ends before its response (refused, unreachable) answers the wait.
        Task {
            do throws(DownloadError) {
                _ = try await task.result()
                slot.deliver(.failure(.invalidResponse("the download of \(request.url) ended before its response")))
            } catch {
                slot.deliver(.failure(error))
            }
        }
        let response = await withTaskCancellationHandler {
            await slot.wait()
        } onCancel: {
            task.cancel()
            slot.deliver(.failure(DownloadError(.cancelled, "the caller was cancelled before the response")))
        }
        return (DownloadBytes(buffer: buffer, task: task), try response.get())
    }
}

/// What the server said about the object of ``Downloader/bytes(for:window:progress:)``, before
/// the first byte: as `URLResponse` says it for `URLSession.bytes(for:)`.
public struct DownloadResponse: Sendable, Equatable {
    /// The URL the bytes come from, after redirects (`s3://BUCKET/KEY` for an object named so).
    public var url: String
    /// The object's size in bytes; `nil` when the server did not say (a chunked response).
    public var expectedContentLength: Int64?
    /// The `Content-Type` header, as sent (e.g. `application/x-tar`).
    public var contentType: String?
    /// The `ETag` header, as sent.
    public var etag: String?
    /// The `Last-Modified` header, as sent.
    public var lastModified: String?
    /// Whether the server serves byte ranges (the bytes then come over several connections).
    public var acceptsRanges: Bool
    /// How long this response took to arrive: the TCP and TLS handshakes of a new connection,
    /// and the request's time to its first byte; `nil` when it was not measured.
    public var timing: ResponseTiming?

    public init(
        url: String, expectedContentLength: Int64?, contentType: String? = nil, etag: String? = nil,
        lastModified: String? = nil, acceptsRanges: Bool, timing: ResponseTiming? = nil
    ) {
        self.url = url
        self.expectedContentLength = expectedContentLength
        self.contentType = contentType
        self.etag = etag
        self.lastModified = lastModified
        self.acceptsRanges = acceptsRanges
        self.timing = timing
    }

    init(_ object: RemoteObject, timing: ResponseTiming?) {
        let named = Downloader.namesObjectStore(object.url.redacted)
        self.init(
            url: named ? object.url.redacted : object.url.absoluteString, expectedContentLength: object.size,
            contentType: object.contentType, etag: object.etag, lastModified: object.lastModified,
            acceptsRanges: object.acceptsRanges, timing: timing)
    }
}

/// Where a stream's response waits for its reader: the first delivery wins (the response, or
/// the failure that came first); later ones are dropped.
final class ResponseSlot: Sendable {
    private enum State {
        case waiting(CheckedContinuation<Result<DownloadResponse, DownloadError>, Never>?)
        case delivered(Result<DownloadResponse, DownloadError>)
    }

    private let state = Mutex(State.waiting(nil))

    func deliver(_ result: Result<DownloadResponse, DownloadError>) {
        let waiter = state.withLock { state -> CheckedContinuation<Result<DownloadResponse, DownloadError>, Never>?? in
            guard case .waiting(let waiter) = state else { return nil }
            state = .delivered(result)
            return .some(waiter)
        }
        if case .some(.some(let waiter)) = waiter { waiter.resume(returning: result) }
    }

    func wait() async -> Result<DownloadResponse, DownloadError> {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> Result<DownloadResponse, DownloadError>? in
                if case .delivered(let result) = state { return result }
                state = .waiting(continuation)
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}

/// The bytes of one download in order, as chunks (see ``Downloader/bytes(for:window:progress:)``).
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
