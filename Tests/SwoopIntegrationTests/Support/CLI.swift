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
    static var executable: String {
        let bundle = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
        return bundle.appendingPathComponent("swoop").path
    }

    /// Runs `swoop arguments` in `directory` and waits for it (without blocking a thread).
    static func run(
        _ arguments: [String], in directory: URL, environment: [String: String] = [:], timeout: Duration = .seconds(300)
    ) async throws -> Result {
        let running = try start(arguments, in: directory, environment: environment)
        return try await running.wait(timeout: timeout)
    }

    static func start(_ arguments: [String], in directory: URL, environment: [String: String] = [:]) throws -> Running {
        let id = UUID().uuidString.prefix(8)
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("swoop-cli-\(id).out")
        let err = FileManager.default.temporaryDirectory.appendingPathComponent("swoop-cli-\(id).err")
        let process = try ChildProcess(
            executable: executable, arguments: arguments, directory: directory.path,
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
