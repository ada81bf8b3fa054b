import Dispatch
import SwoopStore
import SwoopCurl

/// What one share of an object fetched in shares did (``Downloader/download(_:share:to:progress:)``).
public struct ShareResult: Sendable {
    /// The share this task fetched.
    public var share: ObjectShare
    /// The target path.
    public var path: String
    /// The object's size, and the bytes of this share.
    public var objectBytes: Int64
    public var shareBytes: Int64
    /// This share's run, when it fetched anything (`nil`: its share was complete already, or
    /// the object was already at the target).
    public var download: DownloadResult?
    /// Shares complete when this task last looked, its own included (``share``'s `count` once
    /// the object is finished).
    public var sharesComplete: Int
    /// This task found every share complete, checked the seams between them (and the digests), and
    /// put the object at ``path``.
    public var finishedObject = false
    /// The object was at ``path`` already, finished by another task or an earlier run.
    public var alreadyComplete = false
    /// Seams between shares whose bytes were fetched again and compared (by the task that finished).
    public var seamsChecked = 0
    /// Digests the whole object was checked against (by the task that finished).
    public var verified: [VerifiedDigest] = []
    /// Of those, the CRCs combined from the ones every share recorded for its own stripes, without
    /// reading the object again.
    public var digestsFromShares = 0
}

extension Downloader {
    /// Downloads share `share` of `request`'s object into `path`'s part file, which the other
    /// shares' tasks write too; the task that finds every share complete publishes the object.
    ///
    /// `count` tasks (a Slurm array, several machines onto one shared file system) each run this
    /// with their own `share`, without talking to each other:
    ///
    /// - The object is cut into stripes (``ObjectShare``); this task fetches its stripes into
    ///   `DIR/.swoop/H.part` at their offsets and records them in its own segment map, so that a
    ///   killed or requeued task resumes only its own missing bytes.
    /// - The first task writes down the object's size and validators (the *pin*); every task's
    ///   requests carry them as their precondition, and a task that sees another version fails
    ///   with ``DownloadError/Kind/objectChanged`` before it writes a byte (never a mixed file).
    /// - The task that completes its share and finds every other share complete (whichever it
    ///   is) fetches the bytes around each seam between shares again and compares them with the
    ///   part file, checks the digests (``DownloadRequest/expectedChecksum``, or one the server
    ///   publishes), and only then renames the file into place. Until then nothing is at `path`.
    ///   A task that finishes while others still run returns at once (``ShareResult/finishedObject``
    ///   is `false`).
    ///
    /// The server must serve byte ranges of an object whose size it says.
    public func download(
        _ request: DownloadRequest, share: ObjectShare, to path: String,
        progress: (@Sendable (DownloadProgress) -> Void)? = nil
    ) async throws(DownloadError) -> ShareResult {
        var configuration = self.configuration
        // A change cannot be followed by one task alone: the others hold the old version's bytes.
        configuration.files.onObjectChange = .fail
        let paths = DownloadPaths(target: path, share: share)
        guard !DownloadPaths.isInsideWorkingDirectory(path) else {
            throw .invalidRequest(
                "\(path) is in a directory named \(DownloadPaths.workingDirectoryName); choose another")
        }
        let overwrites = configuration.files.overwritesExistingFile
        if case .complete = PartialState.inspect(paths, url: nil, overwritesTarget: overwrites) {
            // Finished already: confirmed as any finished file is (its record, 1 KiB of its middle).
            let done = try await start(
                request, to: path, configuration: configuration, sink: .partFile, share: share,
                progress: progress
            ).result()
            return ShareResult(
                share: share, path: path, objectBytes: done.bytes,
                shareBytes: share.ranges(of: ChunkLayout(objectSize: done.bytes)).totalBytes,
                download: done.alreadyComplete ? nil : done, sharesComplete: share.count,
                alreadyComplete: done.alreadyComplete)
        }
        let pin = try await agreedPin(request, paths: paths, configuration: configuration)
        var result = ShareResult(
            share: share, path: path, objectBytes: pin.objectSize, shareBytes: share.ranges(of: pin.layout).totalBytes,
            download: nil, sharesComplete: 0)
        if try !Self.shareIsComplete(paths, pin: pin) {
            do throws(DownloadError) {
                result.download = try await start(
                    request, to: path, configuration: configuration, sink: .partFile, share: share, progress: progress
                ).result()
            } catch  where error.kind == .objectChanged && error.remedy == nil {
                throw DownloadError(.objectChanged, "share \(share): \(error.reason)", remedy: .restartShares)
            }
        }
        if let algorithm = Self.shareCRC(request, pin: pin) {
            // This share's stripes' CRCs, read back from this task's own writes, for the task that
            // finishes the object to combine.
            _ = try await Self.offPool { () throws(DownloadError) in
                try SharedObject.recordCRCs(paths, pin: pin, algorithm: algorithm)
            }.get()
        }
        try await finishIfLast(request, paths: paths, pin: pin, configuration: configuration, into: &result)
        return result
    }

