import Foundation
import Swoop
import SwoopTestOrigin
import SwoopTestSupport
import Testing

/// Swoop against real servers nobody here wrote — Apache httpd (plain, mod_deflate, weak ETags,
/// `AddEncoding x-gzip`), lighttpd (ETags on and off), Caddy with `tls internal`, h2o over HTTP and
/// HTTPS, `python3 -m http.server` (no ranges) and SeaweedFS's S3 gateway with presigned URLs
/// (plain, and objects put with `ContentEncoding: gzip`) — through the `swoop` executable, as a
/// user runs it. The servers are installed by scripts/setup and started once for the suite.
@Suite("Conformance with real servers", .conformanceServers)
struct ConformanceTests {
    /// The body bytes a finished download's rerun may receive: a probe, an error page.
    static let rerunAllowance: Int64 = 64 << 10

    @Test("0 B, 1 B, an odd size and 64 MiB arrive byte-identical", arguments: ServerVariant.allCases)
    func identical(_ variant: ServerVariant) async throws {
        let lab = try ConformanceLab.require()
        let server = try lab.server(for: variant)
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        await forEachSize(lab) { object in
            let file = variant.fileName("identical-\(object.size)")
            do {
                let url = try await server.publish(object.file, at: variant.path("identical-\(object.size)"))
                let arguments = [url, "-o", file, "-q"] + lab.trustArguments(for: variant)
                let result = try await CLI.run(arguments, in: scratch.url)
                await self.expectSaved(result, file, object, in: scratch, "\(variant), \(object.size) B")
            } catch {
                Issue.record(error, "\(variant), \(object.size) B")
            }
        }
    }

