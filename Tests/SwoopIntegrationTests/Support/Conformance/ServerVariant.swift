import Testing

/// One server, or one configuration of a server, that the conformance tests run against. Several
/// variants share a server process (Apache's four cases are four directories of one Apache).
enum ServerVariant: String, CaseIterable, Sendable, CustomStringConvertible, CustomTestStringConvertible {
    case apache
    case apacheDeflate = "apache-deflate"
    case apacheWeakETags = "apache-weak-etags"
    case apacheXGzip = "apache-x-gzip"
    case lighttpd
    case lighttpdNoETags = "lighttpd-no-etags"
    case caddyTLS = "caddy-tls"
    case h2o
    case h2oTLS = "h2o-tls"
    case pythonHTTPServer = "python-http.server"
    case seaweedS3 = "seaweedfs-s3"
    case seaweedS3Gzip = "seaweedfs-s3-gzip"
    case nginx

    /// The server process a variant runs on.
    enum Host: Sendable, Hashable {
        case apache, lighttpd, caddy, h2o, h2oTLS, python, seaweedS3, nginx
    }

    var host: Host {
        switch self {
        case .apache, .apacheDeflate, .apacheWeakETags, .apacheXGzip: .apache
        case .lighttpd, .lighttpdNoETags: .lighttpd
        case .caddyTLS: .caddy
        case .h2o: .h2o
        case .h2oTLS: .h2oTLS
        case .pythonHTTPServer: .python
        case .seaweedS3, .seaweedS3Gzip: .seaweedS3
        case .nginx: .nginx
        }
    }

    /// The directory (or key prefix) of the variant's objects, distinct for variants of one
    /// server; on Apache, lighttpd and S3 its configuration makes the variant.
    var folder: String {
        switch self {
        case .h2oTLS: "tls"
        case .apacheDeflate: "deflate"
        case .apacheWeakETags: "weak"
        case .apacheXGzip: "xgzip"
        case .lighttpdNoETags: "noetag"
        case .seaweedS3Gzip: "gzip"
        default: "plain"
        }
    }

    /// The local file name for an object called `name`: a stored `.tar.gz` on the x-gzip
    /// variant (where the extension is what makes Apache label it), `.bin` elsewhere.
    func fileName(_ name: String) -> String {
        self == .apacheXGzip ? "\(name).tar.gz" : "\(name).bin"
    }

    /// The object's path on its server.
    func path(_ name: String) -> String { "\(folder)/\(fileName(name))" }

    /// Whether the server answers ranges (`python3 -m http.server` does not: one stream).
    var acceptsRanges: Bool { self != .pythonHTTPServer }

    var description: String { rawValue }
    var testDescription: String { rawValue }
}
