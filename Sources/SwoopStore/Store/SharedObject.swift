import CSwoopSystem
import SwoopCore
import SystemPackage

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// An object fetched in shares by several tasks into one part file (``ObjectShare``), as the disk
/// shows it: the *pin* every share agrees on before its first byte, the shares' own segment maps,
/// and the finishing step of whichever task finds every share complete.
///
/// The pin (`DIR/.swoop/H.shares-N.pin`) is a ``SegmentMap`` without chunks: the object's size,
/// chunk size and validators, and its URL. The first task writes it (a new file linked into place:
/// never replaced), every later task reads it, and a task whose server shows another version
/// refuses to write a byte (``DownloadError/Kind/objectChanged``): the shares are one version.
package enum SharedObject {
    /// The pin at `paths`, if one is there.
    package static func readPin(_ paths: DownloadPaths) throws(DownloadError) -> SegmentMap? {
        guard let path = paths.pin else { return nil }
        switch SegmentMapFile.read(at: path) {
        case .success(let pin): return pin
        case .failure(.missing): return nil
        case .failure(.io(let error)): throw error
        case .failure(.untrusted(let reason)):
            throw DownloadError(
                .localIO, "\(path), the version every share of \(paths.target) agreed on, cannot be used: \(reason)",
                remedy: .restartShares)
        }
    }

    /// Writes `pin` unless another task wrote one first, and returns the one in place.
    package static func pin(_ pin: SegmentMap, at paths: DownloadPaths) throws(DownloadError) -> SegmentMap {
        guard let path = paths.pin else { return pin }
        try TargetLock.createWorkingDirectory(containing: path)
        let temporary = path + ".\(getpid()).tmp"
        do {
            let descriptor = try FileDescriptor.open(
                FilePath(temporary), .writeOnly, options: [.create, .truncate, .closeOnExec],
                permissions: [.ownerReadWrite, .groupReadWrite, .otherReadWrite])
            defer { try? descriptor.close() }
            try descriptor.writeAll(toAbsoluteOffset: 0, pin.encoded())
            try descriptor.sync()
        } catch {
            removeFile(temporary)
            throw .localIO("cannot write", path: temporary, errno: (error as? Errno)?.rawValue ?? EIO)
        }
        defer { removeFile(temporary) }
        do {
            try systemCall { link(temporary, path) }
            try syncDirectory(containing: path)
            return pin
        } catch  where error == .fileExists {
            return try readPin(paths) ?? pin
        } catch {
            throw .localIO("cannot create", path: path, errno: error.rawValue)
        }
    }

    /// The pin for `object` (its size, validators and URL, as the first task saw them).
    package static func pin(size: Int64, etag: String?, lastModified: String?, url: String) -> SegmentMap {
        let layout = ChunkLayout(objectSize: size)
        return SegmentMap(
            objectSize: size, chunkSize: layout.chunkSize, etag: etag, lastModified: lastModified, url: url,
            chunks: ChunkSet(count: layout.chunkCount))
    }

    /// The segment map a share starts from when it holds nothing yet: the pin's object, the other
    /// shares' chunks marked complete (not this share's to fetch).
    package static func freshMap(_ pin: SegmentMap, share: ObjectShare) -> SegmentMap {
        var map = pin
        map.chunks = share.freshChunks(of: pin.layout)
        return map
    }

    /// How far one share is, from its map.
    package enum ShareState: Equatable, Sendable {
        /// No map: nothing of it is held (or its task has not started).
        case notStarted
        /// Its map holds `done` of its `total` bytes.
        case partial(done: Int64, total: Int64)
        case complete(bytes: Int64)
        /// Its map is of another object or version than the pin, or cannot be read: why.
        case unusable(String)

        package var isComplete: Bool {
            if case .complete = self { true } else { false }
        }
    }

    /// Every share's state, read from its map and compared with `pin`.
    package static func shares(of paths: DownloadPaths, pin: SegmentMap) -> [ShareState] {
        guard let count = paths.share?.count else { return [] }
        return (0..<count).map { index in
            guard let share = ObjectShare(index: index, count: count), let path = paths.shareMap(index) else {
                return .notStarted
            }
            switch SegmentMapFile.read(at: path) {
            case .failure(.missing): return .notStarted
            case .failure(.io(let error)): return .unusable(error.reason)
            case .failure(.untrusted(let reason)): return .unusable("\(path): \(reason)")
            case .success(let map):
                guard map.objectSize == pin.objectSize, map.chunkSize == pin.chunkSize,
                    map.identity.compare(pin.identity) == .same
                else {
                    return .unusable("\(path) is of another version than \(paths.pin ?? "the pin")")
                }
                return state(of: map, share: share)
            }
        }
    }

    /// A share's state from its map: its own stripes' bytes held.
    package static func state(of map: SegmentMap, share: ObjectShare) -> ShareState {
        let own = share.ranges(of: map.layout)
        let total = own.totalBytes
        let missing = map.missingRanges.totalBytes
        if missing == 0 { return .complete(bytes: total) }
        return .partial(done: max(0, total - missing), total: total)
    }

    /// Opens the part file and waits for the finishing lock (``TargetLock/finishingLock``): one
    /// task at a time looks at every share and, if they are all complete, publishes the object.
    /// `nil`: there is no part file (another task published it).
    package static func lockForFinishing(_ paths: DownloadPaths) throws(DownloadError) -> FileDescriptor? {
        let descriptor: FileDescriptor
        do {
            descriptor = try FileDescriptor.open(FilePath(paths.part), .readWrite, options: [.closeOnExec])
        } catch let error as Errno where error == .noSuchFileOrDirectory {
            return nil
        } catch {
            throw .localIO("cannot open", path: paths.part, errno: (error as? Errno)?.rawValue ?? EIO)
        }
        do {
            try retryingOnInterrupt { swoop_lock_byte(descriptor.rawValue, TargetLock.finishingLock, 1) }
        } catch {
            try? descriptor.close()
            throw .localIO("cannot lock", path: paths.part, errno: error.rawValue)
        }
        // The task that held the lock before may have published the file meanwhile.
        var opened = CStat()
        guard fstat(descriptor.rawValue, &opened) == 0, let named = try? fileInfo(paths.part),
            opened.st_dev == named.st_dev, opened.st_ino == named.st_ino
        else {
            try? descriptor.close()
            return nil
        }
        return descriptor
    }

    /// Publishes the finished object: the part file (open at `descriptor`, under the finishing
    /// lock) is cut to size, recorded, made durable and renamed to the target without replacing
    /// anything (unless `overwrite`); then every share's map and the pin go. Closes `descriptor`.
    package static func publish(
        _ descriptor: FileDescriptor, paths: DownloadPaths, pin: SegmentMap, overwrite: Bool
    ) throws(DownloadError) {
        let record = CompletedObject(size: pin.objectSize, etag: pin.etag, lastModified: pin.lastModified)
        let item = Finalizer.Item(
            body: .written(descriptor, after: nil), paths: paths, size: pin.objectSize, record: record,
            overwrite: overwrite, removesMap: true)
        try Finalizer.finalize(item)
        discardShares(paths)
    }

    /// Deletes every share's map and the pin (and the working directory, if that empties it);
    /// the part file is the caller's.
    package static func discardShares(_ paths: DownloadPaths) {
        guard let count = paths.share?.count else { return }
        for index in 0..<count {
            if let map = paths.shareMap(index) { SegmentMapFile.remove(at: map) }
        }
        if let pin = paths.pin { removeFile(pin) }
        paths.removeWorkingDirectoryIfEmpty()
    }

    /// The first of `samples` (fresh bytes of the object at their ranges) that the part file open
    /// at `descriptor` does not hold, if any: a seam where two shares' bytes are of two versions.
    package static func firstDifference(
        in descriptor: FileDescriptor, samples: [(range: ByteRange, bytes: [UInt8])]
    ) -> ByteRange? {
        samples.first { descriptor.readAll($0.range) != $0.bytes }?.range
    }

    /// Checks the whole part file (open at `descriptor`, `size` bytes) against `checks`, reading
    /// it once: the digests it matches, or the first mismatch's failure.
    package static func verify(
        _ descriptor: FileDescriptor, size: Int64, checks: [DigestCheck], target: String
    ) throws(DownloadError) -> [VerifiedDigest] {
        guard !checks.isEmpty else { return [] }
        var hashers = checks.map { DigestHasher($0.expected.algorithm) }
        try read(ByteRange(0, size), of: descriptor, path: "\(target)'s part file") { piece in
            for index in hashers.indices { hashers[index].update(piece) }
        }
        var verified: [VerifiedDigest] = []
        for (check, hasher) in zip(checks, hashers) {
            let computed = hasher.finalize()
            guard computed == check.expected else {
                throw check.mismatch(
                    computed, target: target,
                    consequence: "nothing was kept at the target and every share's download was deleted")
            }
            verified.append(VerifiedDigest(source: check.source, checksum: computed))
        }
        return verified
    }

    /// The share counts an object at `paths`'s target is being fetched in: one for each pin in
    /// the working directory (normally one).
    package static func shareCounts(of target: String) -> [Int] {
        let paths = DownloadPaths(target: target)
        let prefix = String(paths.stem.split(separator: "/").last ?? "") + ".shares-"
        guard let directory = opendir(paths.workingDirectory) else { return [] }
        defer { closedir(directory) }
        var counts: [Int] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) {
                String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard name.hasPrefix(prefix), name.hasSuffix(".pin"),
                let count = Int(name.dropFirst(prefix.count).dropLast(4)), count >= 1
            else { continue }
            counts.append(count)
        }
        return counts.sorted()
    }

    /// Whether a task holds share `index`'s lock now (its download is running). Takes nothing: a
    /// lock obtained for the test goes at once.
    package static func isInUse(_ paths: DownloadPaths, index: Int) -> Bool {
        let raw = open(paths.part, O_RDWR | O_CLOEXEC)
        guard raw >= 0 else { return false }
        defer { _ = close(raw) }
        return swoop_lock_byte(raw, TargetLock.shareLock(index), 0) != 0 && (errno == EAGAIN || errno == EACCES)
    }

    // MARK: CRCs by share

    /// Records in this share's map the CRC of each of its stripes, read back from the part file
    /// (this task's own bytes, from its page cache), so that the task finishing the object combines
    /// them (``combinedCRC(of:pin:algorithm:)``) instead of reading the whole object itself. Nothing
    /// to do if the map has them already; `false` when the map is not this share's complete one.
    package static func recordCRCs(
        _ paths: DownloadPaths, pin: SegmentMap, algorithm: Checksum.Algorithm
    ) throws(DownloadError) -> Bool {
        guard let share = paths.share, let crc = algorithm.crc,
            case .success(var map) = SegmentMapFile.read(at: paths.map),
            map.identity.compare(pin.identity) == .same, state(of: map, share: share).isComplete
        else { return false }
        if map.crcRuns?.algorithm == algorithm { return true }
        let descriptor: FileDescriptor
        do { descriptor = try FileDescriptor.open(FilePath(paths.part), .readOnly, options: [.closeOnExec]) } catch {
            throw .localIO("cannot open", path: paths.part, errno: (error as? Errno)?.rawValue ?? EIO)
        }
        defer { try? descriptor.close() }
        var runs = CRCRuns(algorithm: algorithm)
        for stripe in share.ranges(of: pin.layout) {
            var value: UInt64 = 0
            try read(stripe, of: descriptor, path: paths.part) { value = crc.update(value, $0) }
            runs.insert(stripe, crc: value)
        }
        map.crcRuns = runs
        try SegmentMapFile.write(map, to: paths.map)
        return true
    }

    /// The object's `algorithm` CRC combined from every share's map, when each recorded the CRCs
    /// of all its stripes (``recordCRCs(_:pin:algorithm:)``); `nil` otherwise.
    package static func combinedCRC(
        of paths: DownloadPaths, pin: SegmentMap, algorithm: Checksum.Algorithm
    ) -> UInt64? {
        guard let count = paths.share?.count, algorithm.isCRC else { return nil }
        var whole = CRCRuns(algorithm: algorithm)
        for index in 0..<count {
            guard let share = ObjectShare(index: index, count: count), let path = paths.shareMap(index),
                case .success(let map) = SegmentMapFile.read(at: path), let runs = map.crcRuns,
                runs.algorithm == algorithm, map.identity.compare(pin.identity) == .same,
                runs.runs.map(\.range) == share.ranges(of: pin.layout).coalesced
            else { return nil }
            for run in runs.runs { whole.insert(run.range, crc: run.crc) }
        }
        return whole.whole(size: pin.objectSize)
    }

    /// Reads `range` of the file open at `descriptor` (named `path` in errors) in pieces of 1 MiB.
    private static func read(
        _ range: ByteRange, of descriptor: FileDescriptor, path: String, _ body: (UnsafeRawBufferPointer) -> Void
    ) throws(DownloadError) {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 64)
        defer { buffer.deallocate() }
        switch descriptor.readPieces(range, into: buffer, body) {
        case .done, .stopped:
            return
        case .failed(let error):
            throw .localIO("cannot read", path: path, errno: error.rawValue)
        case .endsAt(let offset):
            throw DownloadError(.localIO, "cannot read \(path): it ends at byte \(offset), before \(range.upperBound)")
        }
    }
}
