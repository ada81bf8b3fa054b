import SwoopCurl

/// A connection's permit from its downloader's ``ConnectionBudget``: taken for one exchange to a
/// host, returned when the exchange ends. Without a free one the owner waits for the budget to
/// wake it.
struct ConnectionPermit {
    /// The host (`host:port`) whose permit is held.
    private(set) var host: String?

    /// Takes a permit for a connection to `url`'s host; without one, registers `owner` to have
    /// `retry` run (outside callbacks) when a permit frees up.
    mutating func acquire(
        for url: RemoteURL, on loop: TransferLoop, owner: AnyObject, retry: @escaping () -> Void
    ) -> Bool {
        let key = Self.host(of: url)
        if loop.budget.acquire(host: key) {
            host = key
            return true
        }
        loop.budget.wait(owner) { loop.afterCallbacks(retry) }
        return false
    }

    /// The budget's name for `url`'s host.
    static func host(of url: RemoteURL) -> String {
        "\(url.host):\(url.port)"
    }

    /// Returns the permit, if one is held.
    mutating func release(on loop: TransferLoop) {
        if let host {
            self.host = nil
            loop.budget.release(host: host)
        }
    }
}
