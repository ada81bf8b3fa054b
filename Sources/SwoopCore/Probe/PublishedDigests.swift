import ExtrasBase64
import RawStructuredFieldValues

/// A digest a server published in a response head, and how that header writes one.
package struct PublishedDigest: Sendable, Equatable, CustomStringConvertible {
    /// How the header encodes a digest, to show computed values the same way.
    package enum Notation: Sendable, Equatable {
        /// `sha-256=:BASE64:` (RFC 9530's structured fields).
        case structured(key: String)
        /// `crc32c=BASE64` (`x-goog-hash`, RFC 3230's `Digest`).
        case keyed(key: String)
        /// `BASE64` (`x-amz-checksum-*`, `Content-MD5`).
        case base64
        /// A decimal number (`x-oss-hash-crc64ecma`).
        case decimal
    }

    /// The header's name, lowercase.
    package var header: String
    package var checksum: Checksum
    package var notation: Notation

    /// `digest` as this header would write it.
    package func written(_ digest: Checksum) -> String {
        let base64 = Base64.encodeToString(bytes: digest.digest)
        switch notation {
        case .structured(let key): return "\(key)=:\(base64):"
        case .keyed(let key): return "\(key)=\(base64)"
        case .base64: return base64
        case .decimal: return String(digest.crcValue)
        }
    }

    package var description: String { "\(header): \(written(checksum))" }
}

