import Foundation
import Swoop
import SwoopTestOrigin
import Testing

/// The README's scale-out recipe on a real scheduler: a one-node Slurm cluster on loopback runs
/// `swoop get -i LIST --shard ${SLURM_ARRAY_TASK_ID}/4` as a job array against a real nginx.
@Suite(
    "Sharded lists on Slurm", .serialized,
    .enabled(if: Slurm.unavailableReason == nil, Comment(rawValue: Slurm.unavailableReason ?? ""))
)
struct SlurmTests {
    private static let KiB = 1024
    private static let MiB = 1 << 20

    /// Deterministic sizes between `low` and `high` bytes.
    private static func sizes(_ count: Int, from low: Int, to high: Int, seed: Int) -> [Int] {
        (0..<count).map { low + Int((UInt64(($0 + seed) * 2_654_435_761) % UInt64(high - low + 1))) }
    }

    /// The slowest task's bytes over the mean of a split of `files` (URL, size) over four tasks.
    private static func byteRatio(
        _ files: [(url: String, size: Int)], assignment: ShardAssignment? = nil, sizes bySize: Bool = false
    ) -> Double {
        var split = assignment ?? ShardAssignment(count: 4)
        if bySize {
            var sizes = ShardAssignment.Sizes()
            for file in files { sizes.add(key: file.url, size: Int64(file.size)) }
            split = ShardAssignment(count: 4, sizes: sizes)
        }
        var bytes = [0, 0, 0, 0]
        for file in files { bytes[split.worker(forKey: file.url)] += file.size }
        return Double(bytes.max()!) / (Double(bytes.reduce(0, +)) / 4)
    }

