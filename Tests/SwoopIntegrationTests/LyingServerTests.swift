import Foundation
import Swoop
import SwoopStore
import SwoopTestOrigin
import Testing

/// Servers whose headers lie about the bytes (issue 37), each run the ways a user runs Swoop:
/// the default count, `-c 1`, `-c 8`, `kill -9` and the same command again, and a rerun of a
/// finished file. Whatever the headers say, the target ends as one version byte for byte, or is
/// absent; a rerun of a finished file fetches no body.
@Suite("Servers whose headers lie", .serialized)
struct LyingServerTests {
    /// How a server lies.
    enum Server: String, CaseIterable, CustomTestStringConvertible {
        /// A round-robin pool whose nodes serve the same bytes with their own validators.
        case poolSameBytes
        /// The same pool with another version on the second node (a half-finished deploy).
        case poolDifferentBytes
        /// Old validators for a while after the file is replaced, near the end of a download.
        case staleValidators
        /// Validators and size computed once, at the first request; the file replaced midway.
        case validatorsFixedAtStart
        /// An S3-compatible store's `200` with a `Content-Range`, at most 1 MiB per response.
        case partialUnder200
        /// `416` to every range of a small object.
        case refusesRangesOfSmallObjects

        var testDescription: String { rawValue }

        var size: Int64 {
            switch self {
            case .partialUnder200: 5_000_000
            case .refusesRangesOfSmallObjects: 1
            default: 12 << 20
            }
        }

        /// The versions the target may hold at the end (seeds of ``TestObject``).
        func versions(of object: TestObject) -> [UInt64] {
            switch self {
            case .poolDifferentBytes, .staleValidators, .validatorsFixedAtStart: [object.seed, object.seed + 1]
            default: [object.seed]
            }
        }

        func configure(_ faults: inout FaultSwitches, path: String, size: Int64) {
            faults.throttleBytesPerSecond = 6 << 20
            switch self {
            case .poolSameBytes:
                faults.nodePool = FaultSwitches.NodePool(nodes: 2, copies: .sameBytes)
            case .poolDifferentBytes:
                faults.nodePool = FaultSwitches.NodePool(nodes: 2, copies: .differentBytes)
            case .staleValidators:
                faults.staleValidatorsFor = .seconds(5)
                faults.changeAfterBodyBytes = FaultSwitches.ChangeAfterBodyBytes(path: path, bytes: size * 8 / 10)
            case .validatorsFixedAtStart:
                faults.metadataFromFirstRequest = true
                faults.changeAfterBodyBytes = FaultSwitches.ChangeAfterBodyBytes(path: path, bytes: size / 2)
            case .partialUnder200:
                faults.rangeAs200 = true
                faults.rangeCapBytes = 1 << 20
            case .refusesRangesOfSmallObjects:
                faults.rangeRefusal = FaultSwitches.RangeRefusal(objectsUpTo: 4096, withContentRange: true)
            }
        }
    }

