import CSwoopSystem
import SystemPackage

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

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
                try systemCall { ftruncate(descriptor.rawValue, off_t(size)) }
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
                paths.discardPartialState()
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
        let appeared = DownloadError(.targetExists, "\(target) appeared while downloading; the download is kept in \(source)")
        func renameFailed(_ error: Errno) -> DownloadError {
            .localIO("cannot rename \(source) to", path: target, errno: error.rawValue)
        }
        if overwrite {
            do { try systemCall { rename(source, target) } } catch { throw renameFailed(error) }
            return
        }
        let failure: Errno
        do {
            try systemCall { swoop_rename_noreplace(source, target) }
            return
        } catch {
            failure = error
        }
        switch failure {
        case .fileExists:
            throw appeared
        case .invalidArgument, .noFunction, .notSupported:
            // No RENAME_NOREPLACE here: a hard link fails atomically on an existing target.
            do {
                try systemCall { link(source, target) }
                try? systemCall { unlink(source) }
                return
            } catch .fileExists {
                throw appeared
            } catch {
                // No hard links either (some FUSE and network file systems): check, then rename.
                if (try? fileInfo(target)) != nil { throw appeared }
                do { try systemCall { rename(source, target) } } catch { throw renameFailed(error) }
            }
        default:
            throw renameFailed(failure)
        }
    }
}
