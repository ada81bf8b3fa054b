import Foundation
import Swoop
import SwoopTestOrigin
import Testing

/// `.netrc` logins and cookie files: each credential goes to its own host, and never after a
/// redirect to another one (127.0.0.2 is another host on loopback).
@Suite("netrc and cookies")
struct NetrcCookieTests {
    private static func basic(_ login: String) -> String { "Basic " + Data(login.utf8).base64EncodedString() }

    @Test("--netrc-file: the origin gets its login; a redirect to another host gets none, not even the default one")
    func netrcStaysWithItsHost() async throws {
        try await withTestOrigin { origin in
            let other = try await TestOrigin.start(host: "127.0.0.2")
            defer { Task { try? await other.shutdown() } }
            let object = TestObject(size: 3 << 20, seed: 94)
            origin.addObject(object, at: "/n.bin")
            other.addObject(object, at: "/m.bin")
            origin.addRedirect(from: "/go.bin", to: other.url("/m.bin"))
            let scratch = try Scratch()
            defer { scratch.cleanup() }
            let netrc = scratch.path("netrc")
            try "machine 127.0.0.1 login alice password NETRCSECRET1\ndefault login eve password DEFAULTSECRET2\n"
                .write(toFile: netrc, atomically: true, encoding: .utf8)

            let direct = try await CLI.run(
                [origin.url("/n.bin"), "-q", "-c", "2", "--netrc-file", netrc], in: scratch.url)
            #expect(direct.status == 0, "stderr: \(direct.stderr)")
            #expect(try await TestData.sha256(of: scratch.path("n.bin")) == object.sha256)
            #expect(
                !origin.requests.isEmpty
                    && origin.requests.allSatisfy { $0.header("authorization") == Self.basic("alice:NETRCSECRET1") })

            origin.resetLog()
            let redirected = try await CLI.run(
                [origin.url("/go.bin"), "-q", "-c", "2", "--netrc-file", netrc], in: scratch.url)
            #expect(redirected.status == 0, "stderr: \(redirected.stderr)")
            #expect(try await TestData.sha256(of: scratch.path("go.bin")) == object.sha256)
            #expect(
                origin.requests.first?.header("authorization") == Self.basic("alice:NETRCSECRET1"),
                "the origin got its login")
            #expect(
                !other.requests.isEmpty && other.requests.allSatisfy { $0.header("authorization") == nil },
                "no login after the redirect: \(other.requests.map { $0.header("authorization") ?? "-" })")

            // Without --netrc nothing is read.
            origin.resetLog()
            let off = try await CLI.run([origin.url("/n.bin"), "-q", "-o", "off.bin"], in: scratch.url)
            #expect(off.status == 0)
            #expect(origin.requests.allSatisfy { $0.header("authorization") == nil })
        }
    }

    @Test("-b FILE sends each cookie to its domain only; --cookie-jar saves them; -b name=value goes to the URL's host")
    func cookies() async throws {
        try await withTestOrigin { origin in
            let other = try await TestOrigin.start(host: "127.0.0.2")
            defer { Task { try? await other.shutdown() } }
            let object = TestObject(size: 3 << 20, seed: 95)
            origin.addObject(object, at: "/c.bin")
            other.addObject(object, at: "/d.bin")
            origin.addRedirect(from: "/go.bin", to: other.url("/d.bin"))
            let scratch = try Scratch()
            defer { scratch.cleanup() }
            let file = scratch.path("cookies.txt")
            try "# Netscape HTTP Cookie File\n127.0.0.1\tFALSE\t/\tFALSE\t0\tsession\tCOOKIESECRET3\n".write(
                toFile: file, atomically: true, encoding: .utf8)

            let jar = scratch.path("jar.txt")
            let result = try await CLI.run(
                [origin.url("/go.bin"), "-q", "-c", "2", "-b", file, "--cookie-jar", jar], in: scratch.url)
            #expect(result.status == 0, "stderr: \(result.stderr)")
            #expect(try await TestData.sha256(of: scratch.path("go.bin")) == object.sha256)
            #expect(origin.requests.first?.header("cookie") == "session=COOKIESECRET3")
            #expect(
                !other.requests.isEmpty && other.requests.allSatisfy { $0.header("cookie") == nil },
                "a cookie for 127.0.0.1 never goes to 127.0.0.2")
            #expect(
                try String(contentsOfFile: jar, encoding: .utf8).contains("COOKIESECRET3"), "the jar holds the cookies")

            origin.resetLog()
            let inline = try await CLI.run(
                [origin.url("/c.bin"), "-q", "-c", "2", "-b", "token=INLINE4"], in: scratch.url)
            #expect(inline.status == 0, "stderr: \(inline.stderr)")
            #expect(!origin.requests.isEmpty && origin.requests.allSatisfy { $0.header("cookie") == "token=INLINE4" })

            let missing = try await CLI.run(
                [origin.url("/c.bin"), "-q", "-b", scratch.path("none.txt")], in: scratch.url)
            #expect(missing.status == 2 && missing.stderr.contains("-b/--cookie"), "stderr: \(missing.stderr)")
        }
    }
}
