/// A single `Range: bytes=…` request (RFC 9110 §14.1.2), before it is resolved against a size.
enum ByteRangeRequest: Equatable {
    /// `bytes=first-last` or `bytes=first-` (last is nil).
    case from(first: Int64, last: Int64?)
    /// `bytes=-length`: the final `length` bytes.
    case suffix(length: Int64)

    /// Parses a Range field value holding exactly one byte range. Nil for other units, multiple
    /// ranges, or anything malformed: the origin then ignores the header and sends the whole object.
    init?(parsing text: String) {
        let value = text.trimmingHTTPWhitespace()
        guard let equals = value.firstIndex(of: "="),
            value[..<equals].trimmingHTTPWhitespace().lowercased() == "bytes"
        else { return nil }
        let spec = value[value.index(after: equals)...].trimmingHTTPWhitespace()
        guard !spec.contains(","), let dash = spec.firstIndex(of: "-") else { return nil }
        let firstText = spec[..<dash].trimmingHTTPWhitespace()
        let lastText = spec[spec.index(after: dash)...].trimmingHTTPWhitespace()
        if firstText.isEmpty {
            guard let length = Self.number(lastText) else { return nil }
            self = .suffix(length: length)
        } else {
            guard let first = Self.number(firstText) else { return nil }
            if lastText.isEmpty {
                self = .from(first: first, last: nil)
            } else {
                guard let last = Self.number(lastText), last >= first else { return nil }
                self = .from(first: first, last: last)
            }
        }
    }

    /// The inclusive byte positions this selects from an object of `size` bytes, or nil when
    /// unsatisfiable (416): a first position at or past the end, a zero-length suffix, or any
    /// range of an empty object.
    func resolve(size: Int64) -> ClosedRange<Int64>? {
        guard size > 0 else { return nil }
        switch self {
        case .from(let first, let last):
            guard first < size else { return nil }
            return first...min(last ?? (size - 1), size - 1)
        case .suffix(let length):
            guard length > 0 else { return nil }
            return max(0, size - length)...(size - 1)
        }
    }

    private static func number(_ text: Substring) -> Int64? {
        guard !text.isEmpty, text.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        // Positions beyond Int64 are clamped; they are past any object's end anyway.
        return Int64(text) ?? Int64.max
    }
}
