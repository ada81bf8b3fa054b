import Foundation
import Swoop
import SwoopTestOrigin
import Testing

/// Trusting a private CA the way curl does: `--cacert`, `--capath`, and `CURL_CA_BUNDLE`,
/// `SSL_CERT_FILE` and `SSL_CERT_DIR` from the environment, with curl's precedence. The server
/// is nginx with a self-signed certificate for 127.0.0.1, its own CA.
@Suite("CA trust")
struct CertificateAuthorityTests {
    /// The three variables emptied (counted as unset): the machine's own must not decide a test.
    /// A child inherits the test's environment, with these values replacing its own.
    static let noCAVariables = ["CURL_CA_BUNDLE": "", "SSL_CERT_FILE": "", "SSL_CERT_DIR": ""]
    static let systemBundle = "/etc/ssl/certs/ca-certificates.crt"

    /// nginx over TLS with one file, and a scratch directory holding `ca/`, a hashed directory
    /// with the server's certificate (`openssl rehash`).
    struct Fixture {
        let nginx: Nginx
        let scratch: Scratch
        let expected: String
        var url: String { nginx.url("/t.bin") }
        var certificate: String { nginx.certificate }
        var hashedDirectory: String { scratch.path("ca") }

        /// Runs `swoop URL arguments -q -f` with `environment` over ``noCAVariables``.
        func swoop(_ arguments: [String], environment: [String: String] = [:]) async throws -> CLI.Result {
            let merged = noCAVariables.merging(environment) { $1 }
            return try await CLI.start([url, "-q", "-f"] + arguments, in: scratch.url, environment: merged)
                .wait(timeout: .seconds(120))
        }

        /// Whether the last run left the file, byte for byte; removes it for the next run.
        func downloadedIntact() async throws -> Bool {
            defer { try? FileManager.default.removeItem(atPath: scratch.path("t.bin")) }
            guard scratch.exists("t.bin") else { return false }
            return try await TestData.sha256(of: scratch.path("t.bin")) == expected
        }
    }

    static func withFixture(_ body: (Fixture) async throws -> Void) async throws {
        let nginx = try await Nginx.start(tls: true)
        defer { nginx.stop() }
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        let expected = try await nginx.addFile("t.bin", size: 3 << 20, seed: 29)
        let fixture = Fixture(nginx: nginx, scratch: scratch, expected: expected)
        try FileManager.default.createDirectory(atPath: fixture.hashedDirectory, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: fixture.certificate, toPath: scratch.path("ca/server.pem"))
        let rehash = try ChildProcess(executable: "/usr/bin/openssl", arguments: ["rehash", fixture.hashedDirectory])
        guard await rehash.wait(timeout: .seconds(30)) == 0 else { throw TestFailure("openssl rehash failed") }
        let hashed = try FileManager.default.contentsOfDirectory(atPath: fixture.hashedDirectory)
        guard hashed.contains(where: { $0.hasSuffix(".0") }) else { throw TestFailure("no hash link in \(hashed)") }
        try await body(fixture)
    }

    @Test("without trust: a TLS error with its cause, and --cacert named as the fix before --insecure")
    func untrusted() async throws {
        try await Self.withFixture { fixture in
            let refused = try await fixture.swoop([])
            #expect(refused.status == 1, "stderr: \(refused.stderr)")
            #expect(refused.stderr.contains("TLS failure"), "stderr: \(refused.stderr)")
            #expect(refused.stderr.contains("self-signed certificate"), "the cause: \(refused.stderr)")
            let cacert = refused.stderr.range(of: "--cacert FILE")
            let insecure = refused.stderr.range(of: "--insecure")
            #expect(cacert != nil && insecure != nil, "the fixes are named: \(refused.stderr)")
            if let cacert, let insecure { #expect(cacert.lowerBound < insecure.lowerBound) }
            #expect(!fixture.scratch.exists("t.bin") && !fixture.scratch.exists(part: "t.bin"))
        }
    }

    @Test("--cacert FILE and --capath DIR trust the CA: identical bytes")
    func flags() async throws {
        try await Self.withFixture { fixture in
            let file = try await fixture.swoop(["--cacert", fixture.certificate, "-c", "4"])
            #expect(file.status == 0, "stderr: \(file.stderr)")
            #expect(try await fixture.downloadedIntact())

            let directory = try await fixture.swoop(["--capath", fixture.hashedDirectory, "-c", "4"])
            #expect(directory.status == 0, "stderr: \(directory.stderr)")
            #expect(try await fixture.downloadedIntact())
        }
    }

    @Test("SSL_CERT_FILE, CURL_CA_BUNDLE and SSL_CERT_DIR from the environment trust the CA")
    func environment() async throws {
        try await Self.withFixture { fixture in
            let file = try await fixture.swoop([], environment: ["SSL_CERT_FILE": fixture.certificate])
            #expect(file.status == 0, "SSL_CERT_FILE; stderr: \(file.stderr)")
            #expect(try await fixture.downloadedIntact())

            // CURL_CA_BUNDLE wins: a bad SSL_CERT_FILE or SSL_CERT_DIR beside it is not read.
            let bundle = try await fixture.swoop(
                [],
                environment: [
                    "CURL_CA_BUNDLE": fixture.certificate, "SSL_CERT_FILE": "/nonexistent.pem",
                    "SSL_CERT_DIR": "/nonexistent",
                ])
            #expect(bundle.status == 0, "CURL_CA_BUNDLE; stderr: \(bundle.stderr)")
            #expect(try await fixture.downloadedIntact())

            // SSL_CERT_DIR is read along with SSL_CERT_FILE (here the system's bundle).
            let directory = try await fixture.swoop(
                [],
                environment: [
                    "SSL_CERT_DIR": fixture.hashedDirectory, "SSL_CERT_FILE": Self.systemBundle,
                ])
            #expect(directory.status == 0, "SSL_CERT_DIR; stderr: \(directory.stderr)")
            #expect(try await fixture.downloadedIntact())
        }
    }

    @Test("precedence: --cacert replaces the environment; CURL_CA_BUNDLE replaces SSL_CERT_FILE")
    func precedence() async throws {
        try await Self.withFixture { fixture in
            let wrong = ["CURL_CA_BUNDLE": "/nonexistent.pem", "SSL_CERT_FILE": Self.systemBundle]
            let flag = try await fixture.swoop(["--cacert", fixture.certificate], environment: wrong)
            #expect(flag.status == 0, "stderr: \(flag.stderr)")
            #expect(try await fixture.downloadedIntact())

            // As in curl: with CURL_CA_BUNDLE set, SSL_CERT_FILE is not read, and the message
            // says which bundle was trusted and where it came from.
            let shadowed = try await fixture.swoop(
                [],
                environment: [
                    "CURL_CA_BUNDLE": Self.systemBundle, "SSL_CERT_FILE": fixture.certificate,
                ])
            #expect(shadowed.status == 1, "stderr: \(shadowed.stderr)")
            #expect(
                shadowed.stderr.contains("CAs trusted: the CA bundle \(Self.systemBundle) from CURL_CA_BUNDLE"),
                "stderr: \(shadowed.stderr)")
            #expect(!fixture.scratch.exists("t.bin"))
        }
    }

