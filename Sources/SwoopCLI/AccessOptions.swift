import ArgumentParser
import Logging
import Swoop

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// What is sent and whom to trust: `--header`, TLS (`--insecure`, `--cacert`, `--capath`),
/// `--proxy`, `.netrc`, cookies.
struct AccessOptions: ParsableArguments {
    @Option(
        name: [.customShort("H"), .long],
        help: ArgumentHelp("Send a request header; repeat for several.", valueName: "Name: value"))
    var header: [String] = []

    @Flag(name: [.customShort("k"), .long], help: "Skip TLS certificate verification (insecure).")
    var insecure = false

    @Option(
        name: .long,
        help: ArgumentHelp(
            "CA certificate(s) to verify servers against: a PEM file, for a private CA. "
                + "Replaces CURL_CA_BUNDLE, SSL_CERT_FILE and SSL_CERT_DIR from the environment.",
            valueName: "FILE"))
    var cacert: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "CA directory to verify servers against (PEM files named by hash: openssl rehash DIR). "
                + "Replaces CURL_CA_BUNDLE, SSL_CERT_FILE and SSL_CERT_DIR from the environment.",
            valueName: "DIR"))
    var capath: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Send requests through this proxy: http://, https://, socks4://, socks5:// or socks5h://, with "
                + "user:password@ if it wants them; '' for none. Default: the http_proxy, https_proxy and all_proxy "
                + "environment variables.",
            valueName: "URL"))
    var proxy: String?

    @Option(
        name: .customLong("noproxy"),
        help: ArgumentHelp(
            "Comma-separated hosts reached without the proxy (* for all); replaces no_proxy from the environment.",
            valueName: "list"))
    var noProxy: String?

    @Flag(
        name: .long,
        help: "Send the login ~/.netrc has for a URL's host (to that host only, never after a redirect elsewhere).")
    var netrc = false

    @Option(name: .customLong("netrc-file"), help: ArgumentHelp("Like --netrc, with this file.", valueName: "FILE"))
    var netrcFile: String?

    @Option(
        name: [.customShort("b"), .long],
        help: ArgumentHelp(
            "Send the cookies in FILE (curl's cookie-jar format) to the hosts they name; 'name=value' sends that "
                + "cookie to the URL's host.",
            valueName: "FILE"))
    var cookie: String?

    @Option(
        name: .customLong("cookie-jar"),
        help: ArgumentHelp("Save all cookies (from -b and those servers set) to FILE when done.", valueName: "FILE"))
    var cookieJar: String?

    func validate() throws {
        _ = try parsedHeaders()
        if let proxy, !proxy.isEmpty {
            let scheme = proxy.firstRange(of: "://").map { proxy[..<$0.lowerBound].lowercased() } ?? "http"
            guard ["http", "https", "socks4", "socks4a", "socks5", "socks5h"].contains(scheme) else {
                throw ValidationError(
                    "--proxy: unsupported scheme '\(scheme)://'; use http://, https://, socks4://, socks4a://, "
                        + "socks5:// or socks5h://"
                )
            }
        }
        if netrc && netrcFile != nil { throw ValidationError("give --netrc (~/.netrc) or --netrc-file FILE, not both") }
        if let netrcFile { try Self.requireReadable(netrcFile, "--netrc-file") }
        try validateCertificateAuthorities()
        if let cookieFile { try Self.requireReadable(cookieFile, "-b/--cookie") }
        if let cookieJar, cookieJar.isEmpty { throw ValidationError("--cookie-jar needs a file name") }
    }

    /// `--cacert` a readable file, `--capath` readable directories (`:` separates several).
    private func validateCertificateAuthorities() throws {
        if let cacert {
            try Self.requireReadable(cacert, "--cacert")
            if Self.isDirectory(cacert) {
                throw ValidationError(
                    "--cacert: '\(cacert)' is a directory; give a PEM file, or the directory with --capath")
            }
        }
        for directory in capath.map({ $0.split(separator: ":", omittingEmptySubsequences: false) }) ?? [] {
            let directory = String(directory)
            if access(directory, F_OK) == 0 && !Self.isDirectory(directory) {
                throw ValidationError("--capath: '\(directory)' is not a directory; give a PEM file with --cacert")
            }
            if access(directory, R_OK | X_OK) != 0 {
                throw ValidationError("--capath: cannot read '\(directory)': \(String(cString: strerror(errno)))")
            }
        }
    }

    private static func isDirectory(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFDIR
    }

    private static func requireReadable(_ path: String, _ flag: String) throws {
        if access(path, R_OK) != 0 {
            throw ValidationError("\(flag): cannot read '\(path)': \(String(cString: strerror(errno)))")
        }
    }

    /// `-b`: a file of cookies, unless it is `name=value` and no such file exists (as in curl).
    private var cookieFile: String? {
        guard let cookie, !(cookie.contains("=") && access(cookie, F_OK) != 0) else { return nil }
        return cookie
    }

    /// `--header` values split into name and value; a bad one is a usage error naming it.
    func parsedHeaders() throws -> [(name: String, value: String)] {
        let cookieHeader = cookie.flatMap { cookieFile == nil ? "Cookie: \($0)" : nil }
        return try (header + (cookieHeader.map { [$0] } ?? [])).map { line in
            guard let colon = line.firstIndex(of: ":") else {
                throw ValidationError("invalid --header '\(line)': expected 'Name: value'")
            }
            let name = line[..<colon].trimmed
            let value = line[line.index(after: colon)...].trimmed
            guard !name.isEmpty, !name.contains(where: { $0.isWhitespace }) else {
                throw ValidationError("invalid --header '\(line)': the name before ':' is empty or has spaces")
            }
            return (name, value)
        }
    }

    /// These settings, in `configuration`.
    func apply(to configuration: inout Downloader.Configuration) {
        configuration.tls.verifiesCertificates = !insecure
        if cacert != nil || capath != nil {
            configuration.tls.certificateAuthorities = .custom(file: cacert, directory: capath)
        }
        if let proxy { configuration.access.proxy = proxy.isEmpty ? .direct : .url(proxy) }
        configuration.access.noProxy = noProxy.map {
            $0.split(separator: ",").map { $0.trimmed }.filter { !$0.isEmpty }
        }
        configuration.access.netrc = netrcFile.map { .file($0) } ?? (netrc ? .defaultFile : .off)
        configuration.access.cookies = .init(file: cookieFile, jar: cookieJar)
    }
}
