import CSwoopSystem
import SystemPackage

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The paths one download uses: the target, `TARGET.part` and `TARGET.swoop`.
struct DownloadPaths: Sendable, Equatable {
    let target: String
    var part: String { target + ".part" }
    var map: String { target + ".swoop" }
}

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

/// Finalize: make `FILE.part` durable, check its size, move it to the target without replacing
/// anything unless asked, then drop the map. Runs off the transfer thread (it fsyncs).
enum Finalizer {
    static func finalize(
        part descriptor: FileDescriptor, paths: DownloadPaths, size: Int64,
        record: CompletedObject?, checksum: Checksum?, overwrite: Bool
    ) throws(DownloadError) {
        do {
            let length = try descriptor.size()
            if length != size {
                // A stream of unknown size ends where it ends; a planned object must fill its file.
                try retryingOnInterrupt { ftruncate(descriptor.rawValue, off_t(size)) }
            }
            try descriptor.sync()
        } catch {
            try? descriptor.close()
            throw .localIO("cannot flush", path: paths.part, errno: error.rawValue)
        }
        if let checksum {
            let actual: [UInt8]
            do {
                actual = try digest(of: descriptor, size: size, using: checksum.makeHasher())
            } catch {
                try? descriptor.close()
                throw .localIO("cannot read back", path: paths.part, errno: error.rawValue)
            }
            guard actual == checksum.digest else {
                try? descriptor.close()
                unlink(paths.part)
                SegmentMapFile.remove(at: paths.map)
                let got = Checksum(algorithm: checksum.algorithm, digest: actual)
                throw DownloadError(
                    .checksumMismatch,
                    "checksum mismatch for \(paths.target): expected \(checksum), got \(got); nothing was kept")
            }
        }
        try? descriptor.close()
        try publish(paths.part, as: paths.target, overwrite: overwrite)
        record?.write(to: paths.target)
        SegmentMapFile.remove(at: paths.map)
        do { try syncDirectory(containing: paths.target) } catch {
            throw .localIO("cannot flush the directory of", path: paths.target, errno: error.rawValue)
        }
    }

    /// The digest of the first `size` bytes, read in 1 MiB pieces.
    private static func digest(of descriptor: FileDescriptor, size: Int64, using hasher: ChecksumHasher) throws(Errno) -> [UInt8] {
        var hasher = hasher
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var offset: Int64 = 0
        while offset < size {
            let wanted = Int(min(Int64(buffer.count), size - offset))
            let count: Int
            do {
                count = try buffer.withUnsafeMutableBytes {
                    try descriptor.read(fromAbsoluteOffset: offset, into: UnsafeMutableRawBufferPointer(rebasing: $0[..<wanted]))
                }
            } catch {
                throw (error as? Errno) ?? .ioError
            }
            if count == 0 { break }
            buffer.withUnsafeBytes { hasher.update(UnsafeRawBufferPointer(rebasing: $0[..<count])) }
            offset += Int64(count)
        }
        return hasher.finalize()
    }

    /// Renames `source` to `target`; without `overwrite` an existing target is an error, checked
    /// atomically where the file system allows.
    static func publish(_ source: String, as target: String, overwrite: Bool) throws(DownloadError) {
        if overwrite {
            if rename(source, target) != 0 {
                throw .localIO("cannot rename \(source) to", path: target, errno: errno)
            }
            return
        }
        if swoop_rename_noreplace(source, target) == 0 { return }
        let code = errno
        switch code {
        case EEXIST:
            throw DownloadError(.targetExists, "\(target) appeared while downloading; the download is kept in \(source)")
        case EINVAL, ENOSYS, EOPNOTSUPP:
            // No RENAME_NOREPLACE here: a hard link fails atomically on an existing target.
            if link(source, target) == 0 {
                unlink(source)
                return
            }
            if errno == EEXIST {
                throw DownloadError(.targetExists, "\(target) appeared while downloading; the download is kept in \(source)")
            }
            if access(target, F_OK) == 0 {
                throw DownloadError(.targetExists, "\(target) appeared while downloading; the download is kept in \(source)")
            }
            if rename(source, target) != 0 {
                throw .localIO("cannot rename \(source) to", path: target, errno: errno)
            }
        default:
            throw .localIO("cannot rename \(source) to", path: target, errno: code)
        }
    }
}
