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

    /// Whether running the same download again continues from here.
    public var canResume: Bool { state == .partial }

    public var fractionCompleted: Double? {
        guard let size else { return nil }
        return size == 0 ? 1 : Double(bytesDone) / Double(size)
    }
}

extension Downloader {
    /// Reads the partial or completed download at `path` (its `.part`, `.swoop` and the file itself).
    public static func status(of path: String) -> DownloadStatus {
        let paths = DownloadPaths(target: path)
        var status = DownloadStatus(path: path, state: .absent, bytesDone: 0, chunkCount: 0, completedChunks: [])
        let partLength = fileLength(paths.part)
        switch SegmentMapFile.read(at: paths.map) {
        case .success(let map):
            status.url = map.url
            status.size = map.objectSize
            status.etag = map.etag
            status.lastModified = map.lastModified
            status.chunkSize = map.chunkSize
            status.chunkCount = map.chunks.count
            status.bytesDone = map.completedBytes
            status.completedChunks = complement(map.chunks.missingRuns, count: map.chunks.count)
            if let partLength, partLength >= map.objectSize {
                status.state = .partial
            } else if partLength == nil {
                status.state = .untrusted("\(paths.part) is missing")
            } else {
                status.state = .untrusted("\(paths.part) is shorter than the segment map says")
            }
        case .failure(.untrusted(let reason)):
            status.state = .untrusted("\(paths.map): \(reason)")
        case .failure(.io(let error)):
            status.state = .untrusted(error.message)
        case .failure(.missing):
            if let length = fileLength(path) {
                status.state = .complete
                status.bytesDone = length
                status.size = length
                if let record = CompletedObject.read(from: path) {
                    status.url = record.url
                    status.etag = record.etag
                    status.lastModified = record.lastModified
                }
            } else if partLength != nil {
                status.state = .untrusted("\(paths.part) has no segment map")
            }
        }
        return status
    }

    private static func fileLength(_ path: String) -> Int64? {
        var info = CStat()
        guard stat(path, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return nil }
        return Int64(info.st_size)
    }

    private static func complement(_ missing: [Range<Int>], count: Int) -> [Range<Int>] {
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

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
