import Dispatch
import Logging
import SwoopS3
import SwoopStore
import SwoopCurl
import Synchronization

/// Downloads HTTP objects over many connections at once, resumably.
///
/// One `Downloader` owns a transfer thread (a `curl_multi` event loop) and its connection pool;
/// create one and share it. Call ``shutdown()`` when done.
///
/// ```swift
/// let downloader = Downloader()
/// let result = try await downloader.download(
///     DownloadRequest(url: "https://example.com/big.iso"), to: "/tmp/big.iso"
/// ) { progress in
///     print(progress.bytesDone, progress.totalBytes ?? 0)
/// }
/// await downloader.shutdown()
/// ```
///
/// Cancelling the calling `Task` pauses the download: its state stays on disk, and the same call
/// later resumes it.
public final class Downloader: Sendable {
    public let configuration: Configuration
    let loop: TransferLoop
    /// Blocking file work (fsync, the segment map, rename), off the transfer thread.
    let disk: DiskQueue
    /// Where part files are created, emptied and reserved: not behind the disk queue's checkpoints
    /// (a new download would wait for the fsyncs of the others), and concurrent, since each target
    /// is its own (a hung disk under one holds no other).
    let opening: DiskQueue
    /// Group commit for files finished without a segment map.
    let publisher: PublishQueue
    /// Writes every part file's bytes off the transfer thread, through a bounded ring.
    let writer = WriteBehind()
    let logger: Logger
    /// What a run does before it reaches the transfer thread: its host's addresses, the first look
    /// at the disk and the target's lock (``launch(_:remote:mirrors:paths:configuration:sink:task:run:)``).
    /// Never the caller's thread (an `async` call would block its executor on a slow name server or
    /// disk), never the transfer thread (every other download waits behind it). One queue keeps the
    /// runs in the order they were started.
    let preparation = DispatchQueue(label: "swoop.prepare")
    let active = Mutex<[ObjectIdentifier: DownloadControl]>([:])
    /// Downloads in progress by URL and target: a second request for the same pair joins the first.
    private let coalesced = Mutex<[ByteName: DownloadTask]>([:])
    /// File name lookups under way (``suggestedFileName(for:)-(DownloadRequest)``), stopped by ``shutdown()``.
    private let lookups = Mutex<[ObjectIdentifier: ObjectLookup]>([:])
    /// How names other than URLs (`s3://BUCKET/KEY`) are reached, with the credentials read so far.
    let stores = ObjectStores()
    /// The addresses of the hosts downloads go to (``Configuration/addresses``).
    let hostAddresses = HostAddresses()

    /// Creates a downloader and starts its transfer thread.
    ///
    /// - Parameters:
    ///   - configuration: Connections, retries, timeouts and the shared connection budget.
    ///   - logger: Where the library logs; by default it does not log.
    public init(configuration: Configuration = Configuration(), logger: Logger? = nil) {
        let budget = ConnectionBudget(
            total: configuration.connectionPool.maximumConnections,
            perHost: configuration.connectionPool.maximumConnectionsPerHost)
        guard
            let loop = TransferLoop(
                budget: budget, maximumBytesPerSecond: configuration.connectionPool.maximumBytesPerSecond,
                cookieFile: configuration.access.cookies.file, cookieJar: configuration.access.cookies.jar)
        else {
            fatalError("libcurl could not be initialised (curl_global_init or curl_multi_init failed)")
        }
        self.configuration = configuration
        self.loop = loop
        self.disk = DiskQueue(queue: DispatchQueue(label: "swoop.disk"), loop: loop)
        self.opening = DiskQueue(queue: DispatchQueue(label: "swoop.open", attributes: .concurrent), loop: loop)
        self.publisher = PublishQueue(loop: loop, beforeEachGroup: configuration.tuning.faults.beforeEachPublishGroup)
        self.logger =
            logger.map(EscapingLogHandler.wrapping)
            ?? Logger(label: "swoop", factory: { _ in SwiftLogNoOpLogHandler() })
    }

    deinit {
        loop.requestStop()
    }

    /// Downloads `request` to the file at `path`.
    ///
    /// The object is written to a part file with a segment map, in `.swoop/` beside `path`
    /// (``workingFiles(of:)``), and renamed to `path` once complete and durable; `path` never
    /// holds partial data. A partial download left by an earlier run resumes if it is the same
    /// object.
    ///
    /// - Parameters:
    ///   - request: The URL, extra headers and an optional expected checksum.
    ///   - path: The target file.
    ///   - progress: Called on the transfer thread every ``Configuration/progressInterval``;
    ///     it must return quickly.
    /// - Throws: ``DownloadError``; ``DownloadError/Kind/interrupted`` if the task was cancelled
    ///   (the download is paused and the same call later resumes it).
    public func download(
        _ request: DownloadRequest, to path: String,
        progress: (@Sendable (DownloadProgress) -> Void)? = nil
    ) async throws(DownloadError) -> DownloadResult {
        let task = try start(request, to: path, progress: progress)
        return try await task.result()
    }

