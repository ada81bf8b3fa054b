import SystemPackage

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The file sink: bytes go to `FILE.part` at their offsets, checkpoints to `FILE.swoop`, and the
/// finished file is verified, made durable and renamed to `FILE` (see ``Finalizer``).
///
/// Transfer thread only; fsyncs, the map, the rename and closing run on the ``DiskQueue``.
final class PartFileSink: BodySink {
    let paths: DownloadPaths
    private let disk: DiskQueue
    private let checksum: Checksum?
    private let overwritesTarget: Bool
    private var part: PartFile?

    /// Write-back is started every ``writebackStride`` new bytes, so pages reach the disk during
    /// the download instead of all waiting for the final fsync.
    private static let writebackStride: Int64 = 32 << 20
    private var bytesSinceWriteback: Int64 = 0
    private var writebackInFlight = false

    init(paths: DownloadPaths, disk: DiskQueue, checksum: Checksum?, overwritesTarget: Bool) {
        self.paths = paths
        self.disk = disk
        self.checksum = checksum
        self.overwritesTarget = overwritesTarget
    }

    var keepsPartialState: Bool { true }

    func open(size: Int64?, resuming: Bool) throws(DownloadError) {
        if !resuming { SegmentMapFile.remove(at: paths.map) }  // a stale map must not describe the new bytes
        let file = try PartFile.open(path: paths.part, truncate: !resuming)
        if !resuming, let size {
            do {
                try file.preallocate(size)
            } catch {
                file.close()
                removeFile(paths.part)  // nothing was downloaded; leave nothing behind
                throw error
            }
        }
        part = file
        bytesSinceWriteback = 0
    }

    @inline(__always)
    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws(DownloadError) {
        guard let part else { throw DownloadError(.localIO, "cannot write to \(paths.part): it is closed") }
        do {
            try part.write(bytes, at: offset)
        } catch {
            throw .localIO("cannot write to", path: paths.part, errno: error.rawValue)
        }
        bytesSinceWriteback += Int64(bytes.count)
        if bytesSinceWriteback >= Self.writebackStride { startWriteback() }
    }

    /// Hands the part file's dirty pages to the disk (`sync_file_range`), on the disk queue.
    private func startWriteback() {
        guard !writebackInFlight, let descriptor = part?.openDescriptor else { return }
        writebackInFlight = true
        bytesSinceWriteback = 0
        disk.run({ descriptor.startWriteback() }, then: { [self] in writebackInFlight = false })
    }

    func checkpoint(_ map: SegmentMap, then: @escaping (DownloadError?) -> Void) {
        // Not once finishing has taken the descriptor: the map would be written after the
        // finalizer removed it, by syncing a descriptor number that may belong to another file.
        guard let descriptor = part?.openDescriptor else {
            then(nil)
            return
        }
        let paths = self.paths
        disk.run({ () -> DownloadError? in
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

    func finish(size: Int64, record: CompletedObject, then: @escaping (DownloadError?) -> Void) {
        guard let descriptor = part?.takeDescriptorForClosing() else {
            then(DownloadError(.localIO, "cannot finish \(paths.part): it is not open"))
            return
        }
        let paths = self.paths
        let checksum = self.checksum
        let overwrite = overwritesTarget
        disk.run({ () -> DownloadError? in
            do throws(DownloadError) {
                try Finalizer.finalize(part: descriptor, paths: paths, size: size, record: record, checksum: checksum, overwrite: overwrite)
                return nil
            } catch {
                return error
            }
        }, then: { [self] failure in
            part = nil
            then(failure)
        })
    }

    func close(discarding: Bool, then: @escaping () -> Void) {
        let descriptor = part?.takeDescriptorForClosing()
        part = nil
        let paths = self.paths
        disk.run({
            try? descriptor?.close()
            if discarding { paths.discardPartialState() }
        }, then: then)
    }
}
