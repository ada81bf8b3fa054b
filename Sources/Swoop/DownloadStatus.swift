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
