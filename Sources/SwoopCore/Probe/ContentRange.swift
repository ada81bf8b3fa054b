/// A parsed `Content-Range` header value (RFC 9110 §14.4), for the `bytes` unit only.
package enum ContentRange: Equatable, Sendable {
    /// `bytes first-last/total` (`total` is `nil` for `*`).
    case satisfied(ByteRange, total: Int64?)
    /// `bytes */total`, sent with 416.
    case unsatisfied(total: Int64)

    /// Parses strictly: unit `bytes`, decimal digits without signs, `first <= last < total`.
    /// On bytes: every part the grammar accepts is ASCII, so a value with any other byte is refused.
    package init?(_ value: String) {
        // Read over the value's contiguous bytes: slicing its `UTF8View` cost every probe 3.8k
        // instructions.
        let parsed =
            value.utf8.withContiguousStorageIfAvailable { Self.parse($0[...]) }
            ?? Array(value.utf8).withUnsafeBufferPointer { Self.parse($0[...]) }
        guard let parsed else { return nil }
        self = parsed
    }

    private static func parse(_ bytes: Slice<UnsafeBufferPointer<UInt8>>) -> ContentRange? {
        var utf8 = bytes
        while let byte = utf8.first, ASCIIBytes.isSpace(byte) { utf8 = utf8.dropFirst() }
        while let byte = utf8.last, ASCIIBytes.isSpace(byte) { utf8 = utf8.dropLast() }
        guard utf8.count > 6, utf8.prefix(6).elementsEqual("bytes ".utf8, by: { ASCIIBytes.lowercased($0) == $1 })
        else { return nil }
        var spec = utf8.dropFirst(6)
        while let byte = spec.first, ASCIIBytes.isSpace(byte) { spec = spec.dropFirst() }
        guard let slash = spec.firstIndex(of: UInt8(ascii: "/")) else { return nil }
        let rangePart = spec[..<slash]
        let totalPart = spec[spec.index(after: slash)...]
        let total: Int64?
        if totalPart.elementsEqual("*".utf8) {
            total = nil
        } else {
            guard let parsed = ASCIIBytes.decimal(totalPart) else { return nil }
            total = parsed
        }
        if rangePart.elementsEqual("*".utf8) {
            guard let total else { return nil }
            return .unsatisfied(total: total)
        }
        guard let dash = rangePart.firstIndex(of: UInt8(ascii: "-")),
            let first = ASCIIBytes.decimal(rangePart[..<dash]),
            let last = ASCIIBytes.decimal(rangePart[rangePart.index(after: dash)...]),
            first <= last, last < Int64.max
        else { return nil }
        if let total, last >= total { return nil }
        return .satisfied(ByteRange(first, last + 1), total: total)
    }
}
