import FoundationEssentials

/// A validated absolute `http`/`https` URL.
struct RemoteURL: Sendable, Equatable, CustomStringConvertible {
    /// The URL as sent to the server (fragment removed).
    let absoluteString: String
    let scheme: String
    let host: String
    let port: Int
    /// The path, percent-decoded.
    let path: String

    /// Parses and checks `string`; the error says what is wrong with it and what would work.
    init(_ string: String) throws(DownloadError) {
        let trimmed = string.trimmingWhitespace
        guard !trimmed.isEmpty else { throw .invalidRequest("invalid URL: it is empty") }
        if trimmed.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
            throw .invalidRequest("invalid URL '\(RemoteURL.printable(trimmed))': it contains control characters")
        }
        guard let colon = trimmed.firstIndex(of: ":"), trimmed[..<colon].allSatisfy({ $0.isLetter || $0.isNumber || "+-.".contains($0) }),
              !trimmed[..<colon].isEmpty
        else {
            throw .invalidRequest("invalid URL '\(RemoteURL.printable(trimmed))': it needs a scheme, e.g. https://\(RemoteURL.printable(trimmed))")
        }
        let scheme = trimmed[..<colon].lowercased()
        guard scheme == "http" || scheme == "https" else {
            throw .invalidRequest("unsupported URL scheme '\(scheme)' in '\(RemoteURL.printable(trimmed))': Swoop downloads http and https URLs")
        }
        guard let url = URL(string: trimmed) else {
            throw .invalidRequest("invalid URL '\(RemoteURL.printable(trimmed))': it cannot be parsed; check the host name and the port (digits only)")
        }
        guard let host = url.host(percentEncoded: false), !host.isEmpty else {
            throw .invalidRequest("invalid URL '\(RemoteURL.printable(trimmed))': it has no host name")
        }
        if let port = url.port, !(1...65535).contains(port) {
            throw .invalidRequest("invalid URL '\(RemoteURL.printable(trimmed))': port \(port) is out of range")
        }
        var absolute = url.absoluteString
        if let hash = absolute.firstIndex(of: "#") { absolute = String(absolute[..<hash]) }
        self.absoluteString = absolute
        self.scheme = scheme
        self.host = host.lowercased()
        self.port = url.port ?? (scheme == "https" ? 443 : 80)
        self.path = url.path(percentEncoded: false)
        self.redacted = Self.redact(url, scheme: scheme, host: self.host, port: self.port)
    }

    /// The URL without credentials, query or fragment: safe for logs and the segment map.
    let redacted: String

    private static func redact(_ url: URL, scheme: String, host: String, port: Int) -> String {
        let defaultPort = scheme == "https" ? 443 : 80
        let hostPart = host.contains(":") ? "[\(host)]" : host
        let portPart = port == defaultPort ? "" : ":\(port)"
        let path = url.path(percentEncoded: true)
        return "\(scheme)://\(hostPart)\(portPart)\(path.isEmpty ? "/" : path)"
    }

    var description: String { redacted }

    /// Same scheme, host and port.
    func isSameOrigin(as other: RemoteURL) -> Bool {
        scheme == other.scheme && host == other.host && port == other.port
    }

    /// The target of a redirect: `location` resolved against this URL, which must be http or https.
    func resolving(redirect location: String) throws(DownloadError) -> RemoteURL {
        guard let base = URL(string: absoluteString),
              let resolved = URL(string: location.trimmingWhitespace, relativeTo: base)?.absoluteURL
        else {
            throw .invalidResponse("the server redirected to an invalid location '\(RemoteURL.printable(location))' (from \(redacted))")
        }
        do {
            return try RemoteURL(resolved.absoluteString)
        } catch {
            throw .invalidResponse("refusing a redirect from \(redacted) to '\(RemoteURL.printable(RemoteURL.strippingQuery(resolved.absoluteString)))': only http and https redirects are followed")
        }
    }

    /// The last path component, percent-decoded, as a file-name suggestion (may be empty).
    var lastPathComponent: String {
        guard let slash = path.lastIndex(of: "/") else { return path }
        return String(path[path.index(after: slash)...])
    }

    /// A string safe to print: control characters escaped, long strings cut.
    static func printable(_ string: String) -> String {
        var out = ""
        for scalar in string.unicodeScalars.prefix(200) {
            if scalar.value < 0x20 || scalar.value == 0x7F {
                out += "\\x" + String(scalar.value, radix: 16)
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return string.unicodeScalars.count > 200 ? out + "..." : out
    }

    static func strippingQuery(_ string: String) -> String {
        var result = string
        if let index = result.firstIndex(where: { $0 == "?" || $0 == "#" }) { result = String(result[..<index]) }
        // Drop "user:password@" between "://" and the host.
        if let colon = result.firstIndex(of: ":"), result[colon...].hasPrefix("://") {
            let authority = result.index(colon, offsetBy: 3)
            if let at = result[authority...].firstIndex(of: "@"), !result[authority..<at].contains("/") {
                result = String(result[..<authority]) + result[result.index(after: at)...]
            }
        }
        return result
    }
}
