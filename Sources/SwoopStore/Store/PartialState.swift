import Crypto
import Logging
import SwoopCore
import SystemPackage
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// What is on disk for a download target before a run, read one way for the run itself and for
/// ``Downloader/status(of:url:)``, so that "can resume" there means the next run resumes.
package enum PartialState {
    /// Nothing usable and nothing to clear: the download starts fresh.
    case absent
    /// A file is at the target path. `record` is what Swoop stored about it when it completed it,
    /// when that matches the file (`nil`: not known to be Swoop's, or changed since).
    case complete(size: Int64, record: CompletedObject?)
    /// The target path is a directory.
    case directory
    /// A partial download the next run continues from its segment map.
    case resumable(SegmentMap)
    /// Partial state the next run discards before starting over: why, and the map if it could be read.
    case stale(String, SegmentMap?)
    /// A part file without a segment map: what a small file or a stream (which keep no map)
    /// leaves when interrupted. Nothing in it can be trusted; the next run starts over.
    case orphanedPart(String)
    /// The segment map could not be read (an I/O error, not a bad map).
    case unreadable(DownloadError)

    /// A file is at the target.
    package var isComplete: Bool {
        if case .complete = self { true } else { false }
    }

    /// Whether this is a partial download (another run's, or a running one's): reading it for
    /// real, or changing it, needs the target's lock.
    package var isPartial: Bool {
        switch self {
        case .resumable, .stale, .orphanedPart, .unreadable: true
        case .absent, .complete, .directory: false
        }
    }

    /// Reads the state of `paths`.
    ///
    /// - Parameters:
    ///   - url: The URL the next run fetches, redacted; `nil` assumes the one the map records.
    ///     A map for another URL is trusted only with a strong ETag, which the probe then checks.
    ///   - overwritesTarget: Whether an existing target is to be replaced; then it is ignored.
    package static func inspect(_ paths: DownloadPaths, url: String?, overwritesTarget: Bool = false) -> PartialState {
        if let info = try? fileInfo(paths.target) {
            if info.st_mode & S_IFMT == S_IFDIR { return .directory }
            if !overwritesTarget {
                let size = Int64(info.st_size)
                let record = CompletedObject.read(from: paths.target).flatMap { $0.size == size ? $0 : nil }
                return .complete(size: size, record: record)
            }
        }
        // No working directory, so neither a part file nor a map: one lookup instead of two for
        // every file of a list into a directory where nothing is in progress (`.swoop` goes with
        // its last working file).
        do throws(Errno) {
            _ = try fileInfo(paths.workingDirectory)
        } catch  where error == .noSuchFileOrDirectory {
            return .absent
        } catch {}
        let partLength = (try? fileInfo(paths.part)).map { Int64($0.st_size) }
        switch SegmentMapFile.read(at: paths.map) {
        case .failure(.missing):
            // A share's part file holds the other shares' bytes: without its map, nothing of its own.
            guard let partLength, partLength > 0, paths.share == nil else { return .absent }
            if let count = SharedObject.shareCounts(of: paths.target).first {
                // Another run fetches the object in shares into this part file: not this run's to clear.
                return .unreadable(
                    DownloadError(
                        .targetInUse,
                        "\(paths.target) is being fetched in \(count) shares, into \(paths.part): finish it with each "
                            + "share's download, or discard them", remedy: .restartShares))
            }
            return .orphanedPart("\(paths.part) has no segment map (\(paths.map))")
        case .failure(.io(let error)):
            return .unreadable(error)
        case .failure(.untrusted(let reason)):
            return .stale("\(paths.map) cannot be used: \(reason)", nil)
        case .success(let map):
            guard let partLength else {
                return .stale("\(paths.part) is missing although \(paths.map) describes it", map)
            }
            if partLength < map.objectSize {
                return .stale(
                    "\(paths.part) is shorter (\(Wording.bytes(partLength))) than the segment map says "
                        + "(\(map.objectSize))",
                    map)
            }
            if let url, !map.url.hasSameBytes(as: url), !map.identity.provesIdentityAcrossURLs {
                return .stale(
                    "\(paths.map) is for \(map.url) and has no strong ETag to prove it is the same object", map)
            }
            return .resumable(map)
        }
    }
}

