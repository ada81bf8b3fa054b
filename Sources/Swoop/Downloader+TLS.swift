import SwoopCurl

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension Downloader.Configuration {
    /// How servers' TLS certificates are verified.
    public struct TLS: Sendable {
        /// Verify the server's TLS certificate and host name. Turning this off is insecure.
        public var verifiesCertificates = true
        /// The certificate authorities servers' certificates are verified against: by default
        /// those `CURL_CA_BUNDLE`, or `SSL_CERT_FILE` and `SSL_CERT_DIR`, name when a download
        /// starts (curl's precedence), else libcurl's built-in ones. See
        /// ``CertificateAuthorities`` for trusting a private CA.
        public var certificateAuthorities: CertificateAuthorities = .fromEnvironment

        public init() {}
    }

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
    /// configuration.tls.certificateAuthorities = .custom(file: "/etc/pki/internal-ca.pem")
    /// ```
    ///
    /// Nothing is read when ``Downloader/Configuration/TLS/verifiesCertificates`` is `false`.
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
        guard case .custom(let file, let directory) = tls.certificateAuthorities else { return }
        let setting = "Configuration.tls.certificateAuthorities"
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

extension TrustedCertificates {
    /// What `configuration` trusts now, reading the environment through `variable` for
    /// ``Downloader/Configuration/CertificateAuthorities/fromEnvironment``.
    init(
        _ configuration: Downloader.Configuration,
        variable: (String) -> String? = TrustedCertificates.environmentVariable
    ) {
        guard configuration.tls.verifiesCertificates else {
            self.init()
            return
        }
        switch configuration.tls.certificateAuthorities {
        case .systemDefault:
            self.init()
        case .custom(let file, let directory):
            let setting = "Configuration.tls.certificateAuthorities"
            self.init(
                file: file.map { CertificateLocation(path: $0, setting: setting) },
                directory: directory.map { CertificateLocation(path: $0, setting: setting) })
        case .fromEnvironment:
            func named(_ name: String) -> CertificateLocation? {
                guard let value = variable(name), !value.isEmpty else { return nil }
                return CertificateLocation(path: value, setting: name)
            }
            if let bundle = named("CURL_CA_BUNDLE") {
                self.init(file: bundle)
            } else {
                self.init(file: named("SSL_CERT_FILE"), directory: named("SSL_CERT_DIR"))
            }
        }
    }

    /// The process environment's value of `name`.
    static func environmentVariable(_ name: String) -> String? {
        getenv(name).map { String(cString: $0) }
    }
}
