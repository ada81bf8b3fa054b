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
        let utf8 = string.utf8
        let scheme: String
        var index: String.UTF8View.Index
        if utf8.starts(with: "http://".utf8) {
            (scheme, index) = ("http", utf8.index(utf8.startIndex, offsetBy: 7))
        } else if utf8.starts(with: "https://".utf8) {
            (scheme, index) = ("https", utf8.index(utf8.startIndex, offsetBy: 8))
        } else {
            return nil
        }
        // The host: labels of lowercase letters, digits and hyphens, none empty.
        let hostStart = index
        var labelLength = 0
        while index < utf8.endIndex, utf8[index] != UInt8(ascii: "/"), utf8[index] != UInt8(ascii: ":") {
            let byte = utf8[index]
            if byte == UInt8(ascii: ".") {
                guard labelLength > 0 else { return nil }
                labelLength = 0
            } else {
                guard ASCIIBytes.isLower(byte) || ASCIIBytes.isDigit(byte) || byte == UInt8(ascii: "-") else {
                    return nil
                }
                labelLength += 1
            }
            index = utf8.index(after: index)
        }
        guard labelLength > 0 else { return nil }
        let host = String(string[hostStart..<index])
        // The port: 1 to 5 digits, the first not 0, at most 65535.
        var port = scheme == "https" ? 443 : 80
        var portText = ""
        if index < utf8.endIndex, utf8[index] == UInt8(ascii: ":") {
            index = utf8.index(after: index)
            let digitsStart = index
            while index < utf8.endIndex, ASCIIBytes.isDigit(utf8[index]) { index = utf8.index(after: index) }
            let digits = utf8[digitsStart..<index]
            guard (1...5).contains(digits.count), digits.first != UInt8(ascii: "0"),
                let value = ASCIIBytes.decimal(digits), value <= 65535
            else { return nil }
            port = Int(value)
            portText = ":" + String(string[digitsStart..<index])
        }
        // The path: at least "/", of characters a path holds unescaped, without dot segments.
        guard index < utf8.endIndex, utf8[index] == UInt8(ascii: "/") else { return nil }
        let pathStart = index
        var segmentStart = index
        while index < utf8.endIndex, utf8[index] != UInt8(ascii: "?") {
            let byte = utf8[index]
            if byte == UInt8(ascii: "/") {
                guard !isDotSegment(utf8[segmentStart..<index]) else { return nil }
                segmentStart = utf8.index(after: index)
            } else if !isPathByte(byte) {
                return nil
            }
            index = utf8.index(after: index)
        }
        guard !isDotSegment(utf8[segmentStart..<index]) else { return nil }
        let path = String(string[pathStart..<index])
        // The query: the path's characters, "/", "?" and whole percent escapes; no fragment.
        while index < utf8.endIndex {
            let byte = utf8[index]
            if byte == UInt8(ascii: "%") {
                let first = utf8.index(after: index)
                guard first < utf8.endIndex, isHexDigit(utf8[first]) else { return nil }
                let second = utf8.index(after: first)
                guard second < utf8.endIndex, isHexDigit(utf8[second]) else { return nil }
                index = second
            } else {
                guard isPathByte(byte) || byte == UInt8(ascii: "/") || byte == UInt8(ascii: "?") else { return nil }
            }
            index = utf8.index(after: index)
        }
        let shownPort = port == (scheme == "https" ? 443 : 80) ? "" : portText
        return RemoteURL(
            absoluteString: string, scheme: scheme, host: host, port: port, path: path,
            redacted: scheme + "://" + host + shownPort + path)
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

    private static func isDotSegment(_ segment: Substring.UTF8View) -> Bool {
        segment.elementsEqual(".".utf8) || segment.elementsEqual("..".utf8)
    }
}
