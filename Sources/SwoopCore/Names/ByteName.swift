/// A name — an object key, a URL, a file path — compared, hashed and ordered by its UTF-8 bytes.
///
/// Swift's `String` equality is canonical equivalence: `"café"` written with U+00E9 and with
/// `e` + U+0301 compare equal, and so hash equal in a `Set` or a dictionary. Right for text,
/// wrong for names: an object store and a Linux file system hold both as different names. Every
/// collection of names keys them by this type (or by their bytes), never by `String`.
package struct ByteName: Hashable, Comparable, Sendable, CustomStringConvertible {
    package let bytes: [UInt8]

    package init(_ text: some StringProtocol) {
        bytes = Array(text.utf8)
    }

    /// The bytes in one call (the synthesized hash combines them one at a time: 1% of a
    /// 20,000-file list's processor time).
    package func hash(into hasher: inout Hasher) {
        bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
    }

    package static func < (lhs: ByteName, rhs: ByteName) -> Bool {
        lhs.bytes.lexicographicallyPrecedes(rhs.bytes)
    }

    package var description: String { String(decoding: bytes, as: UTF8.self) }
}

extension String {
    /// Whether the two hold the same bytes (not merely canonically equivalent text): the
    /// contiguous UTF-8 compared directly (the generic form below costs a few per cent of a
    /// rerun's processor time, once per file).
    package func hasSameBytes(as other: String) -> Bool {
        var first = self
        var second = other
        return first.withUTF8 { one in second.withUTF8 { two in one.count == two.count && one.elementsEqual(two) } }
    }
}

extension StringProtocol {
    /// Whether the two hold the same bytes (not merely canonically equivalent text).
    package func hasSameBytes(as other: some StringProtocol) -> Bool {
        utf8.elementsEqual(other.utf8)
    }

    /// Whether the bytes start with `prefix`'s bytes (`hasPrefix` compares characters, so a
    /// combining mark after the prefix, or another normalization of it, changes its answer).
    package func hasBytePrefix(_ prefix: some StringProtocol) -> Bool {
        utf8.starts(with: prefix.utf8)
    }
}
