import Foundation
import Swoop
import SwoopTestOrigin
import Testing

/// A file rewritten in place on an honest server (issue 54): two 4 KiB blocks, away from every
/// seam, get new bytes, and the validators change with them (a later mtime: strong ETags, weak
/// ones without dates, and dates only). Run the ways a user runs Swoop: the default count, `-c 1`
/// and `-c 8` with the change mid-download (responses under way read the new bytes, as a file
/// server's do), `kill -9` with the change before the same command again, and a rerun of a
/// finished file. The target ends as the new version — or, with `--on-change fail`, the command
/// exits 4 and leaves no target (a finished file: the one it had) — never mixed, never the old
/// bytes under the new validators.
@Suite("A file rewritten in place", .serialized)
struct InPlaceChangeTests {
    /// What the server sends as validators.
    enum Validators: String, CaseIterable, CustomTestStringConvertible {
        case strongETag, weakETag, datesOnly

        var testDescription: String { rawValue }

        func object(size: Int64, seed: UInt64) -> TestObject {
            switch self {
            case .strongETag: TestObject(size: size, seed: seed, etag: .strong, lastModified: true)
            case .weakETag: TestObject(size: size, seed: seed, etag: .weak, lastModified: false)
            case .datesOnly: TestObject(size: size, seed: seed, etag: .none, lastModified: true)
            }
        }
    }

    /// When the file is rewritten, and how the command runs.
    enum Way: String, CaseIterable, CustomTestStringConvertible {
        case adaptiveMidDownload, oneConnectionMidDownload, eightConnectionsMidDownload
        /// `kill -9`, a rewrite of one block held and one missing, the same command.
        case killThenResume
        /// `kill -9`, a rewrite of one block held only, the same command.
        case killThenResumeHeldOnly
        /// The command finishes, the file is rewritten away from its middle, the command again.
        case rerunFinished

        var testDescription: String { rawValue }

        var arguments: [String] {
            switch self {
            case .oneConnectionMidDownload: ["-c", "1"]
            case .eightConnectionsMidDownload: ["-c", "8"]
            default: []
            }
        }
    }

    static let size: Int64 = 16 << 20
    /// Two blocks away from every seam: inside 10 MiB, and the last one.
    static let blocks: [Int64] = [(10 << 20) + (12 << 10), size - 4096]