/// The digests one response head publishes: of the whole object (verified at the end), and of
/// this response's body (`Content-Digest`, checked before its bytes count), plus what was seen
/// but cannot be used, and why (shown at `-v`).
///
/// Whole-object digests: `Repr-Digest` (RFC 9530), `x-goog-hash`, `x-amz-checksum-*` (not a
/// composite of parts), `x-oss-hash-crc64ecma`; `Content-MD5` and RFC 3230 `Digest` only when
/// the body is the whole object (a 200), since on a 206 they describe the part (or, from servers
/// that add them statically, wrongly the object). Pure.
package struct PublishedDigests: Sendable, Equatable {
    package var object: [PublishedDigest] = []
    package var response: [PublishedDigest] = []
    package var unusable: [String] = []

    /// Algorithms in the order one is chosen to verify: the CRCs first (checked chunk by chunk
    /// as the bytes arrive, no ordering needed), then the hashes.
    package static let preference: [Checksum.Algorithm] = [
        .crc64nvme, .crc64xz, .crc32c, .crc32, .sha256, .sha512, .sha384, .sha1, .md5,
    ]

    package init() {}

    /// `bodyIsWholeObject`: a 200 with the object's bytes (not a range).
    package init(_ head: ResponseHead, bodyIsWholeObject: Bool) {
        for (name, value) in head.fields {
            switch name {
            case "repr-digest":
                object += structured(name, value)
            case "content-digest":
                let found = structured(name, value)
                response += found
                if bodyIsWholeObject { object += found }
            case "x-goog-hash":
                object += keyed(name, value, accepting: ["crc32c": .crc32c, "md5": .md5])
            case "digest":
                let found = keyed(
                    name, value, accepting: ["sha-256": .sha256, "sha-512": .sha512, "md5": .md5, "sha": .sha1])
                if bodyIsWholeObject {
                    object += found
                } else if !found.isEmpty {
                    unusable.append("\(name): on a partial response it may describe only the part; not used")
                }
            case "content-md5":
                // RFC 1864 says of the body, but servers that add it as a static header send the
                // object's on every 206 too: only a whole body is trusted to match it.
                if bodyIsWholeObject {
                    object += plain(name, value, .md5)
                } else {
                    unusable.append("\(name): on a partial response it may describe the object, not the part; not used")
                }
            case "x-oss-hash-crc64ecma":
                if let crc = UInt64(value.trimmingWhitespace) {
                    object.append(
                        PublishedDigest(
                            header: name, checksum: Checksum(algorithm: .crc64xz, crc: crc), notation: .decimal))
                } else {
                    unusable.append("\(name): '\(value)' is not a decimal CRC-64; not used")
                }
            case _
            where name.hasPrefix("x-amz-checksum-") && name != "x-amz-checksum-type" && name != "x-amz-checksum-mode":
                amazon(name, value, type: head.value("x-amz-checksum-type"))
            default:
                continue
            }
        }
        dropMislabelled(bodyIsWholeObject: bodyIsWholeObject)
    }

    /// Drops a `Content-Digest` of a partial response that repeats the representation's digest:
    /// the server labels the object's digest as the response's (a static header); it would never
    /// match a part, and the object's digest is checked anyway.
    private mutating func dropMislabelled(bodyIsWholeObject: Bool) {
        guard !bodyIsWholeObject else { return }
        let before = response.count
        response.removeAll { part in object.contains { $0.checksum == part.checksum } }
        if response.count < before {
            unusable.append(
                "content-digest: repeats the object's digest on a partial response, so it describes the object, not "
                    + "the part; not used"
            )
        }
    }

    /// The whole-object digest to verify, if any.
    package var preferred: PublishedDigest? { Self.first(of: object, in: Self.preference) }

    /// The response digest to check a body against, if any (the strongest hash first).
    package var preferredForResponse: PublishedDigest? {
        Self.first(of: response, in: [.sha512, .sha256, .sha384, .sha1, .md5, .crc64nvme, .crc64xz, .crc32c, .crc32])
    }

    /// The digest of `digests` whose algorithm comes first in `order`.
    private static func first(of digests: [PublishedDigest], in order: [Checksum.Algorithm]) -> PublishedDigest? {
        for algorithm in order {
            if let found = digests.first(where: { $0.checksum.algorithm == algorithm }) { return found }
        }
        return nil
    }

    /// How `later` contradicts these (the same header and algorithm with another value): the
    /// object changed. `nil` when nothing does; a header that is missing later is no change.
    package func change(in later: PublishedDigests) -> String? {
        for digest in later.object {
            if let earlier = object.first(where: {
                $0.header == digest.header && $0.checksum.algorithm == digest.checksum.algorithm
            }),
                earlier.checksum != digest.checksum
            {
                return
                    "\(digest.header) was \(earlier.written(earlier.checksum)), now \(digest.written(digest.checksum))"
            }
        }
        return nil
    }

    /// Whether a head carries any header this type reads (most carry none: no parsing then).
    package static func mayBeIn(_ head: ResponseHead) -> Bool {
        head.fields.contains { field in
            let name = field.name
            if name.utf8.count > 15 && name.hasPrefix("x-amz-checksum-") { return true }
            // By length first: a name of another length is passed over without a comparison.
            return switch name.utf8.count {
            case 6: name == "digest"
            case 11: name == "repr-digest" || name == "x-goog-hash" || name == "content-md5"
            case 14: name == "content-digest"
            case 20: name == "x-oss-hash-crc64ecma"
            default: false
            }
        }
    }

    // MARK: Notations

    private mutating func structured(_ name: String, _ value: String) -> [PublishedDigest] {
        var parser = StructuredFieldValueParser(Array(value.utf8))
        guard let dictionary = try? parser.parseDictionaryFieldValue() else {
            unusable.append("\(name): '\(value)' is not a structured dictionary (RFC 8941); not used")
            return []
        }
        var found: [PublishedDigest] = []
        for (key, member) in dictionary {
            let algorithm: Checksum.Algorithm? =
                switch key {
                case "sha-256": .sha256
                case "sha-512": .sha512
                case "md5": .md5
                case "crc32c": .crc32c
                default: nil
                }
            guard let algorithm else {
                unusable.append("\(name): algorithm '\(key)' is not supported; not used")
                continue
            }
            guard case .item(let item) = member, case .undecodedByteSequence(let text) = item.rfc9651BareItem,
                let digest = Self.decode(text, algorithm)
            else {
                unusable.append(
                    "\(name): the \(key) value is not a byte sequence of \(algorithm.byteCount) bytes; not used")
                continue
            }
            found.append(PublishedDigest(header: name, checksum: digest, notation: .structured(key: key)))
        }
        return found
    }

    private mutating func keyed(
        _ name: String, _ value: String, accepting names: [String: Checksum.Algorithm]
    ) -> [PublishedDigest] {
        var found: [PublishedDigest] = []
        for member in value.split(separator: ",") {
            let text = member.trimmingWhitespace
            guard let equals = text.firstIndex(of: "=") else { continue }
            let key = text[..<equals].lowercased()
            guard let algorithm = names[key] else {
                unusable.append("\(name): algorithm '\(key)' is not supported; not used")
                continue
            }
            guard let digest = Self.decode(String(text[text.index(after: equals)...]), algorithm) else {
                unusable.append("\(name): the \(key) value is not base64 of \(algorithm.byteCount) bytes; not used")
                continue
            }
            found.append(PublishedDigest(header: name, checksum: digest, notation: .keyed(key: key)))
        }
        return found
    }

    private mutating func plain(_ name: String, _ value: String, _ algorithm: Checksum.Algorithm) -> [PublishedDigest] {
        guard let digest = Self.decode(value.trimmingWhitespace, algorithm) else {
            unusable.append("\(name): '\(value)' is not base64 of \(algorithm.byteCount) bytes; not used")
            return []
        }
        return [PublishedDigest(header: name, checksum: digest, notation: .base64)]
    }

    /// S3: full-object checksums only. A value ending in `-N` (or `x-amz-checksum-type:
    /// COMPOSITE`) is a checksum of the parts' checksums, which the object's bytes cannot give.
    private mutating func amazon(_ name: String, _ value: String, type: String?) {
        let suffix = String(name.dropFirst("x-amz-checksum-".count))
        guard
            let algorithm: Checksum.Algorithm = [
                "crc32": .crc32, "crc32c": .crc32c, "crc64nvme": .crc64nvme, "sha1": .sha1, "sha256": .sha256,
            ][suffix]
        else {
            unusable.append("\(name): algorithm '\(suffix)' is not supported; not used")
            return
        }
        let text = value.trimmingWhitespace
        if let dash = text.lastIndex(of: "-"), Int(text[text.index(after: dash)...]) != nil {
            unusable.append(
                "\(name): \(text) is a composite of \(text[text.index(after: dash)...]) parts' checksums, not of the "
                    + "object's bytes; not checked"
            )
            return
        }
        if type?.uppercased() == "COMPOSITE" {
            unusable.append("\(name): x-amz-checksum-type is COMPOSITE (a checksum of parts); not checked")
            return
        }
        object += plain(name, text, algorithm)
    }

    private static func decode(_ base64: String, _ algorithm: Checksum.Algorithm) -> Checksum? {
        guard let bytes = try? Base64.decode(string: base64) else { return nil }
        return try? Checksum(algorithm: algorithm, digest: bytes)
    }
}
