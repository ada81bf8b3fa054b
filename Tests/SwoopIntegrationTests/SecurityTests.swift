import Foundation
import Swoop
import SwoopTestOrigin
import Testing

@Suite("Security")
struct SecurityTests {
    @Test("TLS certificates are verified; --insecure opts out with a warning")
    func tlsVerification() async throws {
        let nginx = try await Nginx.start(tls: true)
        defer { nginx.stop() }
        let expected = try await nginx.addFile("t.iso", size: 2 << 20, seed: 50)
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        #expect(nginx.url("/t.iso").hasPrefix("https://"))
        let refused = try await CLI.run([nginx.url("/t.iso"), "-q"], in: scratch.url)
        #expect(refused.status == 1, "stderr: \(refused.stderr)")
        #expect(refused.stderr.contains("TLS failure"), "stderr: \(refused.stderr)")
        #expect(refused.stderr.contains("--insecure"), "the fix is named: \(refused.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: scratch.url.path).isEmpty)

        let insecure = try await CLI.run([nginx.url("/t.iso"), "--insecure", "-q"], in: scratch.url)
        #expect(insecure.status == 0, "stderr: \(insecure.stderr)")
        #expect(insecure.stderr.contains("warning: --insecure"))
        #expect(try await TestData.sha256(of: scratch.path("t.iso")) == expected)
    }

    @Test("credentials, header values and query strings never reach logs, messages or the segment map")
    func noSecretsOnDiskOrInLogs() async throws {
        try await exclusively {
            // 4 connections at 512 KiB/s: 32 s for 64 MiB, while the first chunks land within a
            // second, so even a starved test process interrupts it mid-download.
            let nginx = try await Nginx.start(limitRate: "512k")
            defer { nginx.stop() }
            _ = try await nginx.addFile("s.iso", size: 64 << 20, seed: 51)
            let scratch = try Scratch()
            defer { scratch.cleanup() }
            let url = "http://user:PASSWORD1@127.0.0.1:\(nginx.port)/s.iso?X-Amz-Signature=QUERYSECRET2"
            let process = try CLI.start(
                [
                    url, "-vvv", "-c", "4", "--header", "Authorization: Bearer HEADERSECRET3", "--header",
                    "X-Token: HEADERSECRET4",
                ], in: scratch.url)
            let target = scratch.path("s.iso")
            try await waitThenAct(
                within: .seconds(30), until: { Downloader.status(of: target).bytesDone > 0 },
                then: { process.signal(SIGINT) })
            let paused = try await process.wait(timeout: .seconds(20))
            #expect(paused.status == 130, "stderr: \(paused.stderr)")
            let missing = try await CLI.run(
                ["http://user:PASSWORD1@127.0.0.1:\(nginx.port)/nothing.iso?sig=QUERYSECRET2", "-vvv"], in: scratch.url)
            #expect(missing.status == 1)
            var haystacks = [paused.stdout, paused.stderr, missing.stdout, missing.stderr]
            for name in try FileManager.default.contentsOfDirectory(atPath: scratch.url.path)
            where !name.hasSuffix(".part") && name != ".swoop" {
                haystacks.append(
                    String(decoding: try Data(contentsOf: scratch.url.appendingPathComponent(name)), as: UTF8.self))
            }
            haystacks.append(
                try FileManager.default.contentsOfDirectory(atPath: scratch.url.path).joined(separator: " "))
            #expect(FileManager.default.fileExists(atPath: scratch.map("s.iso")), "a map was written")
            for secret in ["PASSWORD1", "QUERYSECRET2", "HEADERSECRET3", "HEADERSECRET4"] {
                #expect(!haystacks.contains { $0.contains(secret) }, "\(secret) leaked")
            }
            // The credentials did reach the server (they were used, just not written down).
            #expect(try nginx.log().contains { $0.authorization.contains("HEADERSECRET3") })
        }
    }

    @Test("files are created with the user's umask", arguments: [("077", 0o600), ("022", 0o644)])
    func umask(mask: String, mode: Int) async throws {
        try await withTestOrigin { origin in
            origin.addObject(TestObject(size: 1 << 20, seed: 52), at: "/u.iso")
            let scratch = try Scratch()
            defer { scratch.cleanup() }
            let process = try ChildProcess(
                executable: "/bin/sh",
                arguments: [
                    "-c", "umask \(mask) && cd \"$1\" && exec \"$0\" \"$2\" -q", CLI.executable, scratch.url.path,
                    origin.url("/u.iso"),
                ])
            #expect(await process.wait(timeout: .seconds(30)) == 0)
            let attributes = try FileManager.default.attributesOfItem(atPath: scratch.path("u.iso"))
            #expect((attributes[.posixPermissions] as? Int) == mode)
        }
    }
}
