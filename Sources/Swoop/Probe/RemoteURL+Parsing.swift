import FoundationEssentials

/// Parsing and resolving URLs: plain ones as bytes (`+Plain`), any other with Foundation's parser.
extension RemoteURL {
    /// Parses and checks `string`; the error says what is wrong with it and what would work.
    init(_ string: String) throws(DownloadError) {
        let trimmed = string.trimmingWhitespace
        guard !trimmed.isEmpty else { throw .invalidRequest("invalid URL: it is empty") }
        // Control characters are single bytes in UTF-8, never part of another character's bytes.
        if ASCIIBytes.contains(trimmed, where: { $0 < 0x20 || $0 == 0x7F }) {
            throw .invalidRequest("invalid URL '\(RemoteURL.printable(trimmed))': it contains control characters")
        }
        // A plain URL starts with a lowercase `http://` or `https://`, which passes every check of
        // the scheme below: it is read first, without them (2k instructions a list's file).
        if let plain = Self.plain(trimmed) {
            self = plain
            return
        }
        // Built only on failure: every download parses its URL, and a bulk list parses each twice.
        func noScheme() -> DownloadError {
            let shown = RemoteURL.printable(trimmed)
            let looksLikeHost = trimmed.first.map { $0.isLetter || $0.isNumber } ?? false
            return trimmed.contains(where: \.isWhitespace) || !looksLikeHost
                ? .invalidRequest(
                    "invalid URL '\(shown)': it has no scheme (a URL starts with "
                        + Wording.list((["http", "https"] + ObjectStores.schemes).map { $0 + "://" }, "or") + ")")
                : .invalidRequest("invalid URL '\(shown)': it has no scheme; write http://\(shown) or https://\(shown)")
        }
        guard let (colon, scheme) = Self.scheme(of: trimmed) else { throw noScheme() }
        // `host:port/path` reads as a scheme `host` (a URL parser's view); what was meant is a host.
        let afterColon = trimmed[trimmed.index(after: colon)...]
        if scheme.utf8.contains(UInt8(ascii: ".")) || scheme == "localhost" || afterColon.first?.isNumber == true {
            throw noScheme()
        }
        guard scheme == "http" || scheme == "https" else {
            throw .invalidRequest(
                "unsupported URL scheme '\(scheme)' in '\(RemoteURL.printable(trimmed))': Swoop downloads "
                    + Wording.list(["http", "https"] + ObjectStores.schemes, "and") + " URLs"
            )
        }
        self = try Self.parsedByFoundation(trimmed, scheme: scheme)
    }

    /// `trimmed`, of the http or https `scheme`, read by Foundation's parser: any URL that is not
    /// plain (``plain(_:)``), and in the tests every plain one, to compare.
    static func parsedByFoundation(_ trimmed: String, scheme: String) throws(DownloadError) -> RemoteURL {
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
        if let hash = absolute.utf8.firstIndex(of: UInt8(ascii: "#")) { absolute = String(absolute[..<hash]) }
        let port = url.port ?? (scheme == "https" ? 443 : 80)
        let lowercased = host.lowercased()
        return RemoteURL(
            absoluteString: absolute, scheme: scheme, host: lowercased, port: port,
            path: url.path(percentEncoded: false),
            redacted: Self.redact(url, scheme: scheme, host: lowercased, port: port))
    }

    /// Where the scheme ends (its colon) and the scheme, lowercased; `nil` when there is none.
    /// An ASCII scheme (every scheme a URL can have) is read as bytes: a list of small files parses
    /// every URL, and reading it as Characters was most of the cost. Others are read as Characters.
    private static func scheme(of string: String) -> (colon: String.Index, scheme: String)? {
        let utf8 = string.utf8
        if let colon = utf8.firstIndex(of: UInt8(ascii: ":")), colon > utf8.startIndex,
            utf8[..<colon].allSatisfy(isSchemeByte),
            utf8.index(after: colon) == utf8.endIndex || utf8[utf8.index(after: colon)] < 0x80
        {
            return (colon, String(decoding: utf8[..<colon].map(ASCIIBytes.lowercased), as: UTF8.self))
        }
        guard let colon = string.firstIndex(of: ":"),
            string[..<colon].allSatisfy({ $0.isLetter || $0.isNumber || "+-.".contains($0) }),
            !string[..<colon].isEmpty
        else { return nil }
        return (colon, string[..<colon].lowercased())
    }

    private static func isSchemeByte(_ byte: UInt8) -> Bool {
        ASCIIBytes.isUpper(byte) || ASCIIBytes.isLower(byte) || ASCIIBytes.isDigit(byte)
            || byte == UInt8(ascii: "+") || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".")
    }

    private static func redact(_ url: URL, scheme: String, host: String, port: Int) -> String {
        let defaultPort = scheme == "https" ? 443 : 80
        let hostPart = host.utf8.contains(UInt8(ascii: ":")) ? "[\(host)]" : host
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
