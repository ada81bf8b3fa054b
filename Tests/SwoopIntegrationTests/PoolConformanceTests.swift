import Foundation
import Swoop
import SwoopTestOrigin
import Testing

/// A real load-balanced pool (nginx round robin over two nginx nodes whose copies have different
/// mtimes, ``NginxPool``): validators alternate from one response to the next. With the same
/// bytes on both nodes Swoop finishes the file as curl does; with different bytes (a deploy half
/// done) the file is one node's version or absent, never both. Run the ways a user runs Swoop.
@Suite("A real load-balanced pool", .serialized)
struct PoolConformanceTests {
    @Test(
        "through nginx's round robin, the file is one node's version",
        arguments: [NginxPool.Copies.sameBytes, .differentBytes], DownloadWay.allCases)
    func oneVersion(_ copies: NginxPool.Copies, _ way: DownloadWay) async throws {
        let size: Int64 = 24 << 20
        let pool = try await NginxPool.start(copies: copies, size: size, seed: 11, fileName: "pool.bin")
        defer { pool.stop() }
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        // Swoop's own cap keeps the download long enough to be killed midway.
        let command =
            [pool.url, "-o", "pool.bin", "--checkpoint-interval", "0.1", "--limit-rate", "16m"] + way.arguments
        let target = scratch.path("pool.bin")
        var versions: Set<String> = []
        for node in pool.nodes { versions.insert(try await TestObject(size: size, seed: node.seed).sha256) }
        let (run, _) = try await way.run(command + ["-q"], target: target, in: scratch.url)
        if copies == .sameBytes {
            #expect(run.status == 0, "\(way): \(run.stderr)")
        }
        guard FileManager.default.fileExists(atPath: target) else {
            #expect(run.status != 0, "exit 0 without a file")
            return
        }
        #expect(versions.contains(try await TestData.sha256(of: target)), "\(way): a mix of both nodes' copies")
        guard way == .rerun, run.status == 0 else { return }
        let again = try await CLI.run([pool.url, "-o", "pool.bin", "--json"], in: scratch.url)
        if copies == .sameBytes {
            #expect(again.status == 0, "\(again.stderr)")
            #expect(again.stdout.contains("\"alreadyComplete\":true"), "\(again.stdout)")
        } else {
            // The other node's copy is another object: the finished file is left alone.
            #expect(again.status == 0 || again.status == 5, "\(again.stderr)")
        }
        #expect(versions.contains(try await TestData.sha256(of: target)))
    }
}
