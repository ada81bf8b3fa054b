/// A snapshot of a download in progress.
public struct DownloadProgress: Sendable, Equatable {
    /// Bytes of the object present in the partial file, including bytes resumed from an earlier run.
    public var bytesDone: Int64
    /// The object's size, when the server said.
    public var totalBytes: Int64?
    /// The recent receive rate, in bytes per second.
    public var bytesPerSecond: Double
    /// Connections transferring right now.
    public var activeConnections: Int
    /// The adaptive count's target now (`nil` with a fixed count, or before the transfer).
    public var connectionTarget: Int?
    /// Time since this run of the download started.
    public var elapsed: Duration
    /// With several URLs: each source's bytes and state so far (see ``DownloadResult/sources``).
    public var sources: [DownloadResult.Source] = []
    /// What the download waits for while no byte can arrive: a server that does not answer, and
    /// when it is tried next; `nil` while bytes can arrive.
    public var waiting: Wait?
    /// Times the object changed on the server and the download started over on the new version
    /// (see ``DownloadResult/objectChanges``), and the bytes it held then, fetched again.
    public var objectChanges = 0
    public var bytesRefetched: Int64 = 0

    /// A snapshot, for a caller that tests its own progress handler.
    public init(
        bytesDone: Int64, totalBytes: Int64?, bytesPerSecond: Double, activeConnections: Int, connectionTarget: Int?,
        elapsed: Duration, sources: [DownloadResult.Source] = [], waiting: Wait? = nil
    ) {
        self.bytesDone = bytesDone
        self.totalBytes = totalBytes
        self.bytesPerSecond = bytesPerSecond
        self.activeConnections = activeConnections
        self.connectionTarget = connectionTarget
        self.elapsed = elapsed
        self.sources = sources
        self.waiting = waiting
    }

    /// A server the download waits for (see ``Downloader/Configuration/RetryPolicy``).
    public struct Wait: Sendable, Equatable {
        /// The server, as `host:port`.
        public var server: String
        /// Its last failure, in a few words ("connection refused", "HTTP 503").
        public var cause: String
        /// How long it has not answered.
        public var duration: Duration
        /// How long until it is tried again; `nil` while a try is under way.
        public var nextTry: Duration?
        /// How long it is waited for in all before the download gives up (`nil`: no such limit,
        /// as while the first request is retried).
        public var limit: Duration?

        public init(server: String, cause: String, duration: Duration, nextTry: Duration?, limit: Duration?) {
            self.server = server
            self.cause = cause
            self.duration = duration
            self.nextTry = nextTry
            self.limit = limit
        }
    }

    /// `bytesDone / totalBytes`, or `nil` when the size is unknown.
    public var fractionCompleted: Double? {
        guard let total = totalBytes else { return nil }
        return total == 0 ? 1 : Double(bytesDone) / Double(total)
    }

    /// The expected time to completion at the recent rate.
    public var estimatedTimeRemaining: Duration? {
        guard let total = totalBytes, bytesPerSecond > 0 else { return nil }
        return .seconds(Double(max(0, total - bytesDone)) / bytesPerSecond)
    }
}
