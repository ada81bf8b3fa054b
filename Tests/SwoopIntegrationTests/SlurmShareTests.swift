import Foundation
import Swoop
import SwoopTestOrigin
import Testing

/// One object striped over a Slurm job array (issue 58): each task `swoop get URL --shard
/// ${SLURM_ARRAY_TASK_ID}/4` from its own client address (`--interface`), against an origin that
/// caps each address as a CDN caps a client. Four tasks against one alone; a task killed as a node
/// failure kills it (`scancel --signal=KILL`) and resubmitted.
@Suite(
    "One object over a Slurm array", .serialized,
    .enabled(if: Slurm.unavailableReason == nil, Comment(rawValue: Slurm.unavailableReason ?? ""))
)
struct SlurmShareTests {
    private static let MiB: Int64 = 1 << 20

    /// The batch script and where its tasks write.
    struct Array {
        let slurm: Slurm
        let work: URL
        let data: URL
        let script: URL

        /// `url` into `data/obj-N.bin` in `N` shares (N from the job's environment), task K from 127.0.0.(K+2).
        init(slurm: Slurm, url: String) throws {
            self.slurm = slurm
            work = slurm.directory.appendingPathComponent("share-\(UUID().uuidString.prefix(6))")
            data = work.appendingPathComponent("data")
            script = work.appendingPathComponent("share.sh")
            try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
            let body = """
                #!/bin/sh
                echo $$ > "\(work.path)/pid-$SHARES-$SLURM_ARRAY_TASK_ID"
                date +%s.%N > "\(work.path)/start-$SHARES-$SLURM_ARRAY_TASK_ID"
                exec "\(CLI.executable)" get "\(url)" -o "\(data.path)/obj-$SHARES.bin" \\
                    --shard "$SLURM_ARRAY_TASK_ID/$SHARES" --interface "127.0.0.$((SLURM_ARRAY_TASK_ID + 2))" \\
                    --json --quiet

                """
            try body.write(to: script, atomically: true, encoding: .utf8)
            chmod(script.path, 0o755)
        }

        func target(shares: Int) -> String { data.appendingPathComponent("obj-\(shares).bin").path }

        /// Submits tasks `array` of a run in `shares` shares; with `wait`, returns when they ended.
        func submit(_ array: String, shares: Int, wait: Bool) async throws -> (job: String, status: Int32) {
            var arguments = [
                "--parsable", "--array=\(array)", "-D", work.path, "--export=ALL,SHARES=\(shares)",
                "-o", "\(work.path)/out-%A-%a.json", "-e", "\(work.path)/err-%A-%a.txt",
            ]
            if wait { arguments.append("--wait") }
            let output = try await slurm.run("sbatch", arguments + [script.path], timeout: .seconds(600))
            let job = String(output.stdout.split(separator: "\n").first?.split(separator: ";").first ?? "")
            guard !job.isEmpty else { throw TestFailure("sbatch failed: \(output.stderr)\n\(slurm.logTail())") }
            return (job, output.status)
        }

        func summary(job: String, task: Int) -> [String: Any]? {
            guard let data = try? Data(contentsOf: work.appendingPathComponent("out-\(job)-\(task).json")) else {
                return nil
            }
            return try? JSONSerialization.jsonObject(with: data) as? [String: Any]
        }