    @Test("an unreadable --cacert or --capath is a usage error naming the flag")
    func unreadable() async throws {
        try await Self.withFixture { fixture in
            let cases: [([String], String)] = [
                (["--cacert", fixture.scratch.path("missing.pem")], "--cacert: cannot read"),
                (["--cacert", fixture.hashedDirectory], "--cacert: '\(fixture.hashedDirectory)' is a directory"),
                (["--capath", fixture.scratch.path("missing")], "--capath: cannot read"),
                (["--capath", fixture.certificate], "--capath: '\(fixture.certificate)' is not a directory"),
            ]
            for (arguments, words) in cases {
                let result = try await fixture.swoop(arguments)
                #expect(result.status == 2, "\(arguments): \(result.stderr)")
                #expect(result.stderr.contains(words), "\(arguments): \(result.stderr)")
            }
            #expect(try fixture.nginx.log().isEmpty, "nothing was requested")
        }
    }

    @Test("a CA file from the environment that cannot be read fails https naming the variable, not http")
    func unreadableFromTheEnvironment() async throws {
        try await Self.withFixture { fixture in
            let missing = fixture.scratch.path("missing.pem")
            let result = try await fixture.swoop([], environment: ["SSL_CERT_FILE": missing])
            #expect(result.status == 1, "stderr: \(result.stderr)")
            #expect(
                result.stderr.contains("SSL_CERT_FILE names the CA bundle \(missing), which cannot be read"),
                "stderr: \(result.stderr)")

            try await withTestOrigin { origin in
                let object = TestObject(size: 1 << 20, seed: 30)
                origin.addObject(object, at: "/plain.bin")
                let environment = Self.noCAVariables.merging(["SSL_CERT_FILE": missing]) { $1 }
                let plain = try await CLI.start(
                    [origin.url("/plain.bin"), "-q"], in: fixture.scratch.url,
                    environment: environment
                ).wait(timeout: .seconds(60))
                #expect(plain.status == 0, "a plain http download does not read it: \(plain.stderr)")
                #expect(try await TestData.sha256(of: fixture.scratch.path("plain.bin")) == object.sha256)
            }
        }
    }

    @Test("Configuration.tls.certificateAuthorities: an explicit bundle is trusted; a missing one is refused")
    func library() async throws {
        try await Self.withFixture { fixture in
            var configuration = Downloader.Configuration()
            configuration.tls.certificateAuthorities = .custom(file: fixture.certificate)
            configuration.connections = .fixed(4)
            try await withDownloader(configuration) { downloader in
                _ = try await downloader.download(DownloadRequest(url: fixture.url), to: fixture.scratch.path("t.bin"))
            }
            #expect(try await fixture.downloadedIntact())

            configuration.tls.certificateAuthorities = .systemDefault
            let untrusted = await #expect(throws: DownloadError.self) {
                try await withDownloader(configuration) { downloader in
                    try await downloader.download(DownloadRequest(url: fixture.url), to: fixture.scratch.path("t.bin"))
                }
            }
            #expect(untrusted?.kind == .tls, "\(String(describing: untrusted))")
            #expect(untrusted?.remedy == .checkCertificate)
            #expect(untrusted?.message.contains("Configuration.tls.certificateAuthorities") == true)

            configuration.tls.certificateAuthorities = .custom(file: fixture.scratch.path("missing.pem"))
            let refused = await #expect(throws: DownloadError.self) {
                try await withDownloader(configuration) { downloader in
                    try await downloader.download(DownloadRequest(url: fixture.url), to: fixture.scratch.path("t.bin"))
                }
            }
            #expect(refused?.kind == .invalidRequest)
            #expect(refused?.reason.contains("Configuration.tls.certificateAuthorities: the CA bundle") == true)
        }
    }
}
