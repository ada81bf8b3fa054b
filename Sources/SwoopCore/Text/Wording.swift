/// How counts and outside text appear in messages: "1 byte" and "2 bytes", "1 retry" and
/// "3 retries", and a server's words made safe to print. Every message that puts a number
/// before a noun goes through ``count(_:_:plural:)``, so no message says "1 bytes".
package enum Wording {
    /// `count` and the noun, singular for exactly one (`"1 byte"`, `"0 bytes"`, `"-1 bytes"`);
    /// the plural adds "s" unless given (`count(3, "retry", plural: "retries")`).
    package static func count(_ count: some BinaryInteger, _ singular: String, plural: String? = nil) -> String {
        "\(count) " + noun(for: count, singular, plural: plural)
    }

    /// The noun alone, as ``count(_:_:plural:)`` chooses it.
    package static func noun(for count: some BinaryInteger, _ singular: String, plural: String? = nil) -> String {
        count == 1 ? singular : plural ?? singular + "s"
    }

    /// `"1 byte"`, `"4096 bytes"`: an exact count, as in messages about sizes that must match.
    package static func bytes(_ count: some BinaryInteger) -> String {
        Self.count(count, "byte")
    }

    /// `"a"`, `"a or b"`, `"a, b or c"` (`conjunction`: "or", "and").
    package static func list(_ items: [String], _ conjunction: String) -> String {
        guard let last = items.last else { return "" }
        guard items.count > 1 else { return last }
        return items.dropLast().joined(separator: ", ") + " \(conjunction) " + last
    }

    /// `"1 try"`, `"3 tries"`.
    package static func tries(_ count: some BinaryInteger) -> String {
        Self.count(count, "try", plural: "tries")
    }

    /// Text that came from a server (a reason phrase, a header's value, a proxy's details),
    /// safe for a terminal: control characters (C0, DEL and C1, which terminals may act on)
    /// become `\xNN`, and at most `limit` characters are kept.
    package static func serverText(_ text: String, limit: Int = 200) -> String {
        var out = ""
        for scalar in text.unicodeScalars.prefix(limit) {
            if scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) {
                let hex = String(scalar.value, radix: 16)
                out += "\\x" + (hex.count < 2 ? "0" + hex : hex)
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return text.unicodeScalars.count > limit ? out + "..." : out
    }
}