    @Test(
        "the same command again exits 0 at once, saying it is complete, without fetching the body",
        arguments: ServerVariant.allCases)
    func rerunFinished(_ variant: ServerVariant) async throws {
        let lab = try ConformanceLab.require()
        let server = try lab.server(for: variant)
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        let commands = Commands()
        await forEachSize(lab) { object in
            let name = "rerun-\(object.size)"
            let file = variant.fileName(name)
            do {
                let url = try await server.publish(object.file, at: variant.path(name))
                let arguments = [url, "-o", file, "--json", "-q"] + lab.trustArguments(for: variant)
                let first = try await CLI.run(arguments, in: scratch.url)
                await self.expectSaved(first, file, object, in: scratch, "\(variant), \(object.size) B, first run")
                if first.status == 0 { await commands.add(object, arguments) }
            } catch {
                Issue.record(error, "\(variant), \(object.size) B")
            }
        }
        try await server.settleLog()
        var before: [String: Int] = [:]
        for (object, _) in await commands.all {
            let path = variant.path("rerun-\(object.size)")
            before[path] = try server.served(path)?.count
        }
        let reruns = Reruns()
        await withTaskGroup(of: Void.self) { group in
            for (object, arguments) in await commands.all {
                group.addTask {
                    let file = variant.fileName("rerun-\(object.size)")
                    let label = "\(variant), \(object.size) B, the same command again"
                    do {
                        let again = try await CLI.run(arguments, in: scratch.url)
                        await self.expectSaved(again, file, object, in: scratch, label)
                        let summary = try? JSONDecoder().decode(RunSummary.self, from: Data(again.stdout.utf8))
                        #expect(summary?.alreadyComplete == true, "\(label): \(again.stdout)")
                        await reruns.add(object)
                    } catch {
                        Issue.record(error, "\(label)")
                    }
                }
            }
        }
        try await server.settleLog()
        for object in await reruns.all {
            let path = variant.path("rerun-\(object.size)")
            guard let log = try server.served(path) else { continue }
            let rerun = log.dropFirst(before[path] ?? 0)
            let body = rerun.reduce(0) { $0 + $1.bodyBytes }
            #expect(
                body <= Self.rerunAllowance,
                "\(variant), \(object.size) B: the rerun received \(body) body bytes: \(Array(rerun))")
        }
    }

    @Test(
        "kill -9 mid-download, then the same command resumes to the identical file",
        arguments: ServerVariant.allCases)
    func killAndResume(_ variant: ServerVariant) async throws {
        let lab = try ConformanceLab.require()
        let server = try lab.server(for: variant)
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        let object = lab.pool.large
        let file = variant.fileName("resume")
        let url = try await server.publish(object.file, at: variant.path("resume"))
        let command = [url, "-o", file] + lab.trustArguments(for: variant)
        // 1 MiB/s: the kill comes after 2 MiB, normally 2-3 s into a run of 64 s. (At 4 MiB/s,
        // with the conformance suite's other work beside it, runs ended before their kill.)
        let slow = try CLI.start(command + ["--limit-rate", "1m", "-q"], in: scratch.url)
        let started = ContinuousClock.now
        let progressed = try await waitForProgress(slow, scratch.path(file), object, atLeast: 2 << 20, variant)
        let seenAfter = ContinuousClock.now - started
        slow.signal(SIGKILL)
        let killed = try await slow.wait(timeout: .seconds(30))
        try #require(progressed, "\(variant): no progress before the kill; stderr: \(killed.stderr)")
        #expect(killed.status == 128 + SIGKILL, "\(variant): 2 MiB seen after \(seenAfter)")
        #expect(scratch.exists(part: file), "the kill left the part file")
        let saved = Downloader.status(of: scratch.path(file))
        if variant.acceptsRanges {
            #expect(saved.state == .partial && saved.bytesDone >= 2 << 20, "\(saved)")
        }
        try await server.settleLog()
        let before = try server.served(variant.path("resume"))?.count ?? 0

        let resumed = try await CLI.run(command + ["--json", "-q"], in: scratch.url)
        await expectSaved(resumed, file, object, in: scratch, "\(variant), resumed")
        guard variant.acceptsRanges, resumed.status == 0 else { return }  // without ranges it starts over
        let summary = try? JSONDecoder().decode(RunSummary.self, from: Data(resumed.stdout.utf8))
        #expect((summary?.resumedBytes ?? 0) >= saved.bytesDone, "\(variant): \(resumed.stdout)")
        try await server.settleLog()
        if let log = try server.served(variant.path("resume")) {
            // Duplicates of what was in flight (a hedge, a replaced connection) are allowed; bytes
            // the segment map held are not.
            let refetched = Self.refetched(saved, by: log.dropFirst(before))
            #expect(refetched.isEmpty, "\(variant): the resumed run fetched saved bytes again: \(refetched)")
        }
    }

    @Test(
        "an object replaced mid-download ends as one version byte for byte, never a mix",
        arguments: ServerVariant.allCases)
    func replacedMidDownload(_ variant: ServerVariant) async throws {
        let lab = try ConformanceLab.require()
        let server = try lab.server(for: variant)
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        let original = lab.pool.large
        let file = variant.fileName("replaced")
        let url = try await server.publish(original.file, at: variant.path("replaced"))
        let run = try CLI.start(
            [url, "-o", file, "--limit-rate", "4m", "-q"] + lab.trustArguments(for: variant), in: scratch.url)
        let progressed = try await waitForProgress(run, scratch.path(file), original, atLeast: 1 << 20, variant)
        guard progressed else {
            run.signal(SIGKILL)
            let failed = try await run.wait(timeout: .seconds(30))
            Issue.record("\(variant): no progress before the replacement; stderr: \(failed.stderr)")
            return
        }
        _ = try await server.publish(lab.pool.replacement.file, at: variant.path("replaced"))
        let result = try await run.wait(timeout: .seconds(180))
        // With ranges, requests sent after the replacement see the new object and the download
        // starts over on it; but when every byte was asked for before it (a slow probe on a loaded
        // machine makes the first requests take whole segments), the old object, complete, is
        // right too: one version. Without ranges the one stream reads the file the server opened,
        // which the rename left whole; the request after it finds the new validators and the
        // download starts over on the new object (or, had it ended before, kept the old).
        let held = try? await TestData.sha256(of: scratch.path(file))
        let expected = held != original.sha256 ? lab.pool.replacement : original
        await expectSaved(result, file, expected, in: scratch, "\(variant), replaced mid-download")
    }

    @Test(
        "a file rewritten in place: the new version mid-download, after kill -9, and on a rerun; never mixed",
        arguments: ServerVariant.allCases)
    func rewrittenInPlace(_ variant: ServerVariant) async throws {
        let lab = try ConformanceLab.require()
        let server = try lab.server(for: variant)
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        let versions = try await RewrittenVersions.make(in: scratch.url.appendingPathComponent("versions"))
        let trust = lab.trustArguments(for: variant)
        // Mid-download: the rewrite lands while responses are under way, one block behind what
        // arrived and two ahead (with ranges, requests sent after it find the new validators and
        // the download starts over on the new version). A server without ranges is read in one
        // stream, which reads the new blocks ahead: after it, one request asks whether its
        // validators moved on. The download is held still (SIGSTOP) across the rewrite and the
        // servers' metadata caches' second, so that it lands mid-download on a loaded machine
        // too; its connections stay open, and the server goes on sending into them.
        // nginx, the server of the issue's report, with -c 1 and -c 8 too.
        let counts: [[String]] = variant == .nginx ? [[], ["-c", "1"], ["-c", "8"]] : [[]]
        for (index, count) in counts.enumerated() {
            let midBlocks = [(1 << 20) + (12 << 10)] + RewrittenVersions.blocks
            let rewritten = try await versions.rewriting(midBlocks, name: "mid\(index)")
            let name = "inplace-mid\(index)"
            let file = variant.fileName(name)
            let url = try await server.publish(try versions.copy("mid\(index)"), at: variant.path(name))
            // Checkpoints every 0.1 s: the progress this waits for shows as it arrives.
            let command =
                [url, "-o", file, "--limit-rate", "2m", "--checkpoint-interval", "0.1", "--json", "-q"] + count + trust
            let run = try CLI.start(command, in: scratch.url)
            let original = versions.original
            // Held still the moment the progress is seen, on the polling thread: a hop back to the
            // test's task may take seconds on a loaded machine (CI once found the file complete).
            let progressed = try await waitForProgress(
                run, scratch.path(file), original, atLeast: 4 << 20, variant, thenSignal: SIGSTOP)
            let status = Downloader.status(of: scratch.path(file))
            let midway = run.process.isRunning && (!variant.acceptsRanges || status.bytesDone < RewrittenVersions.size)
            #expect(progressed && midway, "\(variant) \(count): not mid-download at the rewrite: \(status)")
            try await server.rewrite(variant.path(name), to: rewritten.file, blocks: midBlocks, blockSize: 4096)
            try await Self.statCacheExpiry()
            run.signal(SIGCONT)
            let result = try await run.wait(timeout: .seconds(180))
            await expectSaved(result, file, rewritten, in: scratch, "\(variant) \(count), rewritten mid-download")
        }
        // kill -9, then the rewrite: one block the segment map holds, one it does not.
        do {
            let file = variant.fileName("inplace-kill")
            let url = try await server.publish(try versions.copy("kill"), at: variant.path("inplace-kill"))
            let command = [url, "-o", file] + trust
            let slow = try CLI.start(command + ["--limit-rate", "1m", "-q"], in: scratch.url)
            let progressed = try await waitForProgress(
                slow, scratch.path(file), versions.original, atLeast: 2 << 20, variant)
            slow.signal(SIGKILL)
            _ = try await slow.wait(timeout: .seconds(30))
            try #require(progressed, "\(variant): no progress before the kill")
            let status = Downloader.status(of: scratch.path(file))
            var blocks = [RewrittenVersions.size - 4096]
            if let chunk = status.chunkSize, let held = status.completedChunks.first {
                blocks.insert(Int64(held.lowerBound) * chunk + chunk / 2, at: 0)
            }
            let rewritten = try await versions.rewriting(blocks, name: "kill")
            try await server.rewrite(variant.path("inplace-kill"), to: rewritten.file, blocks: blocks, blockSize: 4096)
            try await Self.statCacheExpiry()
            let resumed = try await CLI.run(command + ["-q"], in: scratch.url)
            await expectSaved(resumed, file, rewritten, in: scratch, "\(variant), rewritten between kill -9 and resume")
        }
        // A finished file, then the rewrite away from its middle (which a rerun compares): the
        // same command fetches the new version.
        do {
            let file = variant.fileName("inplace-rerun")
            let url = try await server.publish(try versions.copy("rerun"), at: variant.path("inplace-rerun"))
            let command = [url, "-o", file, "--json", "-q"] + trust
            let first = try await CLI.run(command, in: scratch.url)
            await expectSaved(first, file, versions.original, in: scratch, "\(variant), first run")
            try await server.rewrite(
                variant.path("inplace-rerun"), to: versions.rewritten.file, blocks: RewrittenVersions.blocks,
                blockSize: 4096)
            try await Self.statCacheExpiry()
            let again = try await CLI.run(command, in: scratch.url)
            await expectSaved(again, file, versions.rewritten, in: scratch, "\(variant), rerun after the rewrite")
            #expect(again.stdout.contains("\"objectChanges\":1"), "\(variant): \(again.stdout)")
        }
    }

    // MARK: Helpers

    /// Waits out the servers' caches of a file's metadata: lighttpd keeps a file's stat (its
    /// size, mtime and so its validators) for about a second, and until then answers a changed
    /// file under its old validators (what no client can know, the README says).
    private static func statCacheExpiry() async throws {
        try await Task.sleep(for: .milliseconds(1500))
    }

    /// Runs `body` for each object size at once.
    private func forEachSize(
        _ lab: ConformanceLab, _ body: @escaping @Sendable (ObjectPool.Object) async -> Void
    ) async {
        await withTaskGroup(of: Void.self) { group in
            for object in lab.pool.sizes {
                group.addTask { await body(object) }
            }
        }
    }

    /// The requests (as `range -> bytes served`) whose served bytes overlap what `saved` held.
    private static func refetched(_ saved: DownloadStatus, by requests: some Sequence<ServedRequest>) -> [String] {
        let chunk = saved.chunkSize ?? 1
        let held = saved.completedChunks.map { Int64($0.lowerBound) * chunk..<Int64($0.upperBound) * chunk }
        return requests.compactMap { request in
            guard request.status == 206, request.bodyBytes > 0, let range = request.range,
                let asked = ResumeTests.requestedRange(range)
            else { return nil }
            // A request overlaps the bytes held around it by a window on each side (its lead and
            // trail, compared with them): only what lies between is new.
            let window = Int64(4096)
            let end = asked.lowerBound + request.bodyBytes
            guard end - window > asked.lowerBound + window else { return nil }
            let served = (asked.lowerBound + window)..<(end - window)
            return held.contains(where: { $0.overlaps(served) }) ? "\(range) -> \(request.bodyBytes) B" : nil
        }
    }

    /// Exit 0, the file holds exactly `object`'s bytes, and no `.part` or `.swoop` is left.
    private func expectSaved(
        _ result: CLI.Result, _ file: String, _ object: ObjectPool.Object, in scratch: Scratch,
        _ label: String, sourceLocation: SourceLocation = #_sourceLocation
    ) async {
        #expect(
            result.status == 0, "\(label): exit \(result.status); stderr: \(result.stderr)",
            sourceLocation: sourceLocation)
        guard result.status == 0 else { return }
        let sha256 = try? await TestData.sha256(of: scratch.path(file))
        #expect(sha256 == object.sha256, "\(label): the file is not the object's bytes", sourceLocation: sourceLocation)
        for working in [scratch.part(file), scratch.map(file)] {
            #expect(
                !FileManager.default.fileExists(atPath: working), "\(label): \(working) left behind",
                sourceLocation: sourceLocation)
        }
    }

    /// Waits (up to a minute, ending early) until the download recorded `bytes` or more: in its
    /// segment map, or without ranges, as the start of its part file. `false` if it exited first.
    /// It polls on a thread of its own: a poll on Swift's cooperative pool (two threads here) sees
    /// nothing while other tests hold both, and the download may end meanwhile.
    private func waitForProgress(
        _ run: CLI.Running, _ target: String, _ object: ObjectPool.Object,
        atLeast bytes: Int, _ variant: ServerVariant, thenSignal signal: Int32? = nil
    ) async throws -> Bool {
        let source = try FileHandle(forReadingFrom: object.file)
        let expected = try source.read(upToCount: bytes) ?? Data()
        try source.close()
        let acceptsRanges = variant.acceptsRanges
        return try await offThePool {
            var deadline = MachineLoad.Deadline(.seconds(60))
            while !deadline.exceeded() && run.process.isRunning {
                var seen = false
                if acceptsRanges {
                    let status = Downloader.status(of: target)
                    seen = status.state == .partial && status.bytesDone >= Int64(bytes)
                } else if let handle = FileHandle(forReadingAtPath: Downloader.workingFiles(of: target).part) {
                    let start = try handle.read(upToCount: bytes)
                    try handle.close()
                    seen = start == expected
                }
                if seen {
                    if let signal { run.signal(signal) }
                    return true
                }
                usleep(50_000)
            }
            return false
        }
    }
}

