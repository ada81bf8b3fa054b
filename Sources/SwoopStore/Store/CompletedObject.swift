import CSwoopSystem
import SwoopCore
import SystemPackage

/// What a completed file records about its source (in the `user.swoop.object` extended attribute),
/// so running the same download again recognises it as done: its size and the one validator the
/// confirming request's precondition uses (a strong ETag, else Last-Modified, else a weak ETag).
///
/// Written as `s2`, size and validator on three lines: about 45 bytes, which fit in an ext4
/// inode's own attribute space. (With the source URL, as the first format had it, the record took
/// an attribute block of its own: a second 4 KiB block, and its journal write, for every small file.)
/// Records in the first format (`swoop1`, with the URL) are still read.
package struct CompletedObject: Equatable, Sendable {
    package static let attributeName = "user.swoop.object"

    package var size: Int64
    package var etag: String?
    package var lastModified: String?
    /// The source URL, redacted: only in records of the first format.
    package var url: String?

    package init(size: Int64, etag: String?, lastModified: String?, url: String? = nil) {
        self.size = size
        self.etag = etag
        self.lastModified = lastModified
        self.url = url
    }

    /// The record as written: only what identifies the object (see the type's notes).
    package var encoded: String {
        let identity = ObjectIdentity(size: size, etag: etag, lastModified: lastModified)
        // A bare ETag (some stores send one) is recorded quoted, so reading it back knows it
        // for an ETag and not a date.
        let strong = identity.strongETag.map { $0.hasPrefix("\"") ? $0 : "\"" + $0 + "\"" }
        let validator = strong ?? lastModified ?? etag ?? ""
        return ["s2", String(size), validator].joined(separator: "\n")
    }

    package init?(encoded: String) {
        let fields = encoded.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        switch fields.first {
        case "s2":
            guard fields.count == 3, let size = Int64(fields[1]) else { return nil }
            let validator = fields[2]
            let isETag = validator.hasPrefix("\"") || validator.hasPrefix("W/\"")
            self.init(
                size: size, etag: isETag ? validator : nil, lastModified: isETag || validator.isEmpty ? nil : validator)
        case "swoop1":
            guard fields.count == 5, let size = Int64(fields[1]) else { return nil }
            self.init(
                size: size, etag: fields[2].isEmpty ? nil : fields[2],
                lastModified: fields[3].isEmpty ? nil : fields[3], url: fields[4])
        default:
            return nil
        }
    }

    /// Reads the record from a file; `nil` when it has none (not ours, or no xattr support).
    package static func read(from path: String) -> CompletedObject? {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = buffer.withUnsafeMutableBytes { swoop_getxattr(path, attributeName, $0.baseAddress, $0.count) }
        guard count > 0 else { return nil }
        return CompletedObject(encoded: String(decoding: buffer.prefix(count), as: UTF8.self))
    }

    /// Best effort: file systems without user xattrs simply do not remember.
    package func write(to path: String) {
        var value = encoded
        _ = value.withUTF8 { value in
            path.withCString { path in
                Self.attributeName.withCString { swoop_setxattr(path, $0, value.baseAddress, value.count) }
            }
        }
    }

    /// Records on the open file, before it is made durable and renamed into place, so the target
    /// never exists without its record. Best effort, like ``write(to:)``.
    package func write(to descriptor: FileDescriptor) {
        var value = encoded
        _ = value.withUTF8 { value in
            Self.attributeName.withCString { swoop_fsetxattr(descriptor.rawValue, $0, value.baseAddress, value.count) }
        }
    }
}

extension CompletedObject {
    /// The identity the record describes.
    package var identity: ObjectIdentity { ObjectIdentity(size: size, etag: etag, lastModified: lastModified) }
}
