import Foundation
import Swoop
import SwoopTestOrigin
import Testing

/// Resume through the library against the test origin: a changed object, damaged saved state, a new URL to the
/// same object, `status`, a completed target, `--no-resume`, pause/resume/cancel. (Process-level cases, kill -9
/// and Ctrl-C, are in `ResumeTests`.)
@Suite("Resume (library)", .serialized)
struct LibraryResumeTests {
    /// Downloads until at least `threshold` bytes are done, then cancels the task (a pause).
    private func downloadPartially(
        _ url: String, to path: String, threshold: Int64, configuration: Downloader.Configuration
    ) async throws {
        try await withDownloader(configuration) { downloader in
            // Cancelled from the progress handler, on the transfer thread: a wait on the cooperative
            // pool could resume after the download had ended, on a loaded machine.
            let trigger = ProgressTrigger(atBytes: threshold)
            let task = Task {
                try await downloader.download(DownloadRequest(url: url), to: path, progress: trigger.handler)
            }
            trigger.arm { task.cancel() }
            let outcome = await task.result
            guard case .failure(let error as DownloadError) = outcome, error.kind == .interrupted else {
                throw TestFailure("expected an interrupted download, got \(outcome)")
            }
        }
        #expect(Downloader.status(of: path).state == .partial)
    }

    /// Four connections, with progress and checkpoints often enough to pause a throttled origin early.
    private func checkpointing() -> Downloader.Configuration {
        var configuration = quickConfiguration(connections: 4)
        configuration.progressInterval = .milliseconds(20)
        configuration.files.checkpointInterval = .milliseconds(50)
        return configuration
    }

    @Test("an object that changed between runs is downloaded anew, never mixed")
    func objectChangedBetweenRuns() async throws {
        try await exclusively {
            let scratch = try Scratch()
            defer { scratch.cleanup() }
            try await withTestOrigin { origin in
                origin.addObject(TestObject(size: 16 << 20, seed: 20), at: "/o.bin")
                origin.updateFaults { $0.throttleBytesPerSecond = 1 << 20 }
                try await downloadPartially(
                    origin.url("/o.bin"), to: scratch.path("o.bin"), threshold: 2 << 20, configuration: checkpointing())
                origin.changeObject(at: "/o.bin")
                origin.updateFaults { $0.throttleBytesPerSecond = nil }
                origin.resetLog()
                let changed = try #require(origin.object(at: "/o.bin"))
                _ = try await withDownloader(checkpointing()) {
                    try await $0.download(DownloadRequest(url: origin.url("/o.bin")), to: scratch.path("o.bin"))
                }
                #expect(try await TestData.sha256(of: scratch.path("o.bin")) == changed.sha256)
                // The resume probe asks under the saved ETag: refused (412) four times in a row, on
                // new connections (a pool's other node would have let the saved ETag through once),
                // the object changed, and it starts over from byte 0.
                let refused = Array(origin.requests.prefix(4))
                #expect(refused.count == 4 && refused.allSatisfy { $0.status == 412 && $0.header("if-match") != nil })
                #expect(Set(refused.map(\.connectionID)).count == 4, "each on a new connection")
                let restart = try #require(origin.requests.dropFirst(4).first)
                #expect(restart.header("range") == "bytes=0-1048575" && restart.header("if-match") == nil)
                #expect(restart.status == 206, "then it starts over from byte 0")
            }
        }
    }

