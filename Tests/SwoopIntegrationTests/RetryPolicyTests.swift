import Foundation
import Swoop
import SwoopTestOrigin
import Synchronization
import Testing

/// What is tried again and what ends at once, and what the messages say about it: a single stream
/// that breaks starts over; redirect loops, like other permanent failures, fail fast; nothing
/// promises a resume that cannot happen.
@Suite("Retry policy")
struct RetryPolicyTests {
    @Test("a server without ranges that resets mid-body once: the stream starts over, says so, and succeeds")
    func streamStartsOver() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            let object = TestObject(size: 6 << 20, seed: 71)
            origin.addObject(object, at: "/plain.bin")
            origin.updateFaults {
                $0.rangeSupport = false
                $0.drops = .init(afterBytes: 2 << 20, firstRequests: 1)
            }
            let result = try await CLI.run([origin.url("/plain.bin")], in: scratch.url)
            #expect(result.status == 0, "stderr: \(result.stderr)")
            #expect(try await TestData.sha256(of: scratch.path("plain.bin")) == object.sha256)
            #expect(result.stderr.contains("does not support ranges"), "stderr: \(result.stderr)")
            #expect(result.stderr.contains("starting over from the first byte"), "stderr: \(result.stderr)")
            #expect(result.stderr.contains("try 2 of 8"), "stderr: \(result.stderr)")
            // One cut response, one whole one, and the request after a stream of 100 ms or more.
            #expect((2...3).contains(origin.requestCount), "one cut response, one whole one")
        }
    }

    @Test("a broken stream's wait for its next try is reported as the download's wait, naming the server")
    func streamWaitIsReported() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            let object = TestObject(size: 4 << 20, seed: 73)
            origin.addObject(object, at: "/plain.bin")
            origin.updateFaults {
                $0.rangeSupport = false
                $0.drops = .init(afterBytes: 1 << 20, firstRequests: 1)
            }
            var configuration = quickConfiguration(connections: 1)
            // A wait of 1-2 s (full jitter), reported every 100 ms.
            (configuration.retry.baseDelay, configuration.retry.maxDelay) = (.seconds(2), .seconds(2))
            configuration.progressInterval = .milliseconds(100)
            let waits = Mutex<[DownloadProgress.Wait]>([])
            try await withDownloader(configuration) { downloader in
                _ = try await downloader.download(
                    DownloadRequest(url: origin.url("/plain.bin")), to: scratch.path("plain.bin")
                ) { progress in
                    if let wait = progress.waiting { waits.withLock { $0.append(wait) } }
                }
            }
            #expect(try await TestData.sha256(of: scratch.path("plain.bin")) == object.sha256)
            let seen = waits.withLock { $0 }
            #expect(!seen.isEmpty, "no progress report showed the wait")
            #expect(seen.allSatisfy { $0.server.hasPrefix("127.0.0.1:") && !$0.cause.isEmpty }, "\(seen)")
            #expect(seen.contains { ($0.nextTry ?? .zero) > .zero }, "\(seen)")
        }
    }

    @Test("a server without ranges that always resets: fails after --max-tries, saying why it cannot resume")
    func streamGivesUp() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            origin.addObject(TestObject(size: 4 << 20, seed: 72), at: "/plain.bin")
            origin.updateFaults {
                $0.rangeSupport = false
                $0.drops = .init(afterBytes: 1 << 20)
            }
            let result = try await CLI.run([origin.url("/plain.bin"), "--max-tries", "3"], in: scratch.url)
            #expect(result.status == 1, "stderr: \(result.stderr)")
            #expect(result.stderr.contains("cannot resume (tried 3 times)"), "stderr: \(result.stderr)")
            #expect(result.stderr.contains("nothing was kept"), "stderr: \(result.stderr)")
            #expect(!result.stderr.contains("resume with the same command"), "stderr: \(result.stderr)")
            #expect(origin.requestCount == 3)
            #expect(try FileManager.default.contentsOfDirectory(atPath: scratch.url.path).isEmpty)
        }
    }

    @Test("a redirect loop fails within a few seconds, naming the loop")
    func redirectLoop() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            origin.addRedirect(from: "/a.bin", to: "/b.bin")
            origin.addRedirect(from: "/b.bin", to: origin.url("/a.bin"))
            let started = ContinuousClock.now
            let result = try await CLI.run([origin.url("/a.bin")], in: scratch.url)
            let took = ContinuousClock.now - started
            #expect(result.status == 1, "stderr: \(result.stderr)")
            #expect(result.stderr.contains("redirects in a loop"), "stderr: \(result.stderr)")
            #expect(result.stderr.contains("/a.bin -> "), "stderr: \(result.stderr)")
            // Generous for a machine running other suites; the request count below is the point.
            #expect(took < MachineLoad.bound(.seconds(15)), "took \(took)")
            // Before, 88 requests over 25 s (the loop was retried 8 times); now one pass through it.
            #expect(origin.requestCount == 4, "\(origin.requestCount) requests")
        }
    }

    @Test("a redirect chain longer than 20 fails once, without retries")
    func tooManyRedirects() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            for hop in 0..<30 { origin.addRedirect(from: "/r\(hop)", to: "/r\(hop + 1)") }
            let result = try await CLI.run([origin.url("/r0")], in: scratch.url)
            #expect(result.status == 1, "stderr: \(result.stderr)")
            #expect(result.stderr.contains("too many redirects (more than 20)"), "stderr: \(result.stderr)")
            #expect(origin.requestCount == 21, "\(origin.requestCount) requests")
        }
    }

    @Test("Ctrl-C on a download from a server without ranges says nothing was kept, not to resume")
    func interruptWithoutRanges() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            origin.addObject(TestObject(size: 16 << 20, seed: 73), at: "/plain.bin")
            origin.updateFaults {
                $0.rangeSupport = false
                $0.throttleBytesPerSecond = 256 << 10
            }
            let process = try CLI.start([origin.url("/plain.bin")], in: scratch.url)
            let receiving = try await eventually(timeout: .seconds(60)) {
                origin.connectionsAccepted > 0 && scratch.exists(part: "plain.bin")
            }
            #expect(receiving, "the stream started")
            try await Task.sleep(for: .milliseconds(500))  // 16 MiB at 256 KiB/s: a minute to go
            process.signal(SIGINT)
            let result = try await process.wait(timeout: .seconds(20))
            #expect(result.status == 130, "stderr: \(result.stderr)")
            #expect(result.stderr.contains("nothing was kept"), "stderr: \(result.stderr)")
            #expect(result.stderr.contains("does not support ranges"), "stderr: \(result.stderr)")
            #expect(!result.stderr.contains("resume with the same command"), "stderr: \(result.stderr)")
            #expect(!result.stderr.contains("saving state"), "stderr: \(result.stderr)")
            #expect(try FileManager.default.contentsOfDirectory(atPath: scratch.url.path).isEmpty)
        }
    }
}
