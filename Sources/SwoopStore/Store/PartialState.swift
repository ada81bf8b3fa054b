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
