/// A half-open range of byte offsets, `lowerBound ..< upperBound`.
package struct ByteRange: Hashable, Sendable, CustomStringConvertible {
    package var lowerBound: Int64
    package var upperBound: Int64

    package init(_ lowerBound: Int64, _ upperBound: Int64) {
        precondition(lowerBound <= upperBound, "ByteRange \(lowerBound)..<\(upperBound)")
        self.lowerBound = lowerBound
        self.upperBound = upperBound
    }

    package var count: Int64 { upperBound - lowerBound }
    package var isEmpty: Bool { lowerBound == upperBound }

    /// As written in an HTTP `Range`/`Content-Range`: first and last byte, inclusive.
    package var description: String { isEmpty ? "empty@\(lowerBound)" : "\(lowerBound)-\(upperBound - 1)" }

    package func contains(_ offset: Int64) -> Bool { offset >= lowerBound && offset < upperBound }

    package func clamped(to other: ByteRange) -> ByteRange {
        let lower = min(max(lowerBound, other.lowerBound), other.upperBound)
        let upper = max(min(upperBound, other.upperBound), lower)
        return ByteRange(lower, upper)
    }

    /// The parts of this range outside `others` (sorted, disjoint), in order.
    package func subtracting(_ others: [ByteRange]) -> [ByteRange] {
        var parts: [ByteRange] = []
        var cursor = lowerBound
        for other in others where other.upperBound > cursor && other.lowerBound < upperBound {
            if other.lowerBound > cursor { parts.append(ByteRange(cursor, other.lowerBound)) }
            cursor = max(cursor, other.upperBound)
        }
        if cursor < upperBound { parts.append(ByteRange(cursor, upperBound)) }
        return parts
    }
}

extension [ByteRange] {
    /// The bytes in these ranges.
    package var totalBytes: Int64 { reduce(0) { $0 + $1.count } }

    /// These ranges (sorted, disjoint) with the ones that meet joined.
    package var coalesced: [ByteRange] {
        var joined: [ByteRange] = []
        for range in self {
            if let last = joined.last, last.upperBound == range.lowerBound {
                joined[joined.count - 1].upperBound = range.upperBound
            } else {
                joined.append(range)
            }
        }
        return joined
    }
}