/// A 16 MiB file and the same file with two 4 KiB blocks of other bytes (inside 10 MiB, and the
/// last one: away from every seam and from the middle a rerun compares), and private copies of
/// the first to publish (a rewrite in place must not reach another test's file).
private struct RewrittenVersions {
    static let size: Int64 = 16 << 20
    static let blocks: [Int64] = [(10 << 20) + (12 << 10), size - 4096]

    let directory: URL
    let original: ObjectPool.Object
    let rewritten: ObjectPool.Object
    /// Other bytes, where the rewritten blocks come from.
    let other: URL

    static func make(in directory: URL) async throws -> RewrittenVersions {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let original = directory.appendingPathComponent("original")
        let sha256 = try await TestData.write(to: original, size: Int(size), seed: 54)
        // Two hours old: a rewrite moves the modification time (and with it the validators) on.
        try FileManager.default.setAttributes(
            [.posixPermissions: 0o644, .modificationDate: Date().addingTimeInterval(-7200)],
            ofItemAtPath: original.path)
        let other = directory.appendingPathComponent("other")
        _ = try await TestData.write(to: other, size: Int(size), seed: 55)
        var versions = RewrittenVersions(
            directory: directory, original: ObjectPool.Object(file: original, size: Int(size), sha256: sha256),
            rewritten: ObjectPool.Object(file: original, size: Int(size), sha256: sha256), other: other)
        versions = RewrittenVersions(
            directory: directory, original: versions.original,
            rewritten: try await versions.rewriting(blocks, name: "rewritten"), other: other)
        return versions
    }

