import Foundation
import SwoopTestOrigin
import Synchronization

/// A child process started with `posix_spawn`, with a clean signal mask and default signal
/// dispositions (Foundation's `Process` passes on the blocked signals of the thread that spawns
/// it, so a child would ignore SIGTERM or SIGINT).
final class ChildProcess: @unchecked Sendable {
    let pid: pid_t
    let arguments: [String]
    private let state = Mutex<Int32?>(nil)

    /// Starts `executable` with `arguments`, in `directory`, with stdin from /dev/null and
    /// stdout/stderr appended to the given files.
    init(
        executable: String, arguments: [String], directory: String? = nil, environment: [String: String] = [:],
        stdout: String = "/dev/null", stderr: String = "/dev/null"
    ) throws {
        self.arguments = arguments
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attributes, &empty)
        var all = sigset_t()
        sigfillset(&all)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, stdout, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        posix_spawn_file_actions_addopen(&actions, 2, stderr, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        // Nothing else: a descriptor another test holds open without close-on-exec (Foundation's
        // FileHandle opens files without it) would otherwise live on in this child, and keep, say,
        // a deleted file's space from being freed.
        _ = closeFrom?(&actions, 3)
        // posix_spawn cannot change directory portably; a shell does, then execs the program.
        var program = executable
        var argumentVector = [executable] + arguments
        if let directory {
            program = "/bin/sh"
            argumentVector = ["/bin/sh", "-c", "cd \"$0\" && exec \"$@\"", directory, executable] + arguments
        }

        var env = ProcessInfo.processInfo.environment
        for (key, value) in environment { env[key] = value }
        let argv = argumentVector.map { strdup($0) } + [nil]
        let envp = env.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, program, &actions, &attributes, argv, envp)
        guard result == 0 else { throw TestFailure("cannot start \(executable): \(String(cString: strerror(result)))") }
        self.pid = pid
    }

    /// The exit status (128 + signal number when killed), or `nil` while it runs.
    var exitStatus: Int32? {
        state.withLock { status in
            if let status { return status }
            var raw: Int32 = 0
            guard waitpid(pid, &raw, WNOHANG) == pid else { return nil }
            let code = raw & 0x7F == 0 ? (raw >> 8) & 0xFF : 128 + (raw & 0x7F)
            status = code
            return code
        }
    }

    var isRunning: Bool { exitStatus == nil }

    func signal(_ number: Int32) {
        if isRunning { kill(pid, number) }
    }

    /// Waits (polling, without blocking a thread) up to `timeout`, stretched by the machine's
    /// load (``MachineLoad``); `nil` if still running.
    func wait(timeout: Duration) async -> Int32? {
        var deadline = MachineLoad.Deadline(timeout)
        while !deadline.exceeded() {
            if let status = exitStatus { return status }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return exitStatus
    }

    /// Waits synchronously; for teardown after SIGKILL, which ends a process at once.
    func waitBlocking() -> Int32 {
        while true {
            if let status = exitStatus { return status }
            usleep(2_000)
        }
    }
}

/// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34 and later), which its header declares
/// only for `_GNU_SOURCE`, so Swift does not see it; looked up at run time, `nil` where missing.
private let closeFrom: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>?, Int32) -> Int32)? = {
    guard let symbol = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np") else { return nil }
    return unsafeBitCast(
        symbol, to: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>?, Int32) -> Int32).self)
}()
