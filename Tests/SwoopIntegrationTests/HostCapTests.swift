import Foundation
import Testing

/// A server that lets one client have a few connections (nginx's `limit_conn`, 503 beyond), met by
/// several downloads of one list at once: the limit is the client's, whatever download a refused
/// request came from.
@Suite("A per-client connection limit, met by a list")
struct HostCapTests {
    @Test("six downloads at once against a limit of 8 connections: every file, few refusals")
    func listAgainstPerClientLimit() async throws {
        try await exclusively {
            let nginx = try await Nginx.start(
                limitRate: "4m", extraServerConfig: "limit_conn perclient 8; limit_conn_status 503;",
                extraHTTPConfig: "limit_conn_zone $binary_remote_addr zone=perclient:1m;")
            defer { nginx.stop() }
            var sums: [String: String] = [:]
            for index in 0..<6 {
                let name = "f\(index).bin"
                sums[name] = try await nginx.addFile(name, size: 24 << 20, seed: UInt64(200 + index))
            }
            let scratch = try Scratch()
            defer { scratch.cleanup() }
            let list = sums.keys.sorted().map { nginx.url("/\($0)") }.joined(separator: "\n") + "\n"
            try list.write(toFile: scratch.path("list.txt"), atomically: true, encoding: .utf8)
            let run = try await CLI.run(["get", "-i", "list.txt", "-j", "6", "-q"], in: scratch.url)
            #expect(run.status == 0, "\(run.stderr)")
            for (name, sum) in sums {
                #expect(try await TestData.sha256(of: scratch.path(name)) == sum, "\(name)")
            }
            let log = try nginx.log()
            let refused = log.filter { $0.status == 503 }
            let served = log.filter { $0.status == 206 || $0.status == 200 }
            // The refusals are the first burst's (every download's first requests, sent before the
            // first refusal came back); once the limit is learnt, none: no refusal ends after the
            // first served response does.
            let firstServed = served.map(\.end).min() ?? 0
            #expect(refused.allSatisfy { $0.end <= firstServed }, "refused after the first served response")
            // The limit is the client's, learnt for the host (its requests in flight from every
            // download): the six downloads together keep close to the 8 connections it allows.
            var events: [(time: Double, change: Int)] = []
            for entry in served where entry.seconds > 0.2 {
                // Trimmed by 5 ms: the log's times are to the millisecond, and a connection's next request
                // starts as its last ends.
                events += [(entry.end - entry.seconds + 0.005, 1), (entry.end, -1)]
            }
            var inFlight = 0
            var most = 0
            for event in events.sorted(by: { ($0.time, $0.change) < ($1.time, $1.change) }) {
                inFlight += event.change
                most = max(most, inFlight)
            }
            #expect(most >= 7 && most <= 8, "at most \(most) served at once; \(refused.count) refused")
        }
    }
}
