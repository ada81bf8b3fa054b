/// A parsed `Content-Range` header value (RFC 9110 §14.4), for the `bytes` unit only.
package enum ContentRange: Equatable, Sendable {
    /// `bytes first-last/total` (`total` is `nil` for `*`).
    case satisfied(ByteRange, total: Int64?)
    /// `bytes */total`, sent with 416.
    case unsatisfied(total: Int64)

    /// Parses strictly: unit `bytes`, decimal digits without signs, `first <= last < total`.
    package init?(_ value: String) {
        let text = value.trimmingWhitespace
        guard text.count > 6, text.prefix(6).lowercased() == "bytes " else { return nil }
        let spec = text.dropFirst(6).trimmingWhitespace
        guard let slash = spec.firstIndex(of: "/") else { return nil }
        let rangePart = spec[..<slash]
        let totalPart = spec[spec.index(after: slash)...]
        let total: Int64?
        if totalPart == "*" {
            total = nil
        } else {
            guard let parsed = ContentRange.decimal(totalPart) else { return nil }
            total = parsed
        }
        if rangePart == "*" {
            guard let total else { return nil }
            self = .unsatisfied(total: total)
            return
        }
        guard let dash = rangePart.firstIndex(of: "-"),
            let first = ContentRange.decimal(rangePart[..<dash]),
            let last = ContentRange.decimal(rangePart[rangePart.index(after: dash)...]),
            first <= last, last < Int64.max
        else { return nil }
        if let total, last >= total { return nil }
        self = .satisfied(ByteRange(first, last + 1), total: total)
    }

    /// A non-negative decimal with 1 to 18 digits (so it fits `Int64` with room to add 1).
    private static func decimal(_ text: Substring) -> Int64? {
        guard !text.isEmpty, text.count <= 18, text.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        return Int64(text)
    }
}
