import Foundation
import Swoop
import SwoopTestOrigin
import SwoopTestSupport
import Testing

/// One test per misbehaviour of the origin. Each ends with the byte-identical file, or with a
/// specific error and nothing at the target path, within the time its timeouts allow. The limits
/// are generous (at least three times a quiet machine's time, stretched by the machine's load:
/// ``MachineLoad``) and hard: a download still running at its limit is shut down, so a hang fails
/// the test instead of holding up the run.
@Suite("Faults")
struct FaultTests {
    /// Outcome of one download against a faulty origin.
    struct Run {
        var result: Result<DownloadResult, DownloadError>
        var elapsed: Duration
        var scratch: Scratch
        var target: String
    }

    func download(
        _ object: TestObject, faults: (inout FaultSwitches) -> Void,
        configuration: Downloader.Configuration = quickConfiguration(connections: 4),
        within limit: Duration, sourceLocation: SourceLocation = #_sourceLocation,
        check: (Run, TestOrigin) async throws -> Void
    ) async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            origin.addObject(object, at: "/object.iso")
            origin.updateFaults(faults)
            let target = scratch.path("object.iso")
            var started = MachineLoad.Deadline(limit)
            let result: Result<DownloadResult, DownloadError>
            do {
                result = .success(
                    try await withDownloader(configuration) { downloader in
                        let deadline = Task {
                            var deadline = MachineLoad.Deadline(limit)
                            try await deadline.sleep()
                            await downloader.shutdown()
                        }
                        defer { deadline.cancel() }
                        return try await downloader.download(
                            DownloadRequest(url: origin.url("/object.iso")), to: target)
                    })
            } catch let error as DownloadError {
                result = .failure(error)
            }
            let run = Run(result: result, elapsed: .now - started.started, scratch: scratch, target: target)
            let allowed = started.bound()
            #expect(run.elapsed < allowed, "took \(run.elapsed), allowed \(allowed)", sourceLocation: sourceLocation)
            switch result {
            case .success:
                #expect(
                    try await TestData.sha256(of: target) == object.sha256, "wrong bytes",
                    sourceLocation: sourceLocation)
            case .failure:
                #expect(
                    !FileManager.default.fileExists(atPath: target), "a failed download left a file at the target",
                    sourceLocation: sourceLocation)
            }
            try await check(run, origin)
        }
    }

    func expectSuccess(_ run: Run, sourceLocation: SourceLocation = #_sourceLocation) -> DownloadResult? {
        switch run.result {
        case .success(let result): return result
        case .failure(let error):
            Issue.record("expected success, got: \(error)", sourceLocation: sourceLocation)
            return nil
        }
    }

    func expectFailure(
        _ run: Run, _ kind: DownloadError.Kind, mentioning text: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        switch run.result {
        case .success:
            Issue.record("expected a \(kind) failure", sourceLocation: sourceLocation)
        case .failure(let error):
            #expect(error.kind == kind, "\(error)", sourceLocation: sourceLocation)
            #expect(error.message.contains(text), "message: \(error.message)", sourceLocation: sourceLocation)
        }
    }

    @Test("connection dropped after N bytes of every response: continues from the last byte")
    func dropAfterBytes() async throws {
        try await download(
            TestObject(size: 6 << 20, seed: 1), faults: { $0.drops = .init(afterBytes: 700_000) }, within: .seconds(20)
        ) { run, origin in
            let result = expectSuccess(run)
            #expect((result?.retries ?? 0) > 0)
            // Every cut request resumed where it stopped: about the object's size in total (a client
            // restarting segments from their start would never finish at 700 kB per response).
            let served = origin.requests.reduce(0) { $0 + $1.bodyBytesSent }
            #expect(served <= 9 << 20, "served \(served)")
        }
    }

    @Test("connections dropped at random (p = 0.3)")
    func dropProbability() async throws {
        try await download(
            TestObject(size: 16 << 20, seed: 2), faults: { $0.drops = .init(probability: 0.3) },
            configuration: quickConfiguration(connections: 8, maxTries: 10), within: .seconds(30)
        ) { run, _ in
            _ = expectSuccess(run)
        }
    }

    @Test("503 with Retry-After on the first tries is waited out", arguments: [503, 429])
    func failFirstWithRetryAfter(status: Int) async throws {
        try await exclusively {
            var configuration = quickConfiguration(connections: 4, maxTries: 5)
            configuration.retry.maxDelay = .seconds(5)
            try await download(
                TestObject(size: 4 << 20, seed: 3),
                faults: {
                    $0.failures = .init(firstRequests: 2, status: status, retryAfterSeconds: 1)
                }, configuration: configuration, within: .seconds(15)
            ) { run, origin in
                let result = expectSuccess(run)
                #expect(result?.retries == 2)
                #expect(run.elapsed >= .seconds(2), "Retry-After: 1 was honoured twice (\(run.elapsed))")
                #expect(origin.requests.prefix(2).allSatisfy { $0.status == status })
            }
        }
    }

    @Test("a server that keeps failing gives up after --max-tries with the status named")
    func failForever() async throws {
        try await download(
            TestObject(size: 4 << 20, seed: 4), faults: { $0.failures = .init(firstRequests: 1000) },
            configuration: quickConfiguration(maxTries: 3), within: .seconds(20)
        ) { run, origin in
            expectFailure(run, .httpStatus, mentioning: "503 Service Unavailable")
            #expect(origin.requestCount == 3)
        }
    }

    @Test("a stalled response (headers, then silence) is replaced after the stall timeout")
    func stallAfterHeaders() async throws {
        try await exclusively {
            var configuration = quickConfiguration()
            configuration.timeout.stall = .seconds(1)
            try await download(
                TestObject(size: 6 << 20, seed: 5),
                faults: {
                    $0.stall = .init(afterBytes: 0, firstRequests: 1)
                }, configuration: configuration, within: .seconds(20)
            ) { run, origin in
                _ = expectSuccess(run)
                // The stalled request is logged only once the server has handled the client's close.
                let stallLogged = try await eventually {
                    origin.requests.first?.faultApplied?.contains("stall") == true
                }
                #expect(stallLogged)
            }
        }
    }

    @Test("a response that stalls mid-body is replaced and continues where it stopped")
    func stallMidBody() async throws {
        try await exclusively {
            var configuration = quickConfiguration()
            configuration.timeout.stall = .seconds(1)
            try await download(
                TestObject(size: 12 << 20, seed: 6),
                faults: {
                    $0.stall = .init(afterBytes: 300_000, firstRequests: 3)
                    // libcurl measures a response's speed over its last five seconds, so one that
                    // stops after some bytes is replaced about five seconds after the stall timeout.
                }, configuration: configuration, within: .seconds(30)
            ) { run, _ in
                let result = expectSuccess(run)
                #expect((result?.retries ?? 0) >= 1)
            }
        }
    }

    @Test("a throttled origin still yields the file, at about the throttled rate")
    func throttled() async throws {
        try await exclusively {
            try await download(
                TestObject(size: 8 << 20, seed: 7), faults: { $0.throttleBytesPerSecond = 2 << 20 },
                within: .seconds(20)
            ) { run, _ in
                _ = expectSuccess(run)
                // 4 connections x 2 MiB/s for 8 MiB: about a second; far less would mean the cap was not applied.
                #expect(run.elapsed > .milliseconds(700))
            }
        }
    }

    @Test("a server that ignores Range: one stream, right bytes")
    func ignoresRange() async throws {
        try await download(
            TestObject(size: 6 << 20, seed: 11), faults: { $0.rangeSupport = false }, within: .seconds(20)
        ) { run, origin in
            _ = expectSuccess(run)
            // One stream; after a stream of 100 ms or more, one request asks whether the server still
            // serves its validators (its body not taken).
            #expect((1...2).contains(origin.requestCount), "\(origin.requests.map(\.status))")
        }
    }

    @Test("a 'server busy' HTML page in answer to a segment request is never written")
    func busyHTMLForSegments() async throws {
        try await download(
            TestObject(size: 6 << 20, seed: 12),
            faults: {
                $0.busyPage = .init()
                $0.honestFirstRequests = 1
            }, configuration: quickConfiguration(maxTries: 2, stall: .seconds(30)), within: .seconds(20)
        ) { run, _ in
            expectFailure(run, .invalidResponse, mentioning: "likely an error page")
            let part = try Data(contentsOf: URL(fileURLWithPath: Downloader.workingFiles(of: run.target).part))
            #expect(!part.contains(Data("Server busy".utf8)), "HTML reached the file")
        }
    }

    @Test("a 'server busy' HTML page in answer to the probe is not saved as the file")
    func busyHTMLForProbe() async throws {
        try await download(
            TestObject(size: 6 << 20, seed: 13), faults: { $0.busyPage = .init() },
            configuration: quickConfiguration(maxTries: 2), within: .seconds(20)
        ) { run, _ in
            expectFailure(run, .invalidResponse, mentioning: "HTML page")
            #expect(!run.scratch.exists(part: "object.iso"))
        }
    }

    @Test("the busy page goes away: the download succeeds")
    func busyHTMLThenFine() async throws {
        try await exclusively {
            let scratch = try Scratch()
            defer { scratch.cleanup() }
            try await withTestOrigin { origin in
                let object = TestObject(size: 4 << 20, seed: 14)
                origin.addObject(object, at: "/object.iso")
                // Two busy pages, then the file: the server's own count, not the test's clock,
                // decides when the page goes away.
                origin.updateFaults {
                    $0.busyPage = .init(firstRequests: 2)
                }
                var configuration = quickConfiguration(maxTries: 6)
                configuration.retry.baseDelay = .milliseconds(200)
                _ = try await withDownloader(configuration) {
                    try await $0.download(
                        DownloadRequest(url: origin.url("/object.iso")), to: scratch.path("object.iso"))
                }
                #expect(try await TestData.sha256(of: scratch.path("object.iso")) == object.sha256)
                #expect(origin.requests.prefix(2).allSatisfy { $0.faultApplied?.contains("busyHTML") == true })
            }
        }
    }

    @Test("a body shorter than its Content-Length is detected and continued")
    func shortBody() async throws {
        try await download(
            TestObject(size: 4 << 20, seed: 15),
            faults: {
                $0.shortBody = true
                $0.honestFirstRequests = 3
            }, configuration: quickConfiguration(maxTries: 4, stall: .seconds(30)), within: .seconds(20)
        ) { run, origin in
            // Every short response lands its bytes; the remainder is fetched again until a
            // response can no longer make progress, then the download fails with the cause.
            switch run.result {
            case .success:
                break
            case .failure(let error):
                #expect(error.kind == .network, "\(error)")
                #expect(error.message.contains("gave up after"), "\(error)")
            }
            #expect(origin.requests.contains { $0.faultApplied?.contains("shortBody") == true })
        }
    }

    @Test("a Content-Range off by one is refused", arguments: [0, 1])
    func contentRangeOffByOne(honest: Int) async throws {
        try await download(
            TestObject(size: 4 << 20, seed: 17),
            faults: {
                $0.contentRangeLie = .offByOne
                $0.honestFirstRequests = honest
            }, configuration: quickConfiguration(maxTries: 2, stall: .seconds(30)), within: .seconds(20)
        ) { run, _ in
            expectFailure(run, .invalidResponse, mentioning: "Content-Range")
        }
    }

    @Test(
        "a redirect to a non-http scheme is refused",
        arguments: ["ftp://127.0.0.1/object.iso", "file:///etc/passwd", "gopher://x/"])
    func redirectToOtherScheme(location: String) async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            origin.addRedirect(from: "/go", to: location)
            let error = await #expect(throws: DownloadError.self) {
                try await withDownloader(quickConfiguration()) {
                    try await $0.download(DownloadRequest(url: origin.url("/go")), to: scratch.path("go"))
                }
            }
            #expect(
                error?.message.contains("only http and https redirects are followed") == true,
                "\(String(describing: error))")
            let left = try FileManager.default.contentsOfDirectory(atPath: scratch.url.path)
            #expect(left.isEmpty)
        }
    }

    @Test("credentials never follow a redirect to another host; they do to the same host")
    func credentialsAcrossRedirects() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { first in
            try await withTestOrigin { second in
                let object = TestObject(size: 3 << 20, seed: 18)
                second.addObject(object, at: "/there.iso")
                first.addObject(object, at: "/here.iso")
                // "localhost" is another host name than "127.0.0.1", and another port too.
                first.addRedirect(from: "/away", to: "http://localhost:\(second.port)/there.iso")
                first.addRedirect(from: "/stay", to: "/here.iso")
                let secret = [
                    (name: "Authorization", value: "Bearer TOPSECRET"), (name: "Cookie", value: "session=TOPSECRET"),
                    (name: "X-Api-Key", value: "TOPSECRET"), (name: "Accept", value: "*/*"),
                ]
                _ = try await withDownloader(quickConfiguration()) {
                    try await $0.download(
                        DownloadRequest(url: first.url("/away"), headers: secret), to: scratch.path("a.iso"))
                }
                #expect(try await TestData.sha256(of: scratch.path("a.iso")) == object.sha256)
                #expect(!second.requests.isEmpty)
                for request in second.requests {
                    #expect(
                        !request.headers.contains { $0.value.contains("TOPSECRET") },
                        "leaked to another host: \(request.headers)")
                    #expect(request.header("accept") == "*/*", "harmless headers still go")
                }
                _ = try await withDownloader(quickConfiguration()) {
                    try await $0.download(
                        DownloadRequest(url: first.url("/stay"), headers: secret), to: scratch.path("b.iso"))
                }
                let sameHost = first.requests.filter { $0.path == "/here.iso" }
                #expect(!sameHost.isEmpty && sameHost.allSatisfy { $0.header("authorization") == "Bearer TOPSECRET" })
                // Nothing secret reached the disk.
                for name in try FileManager.default.contentsOfDirectory(atPath: scratch.url.path) {
                    // Read and searched on a thread of its own: Foundation's search takes seconds in a
                    // debug build, long enough to hold one of the two cooperative threads.
                    let file = scratch.url.appendingPathComponent(name)
                    #expect(try await offThePool { !(try Data(contentsOf: file)).contains(Data("TOPSECRET".utf8)) })
                }
            }
        }
    }

    @Test("an unreachable host fails fast with the cause named")
    func unreachable() async throws {
        var configuration = quickConfiguration()
        configuration.timeout.connect = .seconds(2)
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        let closed = try ClosedPort()
        defer { closed.release() }
        let port = closed.port
        let started = ContinuousClock.now
        let error = await #expect(throws: DownloadError.self) {
            try await withDownloader(configuration) {
                try await $0.download(DownloadRequest(url: "http://127.0.0.1:\(port)/x.iso"), to: scratch.path("x.iso"))
            }
        }
        #expect(error?.kind == .unreachable)
        #expect(error?.message.contains(" tries)") == false, "no retries: \(error?.message ?? "")")
        #expect(
            ContinuousClock.now - started < MachineLoad.bound(.seconds(20)),
            "no retries with backoff (they would take about 30 s)")
    }
}

extension Data {
    func contains(_ needle: Data) -> Bool { range(of: needle) != nil }
}
