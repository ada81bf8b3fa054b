import SwoopCore

/// The connections all downloads of one ``Downloader`` may have open: a total and a per-host cap.
///
/// Every exchange holds a permit from ``acquire(host:)`` until it ends. A session that finds no
/// permit registers with ``wait(_:)`` and is called back, in order, when one frees up.
/// Confined to the transfer thread.
package final class ConnectionBudget {
    package let total: Int
    package let perHost: Int
    package private(set) var active = 0
    private var activeByHost: [String: Int] = [:]
    private var waiting: [(id: ObjectIdentifier, wake: () -> Void)] = []

    package init(total: Int, perHost: Int) {
        self.total = max(1, total)
        self.perHost = max(1, min(perHost, total))
    }

    /// Takes a permit for a connection to `host`, if the caps allow.
    package func acquire(host: String) -> Bool {
        let onHost = activeByHost[host, default: 0]
        guard active < total, onHost < perHost else { return false }
        active += 1
        activeByHost[host] = onHost + 1
        return true
    }

    /// Permits free in all.
    package var free: Int { total - active }

    /// Permits free for a connection to `host`: within the total and the host's cap.
    package func free(onHost host: String) -> Int {
        min(free, perHost - activeByHost[host, default: 0])
    }

    /// Returns a permit and wakes the sessions waiting for one.
    package func release(host: String) {
        active -= 1
        let onHost = activeByHost[host, default: 1] - 1
        activeByHost[host] = onHost > 0 ? onHost : nil
        let woken = waiting
        waiting.removeAll()
        for waiter in woken { waiter.wake() }
    }

    /// Calls `wake` once, the next time a permit is returned. Registering again replaces it.
    package func wait(_ owner: AnyObject, wake: @escaping () -> Void) {
        let id = ObjectIdentifier(owner)
        if let index = waiting.firstIndex(where: { $0.id == id }) {
            waiting[index].wake = wake
        } else {
            waiting.append((id, wake))
        }
    }

    /// Whether `owner` waits for a permit.
    package func isWaiting(_ owner: AnyObject) -> Bool {
        waiting.contains { $0.id == ObjectIdentifier(owner) }
    }

    /// Forgets `owner`'s wait (it finished or stopped).
    package func cancelWait(_ owner: AnyObject) {
        waiting.removeAll { $0.id == ObjectIdentifier(owner) }
    }
}
