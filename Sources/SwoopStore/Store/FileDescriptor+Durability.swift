import CSwoopSystem
import SwoopCore
import SystemPackage

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The system calls swift-system does not wrap, funnelled the way it wraps its own: retried on
/// `EINTR`, `errno` turned into a thrown `Errno`.
extension FileDescriptor {
    /// The bytes at `range` (short reads continued), or `nil` when they cannot all be read (an
    /// error, or the end of the file before the range's end).
    package func readAll(_ range: ByteRange) -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: Int(range.count))
        let count = bytes.withUnsafeMutableBytes { buffer in readAvailable(into: buffer, at: range.lowerBound) }
        return count == bytes.count ? bytes : nil
    }

    /// Reads into `buffer` from `offset` until it is full, the file ends or a read fails (short
    /// reads continued); how many bytes it read.
    package func readAvailable(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) -> Int {
        var done = 0
        while done < buffer.count {
            let rest = UnsafeMutableRawBufferPointer(rebasing: buffer[done...])
            let count = try? read(fromAbsoluteOffset: offset + Int64(done), into: rest)
            guard let count, count > 0 else { break }
            done += count
        }
        return done
    }

    /// How ``readPieces(_:into:while:_:)`` ended.
    package enum PiecesEnd: Equatable {
        /// Every byte of the range was handed over.
        case done
        /// `while` said no before a read.
        case stopped
        /// A read failed.
        case failed(Errno)
        /// The file ends at this offset, before the range does.
        case endsAt(Int64)
    }

    /// Reads `range` in pieces of at most `buffer.count` bytes and hands each to `body`, in order;
    /// `proceeds` is asked before every read.
    package func readPieces(
        _ range: ByteRange, into buffer: UnsafeMutableRawBufferPointer, while proceeds: () -> Bool = { true },
        _ body: (UnsafeRawBufferPointer) -> Void
    ) -> PiecesEnd {
        var offset = range.lowerBound
        while offset < range.upperBound {
            guard proceeds() else { return .stopped }
            let wanted = Int(min(Int64(buffer.count), range.upperBound - offset))
            let count: Int
            do {
                count = try read(
                    fromAbsoluteOffset: offset, into: UnsafeMutableRawBufferPointer(rebasing: buffer[..<wanted]))
            } catch {
                return .failed(error as? Errno ?? .ioError)
            }
            guard count > 0 else { return .endsAt(offset) }
            body(UnsafeRawBufferPointer(rebasing: buffer[..<count]))
            offset += Int64(count)
        }
        return .done
    }

    /// Writes all of `bytes` at `offset`, looping over short writes; swift-system's
    /// `write(toAbsoluteOffset:)` retries on `EINTR`. (Its generic `writeAll` is not specialized
    /// across modules: on the part file's path, run for every piece of every response, it cost
    /// about 25 ms of CPU per GiB in generic-metadata lookups.)
    @inline(__always)
    package func writeFully(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws(Errno) {
        var written = 0
        while written < bytes.count {
            let count: Int
            do {
                count = try write(
                    toAbsoluteOffset: offset + Int64(written), UnsafeRawBufferPointer(rebasing: bytes[written...]))
            } catch {
                throw (error as? Errno) ?? .ioError
            }
            guard count > 0 else { throw .ioError }
            written += count
        }
    }

    /// Flushes the file's data and metadata to stable storage (`fsync`).
    package func sync() throws(Errno) {
        try retryingOnInterrupt { fsync(rawValue) }
    }

    /// Flushes the file's data, and only the metadata needed to read it back (`fdatasync`).
    package func syncData() throws(Errno) {
        #if canImport(Darwin)
        try retryingOnInterrupt { fsync(rawValue) }
        #else
        try retryingOnInterrupt { fdatasync(rawValue) }
        #endif
    }

    /// Flushes every dirty page and metadata change of the file system holding this file
    /// (`syncfs`): one call for many files written since the last.
    package func syncFileSystem() throws(Errno) {
        #if canImport(Darwin)
        try sync()
        #else
        try retryingOnInterrupt { swoop_syncfs(rawValue) }
        #endif
    }

    /// Reserves disk blocks for `length` bytes so a full disk is found now, not mid-download.
    /// Falls back to `ftruncate` where the file system cannot reserve space.
    package func preallocate(length: Int64) throws(Errno) {
        guard length > 0 else { return }
        do {
            try retryingOnInterrupt { swoop_fallocate(rawValue, 0, length) }
        } catch let error where [.notSupported, .invalidArgument, .noFunction].contains(error) {
            try resizeOrThrow(length)
        }
    }

    /// Starts writing dirty pages back to disk without waiting (`sync_file_range`), so the data
    /// reaches the disk while the download goes on and the final `fsync` has little left to do.
    /// A hint only: failures are ignored, durability still comes from ``sync()``.
    package func startWriteback() {
        _ = swoop_start_writeback(rawValue, 0, 0)
    }

    /// The file's size in bytes (`fstat`).
    package func size() throws(Errno) -> Int64 {
        var info = CStat()
        try retryingOnInterrupt { fstat(rawValue, &info) }
        return Int64(info.st_size)
    }

    private func resizeOrThrow(_ length: Int64) throws(Errno) {
        try retryingOnInterrupt { ftruncate(rawValue, off_t(length)) }
    }
}

