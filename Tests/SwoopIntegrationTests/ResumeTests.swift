import Foundation
import Swoop
import SwoopTestOrigin
import SwoopTestSupport
import Testing

/// Crash-safe resume of the CLI process: kill -9 anywhere, Ctrl-C. (Library-level cases: `LibraryResumeTests`.)
@Suite("Resume", .serialized)
struct ResumeTests {
    /// `bytes=a-b` or `bytes=a-` as a closed range (the open end as `Int64.max`).
    static func requestedRange(_ header: String) -> ClosedRange<Int64>? {
        guard header.hasPrefix("bytes=") else { return nil }
        let parts = header.dropFirst(6).split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 2, let first = Int64(parts[0]) else { return nil }
        let last = parts[1].isEmpty ? Int64.max : Int64(parts[1]) ?? -1
        return first <= last ? first...last : nil
    }

    @Test("kill -9 at 20+ random moments, resume each time, end byte-identical without re-fetching")
    func killNineRepeatedly() async throws {
        try await exclusively {
            let size = 96 << 20
            let perConnection = 4 << 20  // nginx limit_rate 4m: 4 connections move 16 MiB/s, 6 s of transfer in all
            let nginx = try await Nginx.start(limitRate: "4m")
            defer { nginx.stop() }
            let expected = try await nginx.addFile("k.bin", size: size, seed: 42)
            let scratch = try Scratch()
            defer { scratch.cleanup() }
            let target = scratch.path("k.bin")
            let connections = 4
            let checkpointInterval = 0.25
            let arguments = [
                nginx.url("/k.bin"), "-o", "k.bin", "-c", "\(connections)", "--checkpoint-interval",
                "\(checkpointInterval)", "-q",
            ]
            var generator = SystemRandomNumberGenerator()

            var kills = 0
            var lastDone: Int64 = 0
            var totalServed: Int64 = 0
            var finished = false
            for run in 0..<200 {
                // What is durably complete before this run; none of it may be requested again.
                let before = Downloader.status(of: target)
                let complete =
                    before.state == .partial
                    ? before.completedChunks.map { run -> ClosedRange<Int64> in
                        let chunk = before.chunkSize ?? 1
                        return (Int64(run.lowerBound) * chunk)...(min(Int64(run.upperBound) * chunk, Int64(size)) - 1)
                    }
                    : []
                try await nginx.startLog()
                // Early kills (before the probe answers) as well as late ones. The first runs and
                // every other one after are killed by a shell at a random moment, so a busy test
                // process cannot delay it; the others once they have recorded progress, a random
                // moment after: on a loaded machine a process may need seconds to record anything,
                // and runs killed before then would only repeat each other.
                let stderrPath = scratch.url.appendingPathComponent("run.err").path
                let status: Int32?
                if run < 3 || run.isMultiple(of: 2) {
                    let delay =
                        run < 3
                        ? Double.random(in: 0.01...0.15, using: &generator)
                        : Double.random(in: 0.05...0.6, using: &generator)
                    let quoted = ([CLI.executable] + arguments).map { "'\($0)'" }.joined(separator: " ")
                    let shell = try ChildProcess(
                        executable: "/bin/sh",
                        arguments: [
                            "-c",
                            "cd '\(scratch.url.path)' && \(quoted) 2>'\(stderrPath)' & p=$!; sleep "
                                + "\(String(format: "%.3f", delay)); kill -9 $p 2>/dev/null; wait $p",
                        ])
                    status = await shell.wait(timeout: .seconds(60))
                } else {
                    let process = try ChildProcess(
                        executable: CLI.executable, arguments: arguments, directory: scratch.url.path,
                        stderr: stderrPath)
                    // Watched and killed from a thread of its own: on a loaded machine Swift's
                    // two pool threads can be busy for seconds, and the run would end first.
                    let (known, pause) = (lastDone, UInt32.random(in: 0...150, using: &generator))
                    let progressed = try await offThePool {
                        var deadline = MachineLoad.Deadline(.seconds(60))
                        while process.isRunning && Downloader.status(of: target).bytesDone <= known {
                            if deadline.exceeded() { return false }
                            usleep(10_000)
                        }
                        usleep(pause * 1000)
                        process.signal(SIGKILL)
                        return true
                    }
                    #expect(progressed, "run \(run) recorded no progress")
                    status = await process.wait(timeout: .seconds(60))
                }
                switch status {
                case 0?:
                    finished = true
                case 137?:
                    kills += 1
                default:
                    let stderr = (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? ""
                    Issue.record("run \(run) ended with \(String(describing: status)): \(stderr)")
                }
                try await Task.sleep(for: .milliseconds(60))  // let nginx log the cut connections
                let log = try nginx.log().filter { $0.uri == "/k.bin" }
                totalServed += log.reduce(0) { $0 + $1.bytes }
                for entry in log {
                    guard let asked = Self.requestedRange(entry.range) else {
                        Issue.record("run \(run): request without a range: \(entry)")
                        continue
                    }
                    let served = asked.lowerBound...min(asked.upperBound, asked.lowerBound + max(entry.bytes, 1) - 1)
                    // A request overlaps the bytes held around it by a window on each side (its
                    // lead and trail, compared with them): only what lies between is new.
                    let window = Int64(4096)
                    guard served.upperBound - window > served.lowerBound + window else { continue }
                    let inner = (served.lowerBound + window)...(served.upperBound - window)
                    for done in complete where done.overlaps(inner) && entry.status == 206 {
                        let served = "(\(entry.bytes) bytes served)"
                        Issue.record("run \(run) re-fetched completed bytes \(done) with \(entry.range) \(served)")
                    }
                    if run > 0 && !complete.isEmpty {
                        #expect(!entry.ifMatch.isEmpty, "resumed requests carry If-Match")
                    }
                }
                if finished { break }
                lastDone = max(lastDone, Downloader.status(of: target).bytesDone)
            }
            print(
                "kill -9 test: \(kills) kills, served \(totalServed) bytes for a \(size)-byte object "
                    + "(\(String(format: "%.3f", Double(totalServed) / Double(size)))x)"
            )
            #expect(finished, "the download never completed")
            #expect(kills >= 20, "only \(kills) kills happened")
            #expect(try await TestData.sha256(of: target) == expected)
            #expect(!FileManager.default.fileExists(atPath: Downloader.workingFiles(of: target).part))
            #expect(!FileManager.default.fileExists(atPath: Downloader.workingFiles(of: target).map))
            // Each kill may lose what arrived since the last checkpoint, plus the partial chunk
            // (64 KiB for this size) each connection was filling; nothing else is fetched twice.
            let rate = Double(connections * perConnection)
            let allowance = Double(kills) * (checkpointInterval * 2 * rate + Double(connections) * 64 * 1024)
            let served = "served \(totalServed) bytes for a \(size)-byte object"
            #expect(
                Double(totalServed) <= Double(size) + allowance,
                "\(served) over \(kills) kills (allowance \(Int(allowance)))")
        }
    }

