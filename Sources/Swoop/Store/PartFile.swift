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

    /// Reserves space for the whole object.
    func preallocate(_ length: Int64) throws(DownloadError) {
        do { try descriptor.preallocate(length: length) } catch {
            throw .localIO("cannot reserve \(length) bytes for", path: path, errno: error.rawValue)
        }
    }

    /// Writes all of `bytes` at `offset`, looping over short writes; swift-system's
    /// `write(toAbsoluteOffset:)` retries on `EINTR`. (Its generic `writeAll` is not specialized
    /// across modules: on this path, run for every piece of every response, it cost about 25 ms of
    /// CPU per GiB in generic-metadata lookups.)
    @inline(__always)
    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws(Errno) {
        var written = 0
        while written < bytes.count {
            let count: Int
            do {
                count = try descriptor.write(toAbsoluteOffset: offset + Int64(written), UnsafeRawBufferPointer(rebasing: bytes[written...]))
            } catch {
                throw (error as? Errno) ?? .ioError
            }
            guard count > 0 else { throw .ioError }
            written += count
        }
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
