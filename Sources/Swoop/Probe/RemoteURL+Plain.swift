import SwoopCore

/// The plain form of an http or https URL read as bytes, without Foundation's parser: a list of
/// small files parses every URL, and Foundation's parser (with the five reads of its parts a
/// ``RemoteURL`` takes) was 2.5% of such a list's processor time.
///
/// Plain is what a list of files on a web server mostly holds: a lowercase `http://` or
/// `https://`, a lowercase host name or IPv4 address, an optional port without leading zeros, and
/// a path (then an optional query) of characters a URL may hold unescaped, with `%` only in the
/// query and no `.` or `..` segment, no fragment. Anything else is `nil`, and Foundation parses
/// it. Whatever this reads, Foundation reads the same (the parts of both are compared on
/// generated URLs in the tests); written here because it is a few dozen lines over bytes.
extension RemoteURL {
    /// The parts of `string` (already trimmed, free of control characters) when it is plain;
    /// `nil` otherwise, also for plain-looking URLs with an error (a port out of range), whose
    /// message Foundation's path words.
    static func plain(_ string: String) -> RemoteURL? {
        // Read over the string's contiguous bytes, by offset: a walk of its `UTF8View` index by
        // index cost a list of small files 6k instructions a URL. A string without them (a
        // bridged one) is copied into a native one first.
        if let parts = string.utf8.withContiguousStorageIfAvailable({ plainParts($0) }) {
            return parts.map { RemoteURL(plain: string, $0) }
        }
        var native = string
        native.makeContiguousUTF8()
        return native.utf8.withContiguousStorageIfAvailable { plainParts($0) }?.map { RemoteURL(plain: native, $0) }
    }

    /// What ``plain(_:)`` reads: the scheme, the host, the port and its text (`:8080`, or empty),
    /// and the path.
    private struct PlainParts {
        let scheme: String
        let host: String
        let port: Int
        let portText: String
        let path: String
        /// Whether a query follows the path.
        let hasQuery: Bool
    }

    private init(plain string: String, _ parts: PlainParts) {
        let shownPort = parts.port == (parts.scheme == "https" ? 443 : 80) ? "" : parts.portText
        // Without a query, and with the port as written, the redacted form is the string itself
        // (a plain URL has no user, no fragment, and its scheme and host are in lowercase): four
        // appends into a new string were 2k instructions a file of a list.
        let redacted =
            !parts.hasQuery && shownPort.utf8.count == parts.portText.utf8.count
            ? string : parts.scheme + "://" + parts.host + shownPort + parts.path
        self.init(
            absoluteString: string, scheme: parts.scheme, host: parts.host, port: parts.port, path: parts.path,
            redacted: redacted)
    }

    private static func plainParts(_ bytes: UnsafeBufferPointer<UInt8>) -> PlainParts? {
        func text(_ range: Range<Int>) -> String {
            String(decoding: UnsafeBufferPointer(rebasing: bytes[range]), as: UTF8.self)
        }
        let scheme: String
        var index: Int
        if bytes.starts(with: "http://".utf8) {
            (scheme, index) = ("http", 7)
        } else if bytes.starts(with: "https://".utf8) {
            (scheme, index) = ("https", 8)
        } else {
            return nil
        }
        // The host: labels of lowercase letters, digits and hyphens, none empty.
        let hostStart = index
        var labelLength = 0
        while index < bytes.count, bytes[index] != UInt8(ascii: "/"), bytes[index] != UInt8(ascii: ":") {
            let byte = bytes[index]
            if byte == UInt8(ascii: ".") {
                guard labelLength > 0 else { return nil }
                labelLength = 0
            } else {
                guard ASCIIBytes.isLower(byte) || ASCIIBytes.isDigit(byte) || byte == UInt8(ascii: "-") else {
                    return nil
                }
                labelLength += 1
            }
            index += 1
        }
        guard labelLength > 0 else { return nil }
        let host = text(hostStart..<index)
        // The port: 1 to 5 digits, the first not 0, at most 65535.
        var port = scheme == "https" ? 443 : 80
        var portText = ""
        if index < bytes.count, bytes[index] == UInt8(ascii: ":") {
            index += 1
            let digitsStart = index
            var value = 0
            while index < bytes.count, ASCIIBytes.isDigit(bytes[index]), index - digitsStart < 6 {
                value = value * 10 + Int(bytes[index] - UInt8(ascii: "0"))
                index += 1
            }
            guard (1...5).contains(index - digitsStart), bytes[digitsStart] != UInt8(ascii: "0"), value <= 65535
            else { return nil }
            port = value
            portText = text(digitsStart - 1..<index)
        }
        // The path: at least "/", of characters a path holds unescaped, without dot segments.
        guard index < bytes.count, bytes[index] == UInt8(ascii: "/") else { return nil }
        let pathStart = index
        var segmentStart = index
        while index < bytes.count, bytes[index] != UInt8(ascii: "?") {
            let byte = bytes[index]
            if byte == UInt8(ascii: "/") {
                guard !isDotSegment(bytes, segmentStart..<index) else { return nil }
                segmentStart = index + 1
            } else if !isPathByte(byte) {
                return nil
            }
            index += 1
        }
        guard !isDotSegment(bytes, segmentStart..<index) else { return nil }
        let path = text(pathStart..<index)
        let hasQuery = index < bytes.count
        // The query: the path's characters, "/", "?" and whole percent escapes; no fragment.
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "%") {
                guard index + 2 < bytes.count, isHexDigit(bytes[index + 1]), isHexDigit(bytes[index + 2]) else {
                    return nil
                }
                index += 2
            } else {
                guard isPathByte(byte) || byte == UInt8(ascii: "/") || byte == UInt8(ascii: "?") else { return nil }
            }
            index += 1
        }
        return PlainParts(scheme: scheme, host: host, port: port, portText: portText, path: path, hasQuery: hasQuery)
    }

    /// A byte a path segment holds as itself: RFC 3986's unreserved characters and sub-delimiters,
    /// `:` and `@`.
    private static func isPathByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            true
        case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "!"),
            UInt8(ascii: "$"), UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "("), UInt8(ascii: ")"),
            UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: ","), UInt8(ascii: ";"), UInt8(ascii: "="),
            UInt8(ascii: ":"), UInt8(ascii: "@"):
            true
        default: false
        }
    }

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        ASCIIBytes.isDigit(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte | 0x20)
    }

    private static func isDotSegment(_ bytes: UnsafeBufferPointer<UInt8>, _ segment: Range<Int>) -> Bool {
        (1...2).contains(segment.count) && bytes[segment].allSatisfy { $0 == UInt8(ascii: ".") }
    }
}
