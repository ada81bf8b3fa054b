/// What a finished download did.
public struct DownloadResult: Sendable, Equatable {
    /// The file the object was written to.
    public var path: String
    /// The object's size in bytes.
    public var bytes: Int64
    /// Bytes received over the network by this run (retries and duplicates included).
    public var bytesReceived: Int64
    /// Bytes that were already on disk from an earlier run and were not fetched again.
    public var bytesResumed: Int64
    /// Bytes received twice on purpose: each response's overlap with the bytes of its neighbours,
    /// compared with them so that a file never mixes two versions of the object (included in
    /// ``bytesReceived``).
    public var bytesCompared: Int64 = 0
    /// Wall time of this run.
    public var duration: Duration
    /// The most connections used at once.
    public var connectionsUsed: Int
    /// The count the adaptive default settled on (where it was when the download ended); `nil`
    /// with a fixed count, or when the object arrived before there was anything to adapt.
    public var connectionsSettled: Int?
    /// HTTP requests made, the probe and redirects included.
    public var requests: Int
    /// Requests that were retried after a failure.
    public var retries: Int
    /// The object's strong ETag, if it had one: every byte of the file was served under it (a
    /// download pins one version's validators; a pool's other nodes are asked again elsewhere).
    public var etag: String?
    /// The object's `Last-Modified`, if it had one, as the server sent it (as ``etag``: the one
    /// every byte was served under).
    public var lastModified: String?
    /// Times the download started over because the object changed on the server (its validators
    /// went, or two responses' bytes differed), within ``Downloader/Configuration/RetryPolicy/maxTries``.
    public var objectChanges = 0
    /// Bytes held when it started over on a changed object (a partial download's, or a finished
    /// file of the earlier version), fetched again.
    public var bytesRefetched: Int64 = 0
    /// `true` when the target was already complete and nothing was downloaded.
    public var alreadyComplete: Bool
    /// With several URLs (``DownloadRequest/urls``): what each source delivered, and which were
    /// dropped and why. Empty for a download from one URL.
    public var sources: [Source] = []
    /// The digests the file was checked against and matched: the expected checksum, and the
    /// digest the server published (`x-goog-hash`, `Repr-Digest`, ...) unless
    /// ``Downloader/Configuration/verifiesPublishedDigests`` is off. Empty when there was none.
    public var verified: [VerifiedDigest] = []

    /// One source of a download from several URLs.
    public struct Source: Sendable, Equatable {
        /// The URL, without credentials or query.
        public var url: String
        /// The address its connections went to, when it is one of several of the URL's host
        /// (``Downloader/Configuration/addresses``); `nil` for a URL reached by its name.
        public var address: String?
        /// Body bytes it delivered.
        public var bytes: Int64
        /// Why it was not used, or stopped being used (a failed check, another size, different
        /// bytes, failures); `nil` while it is in use.
        public var droppedBecause: String?
        /// Its check is still under way (it has not contributed yet).
        public var isChecking = false
    }

    /// Average throughput of this run in bytes per second.
    public var bytesPerSecond: Double {
        let seconds = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
        return seconds > 0 ? Double(bytes - bytesResumed) / seconds : 0
    }
}
