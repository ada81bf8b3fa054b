import Foundation
import Testing

/// A server (or something between) that closes a connection in the middle of its TLS handshake:
/// a loaded server does, and a clean-clone CI run saw h2o do it to one of a download's
/// connections. It is a network fault, retried like a reset; a certificate Swoop does not trust
/// stays a TLS error that is not retried (see `CertificateAuthorityTests`).
@Suite("TLS handshakes cut short")
struct HandshakeCutTests {
    /// nginx over TLS with one 8 MiB file, behind a relay that cuts the connections in `cutting`.
    static func withCutter(
        cutting: Set<Int>, _ body: (HandshakeCutter, Scratch, Nginx, String) async throws -> Void
    ) async throws {
        let nginx = try await Nginx.start(tls: true)
        defer { nginx.stop() }
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        let expected = try await nginx.addFile("t.bin", size: 8 << 20, seed: 41)
        try await withHandshakeCutter(target: nginx.port, cutting: cutting) { cutter in
            try await body(cutter, scratch, nginx, expected)
        }
    }

    @Test("connections cut during the handshake, the probe's among them, are retried: identical bytes, exit 0")
    func cutConnectionsAreRetried() async throws {
        try await Self.withCutter(cutting: [1, 3, 4, 5]) { cutter, scratch, nginx, expected in
            let result = try await CLI.start(
                [cutter.url("/t.bin"), "-f", "-c", "8", "--cacert", nginx.certificate], in: scratch.url
            ).wait(timeout: .seconds(120))
            #expect(result.status == 0, "stderr: \(result.stderr)")
            #expect(try await TestData.sha256(of: scratch.path("t.bin")) == expected)
            #expect(cutter.cuts == 4, "log: \(cutter.log)")
        }
    }

    @Test("a server that cuts every handshake: a network error saying so, after the tries, and no file")
    func everyHandshakeCut() async throws {
        try await Self.withCutter(cutting: Set(1...100)) { cutter, scratch, nginx, _ in
            let result = try await CLI.start(
                [cutter.url("/t.bin"), "-f", "--max-tries", "2", "--cacert", nginx.certificate], in: scratch.url
            ).wait(timeout: .seconds(120))
            #expect(result.status != 0)
            #expect(result.stderr.contains("connection closed during the TLS handshake"), "stderr: \(result.stderr)")
            #expect(!result.stderr.contains("--insecure"), "no certificate advice for a cut: \(result.stderr)")
            #expect(cutter.cuts == 2, "log: \(cutter.log)")
            #expect(!scratch.exists("t.bin"))
        }
    }
}