    @Test("Ctrl-C pauses cleanly: state saved, exit 130, resume with the same command")
    func interruptPauses() async throws {
        try await withTestOrigin { origin in
            // Each response paced at 64 KiB/s until the interrupt: the download cannot end before
            // it, however slowly the test process runs.
            origin.updateFaults { $0.throttleBytesPerSecond = 64 << 10 }
            let object = TestObject(size: 64 << 20, seed: 43)
            origin.addObject(object, at: "/c.bin")
            let scratch = try Scratch()
            defer { scratch.cleanup() }
            let target = scratch.path("c.bin")
            let process = try CLI.start([origin.url("/c.bin"), "-c", "4"], in: scratch.url)
            let started = try await eventually(timeout: .seconds(60)) {
                Downloader.status(of: target).bytesDone >= 2 << 20
            }
            #expect(started, "the download recorded some bytes")
            process.signal(SIGINT)
            let interrupted = try await process.wait(timeout: .seconds(20))
            #expect(interrupted.status == 130, "stderr: \(interrupted.stderr)")
            #expect(interrupted.stderr.contains("resume with the same command"), "stderr: \(interrupted.stderr)")
            #expect(!FileManager.default.fileExists(atPath: target))
            let saved = Downloader.status(of: target)
            #expect(saved.state == .partial)
            #expect(saved.bytesDone >= 2 << 20)

            origin.updateFaults { $0.throttleBytesPerSecond = nil }
            origin.resetLog()
            // More connections for the rest: a resume is keyed on the target.
            let resumed = try await CLI.run([origin.url("/c.bin"), "-c", "16", "-q"], in: scratch.url)
            #expect(resumed.status == 0, "stderr: \(resumed.stderr)")
            #expect(try await TestData.sha256(of: target) == object.sha256)
            let served = origin.requests.reduce(0) { $0 + $1.bodyBytesSent }
            #expect(served <= Int64(64 << 20) - saved.bytesDone + (2 << 20), "the resumed run fetched \(served) bytes")
        }
    }

    @Test("Ctrl-C stops a list: exit 130, no file starts after it, and the same command fetches only the rest")
    func interruptStopsList() async throws {
        try await withTestOrigin { origin in
            // Each response paced at 256 KiB/s: a file of 256 KiB takes a second, so 4 at a time the
            // list takes ten, and the interrupt always comes before its end.
            origin.updateFaults { $0.throttleBytesPerSecond = 256 << 10 }
            let objects = (0..<40).map { TestObject(size: 256 << 10, seed: UInt64(700 + $0)) }
            var list = ""
            for (index, object) in objects.enumerated() {
                origin.addObject(object, at: "/l\(index).bin")
                list += origin.url("/l\(index).bin") + "\n"
            }
            let scratch = try Scratch()
            defer { scratch.cleanup() }
            try list.write(to: scratch.url.appendingPathComponent("list.txt"), atomically: true, encoding: .utf8)
            let targets = (0..<40).map { scratch.path("out/l\($0).bin") }
            func complete() -> Int { targets.filter { FileManager.default.fileExists(atPath: $0) }.count }
            let process = try CLI.start(["-i", "list.txt", "-d", "out", "-j", "4"], in: scratch.url)
            let started = try await eventually(timeout: .seconds(60)) { complete() >= 1 }
            #expect(started, "a file of the list was complete")
            process.signal(SIGINT)
            let interrupted = try await process.wait(timeout: .seconds(30))
            #expect(interrupted.status == 130, "stderr: \(interrupted.stderr)")
            #expect(interrupted.stderr.contains("run the same command to resume"), "stderr: \(interrupted.stderr)")
            let kept = complete()
            // Shutting the downloader down paused only the files in flight, and the list went on.
            #expect(kept < 20, "\(kept) files complete after the interrupt")

            origin.updateFaults { $0.throttleBytesPerSecond = nil }
            origin.resetLog()
            let rerun = try await CLI.run(["-i", "list.txt", "-d", "out", "-j", "8", "-q"], in: scratch.url)
            #expect(rerun.status == 0, "stderr: \(rerun.stderr)")
            for (object, target) in zip(objects, targets) {
                #expect(try await TestData.sha256(of: target) == object.sha256)
            }
            let served = origin.requests.reduce(0) { $0 + $1.bodyBytesSent }
            let confirmations = Int64(kept) * 1024
            #expect(served <= Int64(40 - kept) * (256 << 10) + confirmations, "the rerun fetched \(served) bytes")
        }
    }
}