    /// Starts downloading `request` to `path` and returns a handle to pause, resume or cancel it.
    /// See ``download(_:to:progress:)`` for the files it uses.
    public func start(
        _ request: DownloadRequest, to path: String,
        progress: (@Sendable (DownloadProgress) -> Void)? = nil
    ) throws(DownloadError) -> DownloadTask {
        try start(request, to: path, configuration: configuration, sink: .partFile, progress: progress)
    }

    /// Where a download's bytes go; the engine sees only the ``BodySink`` made from it.
    enum SinkKind: Sendable {
        /// The part file, its segment map, then the finished file.
        case partFile
        /// Nowhere: throughput measurements.
        case discard
        /// In order to a reader, through a window; the response's metadata to `response`
        /// (``bytes(for:window:progress:)``).
        case stream(StreamBuffer, response: ResponseSlot)

        var isPartFile: Bool {
            if case .partFile = self { true } else { false }
        }
    }

    /// ``start(_:to:progress:)`` with another configuration for this one download. `exchange`:
    /// the ``ExchangeSettings`` of `configuration` when the caller made them once for many
    /// downloads (a list); otherwise each run makes its own.
    ///
    /// The same URL to the same path while a download of it is running (or paused) is not
    /// fetched twice: the caller gets the running download's task (resumed if it was paused),
    /// and its `progress` handler receives that download's progress too.
    func start(
        _ request: DownloadRequest, to path: String, configuration: Configuration, sink: SinkKind,
        share: ObjectShare? = nil, exchange: ExchangeSettings? = nil, observer: DownloadTask.RunObserver? = nil,
        progress: (@Sendable (DownloadProgress) -> Void)?
    ) throws(DownloadError) -> DownloadTask {
        try configuration.validate()
        let (url, service): (RemoteURL, (any ObjectService)?)
        if let parsed = request.parsed, ASCIIBytes.same(parsed.text, request.url) {
            (url, service) = (parsed.url, nil)
        } else {
            (url, service) = try remote(request.url, configuration: configuration)
        }
        // The host's addresses are looked up with the run's other preparation, off this thread.
        let mirrors = try request.mirrors.map { (mirror) throws(DownloadError) in try RemoteURL(mirror) }
        try Self.validate(request.headers)
        guard !path.isEmpty else { throw .invalidRequest("the target path is empty") }
        guard !DownloadPaths.isInsideWorkingDirectory(path) else {
            throw .invalidRequest(
                "\(path) is in a directory named \(DownloadPaths.workingDirectoryName), where Swoop keeps its "
                    + "working files; choose another path")
        }
        let paths = DownloadPaths(target: path, share: share)
        let key = Self.downloadKey(url: url.absoluteString, path: path + (share.map { "\n\($0)" } ?? ""))
        let coalescing = sink.isPartFile
        let (task, isNew) = coalesced.withLock { running -> (DownloadTask, Bool) in
            if coalescing, let existing = running[key], existing.state == .running || existing.state == .paused {
                existing.addProgressHandler(progress)
                return (existing, false)
            }
            let task = DownloadTask(
                launch: { [self] task, run in
                    launch(
                        request, remote: (url, service), mirrors: mirrors, paths: paths,
                        configuration: (configuration, exchange), sink: sink, task: task, run: run)
                },
                onFinish: { [self] in
                    coalesced.withLock { running in
                        if let current = running[key], current.state != .running && current.state != .paused {
                            running.removeValue(forKey: key)
                        }
                    }
                })
            task.addProgressHandler(progress)
            if let observer { task.observe(observer) }
            if coalescing { running[key] = task }
            return (task, true)
        }
        if isNew {
            task.begin()
        } else {
            task.resume()
            if let observer {
                // Joined another caller's download: hear its end through its result.
                Task {
                    let outcome: Result<DownloadResult, DownloadError>
                    do throws(DownloadError) { outcome = .success(try await task.result()) } catch {
                        outcome = .failure(error)
                    }
                    observer.transferEnded()
                    observer.runEnded(outcome)
                }
            }
        }
        return task
    }

    /// Identifies one download: the URL and the target path, however the path is spelled. Two
    /// requests with the same key share one transfer.
    /// Compared as bytes: two canonically equivalent names (NFC and NFD) are two targets.
    static func downloadKey(url: String, path: String) -> ByteName {
        ByteName(url + "\n" + FileName.absolute(path))
    }

    /// Pauses every download (each keeps its state and throws ``DownloadError/Kind/interrupted``),
    /// then stops the transfer thread.
    public func shutdown() async {
        let controls = active.withLock { Array($0.values) }
        for control in controls { control.pause() }
        stopLookups()
        while !active.withLock({ $0.isEmpty }) {
            try? await Task.sleep(for: .milliseconds(5))
        }
        await loop.shutdown()
        // Any that started meanwhile: the loop cancelled their probes without telling them.
        stopLookups()
    }

    private func stopLookups() {
        for lookup in lookups.withLock({ Array($0.values) }) {
            lookup.stop(DownloadError(.cancelled, "the downloader was shut down"))
        }
    }

