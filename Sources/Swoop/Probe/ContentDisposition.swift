import SwoopStore

/// A `Content-Disposition` response header (RFC 6266), read for the one thing a downloader wants
/// from it: the file name the server suggests.
///
/// ```
/// attachment; filename="a \"b\".txt"; filename*=UTF-8''na%C3%AFve%20file.txt
/// ```
///
/// `filename*` (an RFC 8187 ext-value: charset `UTF-8` or `ISO-8859-1`, an optional language,
/// percent-encoded bytes) wins over `filename` (a token or a quoted string with backslash
/// escapes): RFC 6266 § 4.3 has servers put an ASCII fallback in `filename` for clients that
/// cannot read `filename*`. Parameter names are case-insensitive; `;` inside quotes is text.
///
/// Servers get this header wrong often, so the reading is lenient where the intent is clear (a
/// missing disposition type, an unquoted name with spaces) and gives no name where it is not (an
/// unterminated quote, a bad percent escape, a name given twice with different values, a
/// charset it does not know): the caller then falls back to the URL's name, which is better than
/// a guessed one. Pure: no I/O.
struct ContentDisposition: Equatable, Sendable {
    /// `attachment`, `inline` or an extension type, lowercased; empty when the header starts
    /// with a parameter (some servers leave the type out).
    var type: String
    /// The name as the server sent it, decoded but not safe: it may hold `/`, `..` or control
    /// characters (see ``safeFileName``). `nil` when neither parameter is usable.
    var fileName: String?

    /// Parses a header value; `nil` when it is not a disposition at all (empty, or its type is
    /// not a token).
    init?(_ value: String) {
        var scanner = Scanner(value)
        scanner.skipWhitespace()
        let start = scanner.position
        let type = scanner.token()
        scanner.skipWhitespace()
        if !type.isEmpty && scanner.peek == "=" {
            // `filename=x` without a type: read it as the first parameter.
            scanner.position = start
            self.type = ""
        } else {
            guard !type.isEmpty, scanner.atEnd || scanner.peek == ";" else { return nil }
            self.type = type.lowercased()
        }
        var parameters = Parameters()
        while let (name, value) = scanner.parameter() {
            parameters.add(name, value)
        }
        fileName =
            parameters.single("filename*").flatMap(Self.decodeExtendedValue)
            ?? parameters.single("filename").flatMap(Self.plainName)
    }

