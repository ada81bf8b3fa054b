/// The status and header fields of a final (non-1xx) HTTP response.
package struct ResponseHead: Sendable {
    package var status: Int
    /// Header fields in arrival order, names lowercased, values trimmed.
    package var fields: [(name: String, value: String)]
    /// The status line's reason phrase, kept for a server error (5xx) only: a gateway's own
    /// answer may be known by it (Varnish's `503 Backend fetch failed`). Escape it before showing it.
    package var reasonPhrase: String?

    package init(status: Int, fields: [(name: String, value: String)] = [], reasonPhrase: String? = nil) {
        self.status = status
        self.fields = fields.map { ($0.name.lowercased(), $0.value) }
        self.reasonPhrase = reasonPhrase
    }

    /// A head from fields whose names are lowercase already (the parser's).
    init(status: Int, lowercasedFields fields: [(name: String, value: String)], reasonPhrase: String?) {
        self.status = status
        self.fields = fields
        self.reasonPhrase = reasonPhrase
    }

    /// Every value of the field `name` (lowercase).
    package func values(_ name: String) -> [String] {
        fields.lazy.filter { Self.isNamed($0.name, name) }.map(\.value)
    }

    /// Whether the field name `field` is `name` (both lowercase). Lengths first: a head is asked for
    /// a dozen names, and comparing two different short strings costs a check of their Unicode
    /// forms, which made comparing names 3k instructions of a small file's probe.
    package static func isNamed(_ field: String, _ name: String) -> Bool {
        field.utf8.count == name.utf8.count && field == name
    }

    /// The field's value when it appears exactly once; `nil` when absent.
    /// A field repeated with different values is reported as ``conflicting``.
    package func value(_ name: String) -> String? {
        if case .single(let value) = reading(name) { value } else { nil }
    }

    /// Whether `name` appears more than once with different values.
    package func isConflicting(_ name: String) -> Bool {
        if case .conflicting = reading(name) { true } else { false }
    }

    private enum Reading {
        case absent
        /// Once, or repeated with the same value.
        case single(String)
        case conflicting
    }

    /// The field `name` read in one pass, without an array: every response's head is asked for a
    /// few fields, and every probe's head is checked for four that may not conflict.
    private func reading(_ name: String) -> Reading {
        var found: String?
        for field in fields where Self.isNamed(field.name, name) {
            guard let first = found else {
                found = field.value
                continue
            }
            if first != field.value { return .conflicting }
        }
        return found.map(Reading.single) ?? .absent
    }

    package var contentRange: String? { value("content-range") }
    /// `Content-Length` as a non-negative decimal (no sign), or `nil`.
    package var contentLength: Int64? {
        value("content-length").flatMap { ASCIIBytes.decimal($0.utf8) }
    }
    package var etag: String? { value("etag") }
    package var lastModified: String? { value("last-modified") }
    package var contentEncoding: String? { value("content-encoding") }
    package var contentType: String? { value("content-type") }
    package var location: String? { value("location") }
    package var transferEncoding: String? { value("transfer-encoding") }

    /// `Retry-After` as a delay in seconds (the delta-seconds form; an HTTP-date is ignored).
    package var retryAfterSeconds: Int? {
        value("retry-after").flatMap { Int($0.trimmingWhitespace) }.flatMap { $0 >= 0 ? $0 : nil }
    }
}

