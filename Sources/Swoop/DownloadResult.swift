/// What a finished download did.
public struct DownloadResult: Sendable, Equatable {
    /// The file the object was written to.
    public var path: String {
        get { storage.value.path }
        set { storage.update { $0.path = newValue } }
    }
    /// The object's size in bytes.
    public var bytes: Int64 {
        get { storage.value.bytes }
        set { storage.update { $0.bytes = newValue } }
    }
    /// Bytes received over the network by this run (retries and duplicates included).
    public var bytesReceived: Int64 {
        get { storage.value.bytesReceived }
        set { storage.update { $0.bytesReceived = newValue } }
    }
    /// Bytes that were already on disk from an earlier run and were not fetched again.
    public var bytesResumed: Int64 {
        get { storage.value.bytesResumed }
        set { storage.update { $0.bytesResumed = newValue } }
    }
    /// Bytes received twice on purpose: each response's overlap with the bytes of its neighbours,
    /// compared with them so that a file never mixes two versions of the object (included in
    /// ``bytesReceived``).
    public var bytesCompared: Int64 {
        get { storage.value.bytesCompared }
        set { storage.update { $0.bytesCompared = newValue } }
    }
    /// Wall time of this run.
    public var duration: Duration {
        get { storage.value.duration }
        set { storage.update { $0.duration = newValue } }
    }
    /// The most connections used at once.
    public var connectionsUsed: Int {
        get { storage.value.connectionsUsed }
        set { storage.update { $0.connectionsUsed = newValue } }
    }
    /// The count the adaptive default settled on (where it was when the download ended); `nil`
    /// with a fixed count, or when the object arrived before there was anything to adapt.
    public var connectionsSettled: Int? {
        get { storage.value.connectionsSettled }
        set { storage.update { $0.connectionsSettled = newValue } }
    }
    /// HTTP requests made, the probe and redirects included.
    public var requests: Int {
        get { storage.value.requests }
        set { storage.update { $0.requests = newValue } }
    }
    /// Requests that were retried after a failure.
    public var retries: Int {
        get { storage.value.retries }
        set { storage.update { $0.retries = newValue } }
    }
    /// The object's strong ETag, if it had one: every byte of the file was served under it (a
    /// download pins one version's validators; a pool's other nodes are asked again elsewhere).
    public var etag: String? {
        get { storage.value.etag }
        set { storage.update { $0.etag = newValue } }
    }
    /// The object's `Last-Modified`, if it had one, as the server sent it (as ``etag``: the one
    /// every byte was served under).
    public var lastModified: String? {
        get { storage.value.lastModified }
        set { storage.update { $0.lastModified = newValue } }
    }
    /// Times the download started over because the object changed on the server (its validators
    /// went, or two responses' bytes differed), within ``Downloader/Configuration/RetryPolicy/maxTries``.
    public var objectChanges: Int {
        get { storage.value.objectChanges }
        set { storage.update { $0.objectChanges = newValue } }
    }
    /// Bytes held when it started over on a changed object (a partial download's, or a finished
    /// file of the earlier version), fetched again.
    public var bytesRefetched: Int64 {
        get { storage.value.bytesRefetched }
        set { storage.update { $0.bytesRefetched = newValue } }
    }
    /// `true` when the target was already complete and nothing was downloaded.
    public var alreadyComplete: Bool {
        get { storage.value.alreadyComplete }
        set { storage.update { $0.alreadyComplete = newValue } }
    }
    /// With several URLs (``DownloadRequest/urls``): what each source delivered, and which were
    /// dropped and why. Empty for a download from one URL.
    public var sources: [Source] {
        get { storage.value.sources }
        set { storage.update { $0.sources = newValue } }
    }
    /// The digests the file was checked against and matched: the expected checksum, and the
    /// digest the server published (`x-goog-hash`, `Repr-Digest`, ...) unless
    /// ``Downloader/Configuration/verifiesPublishedDigests`` is off. Empty when there was none.
    public var verified: [VerifiedDigest] {
        get { storage.value.verified }
        set { storage.update { $0.verified = newValue } }
    }

    private struct Values: Sendable, Equatable {
        var path: String
        var bytes: Int64
        var bytesReceived: Int64
        var bytesResumed: Int64
        var bytesCompared: Int64
        var duration: Duration
        var connectionsUsed: Int
        var connectionsSettled: Int?
        var requests: Int
        var retries: Int
        var etag: String?
        var lastModified: String?
        var objectChanges: Int
        var bytesRefetched: Int64
        var alreadyComplete: Bool
        var sources: [Source]
        var verified: [VerifiedDigest]
    }

    /// One retain a copy (``CopyOnWrite``): a result passes through the session, the task, its
    /// waiters and a list's events.
    private var storage: CopyOnWrite<Values>

    init(
        path: String, bytes: Int64, bytesReceived: Int64, bytesResumed: Int64, bytesCompared: Int64 = 0,
        duration: Duration, connectionsUsed: Int, connectionsSettled: Int? = nil, requests: Int, retries: Int,
        etag: String? = nil, lastModified: String? = nil, objectChanges: Int = 0, bytesRefetched: Int64 = 0,
        alreadyComplete: Bool,
        sources: [Source] = [], verified: [VerifiedDigest] = []
    ) {
        storage = CopyOnWrite(
            Values(
                path: path, bytes: bytes, bytesReceived: bytesReceived, bytesResumed: bytesResumed,
                bytesCompared: bytesCompared, duration: duration, connectionsUsed: connectionsUsed,
                connectionsSettled: connectionsSettled, requests: requests, retries: retries, etag: etag,
                lastModified: lastModified, objectChanges: objectChanges, bytesRefetched: bytesRefetched,
                alreadyComplete: alreadyComplete,
                sources: sources, verified: verified))
    }

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
