extension Downloader {
    /// How a ``Downloader`` fetches: connections, timeouts, retries, redirects, TLS and checkpoints.
    ///
    /// Every property has a default; change only what you need:
    ///
    /// ```swift
    /// var configuration = Downloader.Configuration()
    /// configuration.connections = .fixed(8)
    /// configuration.timeout.connect = .seconds(5)
    /// ```
    public struct Configuration: Sendable {
        /// How many connections one download uses.
        public var connections: Connections {
            get { storage.value.connections }
            set { storage.update { $0.connections = newValue } }
        }
        /// Caps all downloads of this downloader share: connections and the byte rate.
        public var connectionPool: ConnectionPool {
            get { storage.value.connectionPool }
            set { storage.update { $0.connectionPool = newValue } }
        }
        /// Which addresses of a host a download connects to: all of them by default, each a source.
        public var addresses: Addresses {
            get { storage.value.addresses }
            set { storage.update { $0.addresses = newValue } }
        }
        /// How one download spreads its bytes over its connections: segment sizes, tail hedges,
        /// slow-connection replacement, receive buffers.
        public var tuning: Tuning {
            get { storage.value.tuning }
            set { storage.update { $0.tuning = newValue } }
        }
        /// Connection and stall limits.
        public var timeout: Timeout {
            get { storage.value.timeout }
            set { storage.update { $0.timeout = newValue } }
        }
        /// How failed requests are retried.
        public var retry: RetryPolicy {
            get { storage.value.retry }
            set { storage.update { $0.retry = newValue } }
        }
        /// Redirect limits.
        public var redirect: RedirectConfiguration {
            get { storage.value.redirect }
            set { storage.update { $0.redirect = newValue } }
        }
        /// How servers' TLS certificates are verified.
        public var tls: TLS {
            get { storage.value.tls }
            set { storage.update { $0.tls = newValue } }
        }
        /// How requests reach servers and what they carry besides their own headers: the proxy,
        /// `.netrc` logins, cookies.
        public var access: NetworkAccess {
            get { storage.value.access }
            set { storage.update { $0.access = newValue } }
        }
        /// How `s3://` URLs are signed and reach their store: credentials, profile, region, endpoint.
        public var s3: S3 {
            get { storage.value.s3 }
            set { storage.update { $0.s3 = newValue } }
        }
        /// What a download does with what is at and beside its target: resuming, checkpoints,
        /// replacing a file, creating directories, an object that changes.
        public var files: Files {
            get { storage.value.files }
            set { storage.update { $0.files = newValue } }
        }
        /// How often progress is reported.
        public var progressInterval: Duration {
            get { storage.value.progressInterval }
            set { storage.update { $0.progressInterval = newValue } }
        }
        /// The `User-Agent` header.
        public var userAgent: String {
            get { storage.value.userAgent }
            set { storage.update { $0.userAgent = newValue } }
        }
        /// Check the file against the digest its server publishes (`Repr-Digest`, `x-goog-hash`,
        /// `x-amz-checksum-*`, `x-oss-hash-crc64ecma`; `Content-MD5` or `Digest` on a whole
        /// response), and each response against its own `Content-Digest`. A mismatch fails the
        /// download (``DownloadError/Kind/checksumMismatch``) and keeps nothing; a response whose
        /// `Content-Digest` does not match is fetched again. On by default.
        public var verifiesPublishedDigests: Bool {
            get { storage.value.verifiesPublishedDigests }
            set { storage.update { $0.verifiesPublishedDigests = newValue } }
        }

        private struct Values: Sendable {
            var connections: Connections = .adaptive(maximum: 64)
            var connectionPool: ConnectionPool = ConnectionPool()
            var addresses: Addresses = Addresses()
            var tuning: Tuning = Tuning()
            var timeout: Timeout = Timeout()
            var retry: RetryPolicy = RetryPolicy()
            var redirect: RedirectConfiguration = RedirectConfiguration()
            var tls: TLS = TLS()
            var access: NetworkAccess = NetworkAccess()
            var s3: S3 = S3()
            var files: Files = Files()
            var progressInterval: Duration = .milliseconds(250)
            var userAgent: String = "swoop/\(Downloader.version)"
            var verifiesPublishedDigests: Bool = true
        }

        /// One retain a copy (``CopyOnWrite``): every download keeps its configuration, and its
        /// session, probe, transfer and publication each take it.
        private var storage = CopyOnWrite(Values())

        public init() {}

        /// Throws ``DownloadError/Kind/invalidRequest`` for a setting no download can run with.
        func validate() throws(DownloadError) {
            try addresses.validate()
            if let rate = connectionPool.maximumBytesPerSecond, rate <= 0 {
                throw .invalidRequest(
                    "Configuration.connectionPool.maximumBytesPerSecond must be more than 0 bytes per second, or nil "
                        + "for no cap (got \(rate))"
                )
            }
            try validateNetworkAccess()
            try validateCertificateAuthorities()
        }