/// The paths one download uses: the target, and its working files — the part file and the
/// segment map — in the hidden working directory beside it, `DIR/.swoop/`, named by a hash of
/// the target's name: `DIR/.swoop/<32 hex>.part` and `.map`.
///
/// No name a caller chooses can land on another target's working file: the working files are
/// not named after their target (`big.part` is an object's name like any other), and a target
/// inside a working directory is refused (``isInsideWorkingDirectory``). Earlier releases kept
/// `TARGET.part` and `TARGET.swoop` beside the target; those are neither read nor deleted (they
/// may be another object's files).
package struct DownloadPaths: Sendable, Equatable {
    /// The names, in one heap box (``CopyOnWrite``): every stage of a download and its publication
    /// keeps its paths, and copying five names retained one by one was a measurable share of a
    /// small file's work.
    private struct Names: Sendable, Equatable {
        let target: String
        let directory: String
        let part: String
        let map: String
        let share: ObjectShare?
        let stem: String

        init(target: String, share: ObjectShare?) {
            self.target = target
            self.share = share
            let (parent, name) = DownloadPaths.split(target)
            directory = parent.isEmpty ? "." : parent
            let stem =
                (directory == "/" ? "" : directory) + "/" + DownloadPaths.workingDirectoryName + "/"
                + DownloadPaths.workingName(for: name)
            self.stem = stem
            part = stem + ".part"
            if let share {
                map = DownloadPaths.shareMap(stem, index: share.index, count: share.count)
            } else {
                map = stem + ".map"
            }
        }
    }

    private let names: CopyOnWrite<Names>

    package var target: String { names.value.target }
    /// The directory the target goes into.
    package var directory: String { names.value.directory }
    package var part: String { names.value.part }
    /// This download's segment map: the object's (`H.map`), or for one share of it that share's
    /// (`H.share-K-of-N.map`, beside the part file all shares write).
    package var map: String { names.value.map }
    /// The share of the object this download fetches (``ObjectShare``), if it fetches one.
    package var share: ObjectShare? { names.value.share }
    /// `DIR/.swoop/H`: every working file's name less its extension.
    package var stem: String { names.value.stem }

    /// The name of the working directory in each directory that receives downloads.
    package static let workingDirectoryName = WorkingDirectory.name

    package init(target: String, share: ObjectShare? = nil) {
        names = CopyOnWrite(Names(target: target, share: share))
    }

    /// Share `index`'s segment map, when the object is fetched in this download's shares.
    package func shareMap(_ index: Int) -> String? {
        share.map { Self.shareMap(stem, index: index, count: $0.count) }
    }

    /// What every share of the object agrees on before its first byte (`H.shares-N.pin`): the
    /// version, size and chunk size, written once by the first task (``SharedObject``).
    package var pin: String? {
        share.map { stem + ".shares-\($0.count).pin" }
    }

    private static func shareMap(_ stem: String, index: Int, count: Int) -> String {
        stem + ".share-\(index)-of-\(count).map"
    }

    /// `DIR/.swoop`, where the working files of every target in `DIR` live.
    package var workingDirectory: String {
        (directory == "/" ? "" : directory) + "/" + Self.workingDirectoryName
    }

    /// The working files' common name for a target named `name`: the first 16 bytes of the
    /// SHA-256 of its bytes, in hex (two names in one directory share it only by a collision
    /// of 128 bits).
    private static func workingName(for name: String) -> String {
        var name = name
        let digest = name.withUTF8 { SHA256.hash(data: UnsafeRawBufferPointer($0)) }
        return digest.withUnsafeBytes { bytes in
            String(unsafeUninitializedCapacity: 32) { out in
                for index in 0..<16 {
                    out[2 * index] = hexDigit(bytes[index] >> 4)
                    out[2 * index + 1] = hexDigit(bytes[index] & 0xF)
                }
                return 32
            }
        }
    }

    private static func hexDigit(_ value: UInt8) -> UInt8 {
        value < 10 ? UInt8(ascii: "0") + value : UInt8(ascii: "a") + value - 10
    }

    /// `path`'s directory (`""`: none) and last component, as `FilePath` reads them. A path
    /// without `//` or a trailing `/` (every list's target) is split at its last `/` without
    /// `FilePath`'s parse, which cost a list of small files 5k instructions a file; its bytes are
    /// read in place (a pairwise walk of its `UTF8View` cost 3k more).
    private static func split(_ path: String) -> (directory: String, name: String) {
        let utf8 = path.utf8
        let slash = UInt8(ascii: "/")
        func isPlain(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
            guard let last = bytes.last, last != slash else { return false }
            var previous: UInt8 = 0
            for byte in bytes {
                if byte == slash && previous == slash { return false }
                previous = byte
            }
            return true
        }
        // A string without contiguous bytes (a bridged one) takes the parse.
        guard utf8.withContiguousStorageIfAvailable(isPlain) ?? false else {
            let parsed = FilePath(path)
            return (parsed.removingLastComponent().string, parsed.lastComponent?.string ?? path)
        }
        guard let last = utf8.lastIndex(of: slash) else { return ("", path) }
        let directory = last == utf8.startIndex ? "/" : String(path[..<last])
        return (directory, String(path[utf8.index(after: last)...]))
    }

    /// Whether `path` names a working directory or something inside one (a component `.swoop`):
    /// such a target could collide with another target's working files, so it is refused.
    package static func isInsideWorkingDirectory(_ path: String) -> Bool {
        var component = workingDirectoryName.utf8.makeIterator()
        var matching = true
        for byte in path.utf8 {
            if byte == UInt8(ascii: "/") {
                if matching && component.next() == nil { return true }
                component = workingDirectoryName.utf8.makeIterator()
                matching = true
            } else if matching {
                matching = component.next() == byte
            }
        }
        return matching && component.next() == nil
    }

    /// Removes the working directory if it is empty (the last download in it has ended); another
    /// download that starts meanwhile creates it again.
    package func removeWorkingDirectoryIfEmpty() {
        _ = rmdir(workingDirectory)
    }

    /// Checks, before any network traffic, that the target's directory exists (creating it and
    /// its missing parents when `creatingMissing`): the file could not be written otherwise. A
    /// directory seen in the last second is not checked again (a list of thousands of files into
    /// one directory asks once); if it vanished since, creating the part file fails.
    package func prepareDirectory(creatingMissing: Bool) throws(DownloadError) {
        let now = ContinuousClock.now
        if DownloadPaths.recentDirectory.withLock({
            $0.map { $0.path.hasSameBytes(as: directory) && now - $0.at < .seconds(1) } ?? false
        }) {
            return
        }
        do {
            let info = try fileInfo(directory)
            guard info.st_mode & S_IFMT == S_IFDIR else {
                throw DownloadError(
                    .localIO, "cannot write into \(directory): it is not a directory", remedy: .chooseWritableLocation,
                    errno: ENOTDIR)
            }
        } catch let error as Errno where error == .noSuchFileOrDirectory || error == .notDirectory {
            // Missing, or a file where a directory should be (which creating names).
            if creatingMissing {
                try createDirectories(directory)
            } else {
                throw DownloadError(
                    .localIO, "cannot write into \(directory): the directory does not exist", remedy: .createDirectory,
                    errno: error.rawValue)
            }
        } catch let error as Errno {
            throw .localIO("cannot write into", path: directory, errno: error.rawValue)
        } catch let error as DownloadError {
            throw error
        } catch {
            throw DownloadError(.localIO, "cannot write into \(directory): \(error)")
        }
        DownloadPaths.recentDirectory.withLock { $0 = (directory, now) }
    }

    private static let recentDirectory = Mutex<(path: String, at: ContinuousClock.Instant)?>(nil)

    /// Deletes the part file and the segment map (and the working directory, if that empties it).
    /// A share's part file holds the other shares' bytes too: only its map goes.
    package func discardPartialState() {
        if share == nil { removeFile(part) }
        SegmentMapFile.remove(at: map)
        removeWorkingDirectoryIfEmpty()
    }
}

