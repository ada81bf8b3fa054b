import SwoopCore

/// Where the bucket's name goes in a request's URL.
package enum S3Addressing: Sendable, Equatable {
    /// In the host name on AWS when the bucket's name allows it, in the path everywhere else.
    case auto
    /// `ENDPOINT/BUCKET/KEY`.
    case path
    /// `BUCKET.ENDPOINT-HOST/KEY`.
    case virtualHost
}

/// The service endpoint requests go to: AWS S3 in a region, or an S3-compatible store's URL.
package struct S3Endpoint: Sendable, Equatable {
    package var scheme: String
    /// The host as written in a URL (an IPv6 address in brackets).
    package var host: String
    package var port: Int?
    /// A path the endpoint's URL carried (a store behind a path on a shared host), without the
    /// trailing `/`; usually empty.
    package var basePath: String
    /// Whether this is AWS's own endpoint, where virtual-host addressing is the default.
    package var isAWS: Bool

    /// AWS S3 in `region`.
    package static func aws(region: String) -> S3Endpoint {
        S3Endpoint(scheme: "https", host: "s3.\(region).amazonaws.com", port: nil, basePath: "", isAWS: true)
    }

    package init(scheme: String, host: String, port: Int?, basePath: String, isAWS: Bool) {
        self.scheme = scheme
        self.host = host
        self.port = port
        self.basePath = basePath
        self.isAWS = isAWS
    }

    /// An endpoint given as a URL (`http://127.0.0.1:8333`, `https://s3.example.com`); `origin`
    /// names where it came from, for the message when it is not one.
    package init(parsing url: String, origin: String) throws(DownloadError) {
        let invalid = DownloadError(
            .invalidRequest,
            "the S3 endpoint '\(url)' (from \(origin)) is not an http:// or https:// URL such as "
                + "https://s3.example.com or http://127.0.0.1:9000")
        let lower = url.lowercased()
        guard let schemeEnd = lower.firstRange(of: "://") else { throw invalid }
        let scheme = String(lower[..<schemeEnd.lowerBound])
        guard scheme == "http" || scheme == "https" else { throw invalid }
        let rest = url[schemeEnd.upperBound...]
        let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        guard !authority.isEmpty, !authority.contains("@") else { throw invalid }
        var host = String(authority)
        var port: Int?
        if let colon = authority.lastIndex(of: ":"), !authority[colon...].contains("]") {
            guard let number = Int(authority[authority.index(after: colon)...]), (1...65535).contains(number) else {
                throw invalid
            }
            host = String(authority[..<colon])
            port = number
        }
        guard !host.isEmpty else { throw invalid }
        var path = String(rest[authorityEnd...].prefix { $0 != "?" && $0 != "#" })
        while path.hasSuffix("/") { path.removeLast() }
        let lowerHost = host.lowercased()
        let isAWS = lowerHost.hasSuffix(".amazonaws.com") || lowerHost.hasSuffix(".amazonaws.com.cn")
        self.init(scheme: scheme, host: lowerHost, port: port, basePath: path, isAWS: isAWS)
    }

    /// The URL of the object at `location`.
    package func url(for location: S3Location, addressing: S3Addressing) -> String {
        let key = S3Encoding.encode(location.key, keepingSlash: true)
        if usesVirtualHost(for: location.bucket, addressing) {
            return "\(origin(bucket: location.bucket))\(basePath)/\(key)"
        }
        return "\(origin(bucket: nil))\(basePath)/\(location.bucket)/\(key)"
    }

    /// The URL of one ListObjectsV2 page of the keys in `bucket` that start with `prefix`, keys
    /// URL-encoded in the answer (so that any key survives XML).
    package func listURL(
        bucket: String, prefix: String, continuationToken: String?, maxKeys: Int, addressing: S3Addressing
    ) -> String {
        var query: [(String, String)] = [("encoding-type", "url"), ("list-type", "2"), ("max-keys", "\(maxKeys)")]
        if !prefix.isEmpty { query.append(("prefix", prefix)) }
        if let continuationToken { query.append(("continuation-token", continuationToken)) }
        let queryString = query.sorted { $0.0 < $1.0 }
            .map { "\($0.0)=\(S3Encoding.encode($0.1, keepingSlash: false))" }
            .joined(separator: "&")
        if usesVirtualHost(for: bucket, addressing) {
            return "\(origin(bucket: bucket))\(basePath)/?\(queryString)"
        }
        return "\(origin(bucket: nil))\(basePath)/\(bucket)?\(queryString)"
    }

    /// The endpoint as the user would name it, for messages.
    package var description: String { origin(bucket: nil) + basePath }

    private func usesVirtualHost(for bucket: String, _ addressing: S3Addressing) -> Bool {
        switch addressing {
        case .path: false
        case .virtualHost: true
        case .auto: isAWS && S3Location.isDNSCompatible(bucket, tls: scheme == "https")
        }
    }

    private func origin(bucket: String?) -> String {
        let name = bucket.map { "\($0).\(host)" } ?? host
        return "\(scheme)://\(name)\(port.map { ":\($0)" } ?? "")"
    }
}
