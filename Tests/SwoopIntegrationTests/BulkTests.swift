import Foundation
import Swoop
import SwoopTestOrigin
import Synchronization
import Testing

/// Many files at once: lists, one shared connection budget, coalescing, checksums, shards.
@Suite("Bulk downloads", .serialized)
struct BulkTests {
    @Test("300 files: every one right, the missing one reported, the duplicate fetched once, a re-run fetches nothing")
    func threeHundredFiles() async throws {
        try await exclusively {
            let nginx = try await Nginx.start()
            defer { nginx.stop() }
            let scratch = try Scratch()
            defer { scratch.cleanup() }
            var random = SystemRandomNumberGenerator()
            var expected: [String: String] = [:]  // file name -> SHA-256
            var lines: [String] = ["# 300 entries: 297 files, a duplicate line and a missing object"]
            for index in 0..<298 {
                // Mostly small files, some medium ones, two large enough to be split.
                let size =
                    index < 2
                    ? 12 << 20
                    : index % 25 == 0
                        ? Int.random(in: (1 << 20)...(3 << 20), using: &random)
                        : Int.random(in: 1...(300 << 10), using: &random)
                let name = "f\(index).bin"
                expected[name] = try await nginx.addFile(name, size: size, seed: UInt64(index + 1))
                lines.append(nginx.url("/\(name)"))
            }
            lines.append(nginx.url("/f7.bin"))  // the duplicate line
            lines.append(nginx.url("/missing.bin"))
            let list = scratch.url.appendingPathComponent("list.txt")
            try lines.joined(separator: "\n").write(to: list, atomically: true, encoding: .utf8)
            let out = scratch.url.appendingPathComponent("out")
            try FileManager.default.createDirectory(at: out, withIntermediateDirectories: true)

            let first = try await CLI.run(["get", "-i", list.path, "-d", out.path, "--jobs", "16"], in: scratch.url)
            #expect(first.status == 1, "a missing object makes the run fail: \(first.stderr.suffix(500))")
            #expect(
                first.stderr.contains("missing.bin") && first.stderr.contains("404 Not Found"),
                "the missing object is reported: \(first.stderr.suffix(800))")
            #expect(first.stderr.contains("299 done, 1 failed"), "\(first.stderr.suffix(500))")
            for (name, sha) in expected {
                #expect(try await TestData.sha256(of: out.appendingPathComponent(name).path) == sha, "\(name)")
            }
            #expect(!FileManager.default.fileExists(atPath: out.appendingPathComponent("missing.bin").path))
            let log = try nginx.log()
            #expect(
                log.filter { $0.uri == "/f7.bin" }.count == 1,
                "the duplicate line is fetched once: \(log.filter { $0.uri == "/f7.bin" })")
            #expect(log.filter { $0.uri == "/f0.bin" }.count > 1, "large files are split over several requests")
            #expect(Set(log.map(\.connection)).count < log.count, "connections are reused across files")

