/// One normal form for an ETag, so that a listing, a `HEAD` and a `GET` of one object agree.
///
/// Stores differ in how they print the same tag: S3's ListObjectsV2 quotes it (`"9b2c…"`), some
/// compatible stores list it bare (`9b2c…`) and quote it on `GET`; MD5s come in either case. The
/// normal form is the opaque tag without its quotes and surrounding spaces, lowercased when it
/// is hex digits (with S3's `-N` part count for multipart uploads); a weak tag keeps its `W/`, so
/// it never equals a strong one.
package enum ETagForm {
    package static func normal(_ raw: String) -> String {
        var tag = Substring(raw).drop { $0 == " " || $0 == "\t" }
        while let last = tag.last, last == " " || last == "\t" { tag = tag.dropLast() }
        var weak = false
        if tag.hasPrefix("W/") {
            weak = true
            tag = tag.dropFirst(2)
        }
        if tag.count >= 2, tag.first == "\"", tag.last == "\"" { tag = tag.dropFirst().dropLast() }
        let isHex =
            !tag.isEmpty
            && tag.utf8.allSatisfy { byte in
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"),
                    UInt8(ascii: "A")...UInt8(ascii: "F"), UInt8(ascii: "-"):
                    true
                default: false
                }
            }
        let opaque = isHex ? tag.lowercased() : String(tag)
        return weak ? "W/" + opaque : opaque
    }

    /// Whether two tags are the same in the normal form (`nil` equals nothing).
    package static func same(_ first: String?, _ second: String?) -> Bool {
        guard let first, let second else { return false }
        return first == second || normal(first).utf8.elementsEqual(normal(second).utf8)
    }
}
