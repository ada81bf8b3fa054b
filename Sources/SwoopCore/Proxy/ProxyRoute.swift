/// Which proxy a request goes through, decided the way libcurl 7.88 decides it (its
/// `detect_proxy` and `Curl_check_noproxy`), so that a failure can name the party that failed:
/// with a proxy in the way, every TCP connection of the request goes to the proxy, and the
/// server is never reached if the proxy cannot be. libcurl does the routing; this only tells
/// which way it went. Pure: the environment comes in as a value.
package struct ProxyRoute: Sendable, Equatable {
    /// What the configuration says about the proxy.
    package enum Setting: Sendable, Equatable {
        /// The environment's `http_proxy`, `https_proxy`, `all_proxy` (as curl reads them).
        case environment
        /// No proxy.
        case none
        /// This proxy.
        case url(String)
    }

    /// The variables libcurl reads; ``environment`` holds those that are set.
    package static let variables = [
        "http_proxy", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY",
    ]

    package var setting: Setting
    /// curl's `NOPROXY` list (comma- or space-separated); `nil`: `no_proxy` from the environment.
    package var noProxy: String?
    /// The proxy variables that are set (an empty value counts: it turns the proxy off).
    package var environment: [String: String]

    package init(setting: Setting, noProxy: String? = nil, environment: [String: String] = [:]) {
        self.setting = setting
        self.noProxy = noProxy
        self.environment = environment.filter { Self.variables.contains($0.key) }
    }

    /// A route that never goes through a proxy.
    package static let direct = ProxyRoute(setting: .none)

    /// The proxy a request for `url` (absolute, `scheme://host...`) goes through; `nil` when it
    /// goes straight to the server.
    package func proxy(for url: String) -> ProxyEndpoint? {
        guard let target = URLParts(url) else { return nil }
        let noProxyList = noProxy ?? environment["no_proxy"] ?? environment["NO_PROXY"]
        if let noProxyList, Self.bypasses(host: target.host, noProxy: noProxyList) { return nil }
        switch setting {
        case .none:
            return nil
        case .url(let string):
            return ProxyEndpoint(string, variable: nil)
        case .environment:
            // curl reads `<scheme>_proxy`, then its upper case (except HTTP_PROXY, which a CGI
            // program's client can set), then all_proxy; a variable set to "" means no proxy.
            let lower = target.scheme + "_proxy"
            let candidates = lower == "http_proxy" ? [lower] : [lower, lower.uppercased()]
            if let name = candidates.first(where: { environment[$0] != nil }) {
                return ProxyEndpoint(environment[name]!, variable: name)
            }
            if let name = ["all_proxy", "ALL_PROXY"].first(where: { environment[$0] != nil }) {
                return ProxyEndpoint(environment[name]!, variable: name)
            }
            return nil
        }
    }

    /// Whether `host` is in the `no_proxy` list, as libcurl 7.88 matches it: `*` alone matches
    /// every host; a name matches itself and its subdomains (a leading or trailing dot is
    /// ignored); an IP address matches an address or a CIDR range.
    package static func bypasses(host: String, noProxy: String) -> Bool {
        if noProxy == "*" { return true }
        var name = host.lowercased()
        let address: IPAddress?
        if name.hasPrefix("["), let close = name.firstIndex(of: "]") {
            name = String(name[name.index(after: name.startIndex)..<close])
            guard let v6 = IPAddress(v6: name) else { return false }
            address = v6
        } else if let v4 = IPAddress(v4: name) {
            address = v4
        } else {
            address = nil
            if name.hasSuffix(".") { name.removeLast() }
        }
        let tokens = noProxy.split(whereSeparator: { $0 == "," || $0 == " " || $0 == "\t" })
        for var token in tokens.map({ $0.lowercased() }) {
            if let address {
                var bits: Int?
                if let slash = token.firstIndex(of: "/") {
                    bits = Int(token[token.index(after: slash)...]) ?? 0
                    token = String(token[..<slash])
                }
                if token.hasPrefix("["), token.hasSuffix("]") { token = String(token.dropFirst().dropLast()) }
                if address.matches(token, bits: bits ?? 0) { return true }
            } else {
                if token.hasSuffix(".") { token.removeLast() }
                if token.hasPrefix(".") { token.removeFirst() }
                guard !token.isEmpty else { continue }
                if token == name || name.hasSuffix("." + token) { return true }
            }
        }
        return false
    }
}

