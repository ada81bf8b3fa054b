import Foundation
import Swoop
import SwoopTestOrigin
import Testing

/// `-J` / `Downloader.suggestedFileName(for: DownloadRequest)`: the file is named by the server's
/// `Content-Disposition`, never outside the chosen directory, with one extra request.
@Suite("Content-Disposition names (-J)")
struct RemoteHeaderNameTests {
    /// An object served at `/download?id=7`-like paths, named by `disposition`.
    private func named(_ disposition: String?, size: Int64 = 200_000, seed: UInt64 = 31) -> TestObject {
        var object = TestObject(size: size, seed: seed)
        object.contentDisposition = disposition
        return object
    }

    static let headerCases: [(disposition: String?, expected: String)] = [
        ("attachment; filename=report.pdf", "report.pdf"),
        ("attachment; filename=\"fallback.txt\"; filename*=UTF-8''na%C3%AFve.txt", "naïve.txt"),
        ("attachment; filename=\"q \\\"x\\\";y.txt\"", "q \"x\";y.txt"),
        ("attachment; filename=\"../../escape.txt\"", "escape.txt"),
        ("attachment; filename*=UTF-8''..%2F..%2Fclimb.txt", "climb.txt"),
        ("attachment; filename=\"..\"", "download"),
        ("attachment; filename=\"unterminated", "download"),
        (nil, "download"),
    ]

    // MARK: Library

    @Test("the library names the object from one ranged GET of its first byte", arguments: headerCases)
    func libraryNames(disposition: String?, expected: String) async throws {
        try await withTestOrigin { origin in
            origin.addObject(named(disposition), at: "/download")
            let name = try await withDownloader(quickConfiguration()) {
                try await $0.suggestedFileName(for: DownloadRequest(url: origin.url("/download?id=7")))
            }
            #expect(name == expected)
            #expect(try await eventually { origin.requests.count == 1 })
            let request = origin.requests[0]
            #expect(request.method == "GET")
            #expect(request.header("range") == "bytes=0-0")
            #expect(request.bodyBytesSent == 1)
        }
    }