    @Test("the new version, never mixed", arguments: Validators.allCases, Way.allCases)
    func newVersion(_ validators: Validators, _ way: Way) async throws {
        try await exclusively {
            let scratch = try Scratch()
            defer { scratch.cleanup() }
            try await withTestOrigin { origin in
                let path = "/rewritten.bin"
                let original = validators.object(size: Self.size, seed: 54)
                origin.addObject(original, at: path)
                origin.updateFaults { $0.throttleBytesPerSecond = 4 << 20 }
                let command = [origin.url(path), "-o", "rewritten.bin", "--checkpoint-interval", "0.1", "--json", "-q"]
                let target = scratch.path("rewritten.bin")
                let run = try await Self.run(way, command + way.arguments, target: target, origin: origin, path: path)
                let current = try #require(origin.object(at: path))
                #expect(current != original, "\(way): the file was not rewritten")
                #expect(run.status == 0, "\(validators), \(way): \(run.stderr)")
                #expect(
                    try await TestData.sha256(of: target) == current.sha256,
                    "\(validators), \(way): the target is not the new version: \(run.stderr)")
                // What --json says of the version is the one every byte was served under.
                let summary = try Self.summary(run.stdout)
                #expect(summary.etag == current.etagValue.flatMap { $0.hasPrefix("W/") ? nil : $0 }, "\(run.stdout)")
                #expect(summary.lastModified == current.lastModifiedValue, "\(run.stdout)")
                #expect(summary.objectChanges == 1, "\(validators), \(way): \(run.stdout)")
                #expect((summary.refetchedBytes ?? 0) > 0, "\(run.stdout)")
                #expect(!scratch.exists(part: "rewritten.bin") && !scratch.exists(map: "rewritten.bin"))
            }
        }
    }

    @Test("with --on-change fail: exit 4, no target (a finished file: the one it had)", arguments: Way.allCases)
    func onChangeFail(_ way: Way) async throws {
        guard way != .adaptiveMidDownload, way != .oneConnectionMidDownload else { return }
        try await exclusively {
            let scratch = try Scratch()
            defer { scratch.cleanup() }
            try await withTestOrigin { origin in
                let path = "/rewritten.bin"
                let original = Validators.strongETag.object(size: Self.size, seed: 55)
                origin.addObject(original, at: path)
                origin.updateFaults { $0.throttleBytesPerSecond = 4 << 20 }
                let command = [
                    origin.url(path), "-o", "rewritten.bin", "--checkpoint-interval", "0.1", "--on-change", "fail",
                    "-q",
                ]
                let target = scratch.path("rewritten.bin")
                let run = try await Self.run(way, command + way.arguments, target: target, origin: origin, path: path)
                #expect(run.status == 4, "\(way): \(run.stderr)")
                #expect(run.stderr.contains("changed"), "\(run.stderr)")
                if way == .rerunFinished {
                    #expect(try await TestData.sha256(of: target) == original.sha256, "the finished file is kept")
                } else {
                    #expect(!scratch.exists("rewritten.bin"), "\(way): a target after a failed run")
                }
                #expect(!scratch.exists(part: "rewritten.bin") && !scratch.exists(map: "rewritten.bin"))
            }
        }
    }

    /// Runs `command` the way `way` says, rewriting the object at `path` when it says.
    private static func run(
        _ way: Way, _ command: [String], target: String, origin: TestOrigin, path: String
    ) async throws -> CLI.Result {
        let directory = URL(fileURLWithPath: target).deletingLastPathComponent()
        switch way {
        case .adaptiveMidDownload, .oneConnectionMidDownload, .eightConnectionsMidDownload:
            // Half the object's bytes served (in whichever responses), then the rewrite: the
            // responses under way go on with the new bytes.
            origin.updateFaults {
                $0.changeAfterBodyBytes = FaultSwitches.ChangeAfterBodyBytes(
                    path: path, bytes: size / 2, rewritingBlocksAt: blocks)
            }
            return try await CLI.run(command, in: directory)
        case .killThenResume, .killThenResumeHeldOnly:
            let running = try CLI.start(command, in: directory)
            let progressed = try await running.waitUntilPartial(target, holds: 4 << 20)
            running.signal(SIGKILL)
            _ = try await running.wait(timeout: .seconds(30))
            #expect(progressed, "no progress before the kill")
            // One block inside what the segment map holds; the last block is not held yet.
            let status = Downloader.status(of: target)
            let chunk = try #require(status.chunkSize)
            let held = try #require(status.completedChunks.first)
            let inside = Int64(held.lowerBound) * chunk + chunk / 2
            #expect(!status.completedChunks.contains { $0.contains(Int((size - 1) / chunk)) })
            origin.rewriteInPlace(
                at: path, blocksAt: way == .killThenResume ? [inside, size - 4096] : [inside])
            return try await CLI.run(command, in: directory)
        case .rerunFinished:
            let first = try await CLI.run(command, in: directory)
            #expect(first.status == 0, "\(first.stderr)")
            // Away from the middle, which the rerun's 1 KiB compares.
            origin.rewriteInPlace(at: path, blocksAt: blocks)
            return try await CLI.run(command, in: directory)
        }
    }

    /// The fields of `swoop --json` these tests read.
    struct Summary: Decodable {
        var etag: String?
        var lastModified: String?
        var objectChanges: Int?
        var refetchedBytes: Int64?
    }

    static func summary(_ stdout: String) throws -> Summary {
        let line = stdout.split(separator: "\n").last.map(String.init) ?? ""
        return try JSONDecoder().decode(Summary.self, from: Data(line.utf8))
    }
}