            try nginx.clearLog()
            let again = try await CLI.run(
                ["get", "-i", list.path, "-d", out.path, "--jobs", "16", "--json"], in: scratch.url)
            #expect(again.status == 1)
            let summary = try #require(
                try JSONSerialization.jsonObject(with: Data(again.stdout.utf8)) as? [String: Any])
            #expect(summary["alreadyComplete"] as? Int == 299, "\(again.stdout)")
            // A re-run transfers no object bytes but the 1 KiB from each file's middle that
            // confirms it (compared with the file's).
            let rerun = try nginx.log()
            #expect(
                !rerun.contains { $0.status == 200 || ($0.status == 206 && $0.bytes > 1024) },
                "a re-run transfers no object bytes: \(rerun.filter { $0.status < 300 }.prefix(3))")
            // Each confirmation ends with its response, and the next file's goes on its connection.
            #expect(
                Set(rerun.map(\.connection)).count < rerun.count / 2,
                "the confirmations reuse connections: \(Set(rerun.map(\.connection)).count) for \(rerun.count) requests"
            )
        }
    }

    @Test("two concurrent callers for the same URL and file share one transfer, and both see its progress")
    func coalescing() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            let object = TestObject(size: 16 << 20, seed: 70)
            origin.addObject(object, at: "/shared.bin")
            origin.updateFaults { $0.throttleBytesPerSecond = 8 << 20 }
            let path = scratch.path("shared.bin")
            let firstSeen = MostBytesSeen(), secondSeen = MostBytesSeen()
            let (a, b) = try await withDownloader(quickConfiguration()) { downloader in
                async let first = downloader.download(DownloadRequest(url: origin.url("/shared.bin")), to: path) {
                    progress in
                    firstSeen.note(progress)
                }
                async let second = downloader.download(
                    DownloadRequest(url: origin.url("/shared.bin")), to: scratch.url.path + "/./shared.bin"
                ) { progress in
                    secondSeen.note(progress)
                }
                return try await (first, second)
            }
            #expect(a == b, "both callers get the same result")
            #expect(firstSeen.bytes == object.size, "the first caller saw the download to its end")
            #expect(secondSeen.bytes == object.size, "the caller who joined saw the download to its end")
            #expect(try await TestData.sha256(of: path) == object.sha256)
            let served = origin.requests.reduce(0) { $0 + $1.bodyBytesSent }
            #expect(served < object.size + (4 << 20), "one transfer: \(served) bytes served for \(object.size)")
        }
    }

    @Test("shard K/N over N runs covers every line exactly once")
    func shards() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            var lines: [String] = []
            for index in 0..<40 {
                origin.addObject(TestObject(size: 1000 + Int64(index), seed: UInt64(index + 100)), at: "/s\(index).bin")
                lines.append(origin.url("/s\(index).bin"))
            }
            let list = scratch.url.appendingPathComponent("list.txt")
            try lines.joined(separator: "\n").write(to: list, atomically: true, encoding: .utf8)
            var seen: [String: Int] = [:]
            for k in 0..<3 {
                let dir = scratch.url.appendingPathComponent("node\(k)")
                try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
                let result = try await CLI.run(
                    ["get", "-i", list.path, "-d", dir.path, "--shard", "\(k)/3", "-q"], in: scratch.url)
                #expect(result.status == 0, "stderr: \(result.stderr)")
                for name in try FileManager.default.contentsOfDirectory(atPath: dir.path) {
                    seen[name, default: 0] += 1
                }
            }
            #expect(seen.count == 40, "every line is covered: \(seen.count)")
            #expect(seen.values.allSatisfy { $0 == 1 }, "no line is downloaded twice")
            #expect(origin.requestCount == 40)
            let invalid = try await CLI.run(["get", "-i", list.path, "--shard", "3/3"], in: scratch.url)
            #expect(invalid.status == 2)
        }
    }

    @Test("list options: out=, dir=, header=, checksum=, comments, mirrors, unsafe names")
    func listOptions() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            let good = TestObject(size: 200_000, seed: 80)
            let bad = TestObject(size: 200_000, seed: 81)
            origin.addObject(good, at: "/good.bin")
            origin.addObject(bad, at: "/bad.bin")
            origin.addObject(TestObject(size: 500, seed: 82), at: "/plain.bin")
            origin.addObject(TestObject(size: 500, seed: 83), at: "/escape.bin")
            let wrong = String(repeating: "0", count: 64)
            let goodSHA256 = try await good.sha256
            let list = """
                # comments and blank lines are skipped

                \(origin.url("/good.bin"))\thttp://mirror.invalid/good.bin
                  out=sub/dir/renamed.bin
                  header=X-Trace: abc
                  checksum=sha-256=\(goodSHA256)
                \(origin.url("/bad.bin"))
                  checksum=sha-256=\(wrong)
                \(origin.url("/plain.bin"))
                  dir=\(scratch.url.appendingPathComponent("elsewhere").path)
                  max-connection-per-server=4
                \(origin.url("/escape.bin"))
                  out=../../escaped.bin
                """
            try FileManager.default.createDirectory(
                at: scratch.url.appendingPathComponent("elsewhere"), withIntermediateDirectories: true)
            let listURL = scratch.url.appendingPathComponent("list.txt")
            try list.write(to: listURL, atomically: true, encoding: .utf8)
            let out = scratch.url.appendingPathComponent("out")
            try FileManager.default.createDirectory(at: out, withIntermediateDirectories: true)
            let result = try await CLI.run(["get", "-i", listURL.path, "-d", out.path], in: scratch.url)
            #expect(result.status != 0)
            #expect(
                try await TestData.sha256(of: out.appendingPathComponent("sub/dir/renamed.bin").path) == good.sha256)
            #expect(origin.requests.first { $0.path == "/good.bin" }?.header("x-trace") == "abc")
            #expect(result.stderr.contains("checksum mismatch"), "stderr: \(result.stderr)")
            #expect(!FileManager.default.fileExists(atPath: out.appendingPathComponent("bad.bin").path))
            #expect(
                !FileManager.default.fileExists(
                    atPath: Downloader.workingFiles(of: out.appendingPathComponent("bad.bin").path).part),
                "nothing is kept")
            #expect(
                FileManager.default.fileExists(atPath: scratch.url.appendingPathComponent("elsewhere/plain.bin").path))
            #expect(
                result.stderr.contains("max-connection-per-server"), "unsupported options are named: \(result.stderr)")
            #expect(result.stderr.contains("unsafe out="), "stderr: \(result.stderr)")
            #expect(
                !FileManager.default.fileExists(
                    atPath: scratch.url.deletingLastPathComponent().appendingPathComponent("escaped.bin").path))
        }
    }

    @Test("a list saved with CRLF line ends, from a file and from stdin: the same entries and options")
    func listWithCRLF() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            let first = TestObject(size: 3000, seed: 91)
            let second = TestObject(size: 2000, seed: 92)
            origin.addObject(first, at: "/first.bin")
            origin.addObject(second, at: "/second.bin")
            let list = [
                "# made on Windows", origin.url("/first.bin"), "  out=renamed.bin", "", origin.url("/second.bin"), "",
            ].joined(separator: "\r\n")
            try list.write(to: scratch.url.appendingPathComponent("list.txt"), atomically: true, encoding: .utf8)
            try FileManager.default.createDirectory(
                at: scratch.url.appendingPathComponent("file"), withIntermediateDirectories: true)
            let fromFile = try await CLI.run(["get", "-i", "list.txt", "-d", "file", "-q"], in: scratch.url)
            #expect(fromFile.status == 0, "\(fromFile.stderr)")
            let fromStdin = try ChildProcess(
                executable: "/bin/sh",
                arguments: [
                    "-c", "cd \"$1\" && mkdir stdin && exec \"$0\" get -i - -d stdin -q < list.txt", CLI.executable,
                    scratch.url.path,
                ])
            #expect(await fromStdin.wait(timeout: .seconds(30)) == 0)
            for directory in ["file", "stdin"] {
                #expect(try await TestData.sha256(of: scratch.path("\(directory)/renamed.bin")) == first.sha256)
                #expect(try await TestData.sha256(of: scratch.path("\(directory)/second.bin")) == second.sha256)
            }
        }
    }

    @Test("a list from stdin")
    func listFromStdin() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            origin.addObject(TestObject(size: 3000, seed: 90), at: "/in.bin")
            let list = scratch.url.appendingPathComponent("list.txt")
            try origin.url("/in.bin").write(to: list, atomically: true, encoding: .utf8)
            let process = try ChildProcess(
                executable: "/bin/sh",
                arguments: ["-c", "cd \"$1\" && exec \"$0\" get -i - -q < list.txt", CLI.executable, scratch.url.path])
            #expect(await process.wait(timeout: .seconds(30)) == 0)
            #expect(scratch.exists("in.bin"))
        }
    }

    @Test("--checksum on a single download: a match keeps the file, a mismatch keeps nothing")
    func singleChecksum() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            let object = TestObject(size: 5 << 20, seed: 91)
            origin.addObject(object, at: "/c.bin")
            let digest = try await object.sha256
            let ok = try await CLI.run([origin.url("/c.bin"), "--checksum", "sha256=\(digest)", "-q"], in: scratch.url)
            #expect(ok.status == 0, "stderr: \(ok.stderr)")
            let wrong = try await CLI.run(
                [origin.url("/c.bin"), "-o", "d.bin", "--checksum", "sha256=\(String(repeating: "ab", count: 32))"],
                in: scratch.url)
            #expect(wrong.status == 1)
            #expect(
                wrong.stderr.contains("checksum mismatch") && wrong.stderr.contains("nothing was kept"),
                "stderr: \(wrong.stderr)")
            #expect(!scratch.exists("d.bin") && !scratch.exists(part: "d.bin") && !scratch.exists(map: "d.bin"))
            let malformed = try await CLI.run([origin.url("/c.bin"), "--checksum", "md5=abc"], in: scratch.url)
            #expect(malformed.status == 2)
        }
    }

    @Test("checkpoints and progress ticks that race the finalizer leave no segment map behind")
    func noMapAfterFinalize() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            let items = addObjects(120, named: "m", to: origin, into: scratch) {
                TestObject(size: 2 << 20, seed: UInt64(900 + $0))
            }
            // Ticks every millisecond: some land while a file is being finalized, when its part
            // file's descriptor is already being closed and its number can be reused by another file.
            var configuration = quickConfiguration()
            configuration.files.checkpointInterval = .milliseconds(1)
            configuration.progressInterval = .milliseconds(1)
            let summary = try await downloadAll(items, configuration: configuration, maxConcurrentFiles: 16)
            #expect(summary?.succeeded == 120)
            let left = try FileManager.default.contentsOfDirectory(atPath: scratch.url.path).filter {
                !$0.hasSuffix(".bin")
            }
            #expect(left.isEmpty, "left behind: \(left.sorted().prefix(10))")
        }
    }

    @Test("the library's downloadAll: events for every file and a summary; one failure stops nothing")
    func libraryEvents() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            var items = addObjects(12, named: "e", to: origin, into: scratch) {
                TestObject(size: Int64(100_000 * ($0 + 1)), seed: UInt64(200 + $0))
            }
            items.insert(BulkItem(DownloadRequest(url: origin.url("/nope.bin")), to: scratch.path("nope.bin")), at: 5)
            var started = Set<Int>(), finished = Set<Int>(), failed = Set<Int>()
            var summary: BulkSummary?
            try await withDownloader(quickConfiguration()) { downloader in
                for await event in downloader.downloadAll(items, maxConcurrentFiles: 4) {
                    switch event {
                    case .started(let index): started.insert(index)
                    case .progress: break
                    case .finished(let index, _): finished.insert(index)
                    case .failed(let index, let error):
                        failed.insert(index)
                        #expect(error.httpStatus == 404)
                    case .completed(let final): summary = final
                    }
                }
            }
            #expect(started == Set(0..<13))
            #expect(failed == [5])
            #expect(finished == Set(0..<13).subtracting([5]))
            #expect(summary?.succeeded == 12 && summary?.failed == 1)
            #expect(summary?.failures.first?.url.hasSuffix("/nope.bin") == true)
        }
    }

    @Test("downloadAll without progress: only each file's outcome and the summary, the same files")
    func libraryOutcomesOnly() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            var items = addObjects(6, named: "q", to: origin, into: scratch) {
                TestObject(size: Int64(2 << 20) * Int64($0 + 1), seed: UInt64(260 + $0))
            }
            items.insert(BulkItem(DownloadRequest(url: origin.url("/nope.bin")), to: scratch.path("nope.bin")), at: 2)
            var configuration = quickConfiguration()
            configuration.progressInterval = .milliseconds(20)
            origin.updateFaults { $0.throttleBytesPerSecond = 16 << 20 }
            var outcomes: [Int] = []
            var others: [BulkEvent] = []
            var summary: BulkSummary?
            try await withDownloader(configuration) { downloader in
                for await event in downloader.downloadAll(items, maxConcurrentFiles: 3, reportsProgress: false) {
                    switch event {
                    case .finished(let index, _), .failed(let index, _): outcomes.append(index)
                    case .completed(let final): summary = final
                    case .started, .progress: others.append(event)
                    }
                }
            }
            #expect(others.isEmpty, "\(others.count) start or progress events")
            #expect(outcomes.sorted() == Array(0..<7) && summary?.succeeded == 6 && summary?.failed == 1)
            for (index, item) in items.enumerated() where index != 2 {
                #expect(scratch.exists(URL(fileURLWithPath: item.destination).lastPathComponent))
            }
        }
    }

    @Test("two spellings of one URL (a fragment, spaces) to one file are one item, fetched once")
    func duplicateSpellings() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            origin.addObject(TestObject(size: 3 << 20, seed: 77), at: "/twin.bin")
            let url = origin.url("/twin.bin")
            let items = [url, url + "#part-2", "  " + url + " "].map {
                BulkItem(DownloadRequest(url: $0), to: scratch.path("twin.bin"))
            }
            // One file at a time: were the spellings separate items, the later ones would each
            // start after the first finished and ask the server again.
            let summary = try await downloadAll(items, configuration: quickConfiguration(), maxConcurrentFiles: 1)
            #expect(summary?.succeeded == 3)
            #expect(summary?.alreadyComplete == 0, "the twins share the first item's run")
            // A later run for a finished file would confirm it with a request past its end (416).
            #expect(!origin.requests.contains { $0.status == 416 }, "\(origin.requests.map(\.status))")
        }
    }

    @Test("one connection budget: a tight pool is shared, never exceeded")
    func sharedBudget() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            let items = addObjects(6, named: "p", to: origin, into: scratch) {
                TestObject(size: 6 << 20, seed: UInt64(300 + $0))
            }
            origin.updateFaults { $0.throttleBytesPerSecond = 8 << 20 }
            var configuration = quickConfiguration(connections: 8)
            configuration.connectionPool.maximumConnectionsPerHost = 5
            let summary = try await downloadAll(items, configuration: configuration, maxConcurrentFiles: 6)
            #expect(summary?.succeeded == 6)
            #expect(origin.connectionsAccepted >= 5)
            // The origin never saw more than 5 requests in flight at once (plus one: the server
            // notices a request cut short only when it handles the close, which can come after
            // the client's next request on another connection has arrived).
            #expect(origin.maximumConcurrentRequests <= 6, "peak \(origin.maximumConcurrentRequests)")
            #expect(
                origin.maximumConcurrentRequests >= 4, "the pool was used: peak \(origin.maximumConcurrentRequests)")
        }
    }
}