/// Builds a ``ResponseHead`` from the header lines curl hands over one at a time.
package struct ResponseHeadParser {
    private var status: Int?
    private var reasonPhrase: String?
    private var fields: [(name: String, value: String)] = []
    package private(set) var finished: ResponseHead?

    package init() {}

    /// The head so far, before the line that ends it (a proxy's reply to `CONNECT`, whose end
    /// libcurl may not hand over).
    package var partial: ResponseHead? {
        status.map { ResponseHead(status: $0, lowercasedFields: fields, reasonPhrase: reasonPhrase) }
    }

    /// Feeds one raw line (with its CRLF). Returns the head when the line ends a final response's
    /// header block; 1xx blocks are skipped.
    package mutating func consume(_ raw: UnsafeRawBufferPointer) -> ResponseHead? {
        // On bytes, not Characters: a download of many small files parses thousands of these,
        // and grapheme breaking was most of the cost. Names are tokens (ASCII), lowercased here.
        var start = raw.startIndex
        var end = raw.endIndex
        while start < end, ASCIIBytes.isSpace(raw[start]) { start += 1 }
        while end > start, ASCIIBytes.isSpace(raw[end - 1]) { end -= 1 }
        let line = UnsafeRawBufferPointer(rebasing: raw[start..<end])
        if line.isEmpty {
            guard let status else { return nil }
            if (100..<200).contains(status) {
                self.status = nil
                fields.removeAll()
                return nil
            }
            let head = ResponseHead(status: status, lowercasedFields: fields, reasonPhrase: reasonPhrase)
            finished = head
            return head
        }
        if Self.isStatusLine(line) {
            // "HTTP/1.1 206 Partial Content": a new block starts. The status is the second word.
            var index = 0
            while index < line.count, line[index] != UInt8(ascii: " ") { index += 1 }
            while index < line.count, line[index] == UInt8(ascii: " ") { index += 1 }
            var end = index
            while end < line.count, line[end] != UInt8(ascii: " ") { end += 1 }
            let word = UnsafeRawBufferPointer(rebasing: line[index..<end])
            status = word.isEmpty ? nil : Int(String(decoding: word, as: UTF8.self))
            reasonPhrase = nil
            // Kept only where a message quotes it (a proxy's 407, a gateway's 5xx): a list of
            // small files parses thousands of heads.
            if let status, status >= 500 || status == 407 {
                while end < line.count, line[end] == UInt8(ascii: " ") { end += 1 }
                if end < line.count {
                    reasonPhrase = String(decoding: UnsafeRawBufferPointer(rebasing: line[end...]), as: UTF8.self)
                }
            }
            fields.removeAll()
            return nil
        }
        if let colon = line.firstIndex(of: UInt8(ascii: ":")) {
            var nameEnd = colon
            while nameEnd > 0, ASCIIBytes.isSpace(line[nameEnd - 1]) { nameEnd -= 1 }
            var valueStart = colon + 1
            while valueStart < line.count, ASCIIBytes.isSpace(line[valueStart]) { valueStart += 1 }
            let name = String(unsafeUninitializedCapacity: nameEnd) { buffer in
                for index in 0..<nameEnd {
                    buffer[index] = ASCIIBytes.lowercased(line[index])
                }
                return nameEnd
            }
            let value = String(decoding: UnsafeRawBufferPointer(rebasing: line[valueStart...]), as: UTF8.self)
            // Room for a usual head's fields at once: grown one at a time, the array was copied
            // four or five times for every response of a list of small files.
            if fields.isEmpty { fields.reserveCapacity(16) }
            fields.append((name, value))
        }
        return nil
    }
}

extension ResponseHeadParser {
    /// Whether `line` starts with `HTTP/`: five bytes compared in place, where `starts(with:)` over
    /// the literal's UTF-8 view cost every header line of a small file's response 100 instructions.
    static func isStatusLine(_ line: UnsafeRawBufferPointer) -> Bool {
        line.count >= 5 && line[0] == UInt8(ascii: "H") && line[1] == UInt8(ascii: "T")
            && line[2] == UInt8(ascii: "T") && line[3] == UInt8(ascii: "P") && line[4] == UInt8(ascii: "/")
    }
}

extension StringProtocol {
    /// The string without leading and trailing spaces, tabs, CRs and LFs.
    ///
    /// Inlinable, so that it is specialized for the caller's type: the generic form, called across
    /// the module's boundary, cost a list of small files 1.5k instructions a file for its URLs.
    @inlinable
    package var trimmingWhitespace: String {
        // Most strings have nothing to trim: their two ends are looked at before any scan (a list of
        // small files trims every URL and header value).
        // Bytes first: every space `trimmedAtCharacters` trims starts and ends with one of these
        // bytes, and a Character costs a grapheme break (a list's URL was trimmed twice per file).
        let spaceByte: (UInt8) -> Bool = { $0 == 0x20 || $0 == 0x09 || $0 == 0x0D || $0 == 0x0A }
        guard let head = utf8.first else { return "" }
        let tail = utf8[utf8.index(utf8.startIndex, offsetBy: utf8.count - 1)]
        if !spaceByte(head) && !spaceByte(tail) { return String(self) }
        return trimmedAtCharacters
    }

    @usableFromInline
    var trimmedAtCharacters: String {
        // "\r\n" is one Character (a grapheme cluster), so it is listed on its own.
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\r\n" || $0 == "\r" || $0 == "\n" }
        guard let first = firstIndex(where: { !isSpace($0) }) else { return "" }
        let last = lastIndex(where: { !isSpace($0) })!
        return String(self[first...last])
    }
}

/// How a response body is handled once its head has been seen.
package enum BodyDisposition {
    /// Pass body bytes on.
    case deliver
    /// Read and drop the body (a redirect's or an error page's), keeping the connection.
    case discard
    /// Stop now; the connection is closed.
    case abort
}
