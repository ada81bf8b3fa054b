import Foundation
import Swoop
import SwoopTestOrigin
import Testing

/// Many small files: a file that arrives in one response has no segment map and is published in a
/// group commit, with the same crash safety as a large one.
@Suite("Small files", .serialized)
struct SmallFileTests {
    @Test(
        "kill -9 at random moments of a 2,000-file run: every target absent or complete; reruns confirm, never refetch")
    func killNineDuringManySmallFiles() async throws {
        try await exclusively {
            let nginx = try await Nginx.start()
            defer { nginx.stop() }
            let scratch = try Scratch()
            defer { scratch.cleanup() }
            let count = 2000
            var expected: [String: String] = [:]
            var lines: [String] = []
            for index in 0..<count {
                let name = "s\(index).bin"
                expected[name] = try await nginx.addFile(name, size: 4096 + index % 7, seed: UInt64(index + 100))
                lines.append(nginx.url("/\(name)"))
            }
            let list = scratch.url.appendingPathComponent("list.txt")
            try lines.joined(separator: "\n").write(to: list, atomically: true, encoding: .utf8)
            let out = scratch.url.appendingPathComponent("out")
            try FileManager.default.createDirectory(at: out, withIntermediateDirectories: true)
            let arguments = ["get", "-i", list.path, "-d", out.path, "--jobs", "64", "-q"]
            let (names, outPath) = (Set(expected.keys), out.path)
            @Sendable func completeCount() -> Int {
                ((try? FileManager.default.contentsOfDirectory(atPath: outPath)) ?? []).count { names.contains($0) }
            }
            var generator = SystemRandomNumberGenerator()
            var kills = 0
            var finished = false
            var fetchedBefore: Set<String> = []  // files complete at the start of a run
            for run in 0..<20 {
                try await nginx.startLog()
                // The first runs are killed once a random share of the missing files has landed
                // (wherever in its work that is); the rest are left to finish.
                let before = completeCount()
                let killAt =
                    run < 8 ? before + Int.random(in: 1...max(1, (count - before) * 2 / 3), using: &generator) : Int.max
                let process = try CLI.start(arguments, in: scratch.url)
                if killAt != Int.max {
                    try await waitThenAct(
                        within: .seconds(120), every: .milliseconds(5),
                        until: { completeCount() >= killAt || !process.process.isRunning },
                        then: { if process.process.isRunning { process.signal(SIGKILL) } })
                }
                let result = try await process.wait(timeout: .seconds(120))
                if result.status == 0 {
                    finished = true
                } else if result.status == 128 + SIGKILL {
                    kills += 1
                } else {
                    Issue.record("run \(run) ended with \(result.status): \(result.stderr.suffix(300))")
                }
                // Every target is absent or complete and right; no segment maps for small files.
                var complete: Set<String> = []
                for name in (try? FileManager.default.contentsOfDirectory(atPath: out.path)) ?? [] {
                    #expect(!name.hasSuffix(".swoop"), "run \(run): a small file got a segment map: \(name)")
                    guard let sha = expected[name] else { continue }
                    #expect(
                        try await TestData.sha256(of: out.appendingPathComponent(name).path) == sha,
                        "run \(run): \(name) is partial or wrong")
                    complete.insert(name)
                }
                // Files complete before this run are confirmed (1 KiB of their bytes compared with the
                // file's), never fetched again.
                try await Task.sleep(for: .milliseconds(50))
                for entry in try nginx.log() where fetchedBefore.contains(String(entry.uri.dropFirst())) {
                    #expect(
                        entry.status == 206 && entry.bytes <= 1024,
                        "run \(run): \(entry.uri) was complete and was fetched again: \(entry)")
                }
                let requests = try nginx.log().filter { fetchedBefore.contains(String($0.uri.dropFirst())) }
                #expect(
                    Set(requests.map(\.uri)).count == requests.count, "run \(run): a complete file was confirmed twice")
                fetchedBefore = complete
                if finished { break }
            }
            print("small files kill -9 test: \(kills) kills before the run that finished")
            #expect(finished, "the list never completed")
            #expect(kills >= 3, "only \(kills) kills happened")
            #expect(fetchedBefore.count == count)
            let leftovers = try FileManager.default.contentsOfDirectory(atPath: out.path).filter {
                $0.hasSuffix(".part") || $0.hasSuffix(".swoop")
            }
            #expect(leftovers.isEmpty, "\(leftovers.prefix(5))")
        }
    }

    @Test("a disk that fills in the middle of a batch fails only the files that did not fit", .enabled(if: canMount))
    func diskFullMidBatch() async throws {
        try await exclusively {
            let nginx = try await Nginx.start()
            defer { nginx.stop() }
            let scratch = try Scratch()
            defer { scratch.cleanup() }
            var expected: [String: String] = [:]
            var lines: [String] = []
            for index in 0..<120 {
                let name = "d\(index).bin"
                expected[name] = try await nginx.addFile(name, size: 48 << 10, seed: UInt64(index + 7000))
                lines.append(nginx.url("/\(name)"))
            }
            let list = scratch.url.appendingPathComponent("list.txt")
            try lines.joined(separator: "\n").write(to: list, atomically: true, encoding: .utf8)
            // 120 x 48 KiB is 5.6 MiB; a 3 MiB disk holds about half.
            let disk = try SmallDisk(megabytes: 3)
            let full = try await CLI.run(
                ["get", "-i", list.path, "-d", disk.url.path, "--jobs", "16", "--json"], in: scratch.url)
            #expect(full.status == 3, "disk full is a local error: \(full.stderr.suffix(400))")
            let summary = try #require(try JSONSerialization.jsonObject(with: Data(full.stdout.utf8)) as? [String: Any])
            let succeeded = try #require(summary["succeeded"] as? Int)
            let failures = try #require(summary["failures"] as? [[String: Any]])
            #expect(succeeded + failures.count == 120)
            #expect(succeeded > 10 && failures.count > 10, "some fit, some did not: \(succeeded) / \(failures.count)")
            #expect(failures.allSatisfy { ($0["errorKind"] as? String) == "disk full" }, "\(failures.prefix(2))")
            let present = try FileManager.default.contentsOfDirectory(atPath: disk.url.path)
            #expect(present.filter { expected[$0] != nil }.count == succeeded, "\(present.count) entries")
            for name in present where expected[name] != nil {
                #expect(
                    try await TestData.sha256(of: disk.url.appendingPathComponent(name).path) == expected[name],
                    "\(name)")
            }
            #expect(
                present.allSatisfy { !$0.hasSuffix(".part") && !$0.hasSuffix(".swoop") },
                "failed small files leave nothing: \(present.filter { $0.hasSuffix(".part") }.prefix(3))")
        }
    }
}
