/// What to download: a URL and the headers to send with it.
///
/// ```swift
/// var request = DownloadRequest(url: "https://example.com/big.iso")
/// request.headers.append(("Authorization", "Bearer ..."))
/// ```
public struct DownloadRequest: Sendable {
    /// An absolute `http` or `https` URL.
    public var url: String
    /// Extra request headers. They go to the URL's host only: after a redirect to another host,
    /// only ``DownloadRequest/headersSafeAcrossHosts`` are kept.
    public var headers: [(name: String, value: String)]
    /// When set, the finished file must have this digest; on a mismatch nothing is kept.
    public var expectedChecksum: Checksum?

    public init(url: String, headers: [(name: String, value: String)] = [], expectedChecksum: Checksum? = nil) {
        self.url = url
        self.headers = headers
        self.expectedChecksum = expectedChecksum
    }

    /// Header names that carry no credentials and so are still sent after a redirect to another host.
    public static let headersSafeAcrossHosts: Set<String> = [
        "accept", "accept-language", "user-agent", "cache-control", "pragma",
    ]
}
