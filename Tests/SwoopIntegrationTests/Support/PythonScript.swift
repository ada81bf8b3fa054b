import Foundation

/// A python3 script a test fixture runs (a proxy, a relay), from a temporary directory of its
/// own: the script file, a `log` it appends to, a `ready` file it writes once it listens, and
/// its stderr. The fixture owns it and calls ``stop()``.
struct PythonScript: Sendable {
    let directory: URL
    private let process: ChildProcess

    private init(directory: URL, process: ChildProcess) {
        self.directory = directory
        self.process = process
    }

    /// Writes `source` into a new directory and runs it with `arguments(log, ready)` (paths);
    /// returns once `ready` holds what `parse` accepts (within 30 s), or throws with its stderr.
    static func start<Ready>(
        _ source: String, named name: String, arguments: (_ log: String, _ ready: String) -> [String],
        ready parse: (String) -> Ready?
    ) async throws -> (PythonScript, Ready) {
        let directory = try TemporaryDirectory.make(prefix: "swoop-\(name)")
        let script = directory.appendingPathComponent("\(name).py")
        try source.write(to: script, atomically: true, encoding: .utf8)
        let ready = directory.appendingPathComponent("ready")
        let process = try ChildProcess(
            executable: "/usr/bin/python3",
            arguments: [script.path] + arguments(directory.appendingPathComponent("log").path, ready.path),
            stderr: directory.appendingPathComponent("stderr").path)
        let started = PythonScript(directory: directory, process: process)
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline && process.isRunning {
            if let text = try? String(contentsOf: ready, encoding: .utf8), let value = parse(text) {
                return (started, value)
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        let stderr = (try? String(contentsOf: directory.appendingPathComponent("stderr"), encoding: .utf8)) ?? ""
        await started.stop()
        throw TestFailure("\(name).py did not start: \(stderr)")
    }

    /// The lines the script has logged so far.
    var log: [String] {
        ((try? String(contentsOf: directory.appendingPathComponent("log"), encoding: .utf8)) ?? "")
            .split(separator: "\n").map(String.init)
    }

    /// Ends the script (SIGTERM, then SIGKILL after 10 s) and removes its directory.
    func stop() async {
        process.signal(SIGTERM)
        if await process.wait(timeout: .seconds(10)) == nil {
            process.signal(SIGKILL)
            _ = await process.wait(timeout: .seconds(10))
        }
        try? FileManager.default.removeItem(at: directory)
    }
}

/// Runs `body` with `fixture`, then `stop`s it however `body` ends.
func stopping<Fixture, T>(
    _ fixture: Fixture, with stop: (Fixture) async -> Void, _ body: (Fixture) async throws -> T
) async throws -> T {
    do {
        let result = try await body(fixture)
        await stop(fixture)
        return result
    } catch {
        await stop(fixture)
        throw error
    }
}
