/// The little of XML that S3's answers need: the text of an element by name, the elements of one
/// name in order, entities decoded. S3's documents are flat, without attributes that matter,
/// CDATA or comments inside the elements read here; a full XML parser would be a dependency for
/// four element names.
package struct S3XML {
    private let text: Substring

    package init(_ bytes: [UInt8]) {
        text = Substring(String(decoding: bytes, as: UTF8.self))
    }

    private init(_ text: Substring) {
        self.text = text
    }

    /// The decoded text of the first `<name>` element, or `nil`.
    package func value(_ name: String) -> String? {
        elements(name).first.map { Self.decodeEntities($0.text) }
    }

    /// Each `<name>` element's content, in document order (an element written `<name/>` is
    /// empty; attributes are passed over).
    package func elements(_ name: String) -> [S3XML] {
        var found: [S3XML] = []
        var rest = text[...]
        while let (contentStart, isEmpty) = Self.openTag(name, in: rest) {
            if isEmpty {
                found.append(S3XML(rest[contentStart..<contentStart]))
                rest = rest[contentStart...]
                continue
            }
            guard let end = rest[contentStart...].firstRange(of: "</\(name)>") else { break }
            found.append(S3XML(rest[contentStart..<end.lowerBound]))
            rest = rest[end.upperBound...]
        }
        return found
    }

    /// Whether the document has a `<name>` element.
    package func contains(_ name: String) -> Bool {
        Self.openTag(name, in: text) != nil
    }

    /// Where the content of the first `<name ...>` in `text` starts, and whether it is `<name/>`.
    private static func openTag(_ name: String, in text: Substring) -> (Substring.Index, isEmpty: Bool)? {
        var rest = text
        while let open = rest.firstRange(of: "<\(name)") {
            let after = rest[open.upperBound...]
            guard let next = after.first else { return nil }
            if next == ">" || next == "/" || next == " " || next == "\t" || next == "\n" || next == "\r" {
                guard let close = after.firstIndex(of: ">") else { return nil }
                let isEmpty = close > after.startIndex && after[after.index(before: close)] == "/"
                return (after.index(after: close), isEmpty)
            }
            rest = after
        }
        return nil
    }

    static func decodeEntities(_ text: Substring) -> String {
        guard text.contains("&") else { return String(text) }
        var result = ""
        var rest = text
        while let amp = rest.firstIndex(of: "&") {
            result += rest[..<amp]
            guard let semicolon = rest[amp...].firstIndex(of: ";"),
                rest.distance(from: amp, to: semicolon) <= 10
            else {
                result.append("&")
                rest = rest[rest.index(after: amp)...]
                continue
            }
            let entity = rest[rest.index(after: amp)..<semicolon]
            switch entity {
            case "amp": result.append("&")
            case "lt": result.append("<")
            case "gt": result.append(">")
            case "quot": result.append("\"")
            case "apos": result.append("'")
            default:
                let scalar: Unicode.Scalar? =
                    if entity.hasPrefix("#x") || entity.hasPrefix("#X") {
                        UInt32(entity.dropFirst(2), radix: 16).flatMap(Unicode.Scalar.init)
                    } else if entity.hasPrefix("#") {
                        UInt32(entity.dropFirst(), radix: 10).flatMap(Unicode.Scalar.init)
                    } else {
                        nil
                    }
                if let scalar {
                    result.unicodeScalars.append(scalar)
                } else {
                    result += rest[amp...semicolon]
                }
            }
            rest = rest[rest.index(after: semicolon)...]
        }
        return result + rest
    }
}
