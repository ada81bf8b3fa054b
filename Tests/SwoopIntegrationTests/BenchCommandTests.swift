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
                // The path's limit: 2 MiB/s a connection is far below any disk's durable writes,
                // measured where get would write (the scratch directory; the probe's file removed).
                #expect(summary["limit"] as? String == "network", "\(result.stdout)")
                #expect((summary["diskBytesPerSecond"] as? Double ?? 0) > 8e6, "\(result.stdout)")
                #expect(summary["machineBusy"] is Double && summary["cpuSecondsPerGiB"] is Double)
                // 8 MiB/s in all: the transfer thread idles most of the time.
                let thread = try #require(summary["transferThreadBusy"] as? Double, "\(result.stdout)")
                #expect(thread > 0 && thread < 0.5, "\(result.stdout)")
                let chart = try String(contentsOfFile: scratch.path("chart.svg"), encoding: .utf8)
                #expect(chart.hasPrefix("<svg") && chart.contains("polyline"))
                #expect(
                    try FileManager.default.contentsOfDirectory(atPath: scratch.url.path) == ["chart.svg"],
                    "nothing but the chart on disk")
            }
        }
    }

    @Test("every count and the default measure the link, whatever went before and however early the object ends")
    func countsAfterCancelledPasses() async throws {
        try await exclusively {
            try await withTestOrigin { origin in
                // 1 MiB/s a connection: 64 connections fetch the 64 MiB object in a second, a third of a
                // 3 s window, then again; each count's last pass is cancelled when its window ends. Each
                // count must get its connections whatever the counts before it did (their cancelled
                // connections hold no connection permit).
                origin.addObject(TestObject(size: 64 << 20, seed: 62), at: "/c.bin")
                origin.updateFaults { $0.throttleBytesPerSecond = 1 << 20 }
                let scratch = try Scratch()
                defer { scratch.cleanup() }
                let result = try await CLI.run(
                    ["bench", origin.url("/c.bin"), "-c", "16,32,64", "--duration", "3", "--json"], in: scratch.url)
                #expect(result.status == 0, "\(result.stderr)")
                let summary = try #require(
                    try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
                let rows = try #require(summary["results"] as? [[String: Any]])
                let rates = rows.compactMap { $0["bytesPerSecond"] as? Double }
                #expect(rates.count == 3 && rates.allSatisfy { $0 > 0 }, "\(rates)")
                // The permits of the counts before came back: the pass of 64 had 64 requests in flight
                // at once (Swoop's own count when it sent them if the pass ended, else what its progress
                // reports saw: each request takes a second at 1 MiB/s). Had the cancelled passes kept
                // theirs (64 per host), it would have had 16 at most.
                let peaks = rows.map { $0["peakConnections"] as? Int }
                print("bench after cancelled passes: -c 16,32,64 at \(rates) B/s, peaks \(peaks)")
                #expect(peaks.last == 64, "\(peaks)")
                // At 64 MiB/s the object takes a second: the window holds three. Whether the first
                // ended in time follows from the rate measured: beside the rest of the suite the test
                // origin (in this process) may serve 64 connections at a fifth of that (a CI run
                // measured 12.9 MB/s, and its pass of 64 did not end in the 3 s).
                if (rates.last ?? 0) * 3 >= 1.2 * Double(64 << 20) {
                    #expect(rows.last?["completed"] as? Bool == true, "\(rows.last ?? [:])")
                }
                // 64 connections need more processor than 32; beside the rest of the suite the
                // processors may be the limit (the bench says so), and then 64 are no faster.
                let busy = summary["machineBusy"] as? Double ?? 0
                if busy < 0.8 {
                    #expect(
                        rates.count == 3 && rates[2] > 1.3 * rates[1],
                        "64 connections beyond 32's rate: \(rates), the machine \(busy) busy")
                }
                // The default climbs while a step pays, which it judges on the rates it sees: when the
                // processors are the limit the steps blur (a CI run beside the suite: 16.2, 16.1 and
                // 13.3 MB/s at 16, 32 and 64, the default at 4.2 MB/s). It is judged against the
                // counts when they measured the link: the processors free, and 32 beyond 16.
                let adaptive = summary["defaultBytesPerSecond"] as? Double ?? 0
                print("bench after cancelled passes: the default \(adaptive) B/s, the machine \(busy) busy")
                #expect(adaptive > 0, "the default: \(adaptive) B/s against \(rates)")
                if busy < 0.8 && rates.count == 3 && rates[1] > 1.3 * rates[0] {
                    #expect(adaptive > rates[0] / 2, "the default: \(adaptive) B/s against \(rates)")
                }
            }
        }
    }

    @Test("a server whose work is per request: named the limit, with its figures; no count and no default at 0 B/s")
    func perRequestServer() async throws {
        try await exclusively {
            try await withTestOrigin { origin in
                // 150 ms of one worker's time for every request, in arrival order (an S3 emulator that
                // reads the whole object for each GET): a pass of 16 MiB is a probe and one request at
                // 1 connection, and a probe and 16 requests, waiting for each other, at 16 (2.5 s of
                // the server's work, whatever the client's machine does). The bytes come in bursts
                // between the waits, so most 250 ms intervals see none.
                origin.addObject(TestObject(size: 16 << 20, seed: 63), at: "/w.bin")
                origin.updateFaults { $0.workPerRequest = .milliseconds(150) }
                let scratch = try Scratch()
                defer { scratch.cleanup() }
                let result = try await CLI.run(
                    ["bench", origin.url("/w.bin"), "-c", "1,4,16", "--duration", "3", "--no-disk", "--json"],
                    in: scratch.url)
                #expect(result.status == 0, "\(result.stderr)")
                let summary = try #require(
                    try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
                let rows = try #require(summary["results"] as? [[String: Any]])
                let rates = rows.compactMap { $0["bytesPerSecond"] as? Double }
                #expect(rates.count == 3 && rates.allSatisfy { $0 > 0 }, "\(rates)")
                // 16 connections wait for 17 requests' work a pass, whatever the client's machine does:
                // the slowest count, under 0.8 of the best (the bench's mark of a server that slows).
                #expect(rates.count == 3 && rates[2] < 0.8 * (rates.max() ?? 0), "\(rates)")
                let knee = summary["recommendationReason"] as? String ?? ""
                #expect(knee.contains("are slower") && knee.contains("at 16"), "\(knee)")
                // The path's limit: the server, unless the machine's processors were busy at the knee
                // (the rest of the suite beside it): the processors are then named first, truly. A
                // client short of processors also receives a single connection's 16 MiB slowly, so 4
                // connections may beat 1 (a CI run: 9.4, 13.7 and 7.0 MB/s, the processors 100% busy
                // at 4): the figures of 1 against 16 are judged only when the processors were free.
                let busy = summary["machineBusy"] as? Double ?? 0
                let limit = summary["limit"] as? String
                let reason = summary["limitReason"] as? String ?? ""
                if busy < 0.85 || limit == "server" {
                    // 1 connection waits for 2 or 3 requests' work a pass: far faster than 16.
                    #expect(rates.count == 3 && rates[2] < 0.5 * rates[0], "\(rates)")
                    #expect(summary["recommendedConnections"] as? Int == 1, "\(result.stdout)")
                    #expect(knee.contains("more connections than 1 are slower"), "\(knee)")
                    #expect(limit == "server", "\(result.stdout)")
                    #expect(reason.contains("make it slower") && reason.contains("at 16"), "\(reason)")
                } else {
                    #expect(limit == "cpu", "\(result.stdout)")
                    #expect((summary["recommendedConnections"] as? Int ?? 16) < 16, "\(result.stdout)")
                }
                // The default reads the server's time on its first response, also on a connection
                // an earlier count left open, and keeps to few connections and large requests.
                let adaptive = summary["defaultBytesPerSecond"] as? Double ?? 0
                let settled = summary["defaultConnections"] as? Int ?? 0
                #expect(
                    adaptive > 0.4 * rates[0] && settled <= 4,
                    "the default: \(adaptive) B/s at \(settled), \(rates); machine busy \(busy), limit \(limit ?? "-")")
            }
        }
    }

    @Test("a small object is fetched again until the window ends")
    func measureSmallObject() async throws {
        try await withTestOrigin { origin in
            // 256 KiB at 2 MiB/s a connection: a pass takes about a tenth of a second, so the 3 s
            // window holds many, without the CPU an unthrottled loop of passes would take. Measured
            // by the CLI, in a process of its own: in the test process, while the whole suite starts,
            // other tests' blocking waits can hold the two threads of Swift's cooperative pool for
            // seconds, and a pass that ended at 0.12 s was seen to return after the 3 s window.
            origin.addObject(TestObject(size: 256 << 10, seed: 61), at: "/s.bin")
            origin.updateFaults { $0.throttleBytesPerSecond = 2 << 20 }
            let scratch = try Scratch()
            defer { scratch.cleanup() }
            let result = try await CLI.run(
                ["bench", origin.url("/s.bin"), "-c", "2", "--duration", "3", "--json"], in: scratch.url)
            #expect(result.status == 0, "\(result.stderr)")
            let summary = try #require(
                try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
            let row = try #require((summary["results"] as? [[String: Any]])?.first)
            // It arrived whole, and again, until the window was up.
            let passes = try #require(row["passes"] as? Int)
            #expect(row["completed"] as? Bool == true)
            #expect(passes >= 2, "\(passes) passes in \(row["seconds"] ?? "?") s")
            #expect((row["bytes"] as? Int ?? 0) >= (passes - 1) * (256 << 10))
            #expect((row["bytesPerSecond"] as? Double ?? 0) > 0)
        }
    }

    @Test("a per-connection cap, an object fetched early: figures near connections x cap, honest bars, the knee")
    func steadyState() async throws {
        try await exclusively {
            let nginx = try await Nginx.start(limitRate: "4m")
            defer { nginx.stop() }
            _ = try await nginx.addFile("o.bin", size: 32 << 20, seed: 62)
            let scratch = try Scratch()
            defer { scratch.cleanup() }
            // 8 connections at 4 MiB/s fetch the 32 MiB in about a second of the 3 s window.
            let arguments = ["bench", nginx.url("/o.bin"), "-c", "1,2,4,8", "--duration", "3"]
            let json = try await CLI.run(arguments + ["--json"], in: scratch.url)
            #expect(json.status == 0, "\(json.stderr)")
            let summary = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
            let rows = try #require(summary["results"] as? [[String: Any]])
            let cap = 4.0 * 1_048_576
            // Never above the caps; below them by 15% on a quiet machine, more on a loaded one
            // (a process short of CPU reads late, nginx's pacing does not make up for it).
            let stretch = MachineLoad.stretch
            for row in rows {
                let count = try #require(row["connections"] as? Int)
                let rate = try #require(row["bytesPerSecond"] as? Double)
                let ideal = Double(count) * cap
                #expect(
                    rate <= 1.15 * ideal && rate >= 0.85 * ideal / stretch,
                    "\(count) connections: \(rate / 1_048_576) MiB/s (load stretch \(stretch))")
            }
            // A pass that ends within the window is followed by another. Whether the first ended in
            // time follows from the rate measured: a loaded machine's 8 connections may need the whole
            // window for the 32 MiB (a clean clone's CI run measured one pass so).
            let last = try #require(rows.last)
            let rate = last["bytesPerSecond"] as? Double ?? 0
            if rate * 3 >= 1.2 * Double(32 << 20) {
                #expect(last["passes"] as? Int ?? 0 >= 2, "8 connections at \(rate / 1_048_576) MiB/s fetched it again")
            }
            #expect(summary["recommendedConnections"] as? Int == 8)
            // The reason follows the figures: 8 connections each near one's rate is a per-connection
            // cap. On a loaded machine the 8 can fall short of that (the process reads late), and
            // "saturated" is then what was measured; on a quiet one they must not.
            let perConnection = rows.compactMap { row -> Double? in
                guard let rate = row["bytesPerSecond"] as? Double, let count = row["connections"] as? Int else {
                    return nil
                }
                return rate / Double(count)
            }
            let capped = (perConnection.last ?? 0) >= 0.8 * (perConnection.first ?? .infinity)
            let reason = summary["recommendationReason"] as? String ?? ""
            if stretch <= 1.1 { #expect(capped, "a quiet machine measures the cap: \(perConnection)") }
            #expect(
                reason.contains(capped ? "each connection capped near" : "the link is saturated"),
                "\(reason); per connection: \(perConnection)")
            let firstResponse = try #require(summary["firstResponseSeconds"] as? Double)
            #expect(
                firstResponse > 0 && firstResponse < 5 * MachineLoad.stretch,
                "first response after \(firstResponse) s on loopback")
            let roundTrip = try #require(summary["roundTripSeconds"] as? Double)
            #expect(
                roundTrip > 0 && roundTrip < 2 * MachineLoad.stretch, "a TCP handshake on loopback: \(roundTrip) s")
            #expect(summary["tlsHandshakeSeconds"] == nil, "no TLS")

            let text = try await CLI.run(arguments, in: scratch.url)
            #expect(text.status == 0, "\(text.stderr)")
            // Bars: 30 marks for the best of all counts, the others in proportion to the rates the
            // rows print (1 of 8 ~ 4 where 8 connections reach 8 caps: on a quiet machine).
            let lines = text.stdout.split(separator: "\n").filter { $0.hasPrefix(" ") && $0.contains("#") }
            let bars = lines.map { $0.filter { $0 == "#" }.count }
            let units: [Substring: Double] = ["B/s": 1, "KiB/s": 1_024, "MiB/s": 1_048_576, "GiB/s": 1_073_741_824]
            let rates = lines.map { line -> Double in
                let fields = line.split(separator: " ")
                return fields.count > 2 ? (Double(fields[1]) ?? 0) * (units[fields[2]] ?? 0) : 0
            }
            #expect(bars.count == 4 && bars.last == 30, "\(text.stdout)")
            if let best = rates.max(), best > 0 {
                for (marks, rate) in zip(bars, rates) {
                    #expect(abs(Double(marks) - 30 * rate / best) <= 1, "\(marks) marks for \(rate): \(text.stdout)")
                }
            }
            if MachineLoad.stretch <= 1.1 { #expect(bars.first.map { (2...6).contains($0) } == true, "\(text.stdout)") }
            #expect(text.stdout.contains("recommended: 8 connections"), "\(text.stdout)")
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

    @Test("the first response's timing over TLS: the TCP and TLS handshakes, then the request")
    func timingOverTLS() async throws {
        let nginx = try await Nginx.start(tls: true)
        defer { nginx.stop() }
        _ = try await nginx.addFile("t.bin", size: 4 << 20, seed: 63)
        var configuration = Downloader.Configuration()
        configuration.tls.certificateAuthorities = .custom(file: nginx.certificate)
        let timing = try await withDownloader(configuration) { downloader in
            let (bytes, response) = try await downloader.bytes(
                for: DownloadRequest(url: nginx.url("/t.bin")), window: DownloadBytes.minimumWindow)
            bytes.task.cancel()
            _ = try? await bytes.task.result()
            return response.timing
        }
        let measured = try #require(timing)
        #expect(measured.connect.map { $0 > .zero && $0 < MachineLoad.bound(.seconds(2)) } == true, "\(measured)")
        #expect(measured.tlsHandshake.map { $0 > .zero && $0 < MachineLoad.bound(.seconds(5)) } == true, "\(measured)")
        #expect(measured.firstByte > .zero && measured.firstByte < MachineLoad.bound(.seconds(5)))
    }

    @Test("bench reaches a server as get does: a private CA through --cacert, a header; the TLS handshake in --json")
    func accessOptions() async throws {
        let nginx = try await Nginx.start(tls: true)
        defer { nginx.stop() }
        _ = try await nginx.addFile("t.bin", size: 4 << 20, seed: 64)
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        let arguments = ["bench", nginx.url("/t.bin"), "-c", "1", "--duration", "0.5", "--json"]
        let untrusted = try await CLI.run(arguments, in: scratch.url)
        #expect(untrusted.status != 0 && untrusted.stderr.contains("--cacert"), "\(untrusted.stderr)")
        let trusted = try await CLI.run(
            arguments + ["--cacert", nginx.certificate, "-H", "User-Agent: bench-test"], in: scratch.url)
        #expect(trusted.status == 0, "\(trusted.stderr)")
        let summary = try #require(
            try JSONSerialization.jsonObject(with: Data(trusted.stdout.utf8)) as? [String: Any])
        #expect((summary["tlsHandshakeSeconds"] as? Double).map { $0 > 0 && $0 < 5 } == true, "\(summary)")
        let log = try nginx.log()
        #expect(!log.isEmpty && log.allSatisfy { $0.userAgent == "bench-test" }, "\(log.map(\.userAgent))")
    }
}
