import Foundation
import Swoop
import SwoopTestOrigin
import Testing

/// `size=` in lists (Swoop's own option): checked against the server, and the basis of shards
/// balanced by bytes.
@Suite("List size= lines", .serialized)
struct ListSizeTests {
    @Test("a size= other than the server's fails that file at its first response, writing nothing; others succeed")
    func mismatch() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            origin.addObject(TestObject(size: 300_000, seed: 1), at: "/right.bin")
            origin.addObject(TestObject(size: 32 << 20, seed: 2), at: "/wrong.bin")
            let list = """
                \(origin.url("/right.bin"))
                  size=300000
                \(origin.url("/wrong.bin"))
                  size=33554431
                """
            try list.write(to: scratch.url.appendingPathComponent("list.txt"), atomically: true, encoding: .utf8)
            let result = try await CLI.run(["get", "-i", "list.txt", "-d", "out"], in: scratch.url)
            #expect(result.status == 1, "stderr: \(result.stderr)")
            #expect(
                result.stderr.contains(
                    "wrong.bin is 33554432 bytes, not the 33554431 expected; correct or remove size= in the list"),
                "\(result.stderr)")
            #expect(scratch.exists("out/right.bin"))
            #expect(!scratch.exists("out/wrong.bin") && !scratch.exists(part: "out/wrong.bin"))
            let served = origin.requests.filter { $0.path == "/wrong.bin" }.reduce(0) { $0 + $1.bodyBytesSent }
            #expect(served < 32 << 20, "the body was not fetched: \(served) bytes")

            // A file already complete whose size= is wrong fails too, and is left as it is.
            let again = list.replacingOccurrences(of: "size=300000", with: "size=1")
            try again.write(to: scratch.url.appendingPathComponent("list.txt"), atomically: true, encoding: .utf8)
            let second = try await CLI.run(["get", "-i", "list.txt", "-d", "out"], in: scratch.url)
            #expect(second.status == 1)
            #expect(second.stderr.contains("right.bin is 300000 bytes, not the 1 expected"), "\(second.stderr)")
            #expect(scratch.exists("out/right.bin"))
        }
    }

    @Test("a size= that is not a number of bytes stops the run before anything is fetched, naming the line")
    func badSize() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            origin.addObject(TestObject(size: 1000, seed: 3), at: "/a.bin")
            try "\(origin.url("/a.bin"))\n  size=1.5k\n".write(
                to: scratch.url.appendingPathComponent("list.txt"), atomically: true, encoding: .utf8)
            let result = try await CLI.run(["get", "-i", "list.txt", "-d", "out"], in: scratch.url)
            #expect(result.status == 2)
            #expect(
                result.stderr.contains("list.txt: manifest line 2: size=1.5k is not a number of bytes"),
                "\(result.stderr)")
            #expect(origin.requestCount == 0)
        }
    }

    @Test("--shard: with size= on every line the shards balance bytes; on only some, a warning and the hash split")
    func shardsBySize() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            var lines: [String] = []
            for index in 0..<24 {
                let size = index < 3 ? 400_000 : 2000 + index
                origin.addObject(TestObject(size: Int64(size), seed: UInt64(index + 10)), at: "/f\(index).bin")
                lines.append(origin.url("/f\(index).bin") + "\n  size=\(size)")
            }
            let list = scratch.url.appendingPathComponent("list.txt")
            try lines.joined(separator: "\n").write(to: list, atomically: true, encoding: .utf8)
            var seen: [String: Int] = [:]
            for k in 0..<3 {
                let result = try await CLI.run(
                    ["get", "-i", "list.txt", "-d", "node\(k)", "--shard", "\(k)/3"], in: scratch.url)
                #expect(result.status == 0, "stderr: \(result.stderr)")
                #expect(result.stderr.contains("balanced by size="), "\(result.stderr)")
                let names = try FileManager.default.contentsOfDirectory(atPath: scratch.path("node\(k)"))
                #expect(
                    names.filter { ["f0.bin", "f1.bin", "f2.bin"].contains($0) }.count == 1,
                    "one large file per shard: \(names)")
                for name in names { seen[name, default: 0] += 1 }
            }
            #expect(seen.count == 24 && seen.values.allSatisfy { $0 == 1 }, "every line exactly once: \(seen)")

            lines[5] = origin.url("/f5.bin")
            try lines.joined(separator: "\n").write(to: list, atomically: true, encoding: .utf8)
            let partly = try await CLI.run(
                ["get", "-i", "list.txt", "-d", "partly", "--shard", "0/3"], in: scratch.url)
            #expect(partly.status == 0)
            #expect(
                partly.stderr.contains("size= is given for 23 of 24 entries, so --shard splits the list by URL hash"),
                "\(partly.stderr)")
        }
    }
}
