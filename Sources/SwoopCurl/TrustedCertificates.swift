import SwoopCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Where one connection finds its CA certificates, and which setting named each place.
package struct TrustedCertificates: Sendable, Equatable {
    /// `CURLOPT_CAINFO`; `nil` keeps libcurl's default bundle.
    package var file: CertificateLocation?
    /// `CURLOPT_CAPATH`; `nil` keeps libcurl's default directory.
    package var directory: CertificateLocation?

    package init(file: CertificateLocation? = nil, directory: CertificateLocation? = nil) {
        self.file = file
        self.directory = directory
    }

    /// Words for a failed certificate verification: the CA settings that name a path that
    /// cannot be read, else which were in force. Empty with libcurl's defaults.
    package var verificationNote: String {
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
package struct CertificateLocation: Sendable, Equatable {
    package var path: String
    package var setting: String

    package init(path: String, setting: String) {
        self.path = path
        self.setting = setting
    }

    /// What makes a location unusable: one of its paths and why.
    package struct Problem: Equatable {
        package var path: String
        package var reason: String
        package var errno: Int32?
    }

    /// Why this cannot serve as a CA bundle (a readable file) or directory (readable and
    /// searchable; a directory value may list several separated by `:`, as OpenSSL reads it):
    /// the first path that cannot, or `nil`.
    package func problem(isDirectory: Bool) -> Problem? {
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