    /// A copy of the original, with its modification time, named `name`.
    func copy(_ name: String) throws -> URL {
        let copy = directory.appendingPathComponent("copy-\(name)")
        try FileManager.default.copyItem(at: original.file, to: copy)
        let attributes = try FileManager.default.attributesOfItem(atPath: original.file.path)
        try FileManager.default.setAttributes(
            [.posixPermissions: 0o644, .modificationDate: attributes[.modificationDate] as Any], ofItemAtPath: copy.path
        )
        return copy
    }

    /// The original with the 4 KiB blocks at `blocks` taken from the other bytes.
    func rewriting(_ blocks: [Int64], name: String) async throws -> ObjectPool.Object {
        let file = try copy("\(name)-rewritten")
        try DocumentRoot.patch(file, from: other, blocks: blocks, blockSize: 4096)
        return ObjectPool.Object(file: file, size: Int(Self.size), sha256: try await TestData.sha256(of: file.path))
    }
}

/// The fields of `swoop --json` these tests read.
private struct RunSummary: Decodable {
    var alreadyComplete: Bool?
    var resumedBytes: Int64?
}

/// Commands collected by concurrent first runs, for their reruns.
private actor Commands {
    private(set) var all: [(ObjectPool.Object, [String])] = []
    func add(_ object: ObjectPool.Object, _ arguments: [String]) { all.append((object, arguments)) }
}

/// The objects whose reruns succeeded, collected concurrently.
private actor Reruns {
    private(set) var all: [ObjectPool.Object] = []
    func add(_ object: ObjectPool.Object) { all.append(object) }
}