/// A proxy as messages show it: where it is, never its credentials.
package struct ProxyEndpoint: Sendable, Equatable, CustomStringConvertible {
    /// `http`, `https`, `socks4`, `socks4a`, `socks5`, `socks5h`.
    package var scheme: String
    package var host: String
    package var port: Int
    /// The environment variable it came from; `nil` when the configuration names it.
    package var variable: String?

    /// Parses a proxy as libcurl takes it: `[scheme://][user:password@]host[:port][/]`; without a
    /// scheme `http`, without a port 1080 (443 for `https`), as libcurl 7.88 defaults them.
    package init?(_ string: String, variable: String?) {
        let trimmed = string.trimmingWhitespace
        guard !trimmed.isEmpty else { return nil }
        var scheme = "http"
        var rest = Substring(trimmed)
        if let separator = trimmed.firstRange(of: "://") {
            scheme = trimmed[..<separator.lowerBound].lowercased()
            rest = trimmed[separator.upperBound...]
        }
        let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        let hostPort = authority.lastIndex(of: "@").map { authority[authority.index(after: $0)...] } ?? authority
        guard let parts = URLParts.split(hostPort) else { return nil }
        self.scheme = scheme
        self.host = parts.host
        self.port = parts.port ?? (scheme == "https" ? 443 : 1080)
        self.variable = variable
    }

    /// `host:port` (an IPv6 address in brackets).
    package var hostAndPort: String {
        host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }

    /// `scheme://host:port`.
    package var description: String { "\(scheme)://\(hostAndPort)" }

    /// Whether it speaks HTTP to Swoop: a request for an `http` URL is sent to it whole, so the
    /// proxy can answer it itself (SOCKS proxies only relay bytes).
    package var speaksHTTP: Bool { scheme == "http" || scheme == "https" }
}

/// The scheme and host of an absolute URL, for routing.
private struct URLParts {
    var scheme: String
    var host: String

    init?(_ url: String) {
        guard let separator = url.firstRange(of: "://") else { return nil }
        scheme = url[..<separator.lowerBound].lowercased()
        let authority = url[separator.upperBound...].prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        let hostPort = authority.lastIndex(of: "@").map { authority[authority.index(after: $0)...] } ?? authority
        guard let parts = Self.split(hostPort) else { return nil }
        // The no_proxy match sees an IPv6 address in brackets, as libcurl's host name has it.
        host = parts.host.contains(":") ? "[\(parts.host)]" : parts.host.lowercased()
    }

    /// `host[:port]` or `[v6][:port]` → the host (without brackets) and the port, if any.
    static func split(_ hostPort: Substring) -> (host: String, port: Int?)? {
        var host: Substring
        var portText: Substring?
        if hostPort.hasPrefix("[") {
            guard let close = hostPort.firstIndex(of: "]") else { return nil }
            host = hostPort[hostPort.index(after: hostPort.startIndex)..<close]
            let after = hostPort[hostPort.index(after: close)...]
            if after.hasPrefix(":") { portText = after.dropFirst() }
        } else if let colon = hostPort.lastIndex(of: ":") {
            host = hostPort[..<colon]
            portText = hostPort[hostPort.index(after: colon)...]
        } else {
            host = hostPort
        }
        guard !host.isEmpty else { return nil }
        if let portText, !portText.isEmpty {
            guard let port = Int(portText), (0...65535).contains(port) else { return nil }
            return (String(host), port)
        }
        return (String(host), nil)
    }
}

/// An IPv4 or IPv6 address as bytes, for `no_proxy`'s addresses and CIDR ranges.
private struct IPAddress {
    var bytes: [UInt8]

    /// Four decimal parts, each 0–255 (what `inet_pton` accepts).
    init?(v4 text: String) {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4 else { return nil }
        var bytes: [UInt8] = []
        for part in parts {
            guard !part.isEmpty, part.count <= 3, part.allSatisfy({ $0.isASCII && $0.isNumber }),
                let value = UInt8(part)
            else { return nil }
            bytes.append(value)
        }
        self.bytes = bytes
    }

    /// Eight groups of up to four hex digits, one `::` for a run of zeros, optionally ending in
    /// an IPv4 address.
    init?(v6 text: String) {
        let halves = text.split(separator: "::", omittingEmptySubsequences: false).map(String.init)
        guard halves.count <= 2 else { return nil }
        func groups(_ part: String) -> [UInt8]? {
            if part.isEmpty { return [] }
            var bytes: [UInt8] = []
            let pieces = part.split(separator: ":", omittingEmptySubsequences: false)
            for (index, piece) in pieces.enumerated() {
                if index == pieces.count - 1, piece.contains("."), let v4 = IPAddress(v4: String(piece)) {
                    bytes += v4.bytes
                } else {
                    guard (1...4).contains(piece.count), let value = UInt16(piece, radix: 16) else { return nil }
                    bytes += [UInt8(value >> 8), UInt8(value & 0xFF)]
                }
            }
            return bytes
        }
        guard let head = groups(halves[0]) else { return nil }
        if halves.count == 1 {
            guard head.count == 16 else { return nil }
            bytes = head
        } else {
            guard let tail = groups(halves[1]), head.count + tail.count <= 14 else { return nil }
            bytes = head + [UInt8](repeating: 0, count: 16 - head.count - tail.count) + tail
        }
    }

    /// Whether `token` (an address of the same family) has the same first `bits` bits (all of
    /// them when 0, as libcurl counts it).
    func matches(_ token: String, bits: Int) -> Bool {
        guard let other = bytes.count == 4 ? IPAddress(v4: token) : IPAddress(v6: token) else { return false }
        let total = bytes.count * 8
        guard bits <= total else { return false }  // libcurl: "strange input", no match
        let prefix = bits <= 0 ? total : bits
        for index in 0..<bytes.count {
            let covered = min(8, max(0, prefix - index * 8))
            guard covered > 0 else { break }
            let mask = UInt8(truncatingIfNeeded: 0xFF << (8 - covered))
            if bytes[index] & mask != other.bytes[index] & mask { return false }
        }
        return true
    }
}