#if canImport(Glibc)
/// `struct stat`, which swift-system's `Stat` shadows.
package typealias CStat = Glibc.stat
#elseif canImport(Musl)
package typealias CStat = Musl.stat
#endif

/// Runs `call` until it does not fail with `EINTR`; throws `errno` on any other failure.
@inline(__always)
package func retryingOnInterrupt(_ call: () -> Int32) throws(Errno) {
    while true {
        if call() != -1 { return }
        if errno != EINTR { throw Errno(rawValue: errno) }
    }
}

/// Runs a path-based system call until it does not fail with `EINTR` (rename, link, unlink,
/// stat); throws `errno` on any other failure.
@inline(__always)
package func systemCall(_ call: () -> Int32) throws(Errno) {
    try retryingOnInterrupt(call)
}

/// `call` given `path` as its own bytes (`withCString`), retried on `EINTR`: a `String` passed as a
/// C string is copied into a new array for each call, and a list of small files makes these calls
/// for every file.
package func systemCall(_ path: String, _ call: (UnsafePointer<CChar>) -> Int32) throws(Errno) {
    try path.withCString { path in Result { () throws(Errno) in try systemCall { call(path) } } }.get()
}

/// `stat(path)`, retried on `EINTR`.
package func fileInfo(_ path: String) throws(Errno) -> CStat {
    var info = CStat()
    try systemCall(path) { stat($0, &info) }
    return info
}

/// Deletes the file at `path` if it is there (`unlink`, retried on `EINTR`).
package func removeFile(_ path: String) {
    try? systemCall { unlink(path) }
}

/// Flushes a directory entry change (a create, rename or unlink) to stable storage.
package func syncDirectory(containing path: String) throws(Errno) {
    let directory = FilePath(path).removingLastComponent()
    let descriptor: FileDescriptor
    do {
        descriptor = try FileDescriptor.open(
            directory.isEmpty ? "." : directory, .readOnly, options: [.directory, .closeOnExec])
    } catch let error as Errno {
        throw error
    } catch {
        throw Errno.ioError
    }
    defer { try? descriptor.close() }
    try descriptor.sync()
}

/// Creates the directory `path` and its missing parents (`mkdir -p`, mode 0755 less the umask),
/// and makes each new entry durable (`fsync` of its parent), so a file published inside is not
/// lost with its directory in a crash. A directory another process creates meanwhile is fine.
package func createDirectories(_ path: String) throws(DownloadError) {
    var missing: [FilePath] = []
    var current = FilePath(path)
    while !current.isEmpty {
        let info: CStat
        do {
            info = try fileInfo(current.string)
        } catch let error where error == .noSuchFileOrDirectory || error == .notDirectory {
            missing.append(current)
            let parent = current.removingLastComponent()
            if parent == current { break }
            current = parent
            continue
        } catch {
            throw .localIO(
                "cannot create the directory \(path): cannot read", path: current.string, errno: error.rawValue)
        }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            throw DownloadError(
                .localIO, "cannot create the directory \(path): \(current) is a file, not a directory",
                remedy: .chooseWritableLocation, errno: ENOTDIR)
        }
        break
    }
    for directory in missing.reversed() {
        do {
            try systemCall { mkdir(directory.string, 0o755) }
        } catch .fileExists {
            continue
        } catch {
            throw .localIO("cannot create the directory", path: directory.string, errno: error.rawValue)
        }
        do { try syncDirectory(containing: directory.string) } catch {
            throw .localIO("cannot flush the directory holding", path: directory.string, errno: error.rawValue)
        }
    }
}

/// The whole file at `path`, read to its end rather than to its reported size (so `/proc` files,
/// which report none, read too); `.fileTooLarge` beyond `limit` bytes.
package func readWholeFile(_ path: String, limit: Int) -> Result<[UInt8], Errno> {
    do {
        let descriptor = try FileDescriptor.open(FilePath(path), .readOnly, options: [.closeOnExec])
        defer { try? descriptor.close() }
        var bytes = [UInt8](repeating: 0, count: Int(min(Int64(limit), max(try descriptor.size(), 16 << 10))) + 1)
        var total = 0
        while true {
            if total == bytes.count {
                guard bytes.count <= limit else { return .failure(.fileTooLarge) }
                bytes += [UInt8](repeating: 0, count: min(bytes.count, limit + 1 - bytes.count))
            }
            let count = try bytes.withUnsafeMutableBytes {
                try descriptor.read(into: UnsafeMutableRawBufferPointer(rebasing: $0[total...]))
            }
            if count == 0 { break }
            total += count
        }
        return total > limit ? .failure(.fileTooLarge) : .success(Array(bytes.prefix(total)))
    } catch let error as Errno {
        return .failure(error)
    } catch {
        return .failure(.ioError)
    }
}
