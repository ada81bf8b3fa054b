#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension Downloader.Configuration {
    /// How requests reach servers and what they carry besides their own headers, as curl's
    /// `--proxy`, `--noproxy`, `--netrc` and `--cookie` say it.
    ///
    /// ```swift
    /// configuration.access.proxy = .url("http://user:secret@proxy.example.com:3128")
    /// configuration.access.noProxy = ["internal.example.com", "10.0.0.1"]
    /// ```
    public struct NetworkAccess: Sendable, Equatable {
        /// Which proxy requests go through; by default the environment says, as for curl.
        public var proxy: Proxy = .fromEnvironment
        /// Hosts reached without the proxy (curl's `NOPROXY`): names (a name also covers its
        /// subdomains), IP addresses, or `*` for all; `nil`, the default, takes `no_proxy`
        /// from the environment.
        public var noProxy: [String]?
        /// Credentials from a `.netrc` file, sent only to the host they name; off by default.
        public var netrc: Netrc = .off
        /// Cookies to send (from a file) and where to save the cookies servers set.
        public var cookies = Cookies()

        public init() {}
    }

    /// Which proxy requests go through.
    public enum Proxy: Sendable, Equatable {
        /// As the environment says, the way curl reads it: `http_proxy` for http URLs,
        /// `https_proxy` (or `HTTPS_PROXY`) for https URLs, else `all_proxy` (or `ALL_PROXY`);
        /// `no_proxy` (or `NO_PROXY`) names hosts reached directly. No variable: no proxy. When
        /// none is set as the downloader is made, none is looked for again.
        case fromEnvironment
        /// No proxy, whatever the environment says.
        case direct
        /// This proxy: `http://`, `https://`, `socks4://`, `socks4a://`, `socks5://` or
        /// `socks5h://` (the proxy resolves host names), with `user:password@` if it wants them
        /// (percent-encoded). Without a scheme, `http://`. The credentials go to the proxy only,
        /// and are never logged or written. An `https://` proxy's certificate is always verified.
        case url(String)
    }

    /// Where `.netrc` credentials come from (curl's `--netrc`, `--netrc-file`). A request gets
    /// the login of its own host only, and none once a redirect has left the first URL's origin.
    public enum Netrc: Sendable, Equatable {
        /// No `.netrc` is read (the default).
        case off
        /// `$HOME/.netrc`, when it exists.
        case defaultFile
        /// This file, which must be readable.
        case file(String)
    }

    /// Cookies, kept by libcurl's cookie engine for the whole ``Downloader`` (every download it
    /// runs shares them, like one curl command): each cookie goes only to the domain and path it
    /// names.
    public struct Cookies: Sendable, Equatable {
        /// A file to read cookies from (Netscape/curl cookie-jar format, or `Set-Cookie:` lines);
        /// read once, never written. `nil`: none.
        public var file: String?
        /// Where to save every cookie the downloader holds (the file's and those servers set)
        /// when it shuts down (curl's `--cookie-jar`). `nil` (the default): nothing is saved.
        /// Cookies are credentials: choose a private location.
        public var jar: String?

        public init(file: String? = nil, jar: String? = nil) {
            self.file = file
            self.jar = jar
        }

        /// Whether the downloader needs a cookie engine at all.
        var isEnabled: Bool { file != nil || jar != nil }
    }

    /// Checks the proxy, netrc and cookie settings.
    func validateNetworkAccess() throws(DownloadError) {
        let (proxy, noProxy, netrc, cookies) = (access.proxy, access.noProxy, access.netrc, access.cookies)
        if case .url(let proxy) = proxy {
            _ = try ProxyURL(proxy)
        }
        if let noProxy,
            let bad = noProxy.first(where: { $0.contains(where: { $0 == "," || $0.isWhitespace }) || $0.isEmpty })
        {
            throw .invalidRequest(
                "invalid Configuration.access.noProxy entry '\(RemoteURL.printable(bad))': give one host name "
                    + "or address per entry"
            )
        }
        if case .file(let path) = netrc {
            try Self.requireReadable(path, "Configuration.access.netrc")
        }
        if let file = cookies.file {
            try Self.requireReadable(file, "Configuration.access.cookies.file")
        }
        if let jar = cookies.jar, jar.isEmpty {
            throw .invalidRequest("Configuration.access.cookies.jar is empty: name a file, or nil to save no cookies")
        }
    }

    private static func requireReadable(_ path: String, _ setting: String) throws(DownloadError) {
        guard !path.isEmpty else { throw .invalidRequest("\(setting) names no file (an empty path)") }
        #if canImport(Glibc)
        let readable = Glibc.access(path, R_OK) == 0
        #elseif canImport(Musl)
        let readable = Musl.access(path, R_OK) == 0
        #endif
        if !readable {
            let cause = String(cString: strerror(errno))
            throw DownloadError(.invalidRequest, "\(setting): cannot read \(path): \(cause)", errno: errno)
        }
    }
}

/// A proxy URL, checked, and its form safe to print (no credentials).
struct ProxyURL: Sendable, Equatable {
    static let schemes: Set<String> = ["http", "https", "socks4", "socks4a", "socks5", "socks5h"]

    /// What libcurl is given, credentials included.
    let string: String
    /// `scheme://host:port`, without credentials: safe for messages.
    let redacted: String

    init(_ string: String) throws(DownloadError) {
        let trimmed = string.trimmingWhitespace
        var scheme = "http"
        var rest = Substring(trimmed)
        if let separator = trimmed.firstRange(of: "://") {
            scheme = trimmed[..<separator.lowerBound].lowercased()
            rest = trimmed[separator.upperBound...]
        }
        let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        let hostPort = authority.lastIndex(of: "@").map { authority[authority.index(after: $0)...] } ?? authority
        let shown = "\(scheme)://\(hostPort)"
        guard Self.schemes.contains(scheme) else {
            throw .invalidRequest(
                "unsupported proxy scheme '\(RemoteURL.printable(scheme))' in \(RemoteURL.printable(shown)): use "
                    + "http://, https://, socks4://, socks4a://, socks5:// or socks5h://"
            )
        }
        guard !hostPort.isEmpty, !hostPort.hasPrefix(":"),
            trimmed.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value != 0x7F })
        else {
            throw .invalidRequest(
                "invalid proxy \(RemoteURL.printable(shown)): it needs a host, e.g. http://proxy.example.com:3128, "
                    + "with no spaces or control characters"
            )
        }
        self.string = trimmed
        self.redacted = shown
    }
}
