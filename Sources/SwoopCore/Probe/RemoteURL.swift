/// A validated absolute `http`/`https` URL.
package struct RemoteURL: Sendable, Equatable, CustomStringConvertible {
    /// The parts, in one heap box (``CopyOnWrite``): a download copies its URL into every request,
    /// source, result and message, and a copy of six strings retained one by one was a measurable
    /// share of a small file's work (a list of 1,000 made about a hundred copies of URL strings per
    /// file).
    private struct Parts: Sendable, Equatable {
        var absoluteString: String
        var scheme: String
        var host: String
        var port: Int
        var path: String
        var redacted: String
        var address: String?
    }

    private var parts: CopyOnWrite<Parts>

    /// The URL as sent to the server (fragment removed).
    package var absoluteString: String { parts.value.absoluteString }
    package var scheme: String { parts.value.scheme }
    /// Lowercase (the parser makes it so).
    package var host: String { parts.value.host }
    package var port: Int { parts.value.port }
    /// The path, percent-decoded.
    package var path: String { parts.value.path }

    /// The URL without credentials, query or fragment: safe for logs and the segment map.
    package var redacted: String { parts.value.redacted }
    /// The address its connections go to, when pinned to one of its host's addresses (the
    /// `Host` header and the TLS name stay the host's); `nil`: wherever the host name resolves.
    package var address: String? { parts.value.address }

    /// A URL already parsed and checked (``init(_:)``, in the layer that parses URLs).
    package init(absoluteString: String, scheme: String, host: String, port: Int, path: String, redacted: String) {
        parts = CopyOnWrite(
            Parts(
                absoluteString: absoluteString, scheme: scheme, host: host, port: port, path: path, redacted: redacted,
                address: nil))
    }

    package var description: String { redacted }

    /// The same URL shown and recorded as `name` (an `s3://BUCKET/KEY` reached over https).
    package func named(_ name: String) -> RemoteURL {
        var named = self
        named.parts.update { $0.redacted = name }
        return named
    }

    /// The same URL with its connections pinned to `address` (an IPv4 or IPv6 address of its host).
    package func pinned(to address: String) -> RemoteURL {
        var pinned = self
        pinned.parts.update { $0.address = address }
        return pinned
    }

    /// The same URL, whatever its address: two sources that are addresses of one host.
    package func isSameURL(as other: RemoteURL) -> Bool {
        absoluteString == other.absoluteString
    }

    /// libcurl's `CURLOPT_CONNECT_TO` entry for the pin (`HOST:PORT:ADDRESS:PORT`), if pinned.
    package var connectTo: String? {
        address.map { "\(host):\(port):\($0.contains(":") ? "[\($0)]" : $0):\(port)" }
    }

    /// `host:port`, and the address when pinned: what names a source in messages.
    package var hostAndPort: String {
        "\(host):\(port)" + (address.map { " (\($0))" } ?? "")
    }

    /// Same scheme, host and port.
    package func isSameOrigin(as other: RemoteURL) -> Bool {
        scheme == other.scheme && host == other.host && port == other.port
    }

    /// The last path component, percent-decoded, as a file-name suggestion (may be empty).
    package var lastPathComponent: String {
        // The last slash byte is the last "/" Character when ASCII (or nothing) is on both sides of
        // it; otherwise (a decoded path may hold a combining mark there) the Characters decide.
        let utf8 = path.utf8
        if let slash = utf8.lastIndex(of: UInt8(ascii: "/")) {
            let next = utf8.index(after: slash)
            let asciiAfter = next == utf8.endIndex || utf8[next] < 0x80
            let asciiBefore = slash == utf8.startIndex || utf8[utf8.index(before: slash)] < 0x80
            if asciiAfter && asciiBefore { return String(path[next...]) }
        } else {
            return path
        }
        guard let slash = path.lastIndex(of: "/") else { return path }
        return String(path[path.index(after: slash)...])
    }

    /// A string safe to print: control characters escaped, long strings cut.
    package static func printable(_ string: String) -> String {
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

    package static func strippingQuery(_ string: String) -> String {
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