    @Test("with --on-change fail, a changed object fails and nothing is kept")
    func objectChangedFails() async throws {
        try await exclusively {
            let scratch = try Scratch()
            defer { scratch.cleanup() }
            try await withTestOrigin { origin in
                origin.addObject(TestObject(size: 16 << 20, seed: 21), at: "/o.bin")
                origin.updateFaults { $0.throttleBytesPerSecond = 1 << 20 }
                try await downloadPartially(
                    origin.url("/o.bin"), to: scratch.path("o.bin"), threshold: 2 << 20, configuration: checkpointing())
                origin.changeObject(at: "/o.bin")
                var configuration = checkpointing()
                configuration.files.onObjectChange = .fail
                let error = await #expect(throws: DownloadError.self) {
                    try await withDownloader(configuration) {
                        try await $0.download(DownloadRequest(url: origin.url("/o.bin")), to: scratch.path("o.bin"))
                    }
                }
                #expect(error?.kind == .objectChanged)
                #expect(!scratch.exists("o.bin") && !scratch.exists(part: "o.bin") && !scratch.exists(map: "o.bin"))
            }
        }
    }

    enum MapDamage: String, CaseIterable, Sendable {
        case flippedByte, truncated, otherVersion, notAMap, emptyFile, partDeleted, partShortened
    }

    @Test("damaged saved state is never trusted: warn, start over, end byte-identical", arguments: MapDamage.allCases)
    func damagedState(damage: MapDamage) async throws {
        try await exclusively {
            let scratch = try Scratch()
            defer { scratch.cleanup() }
            try await withTestOrigin { origin in
                let object = TestObject(size: 16 << 20, seed: 22)
                origin.addObject(object, at: "/d.bin")
                origin.updateFaults { $0.throttleBytesPerSecond = 1 << 20 }
                let path = scratch.path("d.bin")
                try await downloadPartially(
                    origin.url("/d.bin"), to: path, threshold: 2 << 20, configuration: checkpointing())
                let mapURL = URL(fileURLWithPath: Downloader.workingFiles(of: path).map)
                var map = try Data(contentsOf: mapURL)
                switch damage {
                case .flippedByte:
                    map[map.count / 2] ^= 0x40
                    try map.write(to: mapURL)
                case .truncated:
                    try map.prefix(map.count - 7).write(to: mapURL)
                case .otherVersion:
                    map[8] = 99
                    try map.write(to: mapURL)
                case .notAMap:
                    try Data("hello, I am not a segment map".utf8).write(to: mapURL)
                case .emptyFile:
                    try Data().write(to: mapURL)
                case .partDeleted:
                    try FileManager.default.removeItem(atPath: Downloader.workingFiles(of: path).part)
                case .partShortened:
                    let handle = try FileHandle(
                        forWritingTo: URL(fileURLWithPath: Downloader.workingFiles(of: path).part))
                    try handle.truncate(atOffset: 1 << 20)
                    try handle.close()
                }
                #expect(!Downloader.status(of: path).canResume)
                origin.updateFaults { $0.throttleBytesPerSecond = nil }
                origin.resetLog()
                let result = try await CLI.run([origin.url("/d.bin"), "-o", "d.bin", "-c", "4"], in: scratch.url)
                #expect(result.status == 0, "stderr: \(result.stderr)")
                #expect(result.stderr.contains("starting over"), "a warning says why: \(result.stderr)")
                #expect(try await TestData.sha256(of: path) == object.sha256)
                let first = try #require(origin.requests.first)
                #expect(first.header("range") == "bytes=0-1048575")
                #expect(first.header("if-match") == nil, "a fresh start, not a resume")
                let served = origin.requests.reduce(0) { $0 + $1.bodyBytesSent }
                #expect(served >= object.size)
            }
        }
    }

    @Test("a different URL to the same object resumes (a re-signed URL, a mirror)")
    func resumeWithNewURL() async throws {
        try await exclusively {
            let scratch = try Scratch()
            defer { scratch.cleanup() }
            try await withTestOrigin { origin in
                let object = TestObject(size: 16 << 20, seed: 23)
                origin.addObject(object, at: "/bucket/o.bin")
                origin.addObject(object, at: "/mirror/o.bin")
                origin.updateFaults { $0.throttleBytesPerSecond = 1 << 20 }
                let path = scratch.path("o.bin")
                try await downloadPartially(
                    origin.url("/bucket/o.bin") + "?X-Signature=old", to: path, threshold: 2 << 20,
                    configuration: checkpointing())
                let saved = Downloader.status(of: path)
                #expect(saved.url?.contains("X-Signature") == false, "no query string on disk")
                origin.updateFaults { $0.throttleBytesPerSecond = nil }
                origin.resetLog()
                let result = try await withDownloader(checkpointing()) {
                    try await $0.download(
                        DownloadRequest(url: origin.url("/mirror/o.bin") + "?X-Signature=new"), to: path)
                }
                #expect(try await TestData.sha256(of: path) == object.sha256)
                #expect(result.bytesResumed == saved.bytesDone)
                #expect(origin.requests.allSatisfy { $0.path == "/mirror/o.bin" })
                #expect(origin.requests.first?.header("if-match") == object.etagValue)
                let served = origin.requests.reduce(0) { $0 + $1.bodyBytesSent }
                // ... and the overlap each request has with the bytes held around it (4 KiB a side).
                let overlap = Int64(origin.requests.count) * 2 * 4096
                let missing = object.size - saved.bytesDone
                #expect(served >= missing && served <= missing + overlap, "only the missing bytes were fetched")
            }
        }
    }

    @Test(
        "status and the next run agree on whether a partial download resumes",
        arguments: [ETagStyle.strong, .weak, .none])
    func statusAgreesWithTheNextRun(etag: ETagStyle) async throws {
        try await exclusively {
            let scratch = try Scratch()
            defer { scratch.cleanup() }
            try await withTestOrigin { origin in
                let object = TestObject(size: 16 << 20, seed: 25, etag: etag)
                origin.addObject(object, at: "/bucket/s.bin")
                origin.addObject(object, at: "/mirror/s.bin")
                origin.updateFaults { $0.throttleBytesPerSecond = 1 << 20 }
                let path = scratch.path("s.bin")
                try await downloadPartially(
                    origin.url("/bucket/s.bin"), to: path, threshold: 2 << 20, configuration: checkpointing())
                // The same URL always resumes; another one only with a strong ETag to prove it.
                #expect(Downloader.status(of: path).canResume)
                #expect(Downloader.status(of: path, url: origin.url("/bucket/s.bin")).canResume)
                let predicted = Downloader.status(of: path, url: origin.url("/mirror/s.bin") + "?sig=2")
                #expect(predicted.canResume == (etag == .strong), "\(predicted.state)")
                origin.updateFaults { $0.throttleBytesPerSecond = nil }
                origin.resetLog()
                let result = try await withDownloader(checkpointing()) {
                    try await $0.download(DownloadRequest(url: origin.url("/mirror/s.bin") + "?sig=2"), to: path)
                }
                #expect(try await TestData.sha256(of: path) == object.sha256)
                #expect(
                    (result.bytesResumed > 0) == predicted.canResume,
                    "status said \(predicted.state); the run resumed \(result.bytesResumed) bytes")
                #expect(result.bytesResumed == (predicted.canResume ? predicted.bytesDone : 0))
            }
        }
    }

    @Test("running the same command on a completed target exits 0 without downloading")
    func completedTargetRerun() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            let object = TestObject(size: 5 << 20, seed: 24)
            origin.addObject(object, at: "/done.bin")
            let first = try await CLI.run([origin.url("/done.bin"), "-q"], in: scratch.url)
            #expect(first.status == 0)
            origin.resetLog()
            let again = try await CLI.run([origin.url("/done.bin"), "--json"], in: scratch.url)
            #expect(again.status == 0, "stderr: \(again.stderr)")
            #expect(again.stdout.contains("\"alreadyComplete\":true"))
            #expect(origin.requests.count == 1)
            // 1 KiB from its middle, compared with the file's, confirms it: the bytes, not the validators.
            let middle = object.size / 2
            #expect(origin.requests.first?.status == 206)
            #expect(origin.requests.first?.header("range") == "bytes=\(middle - 512)-\(middle + 511)")
            #expect(origin.requests.first?.bodyBytesSent == 1024)
            #expect(try await TestData.sha256(of: scratch.path("done.bin")) == object.sha256)
            // If the object changed since: with --on-change fail, the finished file is left alone
            // and the user told; by default the new version replaces it once whole.
            origin.changeObject(at: "/done.bin")
            let refused = try await CLI.run([origin.url("/done.bin"), "--on-change", "fail"], in: scratch.url)
            #expect(refused.status == 4)
            #expect(
                refused.stderr.contains("changed") && refused.stderr.contains("left as it was"), "\(refused.stderr)")
            #expect(try await TestData.sha256(of: scratch.path("done.bin")) == object.sha256)
            let changed = try await CLI.run([origin.url("/done.bin"), "--json"], in: scratch.url)
            #expect(changed.status == 0, "stderr: \(changed.stderr)")
            #expect(changed.stdout.contains("\"objectChanges\":1"), "\(changed.stdout)")
            #expect(changed.stdout.contains("\"refetchedBytes\":\(object.size)"), "\(changed.stdout)")
            let current = try #require(origin.object(at: "/done.bin"))
            #expect(try await TestData.sha256(of: scratch.path("done.bin")) == current.sha256)
        }
    }

    @Test("--no-resume starts over")
    func noResume() async throws {
        try await exclusively {
            let scratch = try Scratch()
            defer { scratch.cleanup() }
            try await withTestOrigin { origin in
                let object = TestObject(size: 12 << 20, seed: 25)
                origin.addObject(object, at: "/n.bin")
                origin.updateFaults { $0.throttleBytesPerSecond = 1 << 20 }
                let path = scratch.path("n.bin")
                try await downloadPartially(
                    origin.url("/n.bin"), to: path, threshold: 2 << 20, configuration: checkpointing())
                origin.updateFaults { $0.throttleBytesPerSecond = nil }
                origin.resetLog()
                let result = try await CLI.run(
                    [origin.url("/n.bin"), "-o", "n.bin", "--no-resume", "-q"], in: scratch.url)
                #expect(result.status == 0)
                #expect(try await TestData.sha256(of: path) == object.sha256)
                #expect(origin.requests.first?.header("if-match") == nil)
                #expect(origin.requests.reduce(0) { $0 + $1.bodyBytesSent } >= object.size)
            }
        }
    }

    @Test("a cancelled download's connections give their permits back: the next one gets every connection")
    func cancelReturnsPermits() async throws {
        try await exclusively {
            let scratch = try Scratch()
            defer { scratch.cleanup() }
            try await withTestOrigin { origin in
                origin.addObject(TestObject(size: 32 << 20, seed: 27), at: "/slow.bin")
                origin.addObject(TestObject(size: 8 << 20, seed: 28), at: "/next.bin")
                origin.updateFaults { $0.throttleBytesPerSecond = 1 << 20 }
                var configuration = quickConfiguration(connections: 4)
                configuration.connectionPool.maximumConnectionsPerHost = 4
                try await withDownloader(configuration) { downloader in
                    // Cancelled twice with its 4 connections in flight (from the progress handler, on
                    // the transfer thread), each time letting them go with their exchanges.
                    for round in 0..<2 {
                        let cancelling = ProgressTrigger(atBytes: 2 << 20)
                        let acted = AsyncStream.makeStream(of: Void.self)
                        let task = try downloader.start(
                            DownloadRequest(url: origin.url("/slow.bin")), to: scratch.path("slow-\(round).bin"),
                            progress: cancelling.handler)
                        cancelling.arm {
                            task.cancel()
                            acted.continuation.yield()
                        }
                        for await _ in acted.stream { break }
                        _ = try? await task.result()
                    }
                    // Before, each cancel kept its 4 permits: nothing was left for this one, which
                    // waited for a permit for ever (a second at most here; a minute is the bound).
                    origin.updateFaults { $0.throttleBytesPerSecond = 4 << 20 }
                    let next = try downloader.start(
                        DownloadRequest(url: origin.url("/next.bin")), to: scratch.path("next.bin"))
                    let result = await withTaskGroup(of: DownloadResult?.self) { group in
                        group.addTask { try? await next.result() }
                        group.addTask {
                            try? await Task.sleep(for: MachineLoad.bound(.seconds(20)))
                            return nil
                        }
                        let first = await group.next() ?? nil
                        next.cancel()
                        group.cancelAll()
                        return first
                    }
                    let done = try #require(result, "the next download found no permit")
                    #expect(done.connectionsUsed == 4, "\(done.connectionsUsed) connections")
                }
            }
        }
    }

    @Test("the library's pause, resume and cancel")
    func pauseResumeCancel() async throws {
        try await exclusively {
            let scratch = try Scratch()
            defer { scratch.cleanup() }
            try await withTestOrigin { origin in
                let object = TestObject(size: 16 << 20, seed: 26)
                origin.addObject(object, at: "/p.bin")
                origin.updateFaults { $0.throttleBytesPerSecond = 1 << 20 }
                let path = scratch.path("p.bin")
                try await withDownloader(checkpointing()) { downloader in
                    // Paused and cancelled from the progress handler, on the transfer thread: a wait on
                    // the cooperative pool could resume after the download had ended, on a loaded machine.
                    let pausing = ProgressTrigger(atBytes: 1 << 20)
                    let acted = AsyncStream.makeStream(of: Void.self)
                    let task = try downloader.start(
                        DownloadRequest(url: origin.url("/p.bin")), to: path, progress: pausing.handler)
                    pausing.arm {
                        task.pause()
                        acted.continuation.yield()
                    }
                    for await _ in acted.stream { break }
                    #expect(task.state == .paused)
                    // Give the pause time to land (generously, for loaded machines), then watch the origin.
                    try await Task.sleep(for: MachineLoad.bound(.seconds(1)))
                    let paused = Downloader.status(of: path)
                    #expect(paused.state == .partial)
                    let servedWhilePaused = origin.requests.reduce(0) { $0 + $1.bodyBytesSent }
                    try await Task.sleep(for: .seconds(1))
                    #expect(
                        origin.requests.reduce(0) { $0 + $1.bodyBytesSent } == servedWhilePaused,
                        "no transfer while paused")
                    origin.updateFaults { $0.throttleBytesPerSecond = nil }
                    task.resume()
                    let result = try await task.result()
                    #expect(result.bytesResumed > 0)
                    #expect(try await TestData.sha256(of: path) == object.sha256)

                    // Cancel deletes the partial state.
                    origin.updateFaults { $0.throttleBytesPerSecond = 1 << 20 }
                    let cancelling = ProgressTrigger(atBytes: 1)
                    let other = try downloader.start(
                        DownloadRequest(url: origin.url("/p.bin")), to: scratch.path("q.bin"),
                        progress: cancelling.handler)
                    cancelling.arm { other.cancel() }
                    await #expect(throws: DownloadError.self) { try await other.result() }
                    #expect(other.state == .cancelled)
                    #expect(!scratch.exists("q.bin") && !scratch.exists(part: "q.bin") && !scratch.exists(map: "q.bin"))
                }
            }
        }
    }
}
