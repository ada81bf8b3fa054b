#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension Downloader.Configuration {
    /// The certificate authorities a server's TLS certificate is verified against, the way curl
    /// chooses them (`--cacert`, `--capath` and its environment variables).
    ///
    /// There are two places to find CA certificates: a *bundle*, one file of PEM certificates,
    /// and a *directory* of PEM certificates named by their subject hash (`openssl rehash DIR`
    /// or `c_rehash DIR` makes one). A setting gives either or both; **the one it does not give
    /// keeps libcurl's built-in default** (on Debian and Ubuntu the bundle
    /// `/etc/ssl/certs/ca-certificates.crt` and the directory `/etc/ssl/certs`), so a private
    /// CA's bundle is trusted in addition to what the default directory holds, as with curl.
    ///
    /// ```swift
    /// configuration.certificateAuthorities = .custom(file: "/etc/pki/internal-ca.pem")
    /// ```
    ///
    /// Nothing is read when ``Downloader/Configuration/verifiesTLSCertificates`` is `false`.
    /// These settings are for the servers downloaded from; an `https://` proxy's certificate is
    /// verified against libcurl's defaults (curl's `--proxy-cacert` has no equivalent here).
    public enum CertificateAuthorities: Sendable, Equatable {
        /// As the environment says, read when each download starts, with curl's precedence:
        /// `CURL_CA_BUNDLE` names the bundle, and then neither `SSL_CERT_FILE` nor
        /// `SSL_CERT_DIR` is read; without it, `SSL_CERT_FILE` names the bundle and
        /// `SSL_CERT_DIR` the directory (each on its own, or both at once, as curl's manual
        /// describes them). An empty variable counts as unset (curl takes an empty
        /// `CURL_CA_BUNDLE` as set, and then reads neither of the others). No variable: libcurl's
        /// defaults.
        ///
        /// A path from the environment is not checked up front, so a plain `http` download is
        /// not refused for it (as with curl); if it cannot be read, TLS verification fails with
        /// ``DownloadError/Kind/tls`` and the message names the variable and the path.
        case fromEnvironment
        /// libcurl's built-in bundle and directory only, whatever the environment says.
        case systemDefault
        /// This bundle file and/or directory (curl's `--cacert` and `--capath`) instead of the
        /// environment; `nil` keeps libcurl's default for that one. The directory may list
        /// several, separated by `:` (as OpenSSL reads them). A file or directory that cannot
        /// be read, or neither given, makes every download fail with
        /// ``DownloadError/Kind/invalidRequest``.
        case custom(file: String? = nil, directory: String? = nil)
    }

    /// Checks an explicit CA setting; the environment's are checked only by their use.
    func validateCertificateAuthorities() throws(DownloadError) {
        guard case .custom(let file, let directory) = certificateAuthorities else { return }
        let setting = "Configuration.certificateAuthorities"
        let fix = "give a readable file and/or directory, or use .systemDefault or .fromEnvironment"
        guard file != nil || directory != nil else {
            throw .invalidRequest("\(setting) names neither a CA bundle file nor a directory: \(fix)")
        }
        let places = [("CA bundle", file, false), ("CA directory", directory, true)]
        for case (let kind, let path?, let isDirectory) in places {
            let location = CertificateLocation(path: path, setting: setting)
            guard let problem = location.problem(isDirectory: isDirectory) else { continue }
            let shown = problem.path.isEmpty ? "path" : problem.path
            let reason = "\(setting): the \(kind) \(shown) \(problem.reason); \(fix)"
            throw DownloadError(.invalidRequest, reason, errno: problem.errno)
        }
    }
}

/// Where one connection finds its CA certificates, and which setting named each place.
struct TrustedCertificates: Sendable, Equatable {
    /// `CURLOPT_CAINFO`; `nil` keeps libcurl's default bundle.
    var file: CertificateLocation?
    /// `CURLOPT_CAPATH`; `nil` keeps libcurl's default directory.
    var directory: CertificateLocation?

    /// What `configuration` trusts now, reading the environment through `variable` for
    /// ``Downloader/Configuration/CertificateAuthorities/fromEnvironment``.
    init(
        _ configuration: Downloader.Configuration,
        variable: (String) -> String? = TrustedCertificates.environmentVariable
    ) {
        guard configuration.verifiesTLSCertificates else { return }
        switch configuration.certificateAuthorities {
        case .systemDefault:
            break
        case .custom(let file, let directory):
            let setting = "Configuration.certificateAuthorities"
            self.file = file.map { CertificateLocation(path: $0, setting: setting) }
            self.directory = directory.map { CertificateLocation(path: $0, setting: setting) }
        case .fromEnvironment:
            func named(_ name: String) -> CertificateLocation? {
                guard let value = variable(name), !value.isEmpty else { return nil }
                return CertificateLocation(path: value, setting: name)
            }
            if let bundle = named("CURL_CA_BUNDLE") {
                file = bundle
            } else {
                file = named("SSL_CERT_FILE")
                directory = named("SSL_CERT_DIR")
            }
        }
    }

    /// The process environment's value of `name`.
    static func environmentVariable(_ name: String) -> String? {
        getenv(name).map { String(cString: $0) }
    }

    /// Words for a failed certificate verification: the CA settings that name a path that
    /// cannot be read, else which were in force. Empty with libcurl's defaults.
    var verificationNote: String {
        let places = [("CA bundle", file, false), ("CA directory", directory, true)]
            .compactMap { kind, location, isDirectory in location.map { (kind, $0, isDirectory) } }
        let problems = places.compactMap { kind, location, isDirectory -> String? in
            guard let problem = location.problem(isDirectory: isDirectory) else { return nil }
            return "\(location.setting) names the \(kind) \(problem.path), which \(problem.reason)"
        }
        if !problems.isEmpty { return " (" + problems.joined(separator: "; ") + ")" }
        let trusted = places.map { kind, location, _ in "the \(kind) \(location.path) from \(location.setting)" }
        return trusted.isEmpty ? "" : " (CAs trusted: " + trusted.joined(separator: " and ") + ")"
    }
}

/// A CA bundle file or directory, and the setting that named it (a configuration field or an
/// environment variable), for messages.
struct CertificateLocation: Sendable, Equatable {
    var path: String
    var setting: String

    /// What makes a location unusable: one of its paths and why.
    struct Problem: Equatable {
        var path: String
        var reason: String
        var errno: Int32?
    }

    /// Why this cannot serve as a CA bundle (a readable file) or directory (readable and
    /// searchable; a directory value may list several separated by `:`, as OpenSSL reads it):
    /// the first path that cannot, or `nil`.
    func problem(isDirectory: Bool) -> Problem? {
        let paths = isDirectory ? path.split(separator: ":", omittingEmptySubsequences: false).map(String.init) : [path]
        for path in paths {
            guard !path.isEmpty else { return Problem(path: path, reason: "is empty") }
            var info = stat()
            if stat(path, &info) == 0, (info.st_mode & S_IFMT == S_IFDIR) != isDirectory {
                return Problem(path: path, reason: isDirectory ? "is not a directory" : "is a directory, not a file")
            }
            if access(path, isDirectory ? R_OK | X_OK : R_OK) != 0 {
                let code = errno
                return Problem(path: path, reason: "cannot be read: \(String(cString: strerror(code)))", errno: code)
            }
        }
        return nil
    }
}