        /// The connection count for one download.
        public enum Connections: Sendable, Equatable {
            /// Exactly this many connections (the CLI's `--connections N`).
            case fixed(Int)
            /// Start with a few and add more while throughput keeps rising, up to `maximum`.
            case adaptive(maximum: Int)

            /// The most connections this policy may open.
            public var maximum: Int {
                switch self {
                case .fixed(let count): count
                case .adaptive(let maximum): maximum
                }
            }
        }

        /// The connections and the byte rate all downloads of one ``Downloader`` share, whatever their count.
        public struct ConnectionPool: Sendable {
            /// Connections open at once across all downloads.
            public var maximumConnections = 128
            /// Connections open at once to one host (name and port).
            public var maximumConnectionsPerHost = 64
            /// The most bytes per second this downloader receives, all its connections and downloads
            /// together (a ``Downloader/downloadAll(_:maxConcurrentFiles:reportsProgress:)`` run is capped as a whole);
            /// `nil`, the default, for no cap. It counts response bodies: over any span of a second or
            /// more, at most the cap per second arrives, plus a burst of 100 ms worth (32 KiB at
            /// least). A value of 0 or less makes every download fail with
            /// ``DownloadError/Kind/invalidRequest``.
            ///
            /// While the cap holds bytes back, the measured rates are shares of the cap and say
            /// nothing about the network, so the transfer does not act on them: the adaptive
            /// connection count neither grows nor steps back (more connections cannot go faster than
            /// the cap, and fewer are not needed to stay under it), and neither slow-connection
            /// replacement nor tail hedging happens. Each resumes when the cap stops being the limit
            /// (for example when other downloads sharing it end). The low-speed limit
            /// (``Timeout/lowSpeedLimit``) is lowered to at most half of a connection's share of the
            /// cap (the cap over ``maximumConnections``), so that a connection the cap
            /// slows down is never taken for a stalled one.
            public var maximumBytesPerSecond: Int64?

            public init() {}
        }

        /// Connection and stall limits.
        public struct Timeout: Sendable {
            /// Time allowed to connect (TCP and TLS).
            public var connect: Duration = .seconds(30)
            /// A connection that delivers no bytes for this long is replaced.
            public var stall: Duration = .seconds(30)
            /// A connection slower than this (bytes per second) for ``stall`` is replaced; 0 turns it off.
            public var lowSpeedLimit: Int = 1

            public init() {}
        }

        /// Bounded retries with exponential backoff and jitter, honouring `Retry-After`, and how
        /// long a server that stops answering is waited for.
        ///
        /// A server whose connections fail together (refused, reset or timed out before an answer,
        /// or answering 5xx, 408 or 429) is *down*: nothing is sent to it but one request at a time,
        /// at most every 5 seconds (and at least ``baseDelay`` doubled apart), whatever the number of
        /// byte ranges waiting; when one is answered, the download ramps back up. Such failures
        /// are not counted against a byte range's ``maxTries``. Permanent failures (a 4xx other than
        /// 408, 425 and 429, a certificate problem, an unknown host, a redirect loop) end the
        /// download at once.
        public struct RetryPolicy: Sendable {
            /// Tries per request or byte range without progress, while its server answers, before
            /// the download fails (the first try included). Also the tries of the first request.
            public var maxTries = 8
            /// Delay before the first retry; doubles each time.
            public var baseDelay: Duration = .milliseconds(250)
            /// Longest delay between tries (also caps `Retry-After`).
            public var maxDelay: Duration = .seconds(30)
            /// How long a server that stopped answering mid-download is waited for before the
            /// download fails (with several sources: before that server is dropped). The partial
            /// download is kept either way.
            public var maxOutage: Duration = .seconds(120)
            /// Fresh URLs asked of ``DownloadRequest/urlProvider`` in a row, with no byte arriving
            /// in between, before the download fails; each call may take up to
            /// ``urlRefreshTimeout``.
            public var maxURLRefreshes = 3
            /// How long one call of ``DownloadRequest/urlProvider`` may take.
            public var urlRefreshTimeout: Duration = .seconds(60)

            public init() {}
        }

        /// Redirect limits. Redirects go to `http` and `https` only, and credentials never follow
        /// a redirect to another host.
        public struct RedirectConfiguration: Sendable {
            /// Redirects followed before the download fails (curl's `--max-redirs`), with
            /// ``DownloadError/Kind/tooManyRedirects``. A chain that comes back to a URL it
            /// visited twice already is a loop and fails at once.
            public var maxRedirects = 20

            public init() {}
        }

    }
}

/// Library facts.
extension Downloader {
    /// The library's version, as `swoop --version` and the default `User-Agent` give it.
    public static let version = "0.1.0"
}

extension Downloader.Configuration.Connections {
    /// Connections to start with.
    var initial: Int {
        switch self {
        case .fixed(let count): count
        case .adaptive(let maximum): min(maximum, 8)
        }
    }
}
