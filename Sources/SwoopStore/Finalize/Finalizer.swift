import CSwoopSystem
import SwoopCore
import SystemPackage

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Finalize: cut a finished part file to size, make it durable, move it to the target without
/// replacing anything unless asked, and drop its segment map. Runs off the transfer thread.
///
/// A target appears only once its bytes (and its ``CompletedObject`` record) are durable, so a
/// crash at any moment leaves every target absent or complete.
package enum Finalizer {
    /// One finished download to publish.
    package struct Item: Sendable {
        /// Where its bytes are.
        package enum Body: Sendable {
            /// In the part file, open here; the writes still on their way to it (``WriteBehind``)
            /// are waited for before anything else is done with it.
            case written(FileDescriptor, after: WriteFence?)
            /// In memory (a small object): the part file is created when it is published, off
            /// the transfer thread.
            case held([UInt8])
        }

        package var body: Body
        package var paths: DownloadPaths
        /// The object's size: the file is cut to it (a stream of unknown size ends where it ends).
        package var size: Int64
        package var record: CompletedObject
        package var overwrite: Bool
        /// Whether a segment map may exist for it (a checkpointed or resumed download).
        package var removesMap: Bool

        package init(
            body: Body, paths: DownloadPaths, size: Int64, record: CompletedObject, overwrite: Bool, removesMap: Bool
        ) {
            self.body = body
            self.paths = paths
            self.size = size
            self.record = record
            self.overwrite = overwrite
            self.removesMap = removesMap
        }

        /// The bytes it holds in memory (none once written out, or for a part file).
        var bytesHeld: Int {
            if case .held(let bytes) = body { bytes.count } else { 0 }
        }

        /// The file holding the bytes: the part file written, or for bytes held in memory a new
        /// file, unnamed (`O_TMPFILE`, linked into place once durable) where the file system
        /// allows and nothing is to be replaced, else a new part file.
        func open() throws(DownloadError) -> Opened {
            switch body {
            case .written(let descriptor, let writes):
                if let failure = writes?.waitForWrites() {
                    try? descriptor.close()  // the part file stays, as when finalizing fails
                    throw failure
                }
                return Opened(descriptor: descriptor, unnamed: false)
            case .held(let bytes):
                var opened: Opened
                let raw = overwrite || !Finalizer.canLinkUnnamed ? -1 : paths.directory.withCString(swoop_open_unnamed)
                if raw >= 0 {
                    opened = Opened(descriptor: FileDescriptor(rawValue: raw), unnamed: true)
                } else {
                    // A named part file: under the target's lock like any other.
                    let descriptor = try TargetLock.claim(paths.part, target: paths.target)
                    opened = Opened(descriptor: descriptor, unnamed: false)
                    do { try systemCall { ftruncate(descriptor.rawValue, 0) } } catch {
                        try? descriptor.close()
                        throw .localIO("cannot truncate", path: paths.part, errno: error.rawValue)
                    }
                }
                do {
                    try opened.descriptor.writeAll(toAbsoluteOffset: 0, bytes)
                } catch {
                    opened.discard(paths)
                    throw .localIO(
                        "cannot write to", path: opened.unnamed ? paths.directory : paths.part,
                        errno: (error as? Errno)?.rawValue ?? EIO)
                }
                return opened
            }
        }
    }

    /// A finished file, open for publishing.
    struct Opened {
        package let descriptor: FileDescriptor
        /// It has no name yet (O_TMPFILE): publishing links it; closing it first frees it.
        package let unnamed: Bool

        /// Gives up on it: closes it, and deletes it if it has a name.
        package func discard(_ paths: DownloadPaths) {
            try? descriptor.close()
            if !unnamed {
                removeFile(paths.part)
                paths.removeWorkingDirectoryIfEmpty()
            }
        }

        /// Puts it at the target without replacing anything (unless `overwrite`), and drops its
        /// segment map, then closes it: a part file is renamed while its lock is held.
        package func publish(_ item: Item) throws(DownloadError) {
            defer { try? descriptor.close() }
            guard unnamed else {
                try Finalizer.publish(item.paths.part, as: item.paths.target, overwrite: item.overwrite)
                if item.removesMap { SegmentMapFile.remove(at: item.paths.map) }
                item.paths.removeWorkingDirectoryIfEmpty()
                return
            }
            do { try systemCall(item.paths.target) { swoop_link_unnamed(descriptor.rawValue, $0) } } catch {
                if error == .fileExists {
                    throw DownloadError(
                        .targetExists, "\(item.paths.target) appeared while downloading; it was left as it is")
                }
                throw .localIO("cannot create", path: item.paths.target, errno: error.rawValue)
            }
        }
    }

    /// Whether unnamed files can be linked by their `/proc/self/fd` path here.
    fileprivate static let canLinkUnnamed: Bool = (try? fileInfo("/proc/self/fd")) != nil

    /// Publishes one file: check, `fsync`, rename (or link), drop the map, `fsync` the directory.
    /// `alreadyDurable`: ``makeDurable(_:paths:size:record:)`` did the first two for this part file.
    package static func finalize(_ item: Item, alreadyDurable: Bool = false) throws(DownloadError) {
        let file = try item.open()
        // On a failure, a file made here from bytes held in memory goes; a part file stays.
        func abandon() {
            if case .held = item.body { file.discard(item.paths) } else { try? file.descriptor.close() }
        }
        if !alreadyDurable {
            do throws(DownloadError) { try prepare(item, file.descriptor) } catch {
                abandon()
                throw error
            }
            do { try file.descriptor.sync() } catch {
                abandon()
                throw .localIO("cannot flush", path: item.paths.part, errno: error.rawValue)
            }
        }
        try file.publish(item)
        do { try syncDirectory(containing: item.paths.target) } catch {
            throw .localIO("cannot flush the directory of", path: item.paths.target, errno: error.rawValue)
        }
    }

    /// The first half of ``finalize(_:alreadyDurable:)`` for a part file, done while its digests
    /// are still being checked: cut to size, record, `fsync`. The descriptor stays open.
    package static func makeDurable(
        _ descriptor: FileDescriptor, paths: DownloadPaths, size: Int64, record: CompletedObject
    ) throws(DownloadError) {
        let item = Item(
            body: .written(descriptor, after: nil), paths: paths, size: size, record: record, overwrite: false,
            removesMap: false)
        try prepare(item, descriptor)
        do { try descriptor.sync() } catch {
            throw .localIO("cannot flush", path: paths.part, errno: error.rawValue)
        }
    }

    /// Cuts the file to its size and records its source on it (its digests were checked as it
    /// arrived, by the ``ObjectVerifier``). The caller closes the descriptor.
    static func prepare(_ item: Item, _ descriptor: FileDescriptor) throws(DownloadError) {
        let paths = item.paths
        do {
            // Held bytes were written out at their size; a written part may differ (a stream of
            // unknown size, preallocation).
            if case .written = item.body, try descriptor.size() != item.size {
                try systemCall { ftruncate(descriptor.rawValue, off_t(item.size)) }
            }
        } catch {
            throw .localIO("cannot truncate", path: paths.part, errno: error.rawValue)
        }
        item.record.write(to: descriptor)
    }

    /// Renames `source` to `target`; without `overwrite` an existing target is an error, checked
    /// atomically where the file system allows.
    package static func publish(_ source: String, as target: String, overwrite: Bool) throws(DownloadError) {
        let appeared = DownloadError(
            .targetExists, "\(target) appeared while downloading; the download is kept in \(source)")
        func renameFailed(_ error: Errno) -> DownloadError {
            if error == .noSuchFileOrDirectory, (try? fileInfo(source)) == nil {
                return DownloadError(
                    .localIO,
                    "cannot rename \(source) to \(target): \(source) no longer exists (something else removed it "
                        + "during the download)",
                    errno: error.rawValue)
            }
            return .localIO("cannot rename \(source) to", path: target, errno: error.rawValue)
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
