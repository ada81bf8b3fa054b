import SwoopStore

/// What is on disk for a download target: complete, partial (and how far), or nothing usable.
public struct DownloadStatus: Sendable, Equatable {
    public enum State: Sendable, Equatable {
        /// The target file exists and was completed by Swoop (or at least exists).
        case complete
        /// A partial download with a valid segment map that can resume.
        case partial
        /// Nothing for this target.
        case absent
        /// Partial state that will not be trusted; the reason says why. The next run starts over.
        case untrusted(String)
    }

    public var path: String
    public var state: State
    /// The source URL without credentials or query, if known.
    public var url: String?
    public var size: Int64?
    public var etag: String?
    public var lastModified: String?
    /// Bytes present (durably, for a partial download).
    public var bytesDone: Int64
    public var chunkSize: Int64?
    public var chunkCount: Int
    /// Runs of complete chunks, by chunk index.
    public var completedChunks: [Range<Int>]
    /// Another download (this process or another) is writing this target right now: it holds the
    /// target's lock, and a download started now stops with ``DownloadError/Kind/targetInUse``.
    public var isInUse = false

    /// One share of an object fetched in shares by several tasks (``Downloader/download(_:share:to:progress:)``).
    public struct Share: Sendable, Equatable {
        public var share: ObjectShare
        /// This share's bytes held (durably), and all its bytes.
        public var bytesDone: Int64
        public var bytes: Int64
        /// Its task is running now.
        public var isInUse: Bool
        /// Why its map cannot be used (another version, unreadable), if it cannot.
        public var problem: String?

        public var isComplete: Bool { problem == nil && bytesDone == bytes }
    }

    /// The shares of an object being fetched in shares, when it is (the object's size, validators
    /// and URL are then those its shares agreed on, and ``bytesDone`` is theirs together).
    public var shares: [Share] = []

    /// Whether running the same download again continues from here.
    public var canResume: Bool { state == .partial }

    public var fractionCompleted: Double? {
        guard let size else { return nil }
        return size == 0 ? 1 : Double(bytesDone) / Double(size)
    }
}

extension Downloader {
    /// Reads the partial or completed download at `path` (its `.part`, `.swoop` and the file
    /// itself) the way the next download to `path` reads it, so ``DownloadStatus/canResume``
    /// says whether that download resumes.
    ///
    /// - Parameters:
    ///   - path: The target file.
    ///   - url: The URL the next download fetches; by default the one the segment map records.
    ///     A map for another URL resumes only if it has a strong ETag (which the server must
    ///     then confirm).
    /// Where a download to `path` keeps its partial state: the part file and the segment map, in
    /// the hidden directory `.swoop` beside `path`, named by a hash of `path`'s file name (so no
    /// other target's name, `path.part` included, can be one of them).
    public static func workingFiles(of path: String) -> (part: String, map: String) {
        let paths = DownloadPaths(target: path)
        return (paths.part, paths.map)
    }

    public static func status(of path: String, url: String? = nil) -> DownloadStatus {
        let paths = DownloadPaths(target: path)
        let redacted = url.map { (try? RemoteURL($0))?.redacted ?? RemoteURL.strippingQuery($0) }
        var status = DownloadStatus(path: path, state: .absent, bytesDone: 0, chunkCount: 0, completedChunks: [])
        let state = PartialState.inspect(paths, url: redacted)
        status.isInUse = state.isPartial && TargetLock.isHeld(paths.part)
        if !state.isComplete, let count = SharedObject.shareCounts(of: path).first {
            status.describeShares(count)
            return status
        }
        switch state {
        case .absent:
            break
        case .complete(let size, let record):
            status.state = .complete
            status.bytesDone = size
            status.size = size
            status.url = record?.url
            status.etag = record?.etag
            status.lastModified = record?.lastModified
        case .directory:
            status.state = .untrusted("\(path) is a directory; a download cannot be written there")
        case .resumable(let map):
            status.describe(map)
            status.state = .partial
        case .stale(let reason, let map):
            if let map { status.describe(map) }
            status.state = .untrusted(reason)
        case .orphanedPart(let reason):
            status.state = .untrusted(reason)
        case .unreadable(let error):
            status.state = .untrusted(error.message)
        }
        return status
    }

    fileprivate static func complement(_ missing: [Range<Int>], count: Int) -> [Range<Int>] {
        var runs: [Range<Int>] = []
        var cursor = 0
        for run in missing {
            if run.lowerBound > cursor { runs.append(cursor..<run.lowerBound) }
            cursor = run.upperBound
        }
        if cursor < count { runs.append(cursor..<count) }
        return runs
    }
}

extension DownloadStatus {
    /// Fills in what an object fetched in `count` shares holds: its pin and every share's map (the
    /// first pin's, if tasks of two share counts left theirs).
    fileprivate mutating func describeShares(_ count: Int) {
        guard let share = ObjectShare(index: 0, count: count) else { return }
        let paths = DownloadPaths(target: path, share: share)
        guard let pin = try? SharedObject.readPin(paths) else {
            state = .untrusted("\(paths.pin ?? path), the version its shares agreed on, cannot be read")
            return
        }
        describe(pin)
        // Each share's map is its own: what the object holds is said share by share.
        (bytesDone, chunkCount, completedChunks) = (0, 0, [])
        state = .partial
        for (index, found) in SharedObject.shares(of: paths, pin: pin).enumerated() {
            guard let share = ObjectShare(index: index, count: count) else { continue }
            let total = share.ranges(of: pin.layout).totalBytes
            var entry = Share(
                share: share, bytesDone: 0, bytes: total, isInUse: SharedObject.isInUse(paths, index: index))
            switch found {
            case .notStarted: break
            case .partial(let done, _): entry.bytesDone = done
            case .complete: entry.bytesDone = total
            case .unusable(let why): entry.problem = why
            }
            if entry.isInUse { isInUse = true }
            bytesDone += entry.bytesDone
            shares.append(entry)
        }
    }

    /// Fills in what a segment map says.
    fileprivate mutating func describe(_ map: SegmentMap) {
        url = map.url
        size = map.objectSize
        etag = map.etag
        lastModified = map.lastModified
        chunkSize = map.chunkSize
        chunkCount = map.chunks.count
        bytesDone = map.completedBytes
        completedChunks = Downloader.complement(map.chunks.missingRuns, count: map.chunks.count)
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