        /// When task `task` of a run in `shares` shares started (seconds since 1970).
        func started(shares: Int, task: Int) -> Double? {
            let text = try? String(contentsOf: work.appendingPathComponent("start-\(shares)-\(task)"), encoding: .utf8)
            return text.flatMap { Double($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
        }

        func stderr(job: String, task: Int) -> String {
            (try? String(contentsOf: work.appendingPathComponent("err-\(job)-\(task).txt"), encoding: .utf8)) ?? ""
        }
    }

    @Test("four tasks, each from its own address, fetch a 1 GiB object in about a quarter of one task's time")
    func fourTasksAgainstOne() async throws {
        try await exclusively {
            try await Slurm.with { slurm in
                try await withTestOrigin(threads: 2) { origin in
                    let object = TestObject(size: 1 << 30, seed: 5810)
                    origin.addObject(object, at: "/model.bin")
                    // Each client address gets 32 MiB/s, as a CDN caps a client: one task takes at
                    // least 32 s, four at least 8 s.
                    origin.updateFaults { $0.perClientBytesPerSecond = Int(32 * Self.MiB) }
                    let array = try Array(slurm: slurm, url: origin.url("/model.bin"))
                    var seconds: [Int: Double] = [:]
                    for shares in [1, 4] {
                        origin.resetLog()
                        // From the submission to the file at its path (sbatch --wait polls with a
                        // growing interval: its return can come tens of seconds after the job's end).
                        let started = ContinuousClock.now
                        let submitted = Date().timeIntervalSince1970
                        let run = try await array.submit("0-\(shares - 1)", shares: shares, wait: false)
                        var deadline = MachineLoad.Deadline(.seconds(200))
                        while !FileManager.default.fileExists(atPath: array.target(shares: shares)) {
                            if deadline.exceeded() {
                                Issue.record("no file after \(deadline.bound())")
                                break
                            }
                            try await Task.sleep(for: .milliseconds(20))
                        }
                        let elapsed = ContinuousClock.now - started
                        seconds[shares] =
                            Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
                        try await slurm.waitForNoJobs(timeout: .seconds(120))
                        let summaries = (0..<shares).compactMap { array.summary(job: run.job, task: $0) }
                        let starts = (0..<shares).map { array.started(shares: shares, task: $0).map { $0 - submitted } }
                        let ran = summaries.map { String(format: "%.2f", $0["seconds"] as? Double ?? -1) }
                        let began = starts.map { String(format: "%.2f", $0 ?? -1) }
                        print("slurm shares: \(shares) task(s) started \(began) s after the submission, ran \(ran) s")
                        #expect(
                            summaries.count == shares && summaries.allSatisfy { $0["ok"] as? Bool == true },
                            "\((0..<shares).map { array.stderr(job: run.job, task: $0) })")
                        #expect(summaries.filter { $0["finishedObject"] as? Bool == true }.count == 1)
                        #expect(try await TestData.sha256(of: array.target(shares: shares)) == object.sha256)
                        let addresses = Set(origin.requests.compactMap(\.clientAddress))
                        #expect(addresses == Set((0..<shares).map { "127.0.0.\($0 + 2)" }), "\(addresses)")
                        try FileManager.default.removeItem(atPath: array.target(shares: shares))
                    }
                    let ratio = seconds[4]! / seconds[1]!
                    print(
                        "slurm shares: 1 GiB at 32 MiB/s an address: one task "
                            + "\(String(format: "%.1f", seconds[1]!)) s, four tasks "
                            + "\(String(format: "%.1f", seconds[4]!)) s: "
                            + "\(String(format: "%.2f", ratio))x (from the submission to the file at its path)")
                    // The target is 0.3x; a bound that holds on a loaded machine is looser (the floor is 0.25x).
                    #expect(ratio < 0.5, "four tasks took \(ratio)x one task's time")
                    #expect(slurm.processes(named: "swoop") == [], "no swoop is left running")
                }
            }
        }
    }

    @Test("a task killed as a node failure kills it, resubmitted, fetches only its missing bytes and publishes")
    func killedTaskRequeued() async throws {
        try await exclusively {
            try await Slurm.with { slurm in
                try await withTestOrigin(threads: 2) { origin in
                    let object = TestObject(size: 96 * Self.MiB, seed: 5811)
                    origin.addObject(object, at: "/model.bin")
                    // 24 MiB a task at 4 MiB/s: about 6 s each. Task 1's address is sent 8 MiB and then
                    // nothing: it is killed mid-way however late a loaded machine gets to the kill.
                    origin.updateFaults {
                        $0.perClientBytesPerSecond = Int(4 * Self.MiB)
                        $0.clientBodyLimits = ["127.0.0.3": 8 * Self.MiB]
                    }
                    let array = try Array(slurm: slurm, url: origin.url("/model.bin"))
                    let target = array.target(shares: 4)
                    let run = try await array.submit("0-3", shares: 4, wait: false)
                    var deadline = MachineLoad.Deadline(.seconds(60))
                    while (Downloader.status(of: target).shares.first { $0.share.index == 1 }?.bytesDone ?? 0)
                        < 4 * Self.MiB
                    {
                        if deadline.exceeded() {
                            Issue.record("task 1 checkpointed nothing in \(deadline.bound())")
                            break
                        }
                        try await Task.sleep(for: .milliseconds(100))
                    }
                    let kill = try await slurm.run("scancel", ["--signal=KILL", "\(run.job)_1"])
                    #expect(kill.status == 0, "\(kill.stderr)")
                    try await slurm.waitForNoJobs(timeout: .seconds(180))
                    #expect(!FileManager.default.fileExists(atPath: target), "nothing at the target without share 1")
                    let held = try #require(Downloader.status(of: target).shares.first { $0.share.index == 1 })
                    #expect(held.bytesDone > 0 && held.bytesDone < held.bytes, "\(held)")
                    let heldRanges = SharedObjectTests.heldRanges(
                        target: target, share: try #require(ObjectShare(index: 1, count: 4)))
                    origin.updateFaults { $0.clientBodyLimits = [:] }
                    origin.resetLog()
                    let requeued = try await array.submit("1", shares: 4, wait: true)
                    #expect(requeued.status == 0, "\(array.stderr(job: requeued.job, task: 1))")
                    #expect(array.summary(job: requeued.job, task: 1)?["finishedObject"] as? Bool == true)
                    #expect(try await TestData.sha256(of: target) == object.sha256)
                    SharedObjectTests.expectOnlyMissingAsked(
                        origin, "/model.bin", held: held, heldRanges: heldRanges, killed: "slurm shares: task 1",
                        rerun: "requeued, it")
                    #expect(slurm.processes(named: "swoop") == [], "no swoop is left running")
                }
            }
        }
    }
}
