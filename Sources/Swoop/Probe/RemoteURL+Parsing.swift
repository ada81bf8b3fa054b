import FoundationEssentials

/// Parsing and resolving URLs, with Foundation's parser.
extension RemoteURL {
    /// Parses and checks `string`; the error says what is wrong with it and what would work.
    init(_ string: String) throws(DownloadError) {
        let trimmed = string.trimmingWhitespace
        guard !trimmed.isEmpty else { throw .invalidRequest("invalid URL: it is empty") }
        if trimmed.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
            throw .invalidRequest("invalid URL '\(RemoteURL.printable(trimmed))': it contains control characters")
        }
        // Built only on failure: every download parses its URL, and a bulk list parses each twice.
        func noScheme() -> DownloadError {
            let shown = RemoteURL.printable(trimmed)
            let looksLikeHost = trimmed.first.map { $0.isLetter || $0.isNumber } ?? false
            return trimmed.contains(where: \.isWhitespace) || !looksLikeHost
                ? .invalidRequest(
                    "invalid URL '\(shown)': it has no scheme (a URL starts with http://, https:// or s3://)")
                : .invalidRequest("invalid URL '\(shown)': it has no scheme; write http://\(shown) or https://\(shown)")
        }
        guard let colon = trimmed.firstIndex(of: ":"),
            trimmed[..<colon].allSatisfy({ $0.isLetter || $0.isNumber || "+-.".contains($0) }),
            !trimmed[..<colon].isEmpty
        else { throw noScheme() }
        let scheme = trimmed[..<colon].lowercased()
        // `host:port/path` reads as a scheme `host` (a URL parser's view); what was meant is a host.
        let afterColon = trimmed[trimmed.index(after: colon)...]
        if scheme.contains(".") || scheme == "localhost" || afterColon.first?.isNumber == true { throw noScheme() }
        guard scheme == "http" || scheme == "https" else {
            throw .invalidRequest(
                "unsupported URL scheme '\(scheme)' in '\(RemoteURL.printable(trimmed))': Swoop downloads http, "
                    + "https and s3 URLs"
            )
        }
        guard let url = URL(string: trimmed) else {
            throw .invalidRequest(
                "invalid URL '\(RemoteURL.printable(trimmed))': it cannot be parsed; check the host name and the port "
                    + "(digits only)"
            )
        }
        guard let host = url.host(percentEncoded: false), !host.isEmpty else {
            throw .invalidRequest("invalid URL '\(RemoteURL.printable(trimmed))': it has no host name")
        }
        if let port = url.port, !(1...65535).contains(port) {
            throw .invalidRequest("invalid URL '\(RemoteURL.printable(trimmed))': port \(port) is out of range")
        }
        var absolute = url.absoluteString
        if let hash = absolute.firstIndex(of: "#") { absolute = String(absolute[..<hash]) }
        let port = url.port ?? (scheme == "https" ? 443 : 80)
        self.init(
            absoluteString: absolute, scheme: scheme, host: host.lowercased(), port: port,
            path: url.path(percentEncoded: false),
            redacted: Self.redact(url, scheme: scheme, host: host.lowercased(), port: port))
    }

    private static func redact(_ url: URL, scheme: String, host: String, port: Int) -> String {
        let defaultPort = scheme == "https" ? 443 : 80
        let hostPart = host.contains(":") ? "[\(host)]" : host
        let portPart = port == defaultPort ? "" : ":\(port)"
        let path = url.path(percentEncoded: true)
        return "\(scheme)://\(hostPart)\(portPart)\(path.isEmpty ? "/" : path)"
    }

    /// The target of a redirect: `location` resolved against this URL, which must be http or https.
    /// A URL pinned to an address stays pinned while the redirects stay on its origin.
    func resolving(redirect location: String) throws(DownloadError) -> RemoteURL {
        guard let base = URL(string: absoluteString),
            let resolved = URL(string: location.trimmingWhitespace, relativeTo: base)?.absoluteURL
        else {
            throw .invalidResponse(
                "the server redirected to an invalid location '\(RemoteURL.printable(location))' (from \(redacted))")
        }
        do {
            let target = try RemoteURL(resolved.absoluteString)
            guard let address, target.isSameOrigin(as: self) else { return target }
            return target.pinned(to: address)
        } catch {
            throw .invalidResponse(
                "refusing a redirect from \(redacted) to "
                    + "'\(RemoteURL.printable(RemoteURL.strippingQuery(resolved.absoluteString)))': only http and "
                    + "https redirects are followed"
            )
        }
    }

    /// ``resolving(redirect:)`` as a function of both, for ``ProbeDecision``.
    static func resolve(_ base: RemoteURL, _ location: String) throws(DownloadError) -> RemoteURL {
        try base.resolving(redirect: location)
    }
}
