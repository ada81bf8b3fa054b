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
