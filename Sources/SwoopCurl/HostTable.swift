import SwoopCore

/// One server as every download of a ``TransferLoop`` (one per `Downloader`) sees it: a host and
/// port, and the address its connections are pinned to, if any.
package struct HostKey: Hashable, Sendable {
    package let scheme: String
    package let host: String
    package let port: Int
    package let address: String?

    package init(_ url: RemoteURL) {
        scheme = url.scheme
        host = url.host
        port = url.port
        address = url.address
    }
}

/// Told when a host's health changed in a way that may let a held-back request go.
package protocol HostWatcher: AnyObject {
    func hostMayTakeRequests()
}

/// The health of one host, shared by every download, probe and mirror check of a downloader
/// that sends it requests: one ``SourceHealth`` (the failure policy's circuit breaker), so a host
/// that stops answering is found down once, and tried one request at a time for all of them —
/// 64 downloads of a list probe a dead host as one download does. Transfer thread only.
package final class HostEntry {
    package let key: HostKey
    private weak var table: HostTable?
    /// Whether it answers, what it may be sent, and its failures (see ``SourceHealth``). Changed
    /// only through ``updateHealth(_:)``, which tells the watchers.
    package var health: SourceHealth { storedHealth }

    /// Changes ``health`` in place: every request's send and end updates its host's health, and a
    /// copy of the whole value (a setter's) was a measurable part of a small file's cost. A closure,
    /// not a `_modify` accessor: that coroutine's frame did not fit its caller's buffer and was
    /// allocated on the heap, eight times a small file (heaptrack).
    package func updateHealth<Result>(_ change: (inout SourceHealth) -> Result) -> Result {
        let before = Marks(storedHealth)
        let result = change(&storedHealth)
        noticeChange(from: before)
        return result
    }
    private var storedHealth = SourceHealth()

    /// Requests in flight to the host from every download's transfer: a refusal for too many
    /// connections (``SourceHealth``'s learnt cap) is about the client's, not one download's.
    package var active = 0 {
        didSet {
            // A capped host whose requests in flight fell below its cap may take one more, from
            // whichever download waits for it, not only from the one whose request ended.
            if let cap = storedHealth.cap, oldValue >= cap, active < cap { table?.changed(self) }
        }
    }

    /// The quickest TCP handshake seen with the host (one round trip of the path, without the
    /// queueing a slower one includes): a request on a connection already open, an earlier
    /// download's, has no handshake of its own to tell the path's time from the server's.
    package private(set) var roundTrip: Duration?

    /// A handshake with the host took `handshake`.
    package func noteHandshake(_ handshake: Duration) {
        roundTrip = min(roundTrip ?? handshake, handshake)
    }

    /// What the host's watchers hear about when it changes.
    private struct Marks {
        let state: SourceHealth.State
        let restingUntil: Moment?
        let testing: Bool

        init(_ health: SourceHealth) {
            state = health.state
            restingUntil = health.restingUntil
            testing = health.doubt?.isTesting == true
        }
    }

    private func noticeChange(from before: Marks) {
        // A request that was finding out whether the host went away ended: another may go.
        let doubtReleased = before.testing && storedHealth.doubt?.isTesting != true
        if storedHealth.state != before.state || storedHealth.restingUntil != before.restingUntil || doubtReleased {
            table?.changed(self)
        }
    }
    /// By identity, with the order they came in (each hears in that order). A list of thousands
    /// of downloads watches each host thousands of times: a watch and an unwatch are O(1), and
    /// the watchers that went away without unwatching are dropped once there are as many of
    /// them as the live ones (a scan of the whole list on every watch, as before, was 7% of a
    /// 100,000-file list's CPU).
    private var watchers: [ObjectIdentifier: Watcher] = [:]
    private var nextOrder = 0
    private var pruneAbove = 64

    private struct Watcher {
        weak var watcher: (any HostWatcher)?
        let order: Int
    }

    fileprivate init(key: HostKey, table: HostTable) {
        self.key = key
        self.table = table
    }

    /// `watcher` hears (once per change, after the current callbacks) when this host may take
    /// requests it held back; watching twice is watching once. Held weakly.
    package func watch(_ watcher: any HostWatcher) {
        let id = ObjectIdentifier(watcher)
        // An entry whose watcher is gone may carry a new object's identity: it is replaced.
        if watchers[id]?.watcher != nil { return }
        watchers[id] = Watcher(watcher: watcher, order: nextOrder)
        nextOrder += 1
        if watchers.count > pruneAbove {
            watchers = watchers.filter { $0.value.watcher != nil }
            pruneAbove = max(64, 2 * watchers.count)
        }
    }

    package func unwatch(_ watcher: any HostWatcher) {
        watchers.removeValue(forKey: ObjectIdentifier(watcher))
    }

    /// The watchers still there, in the order they came in.
    fileprivate var liveWatchers: [any HostWatcher] {
        watchers.values.sorted { $0.order < $1.order }.compactMap(\.watcher)
    }
}

/// Every host's ``HostEntry`` for one downloader: the retry state is owned by the client and
/// partitioned per host (as aws-c-io's retry strategy is), not kept per download. Transfer thread
/// only; owned by the ``TransferLoop``.
package final class HostTable {
    private var entries: [HostKey: HostEntry] = [:]
    private let afterCallbacks: (@escaping () -> Void) -> Void

    /// `afterCallbacks`: how wake-ups are deferred until the current callbacks have returned.
    package init(afterCallbacks: @escaping (@escaping () -> Void) -> Void) {
        self.afterCallbacks = afterCallbacks
    }

    /// The entry of `url`'s host (made on first use).
    package func entry(for url: RemoteURL) -> HostEntry {
        let key = HostKey(url)
        if let entry = entries[key] { return entry }
        if entries.count >= 4096 { forgetQuietHosts() }
        let entry = HostEntry(key: key, table: self)
        entries[key] = entry
        return entry
    }

    /// Hosts known so far.
    package var count: Int { entries.count }

    fileprivate func changed(_ entry: HostEntry) {
        let watchers = entry.liveWatchers
        guard !watchers.isEmpty else { return }
        afterCallbacks {
            for watcher in watchers { watcher.hostMayTakeRequests() }
        }
    }

    /// Drops the entries of hosts that are up and have nothing to remember (a downloader that
    /// met thousands of hosts).
    private func forgetQuietHosts() {
        entries = entries.filter { _, entry in
            entry.health != SourceHealth() || !entry.liveWatchers.isEmpty || entry.active > 0
        }
    }
}
