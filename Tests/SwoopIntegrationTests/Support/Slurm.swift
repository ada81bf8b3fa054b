import Foundation
import SwoopTestSupport

/// A real one-node Slurm cluster on loopback for one test: `slurmctld` and `slurmd` in the
/// foreground as children of the test, their configuration, state, spool and logs in a temporary
/// directory of their own, free ports, and `munged` (started only if none runs). `stop()` cancels
/// every job, stops the daemons and kills whatever they started, so nothing is left running.
///
/// Every process of the cluster carries the directory's path (in `SLURM_CONF`, which jobs inherit
/// from `sbatch`, or in its arguments), which is how ``processes()`` finds them, jobs included.
final class Slurm: @unchecked Sendable {
    /// A command's outcome.
    struct Output: Sendable {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    /// The cluster's own directory; put the test's lists and downloads in it too.
    let directory: URL
    let configuration: URL
    private let controller: ChildProcess
    private let node: ChildProcess
    /// `munged`'s pid when this fixture started it.
    private let startedMunge: pid_t?
    private var stopped = false

    /// Why a Slurm cluster cannot run on this machine, or `nil` when it can. Its daemons and
    /// `munged` need root; everything else is installed on demand.
    static var unavailableReason: String? {
        getuid() == 0
            ? nil : "a one-node Slurm cluster needs root (slurmd, munged); run the tests as root to include this one"
    }

    /// The environment every Slurm command of this cluster needs.
    var environment: [String: String] { ["SLURM_CONF": configuration.path] }

    /// Starts a cluster, runs `body` with it, and stops it however `body` ends. Starting and stopping
    /// wait for the daemons and poll `sinfo` and `squeue` for seconds, so both run on a thread of their
    /// own (``offThePool(_:)``), never on one of the two cooperative threads every test shares.
    static func with<T>(_ body: (Slurm) async throws -> T) async throws -> T {
        let slurm = try await offThePool { try Slurm.start() }
        do {
            let result = try await body(slurm)
            await slurm.stopOffThePool()
            return result
        } catch {
            await slurm.stopOffThePool()
            throw error
        }
    }

    private func stopOffThePool() async {
        _ = try? await offThePool { self.stop() }
    }

    static func start() throws -> Slurm {
        try installIfMissing()
        return try Slurm()
    }

    private init() throws {
        directory = try TemporaryDirectory.make(prefix: "swoop-slurm")
        configuration = directory.appendingPathComponent("slurm.conf")
        for name in ["state", "spool"] {
            try FileManager.default.createDirectory(
                at: directory.appendingPathComponent(name), withIntermediateDirectories: true)
        }
        startedMunge = try Self.startMungeIfNeeded(log: directory.appendingPathComponent("munge-start.log").path)
        let host = Self.shortHostName()
        let path = directory.path
        let config = """
            ClusterName=swooptest
            SlurmctldHost=\(host)(127.0.0.1)
            SlurmctldPort=\(try FreePort.find())
            SlurmdPort=\(try FreePort.find())
            SlurmUser=root
            SlurmdUser=root
            AuthType=auth/munge
            StateSaveLocation=\(path)/state
            SlurmdSpoolDir=\(path)/spool
            SlurmctldPidFile=\(path)/slurmctld.pid
            SlurmdPidFile=\(path)/slurmd.pid
            SlurmctldLogFile=\(path)/slurmctld.log
            SlurmdLogFile=\(path)/slurmd.log
            ProctrackType=proctrack/linuxproc
            TaskPlugin=task/none
            SelectType=select/cons_tres
            SelectTypeParameters=CR_Core
            ReturnToService=2
            MpiDefault=none
            JobAcctGatherType=jobacct_gather/none
            AccountingStorageType=accounting_storage/none
            # scancel sends SIGTERM, then SIGKILL after KillWait: long, so a prompt exit is the program's own.
            KillWait=30
            NodeName=\(host) NodeAddr=127.0.0.1 CPUs=\(ProcessInfo.processInfo.activeProcessorCount) \
            RealMemory=2000 State=UNKNOWN
            PartitionName=swoop Nodes=\(host) Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4

            """
        try config.write(to: configuration, atomically: true, encoding: .utf8)
        let environment = ["SLURM_CONF": configuration.path]
        controller = try ChildProcess(
            executable: "/usr/sbin/slurmctld", arguments: ["-D", "-c"], environment: environment,
            stdout: "\(path)/slurmctld.out", stderr: "\(path)/slurmctld.out")
        node = try ChildProcess(
            executable: "/usr/sbin/slurmd", arguments: ["-D"], environment: environment,
            stdout: "\(path)/slurmd.out", stderr: "\(path)/slurmd.out")
        do {
            try waitUntilIdle()
        } catch {
            stop()
            throw error
        }
    }

