import Foundation
import Swoop
import SwoopTestOrigin
import Testing

@Suite("swoop bench")
struct BenchCommandTests {
    @Test("measures each connection count, recommends one, draws a chart, writes nothing else")
    func bench() async throws {
        try await exclusively {
            let scratch = try Scratch()
            defer { scratch.cleanup() }
            try await withTestOrigin { origin in
                // A per-connection cap: more connections should measure faster.
                origin.addObject(TestObject(size: 256 << 20, seed: 60), at: "/b.bin")
                origin.updateFaults { $0.throttleBytesPerSecond = 2 << 20 }
                let result = try await CLI.run(
                    [
                        "bench", origin.url("/b.bin"), "-c", "1,4", "--duration", "1.5", "--json", "--chart",
                        "chart.svg",
                    ],
                    in: scratch.url)
                #expect(result.status == 0, "stderr: \(result.stderr)")
                let summary = try #require(
                    try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
                let rows = try #require(summary["results"] as? [[String: Any]])
                #expect(rows.map { $0["connections"] as? Int } == [1, 4])
                let rates = rows.compactMap { $0["bytesPerSecond"] as? Double }
                #expect(rates.count == 2)
                #expect(rates[0] > 1.2e6 && rates[0] < 3.5e6, "one connection at about 2 MiB/s: \(rates[0])")
                #expect(rates[1] > 2.5 * rates[0], "four connections are faster: \(rates)")
                #expect(summary["recommendedConnections"] as? Int == 4)
                let chart = try String(contentsOfFile: scratch.path("chart.svg"), encoding: .utf8)
                #expect(chart.hasPrefix("<svg") && chart.contains("polyline"))
                #expect(
                    try FileManager.default.contentsOfDirectory(atPath: scratch.url.path) == ["chart.svg"],
                    "nothing but the chart on disk")
            }
        }
    }

    @Test("the library's measurement of a small object reports it whole")
    func measureSmallObject() async throws {
        try await withTestOrigin { origin in
            origin.addObject(TestObject(size: 3 << 20, seed: 61), at: "/s.bin")
            let measurement = try await withDownloader {
                try await $0.measureThroughput(
                    DownloadRequest(url: origin.url("/s.bin")), connections: 2, duration: .seconds(10))
            }
            #expect(measurement.completed)
            #expect(measurement.bytes == 3 << 20)
            #expect(measurement.bytesPerSecond > 0)
        }
    }

    @Test("bad lists are usage errors")
    func badList() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        let result = try await CLI.run(["bench", "http://127.0.0.1:1/x", "-c", "1,zero"], in: scratch.url)
        #expect(result.status == 2)
        #expect(result.stderr.contains("--connections"))
    }
}