    /// The CRC every share records for its stripes: the expected checksum's algorithm if it is a CRC,
    /// else the one the server publishes (as the pin says), if that is a CRC.
    private static func shareCRC(_ request: DownloadRequest, pin: SegmentMap) -> Checksum.Algorithm? {
        if let expected = request.expectedChecksum?.algorithm, expected.isCRC { return expected }
        return pin.crcRuns?.algorithm
    }

    /// The pin every share agrees on: the one on disk, or the object as a head-only probe shows it,
    /// written for the other tasks (unless one of them wrote one first). With
    /// ``Configuration/Files/overwritesExistingFile``, a pin of another version than the server's
    /// is discarded with every share's map, and the shares start over.
    private func agreedPin(
        _ request: DownloadRequest, paths: DownloadPaths, configuration: Configuration
    ) async throws(DownloadError) -> SegmentMap {
        let overwrites = configuration.files.overwritesExistingFile
        if let count = SharedObject.shareCounts(of: paths.target).first(where: { $0 != paths.share?.count }) {
            // Two arrays in one part file could hold two versions: one at a time.
            guard overwrites else {
                throw DownloadError(
                    .targetInUse,
                    "\(paths.target) is being fetched in \(count) shares: fetch one of those, or discard them",
                    remedy: .restartShares)
            }
            if let other = ObjectShare(index: 0, count: count) {
                SharedObject.discardShares(DownloadPaths(target: paths.target, share: other))
            }
        }
        let held = try SharedObject.readPin(paths)
        if let held, !overwrites { return held }
        let found = try await lookUpRefreshing(request, configuration: configuration)
        if found.object?.size == 0 {
            throw DownloadError(
                .invalidRequest, "\(request.url) is empty: there is nothing to fetch in shares; fetch it in one")
        }
        guard let object = found.object, let size = object.size, object.acceptsRanges else {
            throw DownloadError(
                .invalidResponse,
                "\(request.url) cannot be fetched in shares: the server must serve byte ranges of an object whose "
                    + "size it says")
        }
        var pin = SharedObject.pin(
            size: size, etag: object.etag, lastModified: object.lastModified,
            url: (try? RemoteURL(request.url).redacted) ?? request.url)
        if configuration.verifiesPublishedDigests, let published = object.digests.preferred?.checksum.algorithm,
            published.isCRC
        {
            // The server's digest is a CRC: each share records its stripes' (none yet).
            pin.crcRuns = CRCRuns(algorithm: published)
        }
        if let held {
            guard held.identity.compare(pin.identity) != .same || held.layout != pin.layout else { return held }
            logger.notice(
                "the object changed since its shares began: discarding them", metadata: ["path": "\(paths.target)"])
            SharedObject.discardShares(paths)
        }
        return try SharedObject.pin(pin, at: paths)
    }

    /// ``lookUp(_:configuration:)``, asking the request's URL provider for a fresh URL once when the
    /// URL is refused (a presigned URL that expired: a task requeued hours later).
    func lookUpRefreshing(
        _ request: DownloadRequest, configuration: Configuration
    ) async throws(DownloadError) -> ObjectLookup.Found {
        do {
            return try await lookUp(request, configuration: configuration)
        } catch  where error.kind == .httpStatus {
            guard let url = try await request.freshURL(replacing: request.url, for: request.url) else { throw error }
            var fresh = request
            fresh.url = url
            return try await lookUp(fresh, configuration: configuration)
        }
    }

    /// Whether this share's map says all its bytes are here (an empty share gets its map now).
    private static func shareIsComplete(_ paths: DownloadPaths, pin: SegmentMap) throws(DownloadError) -> Bool {
        guard let share = paths.share else { return false }
        switch SegmentMapFile.read(at: paths.map) {
        case .success(let map):
            return map.identity.compare(pin.identity) == .same && SharedObject.state(of: map, share: share).isComplete
        case .failure(.missing) where share.ranges(of: pin.layout).isEmpty:
            try SegmentMapFile.write(SharedObject.freshMap(pin, share: share), to: paths.map)
            return true
        case .failure:
            return false
        }
    }
}

extension DownloadRequest {
    /// A fresh URL in place of `current` from ``urlProvider`` (`nil` without one), for a share's
    /// lookup or seams' check, outside a transfer's ``URLRefresher``; `purpose` names what it is for
    /// in the error when the provider fails.
    func freshURL(replacing current: String, for purpose: String) async throws(DownloadError) -> String? {
        guard let urlProvider else { return nil }
        do {
            return try await urlProvider(current)
        } catch {
            throw DownloadError(
                .urlRefreshFailed, "cannot get a fresh URL for \(purpose): \(error)", remedy: .checkURLProvider)
        }
    }
}
