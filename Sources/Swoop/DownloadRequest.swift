import SwoopCurl

/// What to download: a URL (or several sources of the same file) and the headers to send.
///
/// ```swift
/// var request = DownloadRequest(url: "https://example.com/big.iso")
/// request.headers.append(("Authorization", "Bearer ..."))
///
/// // One file from several servers at once:
/// let mirrored = DownloadRequest(urls: ["https://eu.example.com/big.iso", "https://us.example.com/big.iso"])
/// ```
public struct DownloadRequest: Sendable {
    /// An absolute `http` or `https` URL: the first source, which names the file and whose
    /// bytes every other source is checked against.
    public var url: String
    /// More sources of the same file (mirrors). Each must report the same size, gets its own
    /// precondition from its own `ETag` or `Last-Modified`, and contributes only after one range
    /// it serves matched the same range from ``url``; one that disagrees is never used.
    public var mirrors: [String] = []
    /// Extra request headers. They go to the URL's host only: after a redirect to another host,
    /// only ``DownloadRequest/headersSafeAcrossHosts`` are kept.
    public var headers: [(name: String, value: String)]
    /// When set, the finished file must have this digest; on a mismatch nothing is kept.
    public var expectedChecksum: Checksum?
    /// When set, the object must be this many bytes: a server that reports another size fails the
    /// download with ``DownloadError/Kind/sizeMismatch`` at its first response, before anything
    /// is written (a file already complete at the target is left as it is).
    public var expectedSize: Int64?
    /// The object's ETag as a listing gave it (an `s3://` prefix's ListObjectsV2), quoted or not.
    /// With ``expectedSize``, a file an earlier run completed whose record has this size and
    /// ETag is complete without a request (unless
    /// ``Downloader/Configuration/Files/rechecksCompleteFiles``); any other download ignores it.
    public var expectedETag: String?
    /// Gives a fresh URL for ``url`` when the one in use stops working: a presigned URL that
    /// expired. Called with the URL in use when a request to it is refused with `401` or `403`
    /// (or another `4xx` while the expiry in its query is past), it returns the URL to use
    /// instead. One call serves every connection: requests that fail meanwhile wait for it.
    /// The new URL must lead to the same object (the same size, and the same strong `ETag` or
    /// the same bytes in one chunk compared with those already written), or the download fails
    /// with ``DownloadError/Kind/urlRefreshFailed``, as it does after
    /// ``Downloader/Configuration/RetryPolicy/maxURLRefreshes`` refreshes in a row without a
    /// byte in between, keeping the partial download. The segment map records the URL without
    /// its query, so a signature is never written. `nil` (the default): no refresh.
    public var urlProvider: (@Sendable (_ current: String) async throws -> String)?
    /// ``url`` as already parsed by whoever named its file from it (a list), so that the
    /// download does not parse it again; used only while ``url`` is still the text parsed (byte
    /// for byte).
    package var parsed: (text: String, url: RemoteURL)?

    public init(
        url: String, headers: [(name: String, value: String)] = [], expectedChecksum: Checksum? = nil,
        expectedSize: Int64? = nil
    ) {
        self.url = url
        self.headers = headers
        self.expectedChecksum = expectedChecksum
        self.expectedSize = expectedSize
    }

    /// A request for one file from several sources: the first URL and its ``mirrors``.
    public init(
        urls: [String], headers: [(name: String, value: String)] = [], expectedChecksum: Checksum? = nil,
        expectedSize: Int64? = nil
    ) {
        self.init(
            url: urls.first ?? "", headers: headers, expectedChecksum: expectedChecksum, expectedSize: expectedSize)
        self.mirrors = Array(urls.dropFirst())
    }

    /// Every source: ``url``, then the ``mirrors``.
    public var urls: [String] { [url] + mirrors }

    /// Header names that carry no credentials and so are still sent after a redirect to another host.
    public static let headersSafeAcrossHosts: Set<String> = RequestHeaders.safeAcrossHosts
}
