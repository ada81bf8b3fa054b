import SwoopCurl

/// One server a download fetches from: the first URL's, or a mirror that passed its check. Each
/// has its own object identity (mirrors do not share `ETag`s), so its own precondition; its
/// health is its host's, shared with every other download of the downloader (``HostTable``).
final class Source {
    let index: Int
    /// Its URL and identity; the first source's URL changes when a fresh one replaces it.
    var object: RemoteObject {
        didSet {
            permitHost = ConnectionPermit.host(of: object.url)
            guard HostKey(object.url) != host.key else { return }
            // Its requests in flight count at the host they went to; later ones at the new one.
            host.active -= active
            host = hosts.entry(for: object.url)
            host.active += active
            if let watcher { host.watch(watcher) }
        }
    }
    let headers: RequestHeaders
    /// Requests in flight to it from this download; its host counts every download's
    /// (``HostEntry/active``), which is what a per-client limit and its learnt cap are about.
    var active = 0 {
        didSet { host.active += active - oldValue }
    }
    /// Body bytes it delivered.
    var bytes: Int64 = 0
    /// The connection budget's name for its host (``ConnectionPermit/host(of:)``), kept: the
    /// transfer machine reads the permits free for it at every decision.
    private(set) var permitHost: String
    /// Its host's entry in the downloader's table.
    private(set) var host: HostEntry
    private let hosts: HostTable
    /// Told when its host may take requests again (the download's transfer).
    weak var watcher: (any HostWatcher)? {
        didSet { if let watcher { host.watch(watcher) } }
    }
    /// Whether it answers, what it may be sent, and its failures: its host's, which every
    /// download of the downloader shares.
    var health: SourceHealth { host.health }

    /// Changes its host's health in place (``HostEntry/updateHealth(_:)``: every send and end of
    /// a request does, and a copy of the whole value, a setter's, is not free).
    @discardableResult
    func updateHealth<Result>(_ change: (inout SourceHealth) -> Result) -> Result {
        host.updateHealth(change)
    }
    /// Held back whatever its health, by this download alone (its fresh URL is being checked).
    var isHeld = false
    /// Its last failure.
    var lastError: DownloadError?
    /// Why it is no longer used.
    var dropped: String?

    init(index: Int, object: RemoteObject, headers: RequestHeaders, hosts: HostTable) {
        self.index = index
        self.object = object
        self.headers = headers
        self.hosts = hosts
        host = hosts.entry(for: object.url)
        permitHost = ConnectionPermit.host(of: object.url)
    }

    func sample(at now: Moment) -> SourceSample {
        health.sample(active: host.active, isUsable: dropped == nil, isHeld: isHeld, at: now)
    }

    /// `host:port`, for progress and messages.
    var hostAndPort: String { object.url.hostAndPort }
}