    /// The name the server gives `request`'s object in its `Content-Disposition` header
    /// (`filename*`, else `filename`), made safe the way a URL's name is: only its last path
    /// component, no control characters, never `.` or `..`. When the header is absent or
    /// unusable, the URL's name (``suggestedFileName(for:)-(String)``).
    ///
    /// This costs one request: the name is only known from a response, and a download fixes its
    /// files (the part file and segment map in `.swoop/`) before its first one. It is a GET for
    /// the first byte (`Range: bytes=0-0`; presigned URLs often refuse `HEAD`) that follows redirects, retries
    /// and keeps credentials with their origin as the download will; the download that follows
    /// usually reuses its connection.
    ///
    /// - Throws: ``DownloadError``: what the download would have met (an HTTP error status, an
    ///   unreachable host, ...), or ``DownloadError/Kind/cancelled`` if the calling task was
    ///   cancelled or the downloader shut down.
    public func suggestedFileName(for request: DownloadRequest) async throws(DownloadError) -> String {
        try await lookUp(request, configuration: configuration).name ?? Self.suggestedFileName(for: request.url)
    }

    /// One head-only probe of `request`'s URL (``ObjectLookup``): the server's name for the object,
    /// and the object as the final response shows it.
    func lookUp(
        _ request: DownloadRequest, configuration: Configuration
    ) async throws(DownloadError) -> ObjectLookup.Found {
        let (url, service) = try remote(request.url, configuration: configuration)
        try Self.validate(request.headers)
        let lookup = ObjectLookup(
            url: url, headers: RequestHeaders(request.headers, originalURL: url, service: service),
            configuration: configuration, loop: loop, logger: logger)
        let id = ObjectIdentifier(lookup)
        lookups.withLock { $0[id] = lookup }
        defer { _ = lookups.withLock { $0.removeValue(forKey: id) } }
        let outcome = await withTaskCancellationHandler {
            await lookup.run()
        } onCancel: {
            lookup.stop(DownloadError(.cancelled, "the lookup of \(url.redacted) was cancelled"))
        }
        return try outcome.get()
    }

    /// A file name for `url`: its last path component made safe (no directories, `..`, NUL or
    /// control characters), or `index.html` when there is none. No request is sent; to use the
    /// server's `Content-Disposition` name, see ``suggestedFileName(for:)-(DownloadRequest)``.
    public static func suggestedFileName(for url: String) -> String {
        if let store = ObjectStores.kind(of: url) {
            let key = store.key(of: url) ?? ""
            return FileName.sanitized(String(key.split(separator: "/").last ?? "")) ?? "index.html"
        }
        guard let remote = try? RemoteURL(url) else { return "index.html" }
        return fileName(of: remote)
    }

    /// ``suggestedFileName(for:)-(String)`` for `request`'s URL, which it parses once for the
    /// name and the download both (``DownloadRequest/parsed``): a list names every file so.
    package static func suggestedFileName(parsing request: inout DownloadRequest) -> String {
        guard ObjectStores.kind(of: request.url) == nil else { return suggestedFileName(for: request.url) }
        guard let remote = try? RemoteURL(request.url) else { return "index.html" }
        request.parsed = (request.url, remote)
        return fileName(of: remote)
    }

    /// `remote`'s last path component made safe, or `index.html`.
    private static func fileName(of remote: RemoteURL) -> String {
        FileName.sanitized(remote.lastPathComponent) ?? "index.html"
    }

    /// The URL a download of `string` requests, and for a store's name (`s3://BUCKET/KEY`) the
    /// service that authorizes its requests (``ObjectStores``).
    func remote(
        _ string: String, configuration: Configuration
    ) throws(DownloadError) -> (url: RemoteURL, service: (any ObjectService)?) {
        guard let store = stores.store(for: string) else { return (try RemoteURL(string), nil) }
        let (url, service) = try store.object(string, configuration: configuration)
        return (url, service)
    }

    /// Whether `name` is an object store's (`s3://BUCKET/KEY`), not a URL.
    static func namesObjectStore(_ name: String) -> Bool {
        ObjectStores.kind(of: name) != nil
    }

    static func validate(_ headers: [(name: String, value: String)]) throws(DownloadError) {
        for (name, value) in headers {
            guard !name.isEmpty, name.utf8.allSatisfy(isTokenByte) else {
                throw .invalidRequest(
                    "invalid header name '\(RemoteURL.printable(name))': a header's name is letters, digits and "
                        + "!#$%&'*+-.^_`|~, without spaces or a colon (the value goes in the second element)"
                )
            }
            if value.unicodeScalars.contains(where: { $0 == "\r" || $0 == "\n" || $0 == "\0" }) {
                throw .invalidRequest("invalid value for header '\(name)': it contains a line break or NUL")
            }
            if reservedHeaders.contains(name.lowercased()) {
                throw .invalidRequest("header '\(name)' is set by Swoop itself and cannot be overridden")
            }
        }
    }

    /// A byte of an HTTP token (RFC 9110 `tchar`).
    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            true
        default: "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }

    private static let reservedHeaders: Set<String> = [
        "range", "if-match", "if-unmodified-since", "accept-encoding", "host", "content-length", "transfer-encoding",
        "connection",
    ]
}
