extension Downloader.Configuration {
    /// How `s3://BUCKET/KEY` URLs reach their store: AWS S3, or any store that speaks its API
    /// (MinIO, Ceph, SeaweedFS, Cloudflare R2, and Alibaba OSS or Google Cloud Storage through their
    /// S3-compatible endpoints). Every request is signed with AWS Signature Version 4.
    ///
    /// Each setting left `nil` is read as the AWS command-line tools read it, when a download
    /// starts: the environment, then the shared files (`~/.aws/credentials`, `~/.aws/config`, or
    /// `AWS_SHARED_CREDENTIALS_FILE` and `AWS_CONFIG_FILE`).
    ///
    /// ```swift
    /// configuration.s3.endpointURL = "http://127.0.0.1:8333"   // a local store
    /// try await downloader.download(DownloadRequest(url: "s3://bucket/data/big.bin"), to: "big.bin")
    /// ```
    public struct S3: Sendable {
        /// The credentials; `nil` reads `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and
        /// `AWS_SESSION_TOKEN`, else the profile's. Read again when the store says a session
        /// token expired, so a refreshed one is taken up mid-download.
        public var credentials: Credentials?
        /// The profile in the shared files; `nil`: `AWS_PROFILE`, else `default`. A profile named
        /// here is used even when the environment holds credentials (as `aws --profile` does).
        public var profile: String?
        /// The region requests are signed for; `nil`: `AWS_REGION`, `AWS_DEFAULT_REGION`, the
        /// profile's `region`, else `us-east-1`.
        public var region: String?
        /// An S3-compatible store's endpoint (`https://host[:port]`); `nil`: `AWS_ENDPOINT_URL_S3`,
        /// `AWS_ENDPOINT_URL`, the profile's `endpoint_url`, else AWS S3 in ``region``.
        public var endpointURL: String?
        /// Whether the bucket goes in the host name or the path.
        public var addressing: Addressing = .auto
        /// `false` sends requests unsigned, for public buckets (the AWS CLI's `--no-sign-request`).
        public var signsRequests = true

        public init() {}

        /// Access key, secret and, for temporary credentials, the session token.
        public struct Credentials: Sendable, Equatable, CustomStringConvertible {
            public var accessKeyID: String
            public var secretAccessKey: String
            public var sessionToken: String?

            public init(accessKeyID: String, secretAccessKey: String, sessionToken: String? = nil) {
                self.accessKeyID = accessKeyID
                self.secretAccessKey = secretAccessKey
                self.sessionToken = sessionToken
            }

            /// The key ID only: secrets are never printed.
            public var description: String { "S3 credentials \(accessKeyID)" }
        }

        /// Where the bucket's name goes in a request's URL.
        public enum Addressing: Sendable, Equatable {
            /// In the host name on AWS (`BUCKET.s3.REGION.amazonaws.com`) when the bucket's name
            /// allows it; in the path for any other endpoint (MinIO, Ceph and SeaweedFS expect it;
            /// an IP address or `localhost` has no host name per bucket).
            case auto
            /// Always in the path (`ENDPOINT/BUCKET/KEY`): MinIO, Ceph and most private stores.
            case path
            /// Always in the host name (`BUCKET.ENDPOINT-HOST/KEY`): Alibaba OSS, which takes no
            /// path style.
            case virtualHost
        }
    }
}
