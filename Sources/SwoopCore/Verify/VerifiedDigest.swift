/// A digest a download was checked against, for ``DownloadResult``.
public struct VerifiedDigest: Sendable, Equatable, CustomStringConvertible {
    /// Where the expected value came from.
    public enum Source: Sendable, Equatable {
        /// ``DownloadRequest/expectedChecksum``.
        case expectedChecksum
        /// A header of the server's response (its name, lowercase: `x-goog-hash`, `repr-digest`).
        case server(header: String)
    }

    public var source: Source
    /// The digest, which the downloaded bytes matched.
    public var checksum: Checksum

    package init(source: Source, checksum: Checksum) {
        self.source = source
        self.checksum = checksum
    }

    public var description: String {
        switch source {
        case .expectedChecksum: "\(checksum) (expected checksum)"
        case .server(let header): "\(checksum) (\(header))"
        }
    }
}