    @Test(
        "a job array fetches every file of the list once; a missing object fails the array; the rerun fetches only it")
    func jobArray() async throws {
        try await exclusively {
            try await Slurm.with { slurm in
                let nginx = try await Nginx.start(limitRate: "8m")
                defer { nginx.stop() }
                var specs: [(name: String, size: Int)] = (0..<4).map { ("large-\($0).bin", 3 * Self.MiB + $0 * 4097) }
                specs += Self.sizes(30, from: 200 * Self.KiB, to: 700 * Self.KiB, seed: 1).enumerated().map {
                    ("medium-\($0.offset).bin", $0.element)
                }
                specs += Self.sizes(200, from: 1, to: 60 * Self.KiB, seed: 2).enumerated().map {
                    ("small-\($0.offset).bin", $0.element)
                }
                specs.append(("missing.bin", 5000))
                let objects = try await ShardedList.serve(specs, on: nginx, missing: ["missing.bin"])
                let set = try ShardedList(slurm: slurm, nginx: nginx, objects: objects, sizes: true)

                let first = try await set.submit(array: "0-3", wait: true)
                #expect(first.status == 1, "sbatch --wait reports the failed task: \(first.status)")
                #expect(try await set.wrongFiles() == [])
                let summaries = try set.summaries(job: first.job)
                #expect(summaries.values.map(\.files).reduce(0, +) == specs.count, "the shards cover the list")
                #expect(summaries.values.map(\.succeeded).reduce(0, +) == specs.count - 1)
                let failed = summaries.filter { !$0.value.ok }
                #expect(
                    failed.count == 1 && failed.first?.value.failures.first?.error.contains("404") == true, "\(failed)")
                let fetchers = ShardedList.fetchers(try nginx.log())
                #expect(fetchers.count == specs.count, "nginx saw every object")
                #expect(fetchers.filter { $0.value.count != 1 } == [:], "no object was fetched by two tasks")
                let leftovers = try FileManager.default.contentsOfDirectory(atPath: set.data.path).filter {
                    $0.hasSuffix(".part") || $0.hasSuffix(".swoop")
                }
                #expect(leftovers == [])

                // The object appears; the same array again fetches it and only confirms the others.
                try await nginx.addFile("missing.bin", size: 5000, seed: 99)
                try nginx.clearLog()
                let second = try await set.submit(array: "0-3", wait: true)
                #expect(second.status == 0, "\((0..<4).map { set.stderr(job: second.job, task: $0) })")
                let again = try set.summaries(job: second.job)
                #expect(again.values.map(\.alreadyComplete).reduce(0, +) == specs.count - 1)
                let served = ShardedList.served(try nginx.log())
                #expect(served["/missing.bin"] == 5000)
                // Each finished file is confirmed by 1 KiB of its bytes, not fetched again.
                let others = served.filter { $0.key != "/missing.bin" }.values.reduce(0, +)
                #expect(
                    others <= Int64(specs.count - 1) * 1024,
                    "finished files are confirmed, not fetched again: \(others) bytes")
                #expect(slurm.processes(named: "swoop") == [], "no swoop is left running")
            }
        }
    }

    @Test("a task killed mid-download (SIGKILL) and one cancelled by scancel (SIGTERM) resume when resubmitted")
    func killedTasksResume() async throws {
        try await exclusively {
            try await Slurm.with { slurm in
                // 2 connections per file at 2 MiB/s each: a large file takes about 6 s, and swoop reads
                // what nginx sends at once, so nginx's log counts what swoop received.
                let nginx = try await Nginx.start(limitRate: "2m")
                defer { nginx.stop() }
                let large = 24 * Self.MiB
                var specs: [(name: String, size: Int)] = (0..<4).map { ("large-\($0).bin", large + $0 * 4097) }
                specs += Self.sizes(100, from: 2 * Self.KiB, to: 60 * Self.KiB, seed: 3).enumerated().map {
                    ("small-\($0.offset).bin", $0.element)
                }
                let set = try await ShardedList(
                    slurm: slurm, nginx: nginx, objects: ShardedList.serve(specs, on: nginx), sizes: true,
                    arguments: ["--connections", "2"])
                var sizes = ShardAssignment.Sizes()
                for object in set.objects { sizes.add(key: nginx.url(object.path), size: Int64(object.size)) }
                let assignment = ShardAssignment(count: ShardedList.tasks, sizes: sizes)
                let task = { (object: ShardedList.Object) in assignment.worker(forKey: nginx.url(object.path)) }
                let largeOf = { (index: Int) in set.objects.first { $0.name.hasPrefix("large-") && task($0) == index }!
                }
                let (killed, cancelled) = (1, 2)

                let run = try await set.submit(array: "0-3", wait: false)
                let started = ContinuousClock.now
                try await ShardedList.waitUntil(
                    .seconds(90),
                    "tasks \(killed) and \(cancelled) have finished their small files and checkpointed their large ones"
                ) {
                    [killed, cancelled].allSatisfy { index in
                        set.pid(task: index) != nil
                            && FileManager.default.fileExists(
                                atPath: Downloader.workingFiles(of: set.localPath(largeOf(index))).map)
                            && set.objects.allSatisfy {
                                $0.name.hasPrefix("large-") || task($0) != index
                                    || FileManager.default.fileExists(atPath: set.localPath($0))
                            }
                    }
                }
                // Well into the large files (about 6 s each), so part of each is on disk.
                try await Task.sleep(for: .seconds(2))
                // A node failure: the download process itself dies with SIGKILL.
                let killedPID = try #require(set.pid(task: killed))
                #expect(slurm.processes(named: "swoop").contains(killedPID), "the pid file names the task's swoop")
                kill(killedPID, SIGKILL)
                let killedAfter = ContinuousClock.now - started
                // scancel sends SIGTERM: swoop saves its state and exits long before KillWait (30 s).
                let cancelledPID = try #require(set.pid(task: cancelled))
                let cancelAt = ContinuousClock.now
                let cancel = try await slurm.run("scancel", ["\(run.job)_\(cancelled)"])
                #expect(cancel.status == 0, "\(cancel.stderr)")
                try await ShardedList.waitUntil(.seconds(60), "the cancelled task's swoop has exited") {
                    kill(cancelledPID, 0) != 0
                }
                let exitTime = ContinuousClock.now - cancelAt
                // Well under Slurm's KillWait (30 s, then SIGKILL): it stopped on SIGTERM, not on the kill.
                #expect(exitTime < MachineLoad.bound(.seconds(15)), "swoop exited \(exitTime) after scancel")
                print("slurm resume: the cancelled task's swoop exited \(exitTime) after scancel")
                try await slurm.waitForNoJobs(timeout: .seconds(120))
                let record = try await slurm.run("scontrol", ["show", "job", "\(run.job)_\(cancelled)"]).stdout
                #expect(
                    record.contains("JobState=CANCELLED") && record.contains("ExitCode=130:0"),
                    "swoop exited with 130: \(record)")
                #expect(set.stderr(job: run.job, task: cancelled).contains("interrupted; stopping"))
                for index in [killed, cancelled] {
                    let path = set.localPath(largeOf(index))
                    #expect(
                        FileManager.default.fileExists(atPath: Downloader.workingFiles(of: path).map),
                        "task \(index) left its partial state")
                    #expect(
                        !FileManager.default.fileExists(atPath: path), "task \(index) had not finished its large file")
                }
                // What each task's map holds: what a resume need not fetch again. (What nginx served
                // before the kill is more: the bytes after the last checkpoint, and those in flight,
                // which on a loaded machine can be several seconds' worth.)
                var held: [Int: Int64] = [:]
                for index in [killed, cancelled] {
                    held[index] = Downloader.status(of: set.localPath(largeOf(index))).bytesDone
                }
                try nginx.clearLog()

                // Resubmitted, the two tasks skip finished files and resume partial ones.
                let rerun = try await set.submit(array: "\(killed),\(cancelled)", wait: true)
                #expect(rerun.status == 0, "\([killed, cancelled].map { set.stderr(job: rerun.job, task: $0) })")
                #expect(try await set.wrongFiles() == [])
                let after = ShardedList.served(try nginx.log())
                // The probe's first range and the overlap of each request with its neighbours.
                let slack = 1.0 * Double(Self.MiB)
                for index in [killed, cancelled] {
                    let mine = set.objects.filter { task($0) == index }
                    // Its small files were finished before the kill (waited for above): the large one is missing.
                    let missing = Double(largeOf(index).size) - Double(held[index] ?? 0)
                    let again = mine.reduce(0) { $0 + Double(after[$1.path] ?? 0) }
                    let allowed = 1.10 * missing + slack
                    let seconds =
                        Double(killedAfter.components.seconds) + Double(killedAfter.components.attoseconds) / 1e18
                    let how = index == killed ? "SIGKILL" : "scancel"
                    print(
                        "slurm resume: task \(index) (\(how)) after \(String(format: "%.1f", seconds)) s: "
                            + "\(Int(missing)) bytes missing, \(Int(again)) fetched again (allowed \(Int(allowed)))"
                    )
                    #expect(
                        missing > 0 && again <= allowed,
                        "task \(index): \(Int(again)) bytes fetched for \(Int(missing)) missing")
                }
                let summaries = try set.summaries(job: rerun.job, tasks: [killed, cancelled])
                #expect(summaries.values.allSatisfy { $0.alreadyComplete > 0 }, "finished files were skipped")
                #expect(slurm.processes(named: "swoop") == [], "no swoop is left running")
            }
        }
    }

    @Test("balance: slowest task / mean task, by URL hash and by size=")
    func balance() async throws {
        try await exclusively {
            try await Slurm.with { slurm in
                let nginx = try await Nginx.start(limitRate: "8m")
                defer { nginx.stop() }
                // Four 64 MiB objects and 200 small ones; each task receives at most 16 MiB/s, so its
                // time is proportional to its bytes, as on nodes with their own links.
                var specs: [(name: String, size: Int)] = (0..<4).map { ("large-\($0).bin", 64 * Self.MiB) }
                specs += Self.sizes(200, from: 8 * Self.KiB, to: 120 * Self.KiB, seed: 4).enumerated().map {
                    ("small-\($0.offset).bin", $0.element)
                }
                let objects = try await ShardedList.serve(specs, on: nginx)
                var ratios: [Bool: Double] = [:]
                for bySize in [false, true] {
                    let set = try ShardedList(
                        slurm: slurm, nginx: nginx, objects: objects, sizes: bySize, arguments: ["--limit-rate", "16m"])
                    let run = try await set.submit(array: "0-3", wait: true)
                    #expect(run.status == 0, "\((0..<4).map { set.stderr(job: run.job, task: $0) })")
                    #expect(try await set.wrongFiles() == [])
                    let summaries = try set.summaries(job: run.job)
                    let seconds = (0..<4).map { summaries[$0]!.seconds }
                    let bytes = (0..<4).map { summaries[$0]!.bytes }
                    let ratio = seconds.max()! / (seconds.reduce(0, +) / 4)
                    ratios[bySize] = ratio
                    let figures = zip(seconds, bytes).map { "\(String(format: "%.1f", $0)) s/\($1 >> 20) MiB" }.joined(
                        separator: ", ")
                    print(
                        "slurm balance: \(bySize ? "by size=" : "by URL hash"): slowest/mean "
                            + "\(String(format: "%.2f", ratio)) (tasks: \(figures))"
                    )
                    try FileManager.default.removeItem(at: set.data)
                }
                #expect(ratios[true]! <= 1.25, "balanced by size: slowest task took \(ratios[true]!)x the mean")
                // The split by hash depends on the URLs (their port changes from run to run): the same
                // objects on 400 other ports, split by hash, give these slowest/mean byte ratios.
                let spread = (20_000..<20_400).map { port in
                    Self.byteRatio(
                        objects.map { ("http://127.0.0.1:\(port)" + $0.path, $0.size) },
                        assignment: ShardAssignment(count: 4))
                }.sorted()
                let sized = Self.byteRatio(objects.map { (nginx.url($0.path), $0.size) }, sizes: true)
                let high = spread.filter { $0 >= 1.5 }.count / 4
                print(
                    "slurm balance: by URL hash over 400 ports: median \(String(format: "%.2f", spread[200])), 90th "
                        + "percentile \(String(format: "%.2f", spread[360])), \(high)% at "
                        + "1.5 or more; by size=: \(String(format: "%.2f", sized)) (bytes)"
                )
                #expect(slurm.processes(named: "swoop") == [], "no swoop is left running")
            }
        }
    }
}
