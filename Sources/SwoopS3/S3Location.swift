import SwoopCore

/// An object, or a prefix of keys, named as `s3://BUCKET/KEY`.
///
/// The key is taken as written, byte for byte (no percent-decoding), as the AWS CLI and s5cmd
/// take it; it is encoded only on its way into a request's URL.
package struct S3Location: Sendable, Hashable, CustomStringConvertible {
    package var bucket: String
    /// The key, or the prefix; empty for a whole bucket.
    package var key: String

    package init(bucket: String, key: String) {
        self.bucket = bucket
        self.key = key
    }

    /// Whether `string` is an `s3://` URL (any case of the scheme).
    package static func isS3(_ string: String) -> Bool {
        string.utf8.count >= 5 && string.prefix(5).lowercased() == "s3://"
    }

    /// Reads `s3://BUCKET/KEY`, `s3://BUCKET/PREFIX/` or `s3://BUCKET`.
    package init(parsing string: String) throws(DownloadError) {
        guard Self.isS3(string) else {
            throw DownloadError(.invalidRequest, "'\(string)' is not an s3:// URL; write s3://BUCKET/KEY")
        }
        let rest = string.dropFirst(5)
        let slash = rest.firstIndex(of: "/")
        let bucket = String(rest[..<(slash ?? rest.endIndex)])
        let key = slash.map { String(rest[rest.index(after: $0)...]) } ?? ""
        if let problem = Self.problem(withBucket: bucket) {
            throw DownloadError(
                .invalidRequest, "'\(string)' does not name a bucket: \(problem); write s3://BUCKET/KEY")
        }
        if key.utf8.count > 1024 {
            throw DownloadError(.invalidRequest, "the key of '\(string)' is longer than S3's 1,024 bytes")
        }
        self.init(bucket: bucket, key: key)
    }

    /// `s3://BUCKET/KEY`.
    package var uri: String { "s3://\(bucket)/\(key)" }

    package var description: String { uri }

    /// Whether the location can name one object: a key that is not empty and not a "folder"
    /// (ending in `/`).
    package var namesObject: Bool { !key.isEmpty && !key.hasSuffix("/") }

    /// What is wrong with `bucket` as a bucket's name, or `nil`. S3's rules for new buckets are
    /// stricter (3 to 63 lowercase letters, digits, `.` and `-`); older buckets and other stores
    /// allow capitals and `_`, so those are let through.
    package static func problem(withBucket bucket: String) -> String? {
        if bucket.isEmpty { return "the bucket's name is empty" }
        if bucket.utf8.count > 255 { return "the bucket's name is longer than 255 characters" }
        let allowed = bucket.utf8.allSatisfy { byte in
            S3Encoding.isUnreserved(byte) && byte != UInt8(ascii: "~")
        }
        return allowed ? nil : "'\(bucket)' has characters a bucket's name cannot have (letters, digits, '.', '-', '_')"
    }

    /// Whether `bucket` can be the first label of a host name (virtual-host addressing), over TLS
    /// too (`tls`: a dot would break the certificate's wildcard).
    package static func isDNSCompatible(_ bucket: String, tls: Bool) -> Bool {
        let bytes = Array(bucket.utf8)
        guard (3...63).contains(bytes.count) else { return false }
        let lowercaseDigit: (UInt8) -> Bool = { (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) }
        guard lowercaseDigit(bytes.first!), lowercaseDigit(bytes.last!) else { return false }
        for (index, byte) in bytes.enumerated() {
            switch byte {
            case UInt8(ascii: "-"): continue
            case UInt8(ascii: "."):
                if tls || bytes[index + 1] == UInt8(ascii: ".") { return false }
            default: if !lowercaseDigit(byte) { return false }
            }
        }
        // Not an IPv4 address.
        return !bytes.allSatisfy { (0x30...0x39).contains($0) || $0 == UInt8(ascii: ".") }
    }
}
