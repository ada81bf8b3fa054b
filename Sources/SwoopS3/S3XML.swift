/// The little of XML that S3's answers need: the text of an element by name, the elements of one
/// name in order, entities decoded. S3's documents are flat, without attributes that matter,
/// CDATA or comments inside the elements read here; a full XML parser would be a dependency for
/// four element names.
///
/// It reads bytes, not `Character`s: a key is bytes, and a combining mark right after a tag's `>`
/// would make one `Character` with it (so `>` was not found as a `Character` and a key listed raw
/// was lost); searching grapheme by grapheme also made parsing a page of 1,000 keys a third of a
/// rerun's processor time.
package struct S3XML {
    private let text: ArraySlice<UInt8>

    package init(_ bytes: [UInt8]) {
        text = bytes[...]
    }

    private init(_ text: ArraySlice<UInt8>) {
        self.text = text
    }

    /// The decoded text of the first `<name>` element, or `nil`.
    package func value(_ name: String) -> String? {
        guard let (start, isEmpty) = Self.openTag(Array(name.utf8), in: text) else { return nil }
        if isEmpty { return "" }
        guard let end = Self.find(Array("</\(name)>".utf8), in: text[start...]) else { return nil }
        return Self.decodeEntities(text[start..<end.lowerBound])
    }

    /// Each `<name>` element's content, in document order (an element written `<name/>` is
    /// empty; attributes are passed over).
    package func elements(_ name: String) -> [S3XML] {
        let open = Array(name.utf8)
        let close = Array("</\(name)>".utf8)
        var found: [S3XML] = []
        var rest = text
        while let (contentStart, isEmpty) = Self.openTag(open, in: rest) {
            if isEmpty {
                found.append(S3XML(rest[contentStart..<contentStart]))
                rest = rest[contentStart...]
                continue
            }
            guard let end = Self.find(close, in: rest[contentStart...]) else { break }
            found.append(S3XML(rest[contentStart..<end.lowerBound]))
            rest = rest[end.upperBound...]
        }
        return found
    }

    /// Whether the document has a `<name>` element.
    package func contains(_ name: String) -> Bool {
        Self.openTag(Array(name.utf8), in: text) != nil
    }

    /// Where `pattern` first occurs in `text`.
    private static func find(_ pattern: [UInt8], in text: ArraySlice<UInt8>) -> Range<Int>? {
        guard let first = pattern.first, text.count >= pattern.count else { return nil }
        var index = text.startIndex
        let last = text.endIndex - pattern.count
        while index <= last {
            guard let at = text[index...last].firstIndex(of: first) else { return nil }
            if text[at..<(at + pattern.count)].elementsEqual(pattern) { return at..<(at + pattern.count) }
            index = at + 1
        }
        return nil
    }

    /// Where the content of the first `<name ...>` in `text` starts, and whether it is `<name/>`.
    private static func openTag(_ name: [UInt8], in text: ArraySlice<UInt8>) -> (Int, isEmpty: Bool)? {
        let pattern = [UInt8(ascii: "<")] + name
        var rest = text
        while let open = find(pattern, in: rest) {
            let after = rest[open.upperBound...]
            guard let next = after.first else { return nil }
            switch next {
            case UInt8(ascii: ">"), UInt8(ascii: "/"), UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\n"),
                UInt8(ascii: "\r"):
                guard let close = after.firstIndex(of: UInt8(ascii: ">")) else { return nil }
                let isEmpty = close > after.startIndex && after[close - 1] == UInt8(ascii: "/")
                return (close + 1, isEmpty)
            default:
                rest = after
            }
        }
        return nil
    }

    /// The text with XML's entities decoded (`&amp;`, `&#x1b;`, …); an `&` that starts none is kept.
    static func decodeEntities(_ text: ArraySlice<UInt8>) -> String {
        let amp = UInt8(ascii: "&")
        guard text.contains(amp) else { return String(decoding: text, as: UTF8.self) }
        var result: [UInt8] = []
        result.reserveCapacity(text.count)
        var index = text.startIndex
        while index < text.endIndex {
            let byte = text[index]
            guard byte == amp,
                let semicolon = text[index..<min(text.endIndex, index + 11)].firstIndex(of: UInt8(ascii: ";"))
            else {
                result.append(byte)
                index += 1
                continue
            }
            let entity = String(decoding: text[(index + 1)..<semicolon], as: UTF8.self)
            var decoded: [UInt8]?
            switch entity {
            case "amp": decoded = [amp]
            case "lt": decoded = [UInt8(ascii: "<")]
            case "gt": decoded = [UInt8(ascii: ">")]
            case "quot": decoded = [UInt8(ascii: "\"")]
            case "apos": decoded = [UInt8(ascii: "'")]
            default:
                let scalar: Unicode.Scalar? =
                    if entity.hasPrefix("#x") || entity.hasPrefix("#X") {
                        UInt32(entity.dropFirst(2), radix: 16).flatMap(Unicode.Scalar.init)
                    } else if entity.hasPrefix("#") {
                        UInt32(entity.dropFirst(), radix: 10).flatMap(Unicode.Scalar.init)
                    } else {
                        nil
                    }
                decoded = scalar.map { Array(String($0).utf8) }
            }
            if let decoded {
                result += decoded
                index = semicolon + 1
            } else {
                result.append(byte)
                index += 1
            }
        }
        return String(decoding: result, as: UTF8.self)
    }
}