    @Test("the name holds for the download that follows, which reuses the connection")
    func nameThenDownload() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            let object = named("attachment; filename=\"report.pdf\"", size: 3 << 20)
            origin.addObject(object, at: "/download")
            try await withDownloader(quickConfiguration(connections: 1)) { downloader in
                let request = DownloadRequest(url: origin.url("/download?id=7"))
                let name = try await downloader.suggestedFileName(for: request)
                let result = try await downloader.download(request, to: scratch.path(name))
                #expect(result.path.hasSuffix("/report.pdf"))
            }
            #expect(try await TestData.sha256(of: scratch.path("report.pdf")) == object.sha256)
            #expect(origin.connectionsAccepted == 1, "the lookup's connection is reused")
        }
    }

    @Test("redirects are followed as a download follows them; credentials stay with their host")
    func redirects() async throws {
        try await withTestOrigin { first in
            try await withTestOrigin { second in
                second.addObject(named("attachment; filename=\"signed.bin\""), at: "/blob")
                first.addRedirect(from: "/get", to: "http://localhost:\(second.port)/blob?sig=1")
                first.addRedirect(from: "/ftp", to: "ftp://localhost/blob")
                let request = DownloadRequest(url: first.url("/get"), headers: [("Authorization", "Bearer TOPSECRET")])
                try await withDownloader(quickConfiguration()) { downloader async throws in
                    #expect(try await downloader.suggestedFileName(for: request) == "signed.bin")
                    let refused = await #expect(throws: DownloadError.self) {
                        try await downloader.suggestedFileName(for: DownloadRequest(url: first.url("/ftp")))
                    }
                    #expect(refused?.message.contains("only http and https redirects are followed") == true)
                }
                #expect(try await eventually { second.requests.count == 1 })
                #expect(second.requests[0].header("authorization") == nil, "leaked to another host")
                #expect(first.requests.first?.header("authorization") == "Bearer TOPSECRET")
            }
        }
    }

    @Test("an HTTP error is the download's error; transient ones are retried")
    func failures() async throws {
        try await withTestOrigin { origin in
            origin.addObject(named("attachment; filename=ok.bin"), at: "/busy")
            try await withDownloader(quickConfiguration(maxTries: 3)) { downloader async throws in
                let missing = await #expect(throws: DownloadError.self) {
                    try await downloader.suggestedFileName(for: DownloadRequest(url: origin.url("/missing")))
                }
                #expect(missing?.kind == .httpStatus)
                #expect(missing?.httpStatus == 404)
                origin.resetLog()
                origin.updateFaults { $0.failures = .init(firstRequests: 2) }
                #expect(
                    try await downloader.suggestedFileName(for: DownloadRequest(url: origin.url("/busy"))) == "ok.bin")
                #expect(origin.requestCount == 3)
            }
        }
    }

    @Test("cancelling the task or shutting the downloader down ends a lookup that waits to retry")
    func cancellation() async throws {
        try await withTestOrigin { origin async throws in
            origin.addObject(named("attachment; filename=ok.bin"), at: "/busy")
            origin.updateFaults {
                $0.failures = .init(firstRequests: 100, retryAfterSeconds: 60)
            }
            var configuration = quickConfiguration()
            configuration.retry.maxDelay = .seconds(120)
            let downloader = Downloader(configuration: configuration)
            let request = DownloadRequest(url: origin.url("/busy"))
            let started = ContinuousClock.now
            let task = Task { try await downloader.suggestedFileName(for: request) }
            #expect(try await eventually { origin.requestCount >= 1 })
            task.cancel()
            let cancelled = await #expect(throws: DownloadError.self) { try await task.value }
            #expect(cancelled?.kind == .cancelled)

            let waiting = Task { try await downloader.suggestedFileName(for: request) }
            #expect(try await eventually { origin.requestCount >= 2 })
            await downloader.shutdown()
            let shutDown = await #expect(throws: DownloadError.self) { try await waiting.value }
            #expect(shutDown?.kind == .cancelled)
            #expect(ContinuousClock.now - started < .seconds(55), "neither waited for the 60 s of Retry-After")
        }
    }

    // MARK: Command line

    @Test("swoop get -J names the file inside -d", arguments: headerCases)
    func commandLine(disposition: String?, expected: String) async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        let directory = scratch.url.appendingPathComponent("in/deeper")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try await withTestOrigin { origin in
            let object = named(disposition)
            origin.addObject(object, at: "/download")
            let result = try await CLI.run(
                ["get", "-J", origin.url("/download?id=7"), "-d", "in/deeper", "--json"], in: scratch.url)
            #expect(result.status == 0, "stderr: \(result.stderr)")
            #expect(
                result.stdout.contains("\"path\":\"in\\/deeper\\/") || result.stdout.contains("\"path\":\"in/deeper/"),
                "\(result.stdout)")
            #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == [expected])
            #expect(try await TestData.sha256(of: directory.appendingPathComponent(expected).path) == object.sha256)
            // Nothing anywhere else.
            #expect(try FileManager.default.contentsOfDirectory(atPath: scratch.url.path) == ["in"])
            #expect(try FileManager.default.contentsOfDirectory(atPath: scratch.path("in")) == ["deeper"])
        }
    }

    @Test("an existing file with the server's name is kept (exit 5) unless --force; a finished one is confirmed")
    func existingTarget() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            let object = named("attachment; filename=report.pdf")
            origin.addObject(object, at: "/download")
            try Data("mine".utf8).write(to: scratch.url.appendingPathComponent("report.pdf"))
            let refused = try await CLI.run(["-J", origin.url("/download?id=7"), "-q"], in: scratch.url)
            #expect(refused.status == 5, "stderr: \(refused.stderr)")
            #expect(refused.stderr.contains("report.pdf already exists"), "\(refused.stderr)")
            #expect(try String(contentsOf: scratch.url.appendingPathComponent("report.pdf"), encoding: .utf8) == "mine")
            let forced = try await CLI.run(["-J", origin.url("/download?id=7"), "-q", "--force"], in: scratch.url)
            #expect(forced.status == 0, "stderr: \(forced.stderr)")
            #expect(try await TestData.sha256(of: scratch.path("report.pdf")) == object.sha256)
            let again = try await CLI.run(["-J", origin.url("/download?id=7")], in: scratch.url)
            #expect(again.status == 0, "stderr: \(again.stderr)")
            #expect(again.stderr.contains("already complete"), "\(again.stderr)")
        }
    }

    @Test(
        "-J with -o, or with -i, is a usage error that says why",
        arguments: [
            (
                ["-J", "-o", "x.bin"],
                "-J names the file after the server's Content-Disposition header and -o names it yourself"
            ),
            (["--remote-header-name", "--output", "x.bin"], "give one of them"),
            (["-J", "-i", "list.txt"], "-J is for one URL"),
        ])
    func usageErrors(arguments: [String], expected: String) async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try "http://127.0.0.1:1/a.bin\n".write(
            to: scratch.url.appendingPathComponent("list.txt"), atomically: true, encoding: .utf8)
        let url = arguments.contains("-i") ? [] : ["http://127.0.0.1:1/a.bin"]
        let result = try await CLI.run(["get"] + url + arguments, in: scratch.url)
        #expect(result.status == 2, "stderr: \(result.stderr)")
        #expect(result.stderr.contains(expected), "stderr: \(result.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: scratch.url.path) == ["list.txt"])
    }
}
