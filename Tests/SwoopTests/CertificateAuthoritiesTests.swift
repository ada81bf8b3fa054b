import Foundation
import Testing
@testable import Swoop
@testable import SwoopCurl

/// Which CA bundle and directory a configuration resolves to (curl's precedence between
/// `--cacert`/`--capath`, `CURL_CA_BUNDLE`, `SSL_CERT_FILE` and `SSL_CERT_DIR`), and what is
/// refused up front.
@Suite("Certificate authorities")
struct CertificateAuthoritiesTests {
    private static func resolve(
        _ setting: Downloader.Configuration.CertificateAuthorities, verifying: Bool = true,
        _ environment: [String: String]
    ) -> (file: String?, fileFrom: String?, directory: String?, directoryFrom: String?) {
        var configuration = Downloader.Configuration()
        configuration.tls.certificateAuthorities = setting
        configuration.tls.verifiesCertificates = verifying
        let trusted = TrustedCertificates(configuration) { environment[$0] }
        return (trusted.file?.path, trusted.file?.setting, trusted.directory?.path, trusted.directory?.setting)
    }

    @Test func theEnvironmentIsReadWithCurlsPrecedence() {
        let all = ["CURL_CA_BUNDLE": "/a.pem", "SSL_CERT_FILE": "/f.pem", "SSL_CERT_DIR": "/d"]
        let bundleWins = Self.resolve(.fromEnvironment, all)
        #expect(bundleWins.file == "/a.pem" && bundleWins.fileFrom == "CURL_CA_BUNDLE")
        #expect(bundleWins.directory == nil, "with CURL_CA_BUNDLE, SSL_CERT_DIR is not read either")

        let both = Self.resolve(.fromEnvironment, ["SSL_CERT_FILE": "/f.pem", "SSL_CERT_DIR": "/d"])
        #expect(both.file == "/f.pem" && both.fileFrom == "SSL_CERT_FILE")
        #expect(both.directory == "/d" && both.directoryFrom == "SSL_CERT_DIR")

        let directoryOnly = Self.resolve(.fromEnvironment, ["SSL_CERT_DIR": "/d"])
        #expect(directoryOnly.file == nil && directoryOnly.directory == "/d")

        let emptyIsUnset = Self.resolve(.fromEnvironment, ["CURL_CA_BUNDLE": "", "SSL_CERT_FILE": "/f.pem"])
        #expect(emptyIsUnset.file == "/f.pem")

        let none = Self.resolve(.fromEnvironment, [:])
        #expect(none.file == nil && none.directory == nil, "nothing set: libcurl's defaults")
    }

    @Test func anExplicitSettingOrTheSystemStoreIgnoresTheEnvironment() {
        let all = ["CURL_CA_BUNDLE": "/a.pem", "SSL_CERT_FILE": "/f.pem", "SSL_CERT_DIR": "/d"]
        let file = Self.resolve(.custom(file: "/mine.pem"), all)
        #expect(file.file == "/mine.pem" && file.fileFrom == "Configuration.tls.certificateAuthorities")
        #expect(file.directory == nil, "the directory stays libcurl's default, not SSL_CERT_DIR")
        let directory = Self.resolve(.custom(directory: "/mine"), all)
        #expect(directory.file == nil && directory.directory == "/mine")
        let system = Self.resolve(.systemDefault, all)
        #expect(system.file == nil && system.directory == nil)
        let insecure = Self.resolve(.fromEnvironment, verifying: false, all)
        #expect(insecure.file == nil && insecure.directory == nil, "nothing is read without verification")
    }

    @Test func anExplicitSettingMustBeReadable() throws {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("swoop-ca-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let bundle = directory.appendingPathComponent("ca.pem").path
        try "-----BEGIN CERTIFICATE-----\n".write(toFile: bundle, atomically: true, encoding: .utf8)

        var configuration = Downloader.Configuration()
        for good: Downloader.Configuration.CertificateAuthorities in [
            .fromEnvironment, .systemDefault, .custom(file: bundle), .custom(directory: directory.path),
            .custom(file: bundle, directory: directory.path),
            .custom(directory: directory.path + ":" + directory.path),
        ] {
            configuration.tls.certificateAuthorities = good
            try configuration.validate()
        }
        let missing = directory.appendingPathComponent("missing").path
        let cases: [(Downloader.Configuration.CertificateAuthorities, String)] = [
            (.custom(), "names neither"),
            (.custom(file: missing), "the CA bundle \(missing) cannot be read: No such file or directory"),
            (.custom(file: directory.path), "\(directory.path) is a directory, not a file"),
            (.custom(file: ""), "the CA bundle path is empty"),
            (.custom(directory: missing), "the CA directory \(missing) cannot be read"),
            (.custom(directory: bundle), "\(bundle) is not a directory"),
            (.custom(directory: directory.path + ":" + missing), "the CA directory \(missing) cannot be read"),
        ]
        for (bad, words) in cases {
            configuration.tls.certificateAuthorities = bad
            let error = #expect(throws: DownloadError.self) { try configuration.validate() }
            #expect(error?.kind == .invalidRequest)
            let reason = error?.reason ?? ""
            #expect(reason.contains("Configuration.tls.certificateAuthorities") && reason.contains(words), "\(reason)")
        }
    }

    @Test func aVerificationFailureSaysWhichCertificatesWereTrusted() {
        var configuration = Downloader.Configuration()
        #expect(TrustedCertificates(configuration) { _ in nil }.verificationNote.isEmpty)
        let missing = "/nonexistent/swoop-ca.pem"
        let unreadable = TrustedCertificates(configuration) { $0 == "SSL_CERT_FILE" ? missing : nil }
        let said = unreadable.verificationNote
        let expected =
            " (SSL_CERT_FILE names the CA bundle \(missing), which cannot be read: "
            + "No such file or directory)"
        #expect(said == expected)
        configuration.tls.certificateAuthorities = .custom(directory: "/")
        let note = TrustedCertificates(configuration).verificationNote
        #expect(note == " (CAs trusted: the CA directory / from Configuration.tls.certificateAuthorities)")
    }
}
