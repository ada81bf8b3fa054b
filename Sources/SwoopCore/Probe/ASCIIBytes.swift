/// What the header and URL readers ask of a single byte, and the 1–18 digit decimals of
/// `Content-Length` and `Content-Range`: read as bytes, since every form they accept is ASCII.
package enum ASCIIBytes {
    /// A space, a tab, a CR or an LF (what a header line's parts are trimmed of).
    package static func isSpace(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") || byte == UInt8(ascii: "\r")
            || byte == UInt8(ascii: "\n")
    }

    package static func isUpper(_ byte: UInt8) -> Bool {
        byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z")
    }

    package static func isLower(_ byte: UInt8) -> Bool {
        byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")
    }

    package static func isDigit(_ byte: UInt8) -> Bool {
        byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
    }

    package static func lowercased(_ byte: UInt8) -> UInt8 {
        isUpper(byte) ? byte + 32 : byte
    }

    /// Whether a byte of `text` is one `matching` asks for: over the string's contiguous UTF-8 (any
    /// native string's), where a walk of its `UTF8View` index by index cost about 30 instructions a
    /// byte (a list of small files scans every URL and every line for a byte or two). Inlinable,
    /// to be specialized for the caller's string type.
    @inlinable
    package static func contains(_ text: some StringProtocol, where matching: (UInt8) -> Bool) -> Bool {
        text.utf8.withContiguousStorageIfAvailable { $0.contains(where: matching) }
            ?? text.utf8.contains(where: matching)
    }

    /// Whether `one` and `other` are the same bytes (not merely canonically equivalent, as `==`
    /// compares them).
    @inlinable
    package static func same(_ one: String, _ other: String) -> Bool {
        guard one.utf8.count == other.utf8.count else { return false }
        let compared = one.utf8.withContiguousStorageIfAvailable { first in
            other.utf8.withContiguousStorageIfAvailable { first.elementsEqual($0) }
        }
        return (compared ?? nil) ?? one.utf8.elementsEqual(other.utf8)
    }

    /// A non-negative decimal of 1 to 18 digits, no sign (so it fits `Int64` with room to add 1).
    package static func decimal(_ digits: some Collection<UInt8>) -> Int64? {
        guard !digits.isEmpty, digits.count <= 18 else { return nil }
        var value: Int64 = 0
        for byte in digits {
            guard isDigit(byte) else { return nil }
            value = value * 10 + Int64(byte - UInt8(ascii: "0"))
        }
        return value
    }
}
