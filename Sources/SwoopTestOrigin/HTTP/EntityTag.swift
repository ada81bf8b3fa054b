/// An entity tag as it appears in `ETag`, `If-Match`, `If-None-Match` and `If-Range`.
struct EntityTag: Equatable {
    var isWeak: Bool
    var opaque: String

    /// Strong comparison (RFC 9110 §8.8.3.2): both strong, same opaque tag.
    func strongMatches(_ other: EntityTag) -> Bool {
        !isWeak && !other.isWeak && opaque == other.opaque
    }

    /// Weak comparison: same opaque tag, weakness ignored.
    func weakMatches(_ other: EntityTag) -> Bool {
        opaque == other.opaque
    }

    init(isWeak: Bool, opaque: String) {
        self.isWeak = isWeak
        self.opaque = opaque
    }

    /// Parses a single entity tag (`"x"` or `W/"x"`), surrounding whitespace allowed.
    init?(parsing text: Substring) {
        guard case .tags(let tags)? = EntityTagList.parse(text), tags.count == 1 else { return nil }
        self = tags[0]
    }
}

/// The value of `If-Match` / `If-None-Match`: `*` or a comma-separated list of entity tags.
enum EntityTagList {
    case any
    case tags([EntityTag])

    /// Parses the field value; nil if it is malformed (callers then ignore the header).
    static func parse(_ text: Substring) -> EntityTagList? {
        let trimmed = text.trimmingHTTPWhitespace()
        if trimmed == "*" { return .any }
        var tags: [EntityTag] = []
        var rest = trimmed[...]
        while true {
            rest = rest.drop(while: { $0 == " " || $0 == "\t" || $0 == "," })
            if rest.isEmpty { break }
            var isWeak = false
            if rest.hasPrefix("W/") {
                isWeak = true
                rest = rest.dropFirst(2)
            }
            guard rest.first == "\"" else { return nil }
            rest = rest.dropFirst()
            guard let close = rest.firstIndex(of: "\"") else { return nil }
            tags.append(EntityTag(isWeak: isWeak, opaque: String(rest[..<close])))
            rest = rest[rest.index(after: close)...]
            rest = rest.drop(while: { $0 == " " || $0 == "\t" })
            guard rest.isEmpty || rest.first == "," else { return nil }
        }
        return tags.isEmpty ? nil : .tags(tags)
    }
}

extension StringProtocol {
    /// The text without leading and trailing spaces and tabs.
    func trimmingHTTPWhitespace() -> SubSequence {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let first = firstIndex(where: { !isSpace($0) }), let last = lastIndex(where: { !isSpace($0) })
        else { return self[endIndex...] }
        return self[first...last]
    }
}
