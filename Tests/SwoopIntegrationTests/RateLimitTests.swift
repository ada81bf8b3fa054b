import Foundation
import Swoop
import SwoopTestOrigin
import Synchronization
import Testing

/// `--limit-rate` and `Configuration.connectionPool.maximumBytesPerSecond`: the sum of all connections stays at
/// the cap, for one download and for a whole `-i` run, from nginx on loopback (which alone would
/// deliver these files in a fraction of a second).
///
/// The windows are the issue's: 64 MiB at 16 MiB/s in 3.6–4.6 s. The lower bound is the cap
/// itself (4 s, less the 0.1 s burst the bucket starts with, less a margin); the upper one leaves
/// room for process start, the probe, the final fsync and a loaded two-core machine.
@Suite("Rate limit", .serialized)
struct RateLimitTests {
    private static let MiB = 1 << 20

    @Test("--limit-rate 16M on 64 MiB over 8 connections takes at least 3.6 s (4 s at the cap), byte-identical")
    func commandLine() async throws {
        try await exclusively {
            let nginx = try await Nginx.start()
            defer { nginx.stop() }
            let expected = try await nginx.addFile("object.bin", size: 64 * Self.MiB, seed: 64)
            let scratch = try Scratch()
            defer { scratch.cleanup() }
            // On a tmpfs where the test may mount one: the final fsync of 64 MiB on a disk busy
            // with the other tests' write-back took up to 1.5 s in CI, which is not the cap's.
            let disk = canMount ? try SmallDisk(megabytes: 160) : nil
            let directory = disk?.url ?? scratch.url

            let started = ContinuousClock.now
            let result = try await CLI.run(
                ["get", nginx.url("/object.bin"), "-c", "8", "--limit-rate", "16M", "--json", "-q"], in: directory)
            let elapsed = Self.seconds(since: started)
            #expect(result.status == 0, "\(result.stderr.suffix(500))")
            #expect(try await TestData.sha256(of: directory.appendingPathComponent("object.bin").path) == expected)
            let summary = try #require(
                try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
            // The download's own clock (from its start to the file in place): process start-up of
            // a debug build on a CI machine busy with other suites once added 1.8 s to the wall.
            let downloading = summary["seconds"] as? Double ?? 0
            // At least 0.9 of the cap's 4 s: the cap holds. The upper bound only catches a cap far
            // stricter than asked; this machine runs other suites alongside (4.66 s once in CI).
            #expect(
                downloading >= 3.6 && downloading <= 12 * MachineLoad.stretch,
                "the download took \(downloading) s (\(elapsed) s with the process)")
            #expect(summary["retries"] as? Int == 0, "\(result.stdout)")
            print(
                "rate limit: CLI, 64 MiB at 16M over 8 connections: \(Self.format(downloading)) s "
                    + "(\(Self.format(elapsed)) s with the process)"
            )
        }
    }

    @Test(
        "maximumBytesPerSecond 16 MiB on 64 MiB: at least 3.6 s, no 2 s over the cap by 10%; the adaptive count holds",
        arguments: [Downloader.Configuration.Connections.fixed(8), .adaptive(maximum: 64)])
    func library(connections: Downloader.Configuration.Connections) async throws {
        try await exclusively {
            let nginx = try await Nginx.start()
            defer { nginx.stop() }
            let expected = try await nginx.addFile("object.bin", size: 64 * Self.MiB, seed: 65)
            let scratch = try Scratch()
            defer { scratch.cleanup() }

            var configuration = Downloader.Configuration()
            configuration.connections = connections
            configuration.connectionPool.maximumBytesPerSecond = Int64(16 * Self.MiB)
            configuration.progressInterval = .milliseconds(100)
            let downloader = Downloader(configuration: configuration)
            let samples = Mutex<[(seconds: Double, bytes: Int64)]>([])
            let started = ContinuousClock.now
            let outcome: Result<DownloadResult, DownloadError>
            do throws(DownloadError) {
                outcome = .success(
                    try await downloader.download(
                        DownloadRequest(url: nginx.url("/object.bin")), to: scratch.path("object.bin")
                    ) { progress in
                        samples.withLock { $0.append((Self.seconds(progress.elapsed), progress.bytesDone)) }
                    })
            } catch {
                outcome = .failure(error)
            }
            let elapsed = Self.seconds(since: started)
            await downloader.shutdown()
            let result = try outcome.get()

            #expect(try await TestData.sha256(of: scratch.path("object.bin")) == expected)
            // 4 s at the cap: never faster; slower on a loaded machine, never three times as slow
            // on a quiet one.
            let stretch = MachineLoad.stretch
            #expect(elapsed >= 3.6 && elapsed <= 12 * stretch, "took \(elapsed) s (load stretch \(stretch))")
            #expect(result.retries == 0)
            // On a quiet loopback the adaptive mode starts with 8 (a first byte within 20 ms); the
            // cap binds at once, so it keeps them. On a loaded machine the first byte is later and
            // the start is 16 or 32, kept as well.
            let start = stretch > 1 ? 32 : 8
            #expect(result.connectionsUsed <= start, "\(result.connectionsUsed) connections")
            // Held over a few seconds: no 2 s window of progress, from the first second to the end,
            // more than 10% over the cap; and none far under it (a machine busy with other suites
            // can slow a window, so "far" is 30%).
            let points = samples.withLock { $0 }
            var windowRates: [Double] = []
            for (index, from) in points.enumerated() where from.seconds >= 1 {
                guard let to = points[index...].first(where: { $0.seconds >= from.seconds + 2 }) else { break }
                windowRates.append(Double(to.bytes - from.bytes) / (to.seconds - from.seconds) / Double(16 * Self.MiB))
            }
            #expect(!windowRates.isEmpty)
            let (low, high) = (windowRates.min() ?? 0, windowRates.max() ?? 0)
            #expect(
                low >= 0.7 / stretch && high <= 1.1,
                "2 s windows at \(Self.format(low))-\(Self.format(high)) of the cap")
            print(
                "rate limit: library, 64 MiB at 16 MiB/s, \(connections): \(Self.format(elapsed)) s, "
                    + "\(result.connectionsUsed) connections, 2 s windows at \(Self.format(low))-\(Self.format(high)) "
                    + "of the cap"
            )
        }
    }

    @Test("with -i the cap holds for the whole run: 4 x 16 MiB at 8M take at least 7.2 s, byte-identical")
    func wholeList() async throws {
        try await exclusively {
            let nginx = try await Nginx.start()
            defer { nginx.stop() }
            var expected: [String: String] = [:]
            for index in 0..<4 {
                expected["f\(index).bin"] = try await nginx.addFile(
                    "f\(index).bin", size: 16 * Self.MiB, seed: UInt64(100 + index))
            }
            let scratch = try Scratch()
            defer { scratch.cleanup() }
            let list = scratch.url.appendingPathComponent("list.txt")
            try expected.keys.sorted().map { nginx.url("/\($0)") }.joined(separator: "\n").write(
                to: list, atomically: true, encoding: .utf8)
            // On a tmpfs where possible, as above: the cap is under test, not the disk's write-back.
            let disk = canMount ? try SmallDisk(megabytes: 160) : nil
            let out = (disk?.url ?? scratch.url).appendingPathComponent("out")
            try FileManager.default.createDirectory(at: out, withIntermediateDirectories: true)

            let started = ContinuousClock.now
            let result = try await CLI.run(
                ["get", "-i", list.path, "-d", out.path, "--limit-rate", "8M", "-q"], in: scratch.url)
            let elapsed = Self.seconds(since: started)
            #expect(result.status == 0, "\(result.stderr.suffix(500))")
            for (name, sha) in expected {
                #expect(try await TestData.sha256(of: out.appendingPathComponent(name).path) == sha, "\(name)")
            }
            #expect(elapsed >= 7.2 && elapsed <= 24 * MachineLoad.stretch, "took \(elapsed) s")
            print("rate limit: CLI -i, 4 x 16 MiB at 8M: \(Self.format(elapsed)) s")
        }
    }

    /// Each of 8 connections averages 256 KiB/s under a 2 MiB/s cap, far below a low-speed limit
    /// of 10 MiB/s over 1 s. libcurl skips its speed check while a transfer is paused, which is
    /// most of the time here, and the cap lowers the limit for the moments it is not (that
    /// part is checked in the unit tests, `RateCapTests`): no connection may time out.
    @Test("a connection the cap slows down is not taken for a stalled one")
    func capIsNotAStall() async throws {
        try await exclusively {
            let nginx = try await Nginx.start()
            defer { nginx.stop() }
            let expected = try await nginx.addFile("object.bin", size: 6 * Self.MiB, seed: 66)
            let scratch = try Scratch()
            defer { scratch.cleanup() }

            var configuration = Downloader.Configuration()
            configuration.connections = .fixed(8)
            configuration.connectionPool.maximumBytesPerSecond = Int64(2 * Self.MiB)
            configuration.timeout.lowSpeedLimit = 10 * Self.MiB
            configuration.timeout.stall = .seconds(1)
            configuration.retry.baseDelay = .milliseconds(10)
            let downloader = Downloader(configuration: configuration)
            let outcome: Result<DownloadResult, DownloadError>
            do throws(DownloadError) {
                outcome = .success(
                    try await downloader.download(
                        DownloadRequest(url: nginx.url("/object.bin")), to: scratch.path("object.bin")))
            } catch {
                outcome = .failure(error)
            }
            await downloader.shutdown()
            let result = try outcome.get()
            #expect(result.retries == 0)
            #expect(try await TestData.sha256(of: scratch.path("object.bin")) == expected)
        }
    }

    @Test("a cap of 0 is refused: by the library before anything starts, by the command line as a usage error")
    func invalidCap() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        var configuration = Downloader.Configuration()
        configuration.connectionPool.maximumBytesPerSecond = 0
        let downloader = Downloader(configuration: configuration)
        let error = await #expect(throws: DownloadError.self) {
            _ = try await downloader.download(
                DownloadRequest(url: "http://127.0.0.1:9/object.bin"), to: scratch.path("object.bin"))
        }
        await downloader.shutdown()
        #expect(error?.kind == .invalidRequest)
        #expect(error?.message.contains("maximumBytesPerSecond") == true, "\(String(describing: error))")
        #expect(!scratch.exists(part: "object.bin"))

        for bad in ["0", "-5k", "fast"] {
            let result = try await CLI.run(
                ["get", "http://127.0.0.1:9/object.bin", "--limit-rate", bad], in: scratch.url)
            #expect(result.status == 2, "--limit-rate \(bad): \(result.stderr)")
            #expect(result.stderr.contains("--limit-rate"), "\(result.stderr)")
        }
        let bench = try await CLI.run(
            ["bench", "http://127.0.0.1:9/object.bin", "--limit-rate", "1M"], in: scratch.url)
        #expect(bench.status == 2, "bench measures the link and takes no cap: \(bench.stderr)")
    }

    private static func seconds(since start: ContinuousClock.Instant) -> Double {
        seconds(ContinuousClock.now - start)
    }

    private static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    private static func format(_ seconds: Double) -> String {
        String(format: "%.2f", seconds)
    }
}
