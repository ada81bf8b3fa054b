import Foundation
import Synchronization

/// Runs the built `swoop` executable as a child process, the way a user would.
enum CLI {
    struct Result: Sendable {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    /// `swoop`, next to the test bundle in the build directory.
    static var executable: String { executable(named: "swoop") }

    /// One of the package's executables, next to the test bundle in the build directory.
    static func executable(named name: String) -> String {
        let bundle = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
        return bundle.appendingPathComponent(name).path
    }

    /// Runs `swoop arguments` (or another of the package's executables, `program`) in `directory`
    /// and waits for it (without blocking a thread).
    static func run(
        _ arguments: [String], in directory: URL, environment: [String: String] = [:],
        timeout: Duration = .seconds(300), program: String = "swoop"
    ) async throws -> Result {
        let running = try start(arguments, in: directory, environment: environment, program: program)
        return try await running.wait(timeout: timeout)
    }

    static func start(
        _ arguments: [String], in directory: URL, environment: [String: String] = [:], program: String = "swoop"
    ) throws -> Running {
        let id = UUID().uuidString.prefix(8)
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("swoop-cli-\(id).out")
        let err = FileManager.default.temporaryDirectory.appendingPathComponent("swoop-cli-\(id).err")
        let process = try ChildProcess(
            executable: executable(named: program), arguments: arguments, directory: directory.path,
            environment: environment, stdout: out.path, stderr: err.path)
        return Running(process: process, stdoutURL: out, stderrURL: err)
    }

    final class Running: Sendable {
        let process: ChildProcess
        let stdoutURL: URL
        let stderrURL: URL

        init(process: ChildProcess, stdoutURL: URL, stderrURL: URL) {
            self.process = process
            self.stdoutURL = stdoutURL
            self.stderrURL = stderrURL
        }

        var pid: Int32 { process.pid }

        func signal(_ number: Int32) {
            process.signal(number)
        }

        var stderrSoFar: String { (try? String(contentsOf: stderrURL, encoding: .utf8)) ?? "" }

        func wait(timeout: Duration) async throws -> Result {
            guard let status = await process.wait(timeout: timeout) else {
                process.signal(SIGKILL)
                _ = await process.wait(timeout: .seconds(10))
                throw TestFailure("swoop \(process.arguments) did not exit within \(timeout); stderr: \(stderrSoFar)")
            }
            defer {
                try? FileManager.default.removeItem(at: stdoutURL)
                try? FileManager.default.removeItem(at: stderrURL)
            }
            return Result(
                status: status,
                stdout: (try? String(contentsOf: stdoutURL, encoding: .utf8)) ?? "",
                stderr: (try? String(contentsOf: stderrURL, encoding: .utf8)) ?? "")
        }
    }
}