/// Serves `count` objects at `/NAME<index>.bin` and returns the bulk items that fetch them into
/// `scratch` under the same names.
func addObjects(
    _ count: Int, named name: String, to origin: TestOrigin, into scratch: Scratch, object: (Int) -> TestObject
) -> [BulkItem] {
    (0..<count).map { index in
        let file = "\(name)\(index).bin"
        origin.addObject(object(index), at: "/" + file)
        return BulkItem(DownloadRequest(url: origin.url("/" + file)), to: scratch.path(file))
    }
}

/// Runs `downloadAll` to its end and returns its summary (`nil` if the stream ended without one).
private func downloadAll(
    _ items: [BulkItem], configuration: Downloader.Configuration, maxConcurrentFiles: Int
) async throws -> BulkSummary? {
    var summary: BulkSummary?
    try await withDownloader(configuration) { downloader in
        for await event in downloader.downloadAll(items, maxConcurrentFiles: maxConcurrentFiles) {
            if case .completed(let final) = event { summary = final }
        }
    }
    return summary
}

/// The most bytes a progress handler was told about.
private final class MostBytesSeen: Sendable {
    private let most = Mutex<Int64>(0)
    var bytes: Int64 { most.withLock { $0 } }
    func note(_ progress: DownloadProgress) { most.withLock { $0 = max($0, progress.bytesDone) } }
}