    /// ``fileName`` as a name to create inside a directory: only its last path component (after
    /// the last `/` or `\`, so `../../etc/passwd` is `passwd` and `C:\tmp\a.txt` is `a.txt`),
    /// then the rules of URL-derived names (``FileName/sanitized(_:)``: no control characters,
    /// not `.` or `..`, at most 255 bytes). `nil` when nothing usable is left: the caller falls
    /// back to the URL's name.
    var safeFileName: String? {
        guard let fileName else { return nil }
        let last =
            fileName.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "/" || $0 == "\\" }).last ?? ""
        return FileName.sanitized(String(last))
    }

    // MARK: Values

    /// A `filename` value: taken as written. One that went through a UTF-8 decoding it did not
    /// survive (raw ISO-8859-1 bytes in the header) is refused rather than kept with `�` in it.
    private static func plainName(_ value: Value) -> String? {
        guard !value.text.isEmpty, !value.text.unicodeScalars.contains("\u{FFFD}") else { return nil }
        return value.text
    }

    /// A `filename*` value (RFC 8187 § 3.2): `charset'language'percent-encoded-bytes`, never
    /// quoted. `nil` for another charset, a bad escape, bytes that are not valid in the charset,
    /// or a character that should have been percent-encoded.
    private static func decodeExtendedValue(_ value: Value) -> String? {
        guard !value.isQuoted else { return nil }
        let parts = value.text.split(separator: "'", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3 else { return nil }
        let charset = parts[0].lowercased()
        guard charset == "utf-8" || charset == "iso-8859-1" else { return nil }
        var bytes: [UInt8] = []
        var scalars = parts[2].unicodeScalars.makeIterator()
        while let scalar = scalars.next() {
            if scalar == "%" {
                guard let high = scalars.next().flatMap(hexValue), let low = scalars.next().flatMap(hexValue) else {
                    return nil
                }
                bytes.append(high << 4 | low)
            } else if isAttributeCharacter(scalar) {
                bytes.append(UInt8(scalar.value))
            } else {
                return nil
            }
        }
        guard !bytes.isEmpty else { return nil }
        if charset == "utf-8" {
            return String(validating: bytes, as: UTF8.self)
        }
        var latin1 = String.UnicodeScalarView()
        latin1.append(contentsOf: bytes.map { Unicode.Scalar($0) })
        return String(latin1)
    }

    /// RFC 8187 attr-char: what an ext-value may hold without percent-encoding.
    private static func isAttributeCharacter(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar {
        case "a"..."z", "A"..."Z", "0"..."9": true
        case "!", "#", "$", "&", "+", "-", ".", "^", "_", "`", "|", "~": true
        default: false
        }
    }

    private static func hexValue(_ scalar: Unicode.Scalar) -> UInt8? {
        switch scalar {
        case "0"..."9": UInt8(scalar.value - 0x30)
        case "a"..."f": UInt8(scalar.value - 0x61 + 10)
        case "A"..."F": UInt8(scalar.value - 0x41 + 10)
        default: nil
        }
    }

    // MARK: Parsing

    /// A parameter's value as it appeared: a token or the unescaped text of a quoted string.
    struct Value: Equatable {
        var text: String
        var isQuoted: Bool
    }

    /// Parameters by lowercased name; a malformed one is kept as `nil`, so that it spoils a
    /// well-formed one of the same name instead of letting the parser pick a side.
    private struct Parameters {
        private var values: [String: [Value?]] = [:]

        mutating func add(_ name: String, _ value: Value?) {
            values[name.lowercased(), default: []].append(value)
        }

        /// The parameter's value if it was given once (or repeated identically) and parsed.
        func single(_ name: String) -> Value? {
            guard let all = values[name], let first = all.first, let value = first,
                all.allSatisfy({ $0 == value })
            else { return nil }
            return value
        }
    }

    /// Reads the header value one Unicode scalar at a time.
    private struct Scanner {
        private let scalars: [Unicode.Scalar]
        var position = 0

        init(_ value: String) {
            scalars = Array(value.unicodeScalars)
        }

        var atEnd: Bool { position == scalars.count }
        var peek: Unicode.Scalar? { atEnd ? nil : scalars[position] }

        mutating func skipWhitespace() {
            while let scalar = peek, scalar == " " || scalar == "\t" { position += 1 }
        }

        /// An RFC 9110 token (`*` included, for `filename*`); empty if none starts here.
        mutating func token() -> String {
            var text = String.UnicodeScalarView()
            while let scalar = peek, Self.isTokenCharacter(scalar) {
                text.append(scalar)
                position += 1
            }
            return String(text)
        }

        /// The next `; name=value`: the value is `nil` when the parameter is malformed (no `=`,
        /// an unterminated quote, text after the closing quote, a `"` in an unquoted value).
        /// `nil` at the end of the header.
        mutating func parameter() -> (name: String, value: Value?)? {
            while true {
                skipWhitespace()
                guard let scalar = peek else { return nil }
                if scalar == ";" { position += 1; continue }
                break
            }
            let name = token()
            skipWhitespace()
            guard !name.isEmpty, peek == "=" else {
                skipPastSeparator()
                return (name, nil)
            }
            position += 1
            skipWhitespace()
            let value: Value?
            if peek == "\"" {
                value = quotedString()
                skipWhitespace()
                if !atEnd && peek != ";" {
                    skipPastSeparator()
                    return (name, nil)
                }
            } else {
                // Lenient: `filename=My File.pdf` is common and unambiguous up to the `;`.
                var text = String.UnicodeScalarView()
                while let scalar = peek, scalar != ";" {
                    text.append(scalar)
                    position += 1
                }
                let trimmed = String(text).trimmingWhitespace
                value = trimmed.contains("\"") ? nil : Value(text: trimmed, isQuoted: false)
            }
            return (name, value)
        }

        /// A quoted string starting at `"`, with `\x` read as `x`; `nil` if it never closes
        /// (then the rest of the header is spent).
        private mutating func quotedString() -> Value? {
            position += 1
            var text = String.UnicodeScalarView()
            while let scalar = peek {
                position += 1
                switch scalar {
                case "\"":
                    return Value(text: String(text), isQuoted: true)
                case "\\":
                    guard let escaped = peek else { return nil }
                    text.append(escaped)
                    position += 1
                default:
                    text.append(scalar)
                }
            }
            return nil
        }

        /// Skips to just after the next `;` outside a quoted string, or to the end.
        private mutating func skipPastSeparator() {
            var quoted = false
            while let scalar = peek {
                position += 1
                if quoted {
                    if scalar == "\\" { if !atEnd { position += 1 } } else if scalar == "\"" { quoted = false }
                } else if scalar == "\"" {
                    quoted = true
                } else if scalar == ";" {
                    return
                }
            }
        }

        private static func isTokenCharacter(_ scalar: Unicode.Scalar) -> Bool {
            switch scalar {
            case "a"..."z", "A"..."Z", "0"..."9": true
            case "!", "#", "$", "%", "&", "'", "*", "+", "-", ".", "^", "_", "`", "|", "~": true
            default: false
            }
        }
    }
}