import SystemPackage
import Synchronization

extension PartialState {
    /// The first look at the disk for a download: its directory (created if missing and allowed),
    /// then what ``inspect(_:url:overwritesTarget:)`` finds. Any thread: it changes nothing of the
    /// target's (a partial state is read again under the target's lock before it is trusted or
    /// changed).
    package static func read(_ paths: DownloadPaths, url: RemoteURL, rules: Rules) throws(DownloadError) -> PartialState
    {
        try paths.prepareDirectory(creatingMissing: rules.createsMissingDirectories)
        return inspect(paths, url: url.redacted, overwritesTarget: rules.overwritesTarget)
    }

    /// What a download may do with what it finds (``Downloader/Configuration``'s settings).
    package struct Rules: Sendable {
        /// Create the target's missing directories.
        package var createsMissingDirectories: Bool
        /// Replace a file at the target that is not this download's.
        package var overwritesTarget: Bool
        /// Continue a partial download of the same object.
        package var resumes: Bool

        package init(createsMissingDirectories: Bool, overwritesTarget: Bool, resumes: Bool) {
            self.createsMissingDirectories = createsMissingDirectories
            self.overwritesTarget = overwritesTarget
            self.resumes = resumes
        }
    }

    /// What the disk holds for a download to `paths` from `url`, as the basis of its probe: a
    /// finished file to confirm, a partial download to continue, or nothing (stale or orphaned
    /// state is cleared, under the target's lock). An existing file that is not this download's
    /// is an error unless overwriting is allowed; a missing directory is created if allowed.
    ///
    /// `reading` is ``read(_:url:rules:)`` done before, off the transfer thread (for a new file,
    /// the whole of this work is those few lookups); `nil` reads now.
    package static func basis(
        for paths: DownloadPaths, url: RemoteURL, sink: BodySink, rules: Rules, logger: Logger,
        reading: Result<PartialState, DownloadError>? = nil
    ) throws(DownloadError) -> LocalState {
        var state = try (reading ?? Result { () throws(DownloadError) in try read(paths, url: url, rules: rules) })
            .get()
        if state.isPartial {
            // Another run's partial download: take the target before trusting or changing it,
            // then read it again (its holder may have changed or finished it meanwhile).
            try sink.claim()
            state = inspect(paths, url: url.redacted, overwritesTarget: rules.overwritesTarget)
        }
        switch state {
        case .directory:
            sink.releaseClaim()
            throw DownloadError(.localIO, "\(paths.target) is a directory", remedy: .nameAFile, errno: EISDIR)
        case .complete(_, let record?):
            sink.releaseClaim()
            return .completed(record, samples: HeldBytes.edges(of: paths.target, size: record.size))
        case .complete:
            sink.releaseClaim()
            throw DownloadError(.targetExists, "\(paths.target) already exists", remedy: .replaceTarget)
        case .unreadable(let error):
            throw error
        case .absent:
            return .fresh
        case .orphanedPart(let reason):
            // Small files and streams keep no map: an interrupted one leaves this, expectedly.
            logger.info("\(reason); starting over")
        case .stale(let reason, _) where rules.resumes:
            logger.warning("\(reason); starting over")
        case .resumable(let map) where rules.resumes:
            // Every byte here: the probe compares the server's last bytes with these.
            let samples = map.missingRanges.isEmpty ? HeldBytes.edges(of: paths.part, size: map.objectSize) : []
            return .resuming(map, samples: samples)
        case .stale, .resumable:
            logger.info("starting over (resuming is turned off): discarding \(paths.part)")
        }
        try sink.discardPartialState()
        return .fresh
    }
}

