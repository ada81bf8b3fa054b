import FoundationEssentials
import SystemPackage

// The library in a Swift developer's usual currency: `URL` for remote objects and local files,
// swift-system's `FilePath` for local files, and `localizedDescription` that says what happened.

extension DownloadError: LocalizedError {
    /// ``message``: what happened and what would fix it, so `localizedDescription` reads well.
    public var errorDescription: String? { message }
}

extension DownloadRequest {
    /// A request for the object at `url` (http, https, or `s3://BUCKET/KEY`).
    public init(
        url: URL, headers: [(name: String, value: String)] = [], expectedChecksum: Checksum? = nil,
        expectedSize: Int64? = nil
    ) {
        self.init(
            url: url.absoluteString, headers: headers, expectedChecksum: expectedChecksum, expectedSize: expectedSize)
    }

    /// A request for one file from several sources: the first URL and its ``mirrors``.
    public init(
        urls: [URL], headers: [(name: String, value: String)] = [], expectedChecksum: Checksum? = nil,
        expectedSize: Int64? = nil
    ) {
        self.init(
            urls: urls.map(\.absoluteString), headers: headers, expectedChecksum: expectedChecksum,
            expectedSize: expectedSize)
    }
}

extension Downloader {
    /// Downloads `request` to the file at `path`, as the `String` form does.
    public func download(
        _ request: DownloadRequest, to path: FilePath, progress: (@Sendable (DownloadProgress) -> Void)? = nil
    ) async throws(DownloadError) -> DownloadResult {
        try await download(request, to: path.string, progress: progress)
    }

    /// Downloads `request` to the file at `fileURL`, a `file:` URL.
    public func download(
        _ request: DownloadRequest, to fileURL: URL, progress: (@Sendable (DownloadProgress) -> Void)? = nil
    ) async throws(DownloadError) -> DownloadResult {
        try await download(request, to: Self.path(of: fileURL), progress: progress)
    }

    /// Starts downloading `request` to the file at `path`, as the `String` form does.
    public func start(
        _ request: DownloadRequest, to path: FilePath, progress: (@Sendable (DownloadProgress) -> Void)? = nil
    ) throws(DownloadError) -> DownloadTask {
        try start(request, to: path.string, progress: progress)
    }

    /// Starts downloading `request` to the file at `fileURL`, a `file:` URL.
    public func start(
        _ request: DownloadRequest, to fileURL: URL, progress: (@Sendable (DownloadProgress) -> Void)? = nil
    ) throws(DownloadError) -> DownloadTask {
        try start(request, to: Self.path(of: fileURL), progress: progress)
    }

    /// The path of a `file:` URL; any other URL cannot be a download's target.
    static func path(of fileURL: URL) throws(DownloadError) -> String {
        guard fileURL.isFileURL else {
            throw .invalidRequest(
                "the target '\(fileURL.absoluteString)' is not a file URL; pass a file: URL, a FilePath or a path")
        }
        return fileURL.path(percentEncoded: false)
    }
}

extension BulkItem {
    /// `request` downloaded to the file at `path`.
    public init(_ request: DownloadRequest, to path: FilePath) {
        self.init(request, to: path.string)
    }
}

extension Downloader {
    /// What is known of `path`'s download, as the `String` form says.
    public static func status(of path: FilePath, url: String? = nil) -> DownloadStatus {
        status(of: path.string, url: url)
    }
}