    /// Polls `sinfo` until the node is idle (a few seconds), or fails with the daemons' logs.
    private func waitUntilIdle() throws {
        let deadline = Date().addingTimeInterval(60)
        var state = ""
        while Date() < deadline {
            guard controller.isRunning, node.isRunning else { break }
            state =
                (try? runBlocking("sinfo", ["-h", "-o", "%t"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines))
                ?? ""
            if state == "idle" { return }
            usleep(200_000)
        }
        throw TestFailure("the Slurm node did not become idle (last state '\(state)'): \(logTail())")
    }

    /// The ends of the daemons' logs, for a failure message.
    func logTail() -> String {
        ["slurmctld.log", "slurmctld.out", "slurmd.log", "slurmd.out"].map { name in
            let text = (try? String(contentsOf: directory.appendingPathComponent(name), encoding: .utf8)) ?? ""
            return "\(name): " + text.split(separator: "\n").suffix(8).joined(separator: "\n  ")
        }.joined(separator: "\n")
    }

    // MARK: Commands

    /// Runs a Slurm command (`sbatch`, `squeue`, `scancel`, `scontrol`) against this cluster and
    /// waits for it, up to `timeout` (without blocking a thread).
    func run(_ tool: String, _ arguments: [String], timeout: Duration = .seconds(120)) async throws -> Output {
        let (process, out, err) = try spawn(tool, arguments)
        guard let status = await process.wait(timeout: timeout) else {
            process.signal(SIGKILL)
            _ = await process.wait(timeout: .seconds(10))
            throw TestFailure("\(tool) \(arguments) did not end within \(timeout)")
        }
        return collect(status, out, err)
    }

    private func runBlocking(_ tool: String, _ arguments: [String]) throws -> Output {
        let (process, out, err) = try spawn(tool, arguments)
        return collect(process.waitBlocking(), out, err)
    }

    private func spawn(_ tool: String, _ arguments: [String]) throws -> (ChildProcess, URL, URL) {
        let id = UUID().uuidString.prefix(8)
        let out = directory.appendingPathComponent("cmd-\(id).out")
        let err = directory.appendingPathComponent("cmd-\(id).err")
        let process = try ChildProcess(
            executable: "/usr/bin/\(tool)", arguments: arguments, environment: environment, stdout: out.path,
            stderr: err.path)
        return (process, out, err)
    }

    private func collect(_ status: Int32, _ out: URL, _ err: URL) -> Output {
        defer {
            try? FileManager.default.removeItem(at: out)
            try? FileManager.default.removeItem(at: err)
        }
        return Output(
            status: status,
            stdout: (try? String(contentsOf: out, encoding: .utf8)) ?? "",
            stderr: (try? String(contentsOf: err, encoding: .utf8)) ?? "")
    }

    /// Whether any job of this cluster is still pending or running.
    func hasJobs() async throws -> Bool {
        try await !run("squeue", ["-h", "-o", "%i"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty
    }

    /// Waits until no job is left (ending early), up to `timeout`.
    func waitForNoJobs(timeout: Duration) async throws {
        let deadline = ContinuousClock.now + timeout
        while try await hasJobs() {
            guard ContinuousClock.now < deadline else {
                throw TestFailure("jobs still running after \(timeout): \(try await run("squeue", []).stdout)")
            }
            try await Task.sleep(for: .milliseconds(200))
        }
    }

    // MARK: Processes

    /// Every process of this cluster: the daemons, their job steps and the jobs' programs (all
    /// carry the directory's path in their environment or arguments).
    func processes() -> [pid_t] {
        let marker = Data(directory.path.utf8)
        let me = getpid()
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { pid_t($0) }.filter { pid in
            guard pid != me else { return false }
            for file in ["cmdline", "environ"] {
                if let data = FileManager.default.contents(atPath: "/proc/\(pid)/\(file)"),
                    data.range(of: marker) != nil
                {
                    return true
                }
            }
            return false
        }
    }

    /// The running programs of this cluster's jobs whose executable is named `name`.
    func processes(named name: String) -> [pid_t] {
        processes().filter { pid in
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe")).map {
                URL(fileURLWithPath: $0).lastPathComponent == name
            } ?? false
        }
    }

    // MARK: Teardown

    /// Cancels every job, stops the daemons and kills anything of theirs still running; stops
    /// `munged` if this fixture started it. Safe to call twice.
    func stop() {
        guard !stopped else { return }
        stopped = true
        if controller.isRunning {
            _ = try? runBlocking("scancel", ["--user=root"])
            let deadline = Date().addingTimeInterval(15)
            while Date() < deadline, let jobs = try? runBlocking("squeue", ["-h", "-o", "%i"]), !jobs.stdout.isEmpty,
                jobs.status == 0
            {
                usleep(200_000)
            }
        }
        for daemon in [node, controller] { daemon.signal(SIGTERM) }
        let deadline = Date().addingTimeInterval(10)
        while (node.isRunning || controller.isRunning) && Date() < deadline { usleep(20_000) }
        for daemon in [node, controller] where daemon.isRunning {
            daemon.signal(SIGKILL)
            _ = daemon.waitBlocking()
        }
        // Job steps and programs outlive slurmd: end them by pid.
        for _ in 0..<50 {
            let left = processes()
            if left.isEmpty { break }
            for pid in left { kill(pid, SIGKILL) }
            usleep(100_000)
        }
        if let startedMunge {
            kill(startedMunge, SIGTERM)
            for _ in 0..<100 where kill(startedMunge, 0) == 0 { usleep(20_000) }
        }
        try? FileManager.default.removeItem(at: directory)
    }

    deinit {
        stop()
    }

    // MARK: Installation and munge

    /// Installs `slurm-wlm` and `munge` with the project's setup script when they are missing.
    private static func installIfMissing() throws {
        let needed = ["/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/bin/sbatch", "/usr/sbin/munged"]
        guard needed.contains(where: { !FileManager.default.isExecutableFile(atPath: $0) }) else { return }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("swoop-slurm-setup-\(getpid()).log")
        defer { try? FileManager.default.removeItem(at: log) }
        let setup = try ChildProcess(
            executable: root.appendingPathComponent("scripts/setup").path, arguments: ["--quiet"],
            environment: ["CI": "true"], stdout: log.path, stderr: log.path)
        guard setup.waitBlocking() == 0 else {
            throw TestFailure(
                "scripts/setup could not install slurm-wlm and munge: "
                    + "\((try? String(contentsOf: log, encoding: .utf8)) ?? "")"
            )
        }
    }

    /// Starts `munged` as the `munge` user unless one already answers; returns its pid if started.
    private static func startMungeIfNeeded(log: String) throws -> pid_t? {
        if (try? ChildProcess(executable: "/usr/bin/munge", arguments: ["-n"]).waitBlocking()) == 0 { return nil }
        let key = "/etc/munge/munge.key"
        if !FileManager.default.fileExists(atPath: key) {
            var bytes = [UInt8](repeating: 0, count: 1024)
            for index in bytes.indices { bytes[index] = UInt8.random(in: 0...255) }
            try Data(bytes).write(to: URL(fileURLWithPath: key))
            try shell("chown munge:munge \(key) && chmod 0400 \(key)", log: log)
        }
        try shell("mkdir -p /run/munge && chown munge:munge /run/munge && chmod 0755 /run/munge", log: log)
        try shell("rm -f /run/munge/munged.pid && runuser -u munge -- /usr/sbin/munged --force", log: log)
        let pidText = (try? String(contentsOfFile: "/run/munge/munged.pid", encoding: .utf8)) ?? ""
        guard let pid = pid_t(pidText.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw TestFailure("munged did not start: \((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
        }
        return pid
    }

    private static func shell(_ command: String, log: String) throws {
        let process = try ChildProcess(executable: "/bin/sh", arguments: ["-c", command], stdout: log, stderr: log)
        guard process.waitBlocking() == 0 else {
            throw TestFailure("'\(command)' failed: \((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
        }
    }

    private static func shortHostName() -> String {
        let name = ProcessInfo.processInfo.hostName
        return String(name.split(separator: ".").first ?? Substring(name))
    }
}
