/// The `ListBucketResult` the test origin answers a ListObjectsV2 request with, when
/// ``FaultSwitches/s3Listing`` is on: built from the objects it serves, in S3's XML.
struct S3ListingDocument {
    var mode: FaultSwitches.S3Listing

    /// The bucket a listing request names: a path of one segment (`/BUCKET` or `/BUCKET/`) whose
    /// query asks for `list-type=2`; `nil` for any other request.
    static func bucket(of target: RequestTarget) -> String? {
        guard let query = target.query, parameters(query)["list-type"] == "2" else { return nil }
        var path = target.path.dropFirst()
        if path.hasSuffix("/") { path = path.dropLast() }
        guard !path.isEmpty, !path.contains("/") else { return nil }
        return String(path)
    }

    /// The page of `objects` (by request path) that the request's query asks for.
    func body(bucket: String, query: String, objects: [String: TestObject]) -> [UInt8] {
        let fields = Self.parameters(query)
        let prefix = Array(Self.decode(fields["prefix"] ?? ""))
        let urlEncoded = fields["encoding-type"] == "url"
        let maxKeys = min(mode.pageSize, fields["max-keys"].flatMap { Int($0) } ?? 1000)
        let start = fields["continuation-token"].flatMap { Int($0) } ?? 0
        let folder = "/" + bucket + "/"
        var listed: [(key: [UInt8], object: TestObject)] = []
        for (path, object) in objects where path.utf8.starts(with: folder.utf8) {
            let key = Self.decode(path.utf8.dropFirst(folder.utf8.count))
            if key.starts(with: prefix) { listed.append((key, object)) }
        }
        listed.sort { $0.key.lexicographicallyPrecedes($1.key) }
        let page = listed.dropFirst(start).prefix(max(1, maxKeys))
        let truncated = start + page.count < listed.count
        var xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        xml += "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
        xml += "<Name>\(bucket)</Name><Prefix>\(Self.text(prefix, urlEncoded))</Prefix>"
        xml += "<KeyCount>\(page.count)</KeyCount><MaxKeys>\(maxKeys)</MaxKeys>"
        if urlEncoded { xml += "<EncodingType>url</EncodingType>" }
        xml += "<IsTruncated>\(truncated)</IsTruncated>"
        if truncated { xml += "<NextContinuationToken>\(start + page.count)</NextContinuationToken>" }
        for (key, object) in page {
            let tag = object.etagValue.map { mode.quotesETags ? $0 : $0.filter { $0 != "\"" } } ?? ""
            xml += "<Contents><Key>\(Self.text(key, urlEncoded))</Key>"
            xml += "<LastModified>2026-01-01T00:00:00.000Z</LastModified>"
            xml += "<ETag>\(Self.escapeXML(tag))</ETag><Size>\(object.size)</Size>"
            xml += "<StorageClass>STANDARD</StorageClass></Contents>"
        }
        xml += "</ListBucketResult>"
        return Array(xml.utf8)
    }

    /// A key in the document: percent-encoded when asked (every byte but the unreserved and
    /// `/`), else as XML text.
    private static func text(_ key: [UInt8], _ urlEncoded: Bool) -> String {
        guard urlEncoded else { return escapeXML(String(decoding: key, as: UTF8.self)) }
        let hex = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        for byte in key {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"), UInt8(ascii: "/"):
                out.append(byte)
            default:
                out += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 0xF)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static func escapeXML(_ text: String) -> String {
        var out = ""
        for character in text {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            default: out.append(character)
            }
        }
        return out
    }

    /// A query's `name=value` pairs, values percent-decoded (`+` as a space).
    private static func parameters(_ query: String) -> [String: String] {
        var fields: [String: String] = [:]
        for pair in query.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let value = parts.count > 1 ? String(decoding: decode(parts[1].utf8, plusIsSpace: true), as: UTF8.self) : ""
            fields[String(parts[0])] = value
        }
        return fields
    }

    /// `%XX` decoded to bytes.
    private static func decode(_ text: some Collection<UInt8>, plusIsSpace: Bool = false) -> [UInt8] {
        let bytes = Array(text)
        var out: [UInt8] = []
        var index = 0
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: "%"), index + 2 < bytes.count,
                let high = hexValue(bytes[index + 1]), let low = hexValue(bytes[index + 2])
            {
                out.append(high << 4 | low)
                index += 3
            } else {
                out.append(plusIsSpace && bytes[index] == UInt8(ascii: "+") ? UInt8(ascii: " ") : bytes[index])
                index += 1
            }
        }
        return out
    }

    private static func decode(_ text: String) -> [UInt8] { decode(text.utf8) }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
