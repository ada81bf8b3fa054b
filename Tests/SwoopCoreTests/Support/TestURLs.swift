@testable import SwoopCore

extension RemoteURL {
    /// A URL for tests of the pure decisions, which do not parse URLs: `scheme://[user@]host[:port]/path[?query]`,
    /// well-formed by construction (the parser itself is tested with the layer that owns it).
    init(testing string: String) {
        let schemeEnd = string.firstRange(of: "://")!
        let scheme = String(string[..<schemeEnd.lowerBound])
        let rest = string[schemeEnd.upperBound...]
        let userAndAuthority = rest.prefix { $0 != "/" && $0 != "?" }
        let pathAndQuery = rest.dropFirst(userAndAuthority.count)
        // `user:password@` is sent, never shown (the real parser's redaction).
        let authority = userAndAuthority.split(separator: "@").last ?? userAndAuthority
        let path = String(pathAndQuery.prefix { $0 != "?" })
        let defaultPort = scheme == "https" ? 443 : 80
        let (host, port) =
            authority.split(separator: ":").count == 2
            ? (String(authority.split(separator: ":")[0]), Int(authority.split(separator: ":")[1])!)
            : (String(authority), defaultPort)
        let shownPort = port == defaultPort ? "" : ":\(port)"
        self.init(
            absoluteString: string, scheme: scheme, host: host, port: port, path: path.isEmpty ? "/" : path,
            redacted: "\(scheme)://\(host)\(shownPort)\(path.isEmpty ? "/" : path)")
    }

    /// Redirect resolution for tests: an absolute `Location`, or a path on the same origin.
    static func testingResolve(_ base: RemoteURL, _ location: String) throws(DownloadError) -> RemoteURL {
        if location.contains("://") { return RemoteURL(testing: location) }
        let port = base.port == (base.scheme == "https" ? 443 : 80) ? "" : ":\(base.port)"
        return RemoteURL(testing: "\(base.scheme)://\(base.host)\(port)\(location)")
    }
}
