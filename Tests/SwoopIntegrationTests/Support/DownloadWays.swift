import Foundation
import Swoop
import Testing

/// The ways a user runs `swoop get` against a server whose headers lie (issue 37): the default
/// count, one connection, eight, `kill -9` and the same command again, and a rerun of a finished
/// file.
enum DownloadWay: String, CaseIterable, CustomTestStringConvertible {
    case adaptive, oneConnection, eightConnections, killAndResume, rerun

    var testDescription: String { rawValue }

    /// The flags that make the way.
    var arguments: [String] {
        switch self {
        case .oneConnection: ["-c", "1"]
        case .eightConnections: ["-c", "8"]
        default: []
        }
    }

    /// Runs `command` in `directory` this way up to the end of the download (for `killAndResume`
    /// killed once `target` holds `killAfter` bytes, then run again); a rerun's second run is
    /// the caller's. Returns the last run's result and whether the kill came mid-download.
    func run(
        _ command: [String], target: String, in directory: URL, killAfter bytes: Int64 = 2 << 20
    ) async throws -> (result: CLI.Result, killedMidway: Bool) {
        guard self == .killAndResume else { return (try await CLI.run(command, in: directory), false) }
        let slow = try CLI.start(command, in: directory)
        let progressed = try await slow.waitUntilPartial(target, holds: bytes)
        slow.signal(SIGKILL)
        _ = try await slow.wait(timeout: .seconds(30))
        return (try await CLI.run(command, in: directory), progressed)
    }
}

extension CLI.Running {
    /// Waits (ending early) until `target` is a partial download holding at least `bytes`, or the
    /// process ends, or a minute passes. Returns whether it got there.
    func waitUntilPartial(_ target: String, holds bytes: Int64) async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline && process.isRunning {
            let status = Downloader.status(of: target)
            if status.state == .partial && status.bytesDone >= bytes { return true }
            try await Task.sleep(for: .milliseconds(20))
        }
        return false
    }
}
