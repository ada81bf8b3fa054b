/// Text from a server (object keys, header values, error bodies, `Content-Disposition` names)
/// made safe to print: it can carry terminal control sequences (`ESC ] 0 ; title BEL`,
/// `ESC [ 2 J`) that retitle or clear the terminal of whoever reads a message or a log line.
///
/// Every control character is written as a visible escape, as `ls -b` does: C0 and DEL as
/// `\x1b`, the C1 controls (U+0080–U+009F, which some terminals obey) as `\u{9b}`. Everything
/// else, backslashes included, is kept as it is, so ordinary names read unchanged.
extension StringProtocol {
    /// Whether there is anything to escape (the common case costs one pass over the bytes).
    package var containsControlCharacters: Bool {
        var previous: UInt8 = 0
        for byte in utf8 {
            if byte < 0x20 || byte == 0x7F { return true }
            // U+0080–U+009F are C2 80 … C2 9F in UTF-8.
            if previous == 0xC2 && byte >= 0x80 && byte <= 0x9F { return true }
            previous = byte
        }
        return false
    }

    /// The text with every control character escaped (see the type's notes); `keeping` names
    /// characters left as they are (a line break that a message itself adds).
    package func escapingControlCharacters(keeping kept: Set<Unicode.Scalar> = []) -> String {
        guard containsControlCharacters else { return String(self) }
        var out = ""
        out.reserveCapacity(utf8.count + 8)
        for scalar in unicodeScalars {
            switch scalar.value {
            case _ where kept.contains(scalar):
                out.unicodeScalars.append(scalar)
            case 0..<0x20, 0x7F:
                out += scalar.value < 0x10 ? "\\x0" : "\\x"
                out += String(scalar.value, radix: 16)
            case 0x80...0x9F:
                out += "\\u{" + String(scalar.value, radix: 16) + "}"
            default:
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}