    @Test("the target is one version or absent, never mixed", arguments: Server.allCases, DownloadWay.allCases)
    func oneVersion(_ server: Server, _ way: DownloadWay) async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            let object = TestObject(size: server.size, seed: 37)
            let path = "/lying.bin"
            origin.addObject(object, at: path)
            origin.updateFaults { server.configure(&$0, path: path, size: object.size) }
            let command = [origin.url(path), "-o", "lying.bin", "--checkpoint-interval", "0.1"] + way.arguments
            let target = scratch.path("lying.bin")
            let killed = way == .killAndResume && server.size > 1 << 20
            // A 1-byte object arrives at once: nothing to kill midway.
            let (run, progressed) = try await (killed ? way : .adaptive).run(
                command + ["-q"], target: target, in: scratch.url)
            if killed { #expect(progressed || scratch.exists("lying.bin"), "\(server): no progress before the kill") }
            try await expectOneVersion(run, target: target, object: object, server: server)
            if server == .refusesRangesOfSmallObjects {
                // Asked again without Range at once: a 416 and a 200, not a second of retries.
                #expect(origin.requests.count == 2, "\(origin.requests.map { "\($0.status)" })")
            }
            guard way == .rerun, run.status == 0 else { return }
            // The version the first run finished with: the earlier one when every byte past the
            // change was in responses already under way (served from the object they began with).
            let held = try await TestData.sha256(of: target)
            let recorded = Self.recordedValidator(of: target)
            // The rerun judges that file against what is served now; no further change during it
            // (the log's reset arms the change again).
            origin.updateFaults { $0.changeAfterBodyBytes = nil }
            origin.resetLog()
            let again = try await CLI.run(command + ["--json"], in: scratch.url)
            let bodies = origin.requests.reduce(Int64(0)) { $0 + $1.bodyBytesSent }
            let current = try #require(origin.object(at: path))
            let currentSHA256 = try await current.sha256
            if server == .poolDifferentBytes {
                // The other node's version may be served now: the finished file is left alone, and
                // the user told.
                #expect(again.status == 0 || again.status == 5, "\(again.stderr)")
                #expect(bodies <= 2 * 4096, "\(server): a rerun fetched \(bodies) body bytes")
            } else if held != currentSHA256 || Self.validator(in: again.stdout).map({ $0 != recorded }) == true {
                // The file was replaced after the version this one holds, or the server's validators
                // for it changed since it was finished (a stale window that closed before the rerun,
                // which a slow first run leaves little of): a change the server stands by, and the
                // rerun fetches the version served now (exit 0).
                #expect(again.status == 0, "\(server): \(again.stderr)")
                #expect(try await TestData.sha256(of: target) == currentSHA256, "\(server): \(again.stdout)")
                let changed = "recorded validators the server no longer sends (\(recorded ?? "-"))"
                let why = held != currentSHA256 ? "held the earlier version" : changed
                print("lying \(server): a rerun fetched \(bodies) bytes: the first run's file \(why)")
            } else {
                #expect(again.status == 0, "\(server): \(again.stderr)")
                #expect(again.stdout.contains("\"alreadyComplete\":true"), "\(again.stdout)")
                #expect(bodies <= 2 * 4096, "\(server): a rerun fetched \(bodies) body bytes")
            }
            try await expectOneVersion(run, target: target, object: object, server: server)
        }
    }

    /// The validator a finished file records (its `user.swoop.object` attribute): its ETag, else its date.
    private static func recordedValidator(of path: String) -> String? {
        CompletedObject.read(from: path).flatMap { $0.etag ?? $0.lastModified }
    }

    /// The validator a `--json` summary names: its ETag, else its Last-Modified.
    private static func validator(in json: String) -> String? {
        guard let data = json.data(using: .utf8),
            let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
        else { return nil }
        return (object["etag"] as? String) ?? (object["lastModified"] as? String)
    }

    /// Exit 0 and one version byte for byte, or a failure with no target; never a mix.
    private func expectOneVersion(
        _ run: CLI.Result, target: String, object: TestObject, server: Server
    ) async throws {
        guard FileManager.default.fileExists(atPath: target) else {
            #expect(run.status != 0, "\(server): exit 0 without a file")
            #expect(server == .poolDifferentBytes, "\(server): failed: \(run.stderr)")
            return
        }
        let sha256 = try await TestData.sha256(of: target)
        var versions: [String] = []
        for seed in server.versions(of: object) {
            versions.append(try await TestObject(size: object.size, seed: seed).sha256)
        }
        #expect(versions.contains(sha256), "\(server): the target mixes versions (exit \(run.status)): \(run.stderr)")
        if server == .poolSameBytes || server == .partialUnder200 || server == .refusesRangesOfSmallObjects {
            #expect(run.status == 0, "\(server): \(run.stderr)")
            #expect(try await sha256 == object.sha256)
        }
    }
}
