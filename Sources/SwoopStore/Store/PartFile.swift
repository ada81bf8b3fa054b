import SwoopCore
import SystemPackage

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The part file (`DIR/.swoop/H.part`): the object's bytes, written at their absolute offsets as they arrive.
///
/// Used on the transfer thread only. Its bytes are written by the downloader's ``WriteBehind``.
package final class PartFile {
    package let path: String
    package let descriptor: FileDescriptor
    private var isClosed = false

    /// The descriptor while the file is open here; `nil` once it is closed or handed over for
    /// closing (work queued for later must not touch a descriptor number that may be reused).
    package var openDescriptor: FileDescriptor? { isClosed ? nil : descriptor }

    private init(path: String, descriptor: FileDescriptor, isShared: Bool) {
        self.path = path
        self.descriptor = descriptor
        self.isShared = isShared
    }

    deinit {
        if !isClosed { try? descriptor.close() }
    }

    /// Opens (creating if needed) the part file and takes the target's lock (``TargetLock``):
    /// held until the descriptor is closed. Nothing in the file is changed.
    /// The file is created with mode 0666 minus the process umask.
    /// A share's download (``DownloadPaths/share``) takes its share's lock instead: the other
    /// shares write the same file.
    package static func claim(_ paths: DownloadPaths) throws(DownloadError) -> PartFile {
        PartFile(
            path: paths.part, descriptor: try TargetLock.claim(paths.part, target: paths.target, share: paths.share),
            isShared: paths.share != nil)
    }

    /// Other downloads (the object's other shares) write this file too: it is never emptied.
    package let isShared: Bool

    /// Discards what the file held (under the lock: the file keeps its name, so nobody else can
    /// take the target over meanwhile). A shared file keeps the other shares' bytes.
    package func truncate() throws(DownloadError) {
        guard !isShared else { return }
        do { try systemCall { ftruncate(descriptor.rawValue, 0) } } catch {
            throw .localIO("cannot truncate", path: path, errno: error.rawValue)
        }
    }

    /// Reserves space for the whole object.
    package func preallocate(_ length: Int64) throws(DownloadError) {
        do { try descriptor.preallocate(length: length) } catch {
            throw .localIO("cannot reserve \(Wording.bytes(length)) for", path: path, errno: error.rawValue)
        }
    }

    /// Hands the descriptor to whoever will close it (the finalizer, the disk queue), exactly
    /// once: later calls return `nil`, and this object no longer closes it.
    package func takeDescriptorForClosing() -> FileDescriptor? {
        guard !isClosed else { return nil }
        isClosed = true
        return descriptor
    }

    package func close() {
        guard !isClosed else { return }
        isClosed = true
        try? descriptor.close()
    }
}
