import SystemPackage

/// `FILE.part`: the object's bytes, written at their absolute offsets as they arrive.
///
/// Used on the transfer thread only. Writes go straight from curl's buffer to `pwrite`.
final class PartFile {
    let path: String
    let descriptor: FileDescriptor
    private var isClosed = false

    /// The descriptor while the file is open here; `nil` once it is closed or handed over for
    /// closing (work queued for later must not touch a descriptor number that may be reused).
    var openDescriptor: FileDescriptor? { isClosed ? nil : descriptor }

    private init(path: String, descriptor: FileDescriptor) {
        self.path = path
        self.descriptor = descriptor
    }

    deinit {
        if !isClosed { try? descriptor.close() }
    }

    /// Opens (creating if needed) the part file. `truncate` discards what it held.
    /// The file is created with mode 0666 minus the process umask.
    static func open(path: String, truncate: Bool) throws(DownloadError) -> PartFile {
        var options: FileDescriptor.OpenOptions = [.create, .closeOnExec]
        if truncate { options.insert(.truncate) }
        do {
            let descriptor = try FileDescriptor.open(
                FilePath(path), .readWrite, options: options, permissions: [.ownerReadWrite, .groupReadWrite, .otherReadWrite])
            return PartFile(path: path, descriptor: descriptor)
        } catch let error as Errno {
            throw DownloadError.localIO("cannot create", path: path, errno: error.rawValue)
        } catch {
            throw DownloadError(.localIO, "cannot create \(path): \(error)")
        }
    }

    /// The file's current length.
    func length() throws(DownloadError) -> Int64 {
        do { return try descriptor.size() } catch { throw .localIO("cannot stat", path: path, errno: error.rawValue) }
    }

    /// Reserves space for the whole object.
    func preallocate(_ length: Int64) throws(DownloadError) {
        do { try descriptor.preallocate(length: length) } catch {
            throw .localIO("cannot reserve \(length) bytes for", path: path, errno: error.rawValue)
        }
    }

    /// Writes `bytes` at `offset`.
    @inline(__always)
    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws(Errno) {
        try descriptor.writeAll(bytes, atOffset: offset)
    }

    /// Sets the length, e.g. to drop preallocated space past the end of a stream of unknown size.
    func truncate(to length: Int64) throws(DownloadError) {
        do { try retryingOnInterrupt { ftruncateShim(descriptor.rawValue, length) } } catch {
            throw .localIO("cannot truncate", path: path, errno: error.rawValue)
        }
    }

    /// Makes the written data durable (`fdatasync`).
    func syncData() throws(DownloadError) {
        do { try descriptor.syncData() } catch { throw .localIO("cannot flush", path: path, errno: error.rawValue) }
    }

    /// Makes data and metadata durable (`fsync`).
    func sync() throws(DownloadError) {
        do { try descriptor.sync() } catch { throw .localIO("cannot flush", path: path, errno: error.rawValue) }
    }

    /// Hands the descriptor to whoever will close it (the finalizer, the disk queue), exactly
    /// once: later calls return `nil`, and this object no longer closes it.
    func takeDescriptorForClosing() -> FileDescriptor? {
        guard !isClosed else { return nil }
        isClosed = true
        return descriptor
    }

    func close() {
        guard !isClosed else { return }
        isClosed = true
        try? descriptor.close()
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

private func ftruncateShim(_ descriptor: Int32, _ length: Int64) -> Int32 {
    ftruncate(descriptor, off_t(length))
}
