/// A half-open range of byte offsets, `lowerBound ..< upperBound`.
struct ByteRange: Hashable, Sendable, CustomStringConvertible {
    var lowerBound: Int64
    var upperBound: Int64

    init(_ lowerBound: Int64, _ upperBound: Int64) {
        precondition(lowerBound <= upperBound, "ByteRange \(lowerBound)..<\(upperBound)")
        self.lowerBound = lowerBound
        self.upperBound = upperBound
    }

    var count: Int64 { upperBound - lowerBound }
    var isEmpty: Bool { lowerBound == upperBound }

    /// As written in an HTTP `Range`/`Content-Range`: first and last byte, inclusive.
    var description: String { isEmpty ? "empty@\(lowerBound)" : "\(lowerBound)-\(upperBound - 1)" }

    func contains(_ offset: Int64) -> Bool { offset >= lowerBound && offset < upperBound }

    func clamped(to other: ByteRange) -> ByteRange {
        let lower = min(max(lowerBound, other.lowerBound), other.upperBound)
        let upper = max(min(upperBound, other.upperBound), lower)
        return ByteRange(lower, upper)
    }
}
