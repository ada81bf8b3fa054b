import ArgumentParser
import Swoop

/// How `s3://` URLs reach their store; everything left out is read as the AWS CLI reads it.
struct S3Options: ParsableArguments {
    @Option(
        name: .customLong("endpoint-url"),
        help: ArgumentHelp(
            "For s3:// URLs: an S3-compatible store's endpoint (MinIO, Ceph, SeaweedFS, R2, OSS, GCS). "
                + "Default: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the profile's endpoint_url, else AWS.",
            valueName: "URL"))
    var endpointURL: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "For s3:// URLs: the region to sign for. Default: AWS_REGION, AWS_DEFAULT_REGION, the profile's "
                + "region, else us-east-1.",
            valueName: "REGION"))
    var region: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "For s3:// URLs: the profile in ~/.aws/credentials and ~/.aws/config (default: AWS_PROFILE, else "
                + "default); it wins over credentials in the environment.",
            valueName: "NAME"))
    var profile: String?

    @Flag(name: .customLong("no-sign-request"), help: "For s3:// URLs: send requests unsigned (public buckets).")
    var noSignRequest = false

    @Option(
        name: .customLong("s3-addressing"),
        help: ArgumentHelp(
            "For s3:// URLs: put the bucket in the path or the host name (auto: the host name on AWS, the path "
                + "for any other endpoint).",
            valueName: "auto|path|virtual"))
    var addressing: Downloader.Configuration.S3.Addressing = .auto

    func validate() throws {
        if let endpointURL {
            let lower = endpointURL.lowercased()
            guard lower.hasPrefix("http://") || lower.hasPrefix("https://") else {
                throw ValidationError(
                    "--endpoint-url needs an http:// or https:// URL, e.g. http://127.0.0.1:8333 (got '\(endpointURL)')"
                )
            }
        }
        if let region, region.isEmpty || region.contains(where: { $0 == "/" || $0.isWhitespace }) {
            throw ValidationError("--region takes a region name such as us-east-1 (got '\(region)')")
        }
    }

    func apply(to configuration: inout Downloader.Configuration) {
        configuration.s3.endpointURL = endpointURL
        configuration.s3.region = region
        configuration.s3.profile = profile
        configuration.s3.signsRequests = !noSignRequest
        configuration.s3.addressing = addressing
    }
}

extension Downloader.Configuration.S3.Addressing: ExpressibleByArgument {
    public init?(argument: String) {
        switch argument {
        case "auto": self = .auto
        case "path": self = .path
        case "virtual", "virtual-host": self = .virtualHost
        default: return nil
        }
    }

    public static var allValueStrings: [String] { ["auto", "path", "virtual"] }
}
