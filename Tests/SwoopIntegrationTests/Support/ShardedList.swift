import Foundation

/// A download list of objects on nginx, fetched by a Slurm job array with the README's recipe:
/// one task per shard, every task writing into one shared directory.
struct ShardedList {
    struct Object: Sendable {
        var name: String
        var size: Int
        var sha256: String?
        var path: String { "/" + name }
    }

    /// `swoop get -i --json`'s summary, one per task.
    struct TaskSummary: Decodable {
        struct Failure: Decodable {
            var url: String
            var error: String
        }

        var ok: Bool
        var files: Int
        var succeeded: Int
        var alreadyComplete: Int
        var failed: Int
        var bytes: Int64
        var bytesReceived: Int64
        var seconds: Double
        var failures: [Failure]
    }

    static let tasks = 4

    let slurm: Slurm
    let nginx: Nginx
    let objects: [Object]
    let work: URL
    let data: URL
    let list: URL
    let script: URL

    /// Puts objects of these names and sizes on nginx, except those named in `missing`.
    static func serve(
        _ specs: [(name: String, size: Int)], on nginx: Nginx, missing: Set<String> = []
    ) async throws -> [Object] {
        var objects: [Object] = []
        for (index, spec) in specs.enumerated() {
            var object = Object(name: spec.name, size: spec.size)
            if !missing.contains(spec.name) {
                object.sha256 = try await nginx.addFile(spec.name, size: spec.size, seed: UInt64(index + 1))
            }
            objects.append(object)
        }
        return objects
    }

    /// Writes the list of `objects` (with `size=` lines when `sizes`) and the batch script in a
    /// directory of their own. `arguments` go to swoop.
    init(slurm: Slurm, nginx: Nginx, objects: [Object], sizes: Bool, arguments: [String] = []) throws {
        self.slurm = slurm
        self.nginx = nginx
        self.objects = objects
        work = slurm.directory.appendingPathComponent("work-\(UUID().uuidString.prefix(6))")
        data = work.appendingPathComponent("data")
        list = work.appendingPathComponent("list.txt")
        script = work.appendingPathComponent("fetch.sh")
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
        let text =
            objects.map { nginx.url($0.path) + (sizes ? "\n  size=\($0.size)" : "") }.joined(separator: "\n") + "\n"
        try text.write(to: list, atomically: true, encoding: .utf8)
        // The README's recipe, plus a pid file (exec makes it swoop's pid) and a User-Agent naming
        // the task, so the nginx log shows which task fetched what.
        let extra = arguments.map { "'\($0)'" }.joined(separator: " ")
        let body = """
            #!/bin/sh
            echo $$ > "\(work.path)/pid-$SLURM_ARRAY_TASK_ID"
            exec "\(CLI.executable)" get -i "\(list.path)" -d "\(data.path)" --jobs 16 \\
                --shard "${SLURM_ARRAY_TASK_ID}/\(Self.tasks)" --quiet --json \\
                --header "User-Agent: swoop task $SLURM_ARRAY_TASK_ID" \(extra)

            """
        try body.write(to: script, atomically: true, encoding: .utf8)
        chmod(script.path, 0o755)
    }

    /// Submits tasks `array` (e.g. "0-3", "1,2"); with `wait`, returns when they have all ended,
    /// with `sbatch --wait`'s status (the highest of the tasks').
    func submit(array: String, wait: Bool) async throws -> (job: String, status: Int32) {
        var arguments = [
            "--parsable", "--array=\(array)", "-D", work.path,
            "-o", "\(work.path)/out-%A-%a.json", "-e", "\(work.path)/err-%A-%a.txt",
        ]
        if wait { arguments.append("--wait") }
        let output = try await slurm.run("sbatch", arguments + [script.path], timeout: .seconds(300))
        let job = String(output.stdout.split(separator: "\n").first?.split(separator: ";").first ?? "")
        guard !job.isEmpty else {
            throw TestFailure("sbatch failed (\(output.status)): \(output.stderr)\n\(slurm.logTail())")
        }
        return (job, output.status)
    }

    /// The summary task `task` of job `job` printed (nil if it printed none).
    func summary(job: String, task: Int) -> TaskSummary? {
        guard let text = try? Data(contentsOf: work.appendingPathComponent("out-\(job)-\(task).json")) else {
            return nil
        }
        return try? JSONDecoder().decode(TaskSummary.self, from: text)
    }

    func summaries(job: String, tasks: [Int] = Array(0..<Self.tasks)) throws -> [Int: TaskSummary] {
        var result: [Int: TaskSummary] = [:]
        for task in tasks {
            guard let summary = summary(job: job, task: task) else {
                throw TestFailure(
                    "task \(task) of job \(job) printed no summary; stderr: \(stderr(job: job, task: task))")
            }
            result[task] = summary
        }
        return result
    }

    func stderr(job: String, task: Int) -> String {
        (try? String(contentsOf: work.appendingPathComponent("err-\(job)-\(task).txt"), encoding: .utf8)) ?? ""
    }

    /// The pid task `task` wrote (its swoop), once the file exists.
    func pid(task: Int) -> pid_t? {
        let text = (try? String(contentsOf: work.appendingPathComponent("pid-\(task)"), encoding: .utf8)) ?? ""
        return pid_t(text.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    func localPath(_ object: Object) -> String { data.appendingPathComponent(object.name).path }

    /// Objects served whose download is not byte-identical, or missing ones that exist; empty when all is well.
    func wrongFiles() async throws -> [String] {
        var wrong: [String] = []
        for object in objects {
            let path = localPath(object)
            let exists = FileManager.default.fileExists(atPath: path)
            if let expected = object.sha256 {
                if !exists { wrong.append(object.name) } else if try await TestData.sha256(of: path) != expected {
                    wrong.append(object.name)
                }
            } else if exists {
                wrong.append(object.name + " (not served, yet present)")
            }
        }
        return wrong
    }

    /// Bytes of each object nginx sent (in 200 and 206 responses; a finished file is confirmed
    /// with a 416, whose error page is not the object's), from its access log.
    static func served(_ log: [Nginx.LogEntry]) -> [String: Int64] {
        log.filter { $0.status == 200 || $0.status == 206 }.reduce(into: [:]) { $0[$1.uri, default: 0] += $1.bytes }
    }

    /// Which tasks (by User-Agent) asked nginx for each object path.
    static func fetchers(_ log: [Nginx.LogEntry]) -> [String: Set<String>] {
        log.reduce(into: [:]) { $0[$1.uri, default: []].insert($1.userAgent) }
    }

    /// Waits until `condition` holds (ending early), up to `timeout`.
    static func waitUntil(_ timeout: Duration, _ what: String, _ condition: () throws -> Bool) async throws {
        let deadline = ContinuousClock.now + timeout
        while try !condition() {
            guard ContinuousClock.now < deadline else {
                throw TestFailure("timed out after \(timeout) waiting until \(what)")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
    }
}
