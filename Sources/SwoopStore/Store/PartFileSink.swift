import SwoopCore
import SystemPackage

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The file sink: bytes go to the part file at their offsets, checkpoints to the segment map, and the
/// finished file is verified, made durable and renamed to `FILE` (see ``Finalizer``). A file that
/// never needed a segment map (a small one, or a stream) is published with others in a group
/// commit (``PublishQueue``).
///
/// Transfer thread only; the bytes are written by the downloader's ``WriteBehind``; fsyncs, the
/// map, the rename and closing run on the ``DiskQueue``, each after the writes taken before it.
package final class PartFileSink: BodySink {
    package let paths: DownloadPaths
    private let disk: DiskQueue
    private let opening: DiskQueue
    private let publisher: PublishQueue
    private let writer: WriteBehind
    private var overwritesTarget: Bool
    private var part: PartFile? {
        didSet {
            guard part !== oldValue else { return }
            written = part.map { part in WriteBehind.File(descriptor: part.descriptor, path: part.path) }
        }
    }
    /// The part file as the writer knows it.
    private var written: WriteBehind.File?
    /// A segment map may exist: this download resumed one or checkpointed.
    private var mapMayExist = false

    /// Objects up to this size are not preallocated: they arrive in the first response, and a
    /// full disk shows at once anyway.
    private static let preallocationThreshold: Int64 = 1 << 20
    /// Objects up to this size (too small to split) are held in memory and written out when
    /// published, by the publish queue: creating a file can take the file system a millisecond,
    /// which the transfer thread spends on the network instead. 64 in flight hold 4 MiB.
    package static let holdLimit: Int64 = 64 << 10
    /// A small object's bytes, until it is published.
    private var held: [UInt8]?
    /// The part was made durable ahead of `finish` (``makeDurable(size:record:)``).
    private var durable: DurableStep?
    /// The part file is being opened on the opening queue (``open(size:resuming:then:)``).
    private var openInFlight: Opening?

    private struct Opening {
        /// A close asked for meanwhile: done once the disk work is.
        var close: (discarding: Bool, then: () -> Void)?
    }

    /// Write-back is started every ``writebackStride`` new bytes, so pages reach the disk during
    /// the download instead of all waiting for the final fsync.
    private static let writebackStride: Int64 = 32 << 20
    private var bytesSinceWriteback: Int64 = 0
    private var writebackInFlight = false

    /// A test's stand-in for a slow disk: runs on the opening queue before a part file is opened there.
    private let beforeOpening: (@Sendable (String) -> Void)?

    /// `opening`: where the part file is opened (``open(size:resuming:then:)``); by default the
    /// disk queue. Everything else of this sink's runs on `disk`, after the opening has come back.
    package init(
        paths: DownloadPaths, disk: DiskQueue, opening: DiskQueue? = nil, publisher: PublishQueue,
        writer: WriteBehind, overwritesTarget: Bool, beforeOpening: (@Sendable (String) -> Void)? = nil
    ) {
        self.paths = paths
        self.disk = disk
        self.opening = opening ?? disk
        self.publisher = publisher
        self.writer = writer
        self.overwritesTarget = overwritesTarget
        self.beforeOpening = beforeOpening
    }

    package var keepsPartialState: Bool { true }

    package func claim() throws(DownloadError) {
        if part == nil { part = try PartFile.claim(paths) }
    }

    package func discardPartialState() throws(DownloadError) {
        guard let part else { return }
        // The map first: never a map that describes bytes no longer there.
        SegmentMapFile.remove(at: paths.map)
        mapMayExist = false
        try part.truncate()
    }

    package func releaseClaim() {
        guard let part else { return }
        self.part = nil
        // Claiming created it when nothing was there: then it goes (before the lock does). Not a
        // share's: another share may have opened it meanwhile.
        if !part.isShared, (try? part.descriptor.size()) == 0, (try? fileInfo(paths.map)) == nil {
            removeFile(paths.part)
            paths.removeWorkingDirectoryIfEmpty()
        }
        part.close()
    }

    package func opensAtOnce(size: Int64?, resuming: Bool) -> Bool {
        holdsInMemory(size: size, resuming: resuming) || (resuming && part != nil)
    }

    /// A new object too small to split: held in memory until it is published.
    private func holdsInMemory(size: Int64?, resuming: Bool) -> Bool {
        guard !resuming, part == nil, let size else { return false }
        return size <= Self.holdLimit
    }

    package func open(size: Int64?, resuming: Bool) throws(DownloadError) {
        if holdsInMemory(size: size, resuming: resuming) {
            held = [UInt8](repeating: 0, count: Int(size ?? 0))
            mapMayExist = false
            return
        }
        guard resuming, part != nil else {
            throw DownloadError(.localIO, "internal: \(paths.part) must be opened on the opening queue")
        }
        held = nil
        mapMayExist = true
        bytesSinceWriteback = 0
    }

    package func open(holding bytes: [UInt8]) throws(DownloadError) {
        guard holdsInMemory(size: Int64(bytes.count), resuming: false) else { return try openWriting(bytes) }
        held = bytes
        mapMayExist = false
    }

    package func open(size: Int64?, resuming: Bool, then: @escaping (DownloadError?) -> Void) {
        if opensAtOnce(size: size, resuming: resuming) {
            return openAtOnce(size: size, resuming: resuming, then: then)
        }
        let claimed = part.map(FileHandover.init)
        // Starting over on the same part: what the last attempt still had on its way lands first.
        let earlierWrites = pendingWrites
        part = nil
        held = nil
        openInFlight = Opening()
        let (paths, beforeOpening) = (self.paths, self.beforeOpening)
        opening.run(
            { () -> Result<FileHandover, DownloadError> in
                earlierWrites?.wait()
                beforeOpening?(paths.part)
                return Result { () throws(DownloadError) in
                    FileHandover(try Self.openOnDisk(claimed?.file, paths: paths, size: size, resuming: resuming))
                }
            },
            then: { [self] opened in
                let closing = openInFlight?.close
                openInFlight = nil
                if case .success(let handover) = opened {
                    part = handover.file
                    mapMayExist = resuming
                    bytesSinceWriteback = 0
                }
                // A new download's part holds nothing yet (emptied, maybe reserved): it goes.
                if let closing { return close(discarding: closing.discarding || !resuming, then: closing.then) }
                if case .failure(let error) = opened { return then(error) }
                then(nil)
            })
    }

    /// The disk work of opening, on the opening queue: the part file claimed (unless `claimed`), and
    /// for a new download what it held discarded (the map first) and the object's space reserved.
    /// On a failure nothing is left behind (the name goes before the lock does).
    private static func openOnDisk(
        _ claimed: PartFile?, paths: DownloadPaths, size: Int64?, resuming: Bool
    ) throws(DownloadError) -> PartFile {
        let file: PartFile
        if let claimed { file = claimed } else { file = try PartFile.claim(paths) }
        if file.isShared {
            // Every share starts from a map (its own, or a new one), and the file is never emptied:
            // the first to come reserves the whole object's space.
            do throws(DownloadError) {
                if let size, size > preallocationThreshold, (try? file.descriptor.size()) ?? 0 < size {
                    try file.preallocate(size)
                }
            } catch {
                file.close()
                throw error
            }
            return file
        }
        guard !resuming else { return file }
        // Whatever a process that held the target before left goes, the map first.
        SegmentMapFile.remove(at: paths.map)
        do throws(DownloadError) {
            try file.truncate()
            if let size, size > preallocationThreshold { try file.preallocate(size) }
        } catch {
            removeFile(paths.part)  // nothing was downloaded; leave nothing behind (lock held until the close)
            paths.removeWorkingDirectoryIfEmpty()
            file.close()
            throw error
        }
        return file
    }

    @inline(__always)
    package func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws(DownloadError) {
        if held != nil {
            held!.withUnsafeMutableBytes { target in
                let start = Int(offset)
                let end = min(target.count, start + bytes.count)
                guard start < end else { return }
                UnsafeMutableRawBufferPointer(rebasing: target[start..<end]).copyMemory(
                    from: UnsafeRawBufferPointer(rebasing: bytes[..<(end - start)]))
            }
            return
        }
        guard let written else { throw DownloadError(.localIO, "cannot write to \(paths.part): it is closed") }
        do {
            try writer.write(bytes, at: offset, to: written)
        } catch {
            throw written.writeFailure(error)
        }
        bytesSinceWriteback += Int64(bytes.count)
        if bytesSinceWriteback >= Self.writebackStride { startWriteback() }
    }

    package var canReadBack: Bool { true }

    package var localWait: Duration { writer.waitedForRoom }

    package func read(_ range: ByteRange) -> [UInt8]? {
        if let held {
            guard range.upperBound <= Int64(held.count) else { return nil }
            return Array(held[Int(range.lowerBound)..<Int(range.upperBound)])
        }
        // From the page cache (the bytes were written moments ago), or the writer's ring.
        guard part?.openDescriptor != nil, let written else { return nil }
        return writer.read(range, from: written)
    }

    package var pendingWrites: WriteFence? {
        guard part?.openDescriptor != nil, let written else { return nil }
        return writer.fence(for: written)
    }

    /// Hands the part file's dirty pages to the disk (`sync_file_range`), on the disk queue.
    private func startWriteback() {
        guard !writebackInFlight, let descriptor = part?.openDescriptor else { return }
        writebackInFlight = true
        bytesSinceWriteback = 0
        disk.run({ descriptor.startWriteback() }, then: { [self] in writebackInFlight = false })
    }

    package func checkpoint(_ map: SegmentMap, then: @escaping (DownloadError?) -> Void) {
        // Not once finishing has taken the descriptor: the map would be written after the
        // finalizer removed it, by syncing a descriptor number that may belong to another file.
        guard let descriptor = part?.openDescriptor else {
            then(nil)
            return
        }
        let paths = self.paths
        let writes = pendingWrites
        mapMayExist = true
        disk.run(
            { () -> DownloadError? in
                if let failure = writes?.waitForWrites() { return failure }
                do throws(Errno) {
                    try descriptor.syncData()
                } catch {
                    return .localIO("cannot flush", path: paths.part, errno: error.rawValue)
                }
                do throws(DownloadError) {
                    try SegmentMapFile.write(map, to: paths.map)
                } catch {
                    return error
                }
                return nil
            }, then: then)
    }

    /// Cuts the part to size, records it and fsyncs it on the disk queue while the verifier
    /// finishes; `finish` then only publishes (or reports this step's failure).
    package func makeDurable(size: Int64, record: CompletedObject) {
        guard held == nil, durable == nil, let descriptor = part?.openDescriptor else { return }
        let step = DurableStep()
        durable = step
        let paths = self.paths
        let writes = pendingWrites
        disk.run {
            if let failure = writes?.waitForWrites() {
                step.failure = failure
                return
            }
            do throws(DownloadError) {
                try Finalizer.makeDurable(descriptor, paths: paths, size: size, record: record)
            } catch {
                step.failure = error
            }
        }
    }

    package func finish(size: Int64, record: CompletedObject, then: @escaping (DownloadError?) -> Void) {
        let body: Finalizer.Item.Body
        if let held {
            // The bytes themselves when they are the object's (not a copy of them).
            body = .held(held.count == Int(size) ? held : Array(held.prefix(Int(size))))
            self.held = nil
        } else if let writes = pendingWrites, let descriptor = part?.takeDescriptorForClosing() {
            body = .written(descriptor, after: writes)
        } else {
            then(DownloadError(.localIO, "cannot finish \(paths.part): it is not open"))
            return
        }
        part = nil
        let item = Finalizer.Item(
            body: body, paths: paths, size: size, record: record,
            overwrite: overwritesTarget, removesMap: mapMayExist)
        guard mapMayExist else {
            publisher.publish(item, then: then)
            return
        }
        let step = durable
        durable = nil
        disk.run(
            { () -> DownloadError? in
                // The durable step ran before this on the same serial queue.
                if let failure = step?.failure {
                    // As when finalizing fails: the part file stays, its descriptor is closed.
                    if case .written(let descriptor, _) = item.body { try? descriptor.close() }
                    return failure
                }
                do throws(DownloadError) {
                    try Finalizer.finalize(item, alreadyDurable: step != nil)
                    return nil
                } catch {
                    return error
                }
            }, then: then)
    }

    package func replacesTarget() {
        overwritesTarget = true
    }

    package func close(discarding: Bool, then: @escaping () -> Void) {
        if openInFlight != nil {
            openInFlight!.close = (discarding, then)
            return
        }
        let writes = pendingWrites
        let descriptor = part?.takeDescriptorForClosing()
        part = nil
        held = nil
        if descriptor == nil {
            // Nothing to close (finished, or never opened): no trip to the disk queue.
            disk.loop.afterCallbacks(then)
            return
        }
        let paths = self.paths
        disk.run(
            {
                // Only what this download holds: the files are deleted under its lock, then it goes.
                // (Without a descriptor it never claimed the target: what is there is not its own.)
                writes?.wait()
                if discarding, descriptor != nil { paths.discardPartialState() }
                try? descriptor?.close()
            }, then: then)
    }
}

/// A part file on its way between the transfer thread and the disk queue.
///
/// `@unchecked Sendable`: one side lets go of it as it hands it to the other.
private struct FileHandover: @unchecked Sendable {
    let file: PartFile

    init(_ file: PartFile) {
        self.file = file
    }
}

/// The outcome of ``PartFileSink/makeDurable(size:record:)``, for the `finish` that follows it.
///
/// `@unchecked Sendable`: written and read only on the sink's serial disk queue, in that order.
private final class DurableStep: @unchecked Sendable {
    package var failure: DownloadError?
}
