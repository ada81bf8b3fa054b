import Foundation
import SwoopTestOrigin
import Testing

/// The `swoop` executable on bad input: a non-zero exit, a one-line cause, and no file left behind.
@Suite("CLI failures")
struct CLIFailureTests {
    /// Nothing named like the target (no file, no .part, no .swoop) exists in `scratch`.
    private func expectNoFiles(_ scratch: Scratch, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let names = try FileManager.default.contentsOfDirectory(atPath: scratch.url.path)
        #expect(names.isEmpty, "left behind: \(names)", sourceLocation: sourceLocation)
    }

    @Test("404 Not Found")
    func notFound() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            let result = try await CLI.run(["get", origin.url("/missing.iso"), "--quiet"], in: scratch.url)
            #expect(result.status == 1)
            #expect(result.stderr.contains("404 Not Found"), "stderr: \(result.stderr)")
            #expect(result.stderr.split(separator: "\n").count == 1, "one line: \(result.stderr)")
            try expectNoFiles(scratch)
        }
    }

    @Test("403 Forbidden names the likely cause")
    func forbidden() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        let nginx = try await Nginx.start(extraServerConfig: "location /private/ { return 403; }")
        defer { nginx.stop() }
        let result = try await CLI.run([nginx.url("/private/file.bin"), "-q"], in: scratch.url)
        #expect(result.status == 1)
        #expect(result.stderr.contains("403 Forbidden"), "stderr: \(result.stderr)")
        try expectNoFiles(scratch)
    }

    @Test("connection refused")
    func connectionRefused() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        let closed = try ClosedPort()
        defer { closed.release() }
        let port = closed.port
        let started = ContinuousClock.now
        let result = try await CLI.run(["http://127.0.0.1:\(port)/file.bin"], in: scratch.url)
        #expect(result.status == 1)
        #expect(result.stderr.contains("cannot connect"), "stderr: \(result.stderr)")
        #expect(result.stderr.contains("127.0.0.1:\(port)"))
        // Retrying with backoff would take about 30 s and say how many tries; failing fast takes
        // well under a second (the bound stretches with the machine's load, so the words decide).
        #expect(!result.stderr.contains(" tries)"), "no retries: \(result.stderr)")
        #expect(ContinuousClock.now - started < MachineLoad.bound(.seconds(20)), "refused connections fail fast")
        try expectNoFiles(scratch)
    }

    @Test(
        "invalid URLs are usage errors",
        arguments: [
            ("not a url", "invalid URL"),
            ("ftp://example.com/file", "unsupported URL scheme 'ftp'"),
            ("file:///etc/passwd", "unsupported URL scheme 'file'"),
            ("http://", "no host"),
            ("http://127.0.0.1:99999/x", "port"),
            ("", "empty"),
        ])
    func invalidURL(url: String, expected: String) async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        let result = try await CLI.run([url], in: scratch.url)
        #expect(result.status == 2, "stderr: \(result.stderr)")
        #expect(result.stderr.contains(expected), "stderr: \(result.stderr)")
        try expectNoFiles(scratch)
    }

    @Test(
        "bad options are usage errors",
        arguments: [
            (["--connections", "0"], "--connections"),
            (["--connections", "many"], "connections"),
            (["--header", "NoColonHere"], "Name: value"),
            (["--header", "Bad Name: x"], "--header"),
            (["--max-tries", "0"], "--max-tries"),
        ])
    func badOptions(arguments: [String], expected: String) async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        let result = try await CLI.run(["http://127.0.0.1:1/x"] + arguments, in: scratch.url)
        #expect(result.status == 2, "stderr: \(result.stderr)")
        #expect(result.stderr.contains(expected), "stderr: \(result.stderr)")
        try expectNoFiles(scratch)
    }

    @Test("an existing file is not overwritten without --force")
    func existingTarget() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            let object = TestObject(size: 3 << 20, seed: 11)
            origin.addObject(object, at: "/data.bin")
            try Data("precious".utf8).write(to: URL(fileURLWithPath: scratch.path("data.bin")))
            let refused = try await CLI.run([origin.url("/data.bin")], in: scratch.url)
            #expect(refused.status == 5)
            #expect(refused.stderr.contains("already exists"), "stderr: \(refused.stderr)")
            #expect(try String(contentsOfFile: scratch.path("data.bin"), encoding: .utf8) == "precious")

            let forced = try await CLI.run([origin.url("/data.bin"), "--force", "-q"], in: scratch.url)
            #expect(forced.status == 0, "stderr: \(forced.stderr)")
            #expect(try await TestData.sha256(of: scratch.path("data.bin")) == object.sha256)
        }
    }

    @Test("the file name comes from the URL and cannot escape the directory")
    func fileNameFromURL() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            origin.addObject(TestObject(size: 1000, seed: 2), at: "/a/..%2F..%2Fescape.bin")
            origin.addObject(TestObject(size: 1000, seed: 3), at: "/dir/")
            let sub = scratch.url.appendingPathComponent("out")
            try FileManager.default.createDirectory(at: sub, withIntermediateDirectories: true)
            let first = try await CLI.run([origin.url("/a/..%2F..%2Fescape.bin"), "-d", "out", "-q"], in: scratch.url)
            #expect(first.status == 0, "stderr: \(first.stderr)")
            let second = try await CLI.run([origin.url("/dir/"), "-d", "out", "-q"], in: scratch.url)
            #expect(second.status == 0, "stderr: \(second.stderr)")
            let inside = try FileManager.default.contentsOfDirectory(atPath: sub.path).sorted()
            #expect(inside == ["escape.bin", "index.html"])
            #expect(try FileManager.default.contentsOfDirectory(atPath: scratch.url.path) == ["out"])
        }
    }

    @Test("--json prints one summary object")
    func jsonSummary() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            let object = TestObject(size: 4 << 20, seed: 13)
            origin.addObject(object, at: "/j.bin")
            let result = try await CLI.run([origin.url("/j.bin"), "--json", "-c", "4"], in: scratch.url)
            #expect(result.status == 0)
            let summary = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
            #expect(summary?["ok"] as? Bool == true)
            #expect(summary?["bytes"] as? Int == Int(object.size))
            #expect((summary?["requests"] as? Int ?? 0) >= 2)
            #expect(result.stdout.split(separator: "\n").count == 1)
            let failure = try await CLI.run([origin.url("/nope"), "--json"], in: scratch.url)
            #expect(failure.status == 1)
            let error = try JSONSerialization.jsonObject(with: Data(failure.stdout.utf8)) as? [String: Any]
            #expect(error?["ok"] as? Bool == false)
            #expect((error?["error"] as? String)?.contains("404") == true)
        }
    }
}
