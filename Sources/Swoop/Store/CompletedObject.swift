import CSwoopSystem

/// What a completed file records about its source (in the `user.swoop.object` extended attribute),
/// so running the same download again recognises it as done.
struct CompletedObject: Equatable, Sendable {
    static let attributeName = "user.swoop.object"

    var size: Int64
    var etag: String?
    var lastModified: String?
    /// The source URL, redacted.
    var url: String

    var encoded: String {
        ["swoop1", String(size), etag ?? "", lastModified ?? "", url].joined(separator: "\n")
    }

    init(size: Int64, etag: String?, lastModified: String?, url: String) {
        self.size = size
        self.etag = etag
        self.lastModified = lastModified
        self.url = url
    }

    init?(encoded: String) {
        let fields = encoded.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        guard fields.count == 5, fields[0] == "swoop1", let size = Int64(fields[1]) else { return nil }
        self.init(size: size, etag: fields[2].isEmpty ? nil : fields[2],
                  lastModified: fields[3].isEmpty ? nil : fields[3], url: fields[4])
    }

    /// Reads the record from a file; `nil` when it has none (not ours, or no xattr support).
    static func read(from path: String) -> CompletedObject? {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = buffer.withUnsafeMutableBytes { swoop_getxattr(path, attributeName, $0.baseAddress, $0.count) }
        guard count > 0 else { return nil }
        return CompletedObject(encoded: String(decoding: buffer.prefix(count), as: UTF8.self))
    }

    /// Best effort: file systems without user xattrs simply do not remember.
    func write(to path: String) {
        let value = Array(encoded.utf8)
        _ = value.withUnsafeBytes { swoop_setxattr(path, Self.attributeName, $0.baseAddress, $0.count) }
    }
}

extension CompletedObject {
    /// The identity the record describes.
    var identity: ObjectIdentity { ObjectIdentity(size: size, etag: etag, lastModified: lastModified) }
}
