/// A parsed `Content-Range` header value (RFC 9110 §14.4), for the `bytes` unit only.
package enum ContentRange: Equatable, Sendable {
    /// `bytes first-last/total` (`total` is `nil` for `*`).
    case satisfied(ByteRange, total: Int64?)
    /// `bytes */total`, sent with 416.
    case unsatisfied(total: Int64)

    /// Parses strictly: unit `bytes`, decimal digits without signs, `first <= last < total`.
    /// On bytes: every part the grammar accepts is ASCII, so a value with any other byte is refused.
    package init?(_ value: String) {
        var utf8 = value.utf8[...]
        while let byte = utf8.first, Self.isSpace(byte) { utf8 = utf8.dropFirst() }
        while let byte = utf8.last, Self.isSpace(byte) { utf8 = utf8.dropLast() }
        guard utf8.count > 6, utf8.prefix(6).map(Self.lowercased).elementsEqual("bytes ".utf8) else { return nil }
        var spec = utf8.dropFirst(6)
        while let byte = spec.first, Self.isSpace(byte) { spec = spec.dropFirst() }
        guard let slash = spec.firstIndex(of: UInt8(ascii: "/")) else { return nil }
        let rangePart = spec[..<slash]
        let totalPart = spec[spec.index(after: slash)...]
        let total: Int64?
        if totalPart.elementsEqual("*".utf8) {
            total = nil
        } else {
            guard let parsed = ContentRange.decimal(totalPart) else { return nil }
            total = parsed
        }
        if rangePart.elementsEqual("*".utf8) {
            guard let total else { return nil }
            self = .unsatisfied(total: total)
            return
        }
        guard let dash = rangePart.firstIndex(of: UInt8(ascii: "-")),
            let first = ContentRange.decimal(rangePart[..<dash]),
            let last = ContentRange.decimal(rangePart[rangePart.index(after: dash)...]),
            first <= last, last < Int64.max
        else { return nil }
        if let total, last >= total { return nil }
        self = .satisfied(ByteRange(first, last + 1), total: total)
    }

    /// A non-negative decimal with 1 to 18 digits (so it fits `Int64` with room to add 1).
    private static func decimal(_ digits: Substring.UTF8View) -> Int64? {
        guard !digits.isEmpty, digits.count <= 18 else { return nil }
        var value: Int64 = 0
        for byte in digits {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            value = value * 10 + Int64(byte - UInt8(ascii: "0"))
        }
        return value
    }

    private static func isSpace(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") || byte == UInt8(ascii: "\r")
            || byte == UInt8(ascii: "\n")
    }

    private static func lowercased(_ byte: UInt8) -> UInt8 {
        byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte + 32 : byte
    }
}
