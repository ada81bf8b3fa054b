import Foundation
import Testing

/// `swoop-lane-floor`, the benchmark's floor for a list of small files (S9, issue 57): not a
/// downloader, but its files must be right for its times to mean anything, and its list reader
/// reads bytes, as Swoop's does.
@Suite("The lane floor", .serialized)
struct LaneFloorTests {
    @Test("it fetches a list into files equal to the server's, reading CRLF and blank lines; a second run refuses")
    func fetchesAList() async throws {
        try await exclusively {
            let nginx = try await Nginx.start()
            defer { nginx.stop() }
            let scratch = try Scratch()
            defer { scratch.cleanup() }
            var expected: [String: String] = [:]  // file name -> SHA-256
            var lines: [String] = []
            for index in 0..<40 {
                let name = "f\(index).bin"
                expected[name] = try await nginx.addFile(name, size: 1 + index * 997, seed: UInt64(index + 1))
                lines.append(nginx.url("/\(name)") + (index % 3 == 0 ? "\r" : ""))
                if index % 10 == 0 { lines.append("") }
            }
            try (lines.joined(separator: "\n") + "\n").write(
                to: scratch.url.appendingPathComponent("list.txt"), atomically: true, encoding: .utf8)
            let out = scratch.url.appendingPathComponent("out")
            try FileManager.default.createDirectory(at: out, withIntermediateDirectories: true)

            let run = try await CLI.run(["list.txt", out.path, "8"], in: scratch.url, program: "swoop-lane-floor")
            #expect(run.status == 0, "\(run.stderr)")
            for (name, sha) in expected {
                #expect(try await TestData.sha256(of: out.appendingPathComponent(name).path) == sha, "\(name)")
            }
            let written = try FileManager.default.contentsOfDirectory(atPath: out.path).filter { !$0.hasPrefix(".") }
            #expect(written.count == expected.count, "\(written.sorted())")

            // The targets exist now: the preparation's look finds them, and nothing is replaced.
            let again = try await CLI.run(["list.txt", out.path, "8"], in: scratch.url, program: "swoop-lane-floor")
            #expect(again.status == 2)
            #expect(
                again.stderr.contains("40 of 40 files failed") && again.stderr.contains("exists"), "\(again.stderr)")
        }
    }

    @Test("a line that is not a plain http:// URL with a path stops it, naming the line")
    func refusesOtherLines() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        for line in ["https://example.com/a", "http://example.com", "http://:80/a", "http://example.com:x/a"] {
            try "\(line)\n".write(to: scratch.url.appendingPathComponent("list.txt"), atomically: true, encoding: .utf8)
            let run = try await CLI.run(["list.txt", scratch.url.path], in: scratch.url, program: "swoop-lane-floor")
            #expect(run.status == 2)
            #expect(run.stderr.contains("not a plain http:// URL: \(line)"), "\(line): \(run.stderr)")
        }
    }
}