/// What the disk holds for a download when it starts
/// (``PartialState/basis(for:url:sink:rules:logger:reading:)``).
package enum LocalState {
    /// Nothing: the object is fetched from the start.
    case fresh
    /// A file Swoop completed, with its record and its first and last bytes (``HeldBytes/edges(of:size:)``).
    case completed(CompletedObject, samples: [HeldBytes])
    /// A partial download and its segment map (with its edges when it holds every byte).
    case resuming(SegmentMap, samples: [HeldBytes])

    /// What the probe needs of it, the file being at `target`.
    package func probeBasis(target: String) -> ProbeBasis {
        switch self {
        case .fresh: .fresh
        case .completed(let record, let samples):
            .completed(LocalObject(identity: record.identity, path: target, samples: samples))
        case .resuming(let map, let samples):
            .resuming(
                LocalObject(identity: map.identity, missingRanges: map.missingRanges, path: target, samples: samples))
        }
    }
}

extension HeldBytes {
    /// The bytes of the file at `path` (which holds `size` bytes) that a server's bytes are
    /// compared with to confirm the file is its object (``ProbeDecision/confirmationSamples(size:)``).
    /// None when they cannot be read (the probe then finds the file differs).
    package static func edges(of path: String, size: Int64) -> [HeldBytes] {
        guard size >= 0, let descriptor = try? FileDescriptor.open(FilePath(path), .readOnly, options: [.closeOnExec])
        else { return [] }
        defer { try? descriptor.close() }
        var samples: [HeldBytes] = []
        for range in ProbeDecision.confirmationSamples(size: size) {
            guard let bytes = descriptor.readAll(range) else { return [] }
            samples.append(HeldBytes(range: range, bytes: bytes))
        }
        return samples
    }
}
