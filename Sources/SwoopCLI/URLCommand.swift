import Dispatch
import Swoop

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// `--url-command CMD`: a ``DownloadRequest/urlProvider`` that runs `sh -c CMD` with the URL in
/// use in `SWOOP_URL`, and takes the first non-empty line it prints as the fresh URL.
struct URLCommand: Sendable {
    /// The environment variable that carries the current URL.
    static let variable = "SWOOP_URL"

    let command: String

    /// The provider the library calls (off the cooperative pool: the command blocks a thread).
    var provider: @Sendable (String) async throws -> String {
        let command = command
        return { current in
            try await withCheckedThrowingContinuation { continuation in
                DispatchQueue.global().async {
                    continuation.resume(with: Result { try Self.run(command, url: current) })
                }
            }
        }
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// Runs the command and reads its standard output; standard error passes through.
    private static func run(_ command: String, url: String) throws -> String {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else {
            throw Failure(description: "--url-command: cannot make a pipe: \(String(cString: strerror(errno)))")
        }
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }  // the child gets only its dup2'ed copy
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, fds[1], 1)
        var environment = ProcessEnvironment.current.filter { !$0.hasPrefix(variable + "=") }
        environment.append("\(variable)=\(url)")
        let arguments: [String] = ["/bin/sh", "-c", command]
        let argv = arguments.map { strdup($0) } + [nil]
        let envp = environment.map { strdup($0) } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, "/bin/sh", &actions, nil, argv, envp)
        close(fds[1])
        guard spawned == 0 else {
            close(fds[0])
            throw Failure(description: "--url-command: cannot run /bin/sh: \(String(cString: strerror(spawned)))")
        }
        var output: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while output.count < 1 << 20 {
            let count = read(fds[0], &buffer, buffer.count)
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            output += buffer[0..<count]
        }
        close(fds[0])
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let exit = status & 0x7F == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
        guard exit == 0 else { throw Failure(description: "--url-command exited with status \(exit)") }
        let lines = String(decoding: output, as: UTF8.self).split(whereSeparator: \.isNewline).map { $0.trimmed }
        guard let fresh = lines.first(where: { !$0.isEmpty }) else {
            throw Failure(description: "--url-command printed no URL")
        }
        return fresh
    }
}

/// This process's environment as `NAME=value` strings.
enum ProcessEnvironment {
    static var current: [String] {
        var result: [String] = []
        var pointer = environ
        while let entry = pointer.pointee {
            result.append(String(cString: entry))
            pointer += 1
        }
        return result
    }
}
