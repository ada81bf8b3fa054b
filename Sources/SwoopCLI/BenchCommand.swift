import ArgumentParser
import FoundationEssentials
import Swoop

/// `swoop bench URL`: how fast a URL downloads with 1, 2, 4, ... connections.
struct Bench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Measure a URL's throughput with 1, 2, 4, ... connections and recommend a count.",
        discussion: """
            Each count fetches the object for up to --duration seconds and throws the bytes away; \
            an object that arrives before the time is up is fetched \
            again until it is, so each figure is what that many connections sustain. A figure is the \
            rate after a ramp-up (the first second, or a fifth of a shorter run), with the \
            10th-90th percentile spread of its 250 ms intervals. The recommendation is the fewest \
            connections within 5% of the best throughput, with what limits the rate there. Before \
            the counts, the first request's round trip (its TCP handshake), TLS handshake and time to \
            its first byte are measured. A name with several addresses is then measured one \
            address at a time with the recommended count, and each is said to be worth using or not \
            (under a quarter of the best address's rate). Last, the adaptive default (what `get` \
            does without -c) runs for --duration too, and the count it settled on is shown next to \
            the recommendation.

            Then the rest of the path a download meets: the disk's durable write rate where `get` \
            would write (as many bytes as the object, between 256 MiB and 1 GiB, written to a \
            temporary file in the current directory, fsync'ed, and removed; --no-disk skips it), \
            the machine's processors (how busy they were at the \
            recommended count) and Swoop's CPU per GiB there; and which of the network, the server, \
            the disk or the CPU is the limit.
            """
    )

    @Argument(help: "The http, https or s3:// URL to measure.")
    var url: String

    @Option(name: [.short, .long], help: ArgumentHelp("Connection counts to try, comma-separated.", valueName: "list"))
    var connections: String = "1,2,4,8,16,32,64"

    @Option(name: .long, help: "Seconds per connection count.")
    var duration: Double = 5

    @Option(
        name: .long,
        help: ArgumentHelp("Write an SVG chart of throughput against connections and over time.", valueName: "file.svg")
    )
    var chart: String?

    @Flag(name: .long, help: "Print the results as one JSON object.")
    var json = false

    @Flag(name: .long, help: "Do not measure the disk's durable write rate (nothing is written to disk at all).")
    var noDisk = false

    @OptionGroup(title: "Access") var access: AccessOptions
    @OptionGroup var stores: ObjectStoreOptions
    @OptionGroup(title: "Addresses") var addressOptions: AddressOptions

    func counts() throws -> [Int] {
        let parts = connections.split(separator: ",").map { $0.trimmed }
        let values = parts.compactMap { Int($0) }
        guard !values.isEmpty, values.count == parts.count, values.allSatisfy({ (1...1024).contains($0) }) else {
            throw ValidationError(
                "--connections must be a comma-separated list of counts from 1 to 1024 (got '\(connections)')")
        }
        return Array(Set(values)).sorted()
    }

    /// How long each count is measured.
    private var window: Duration { .milliseconds(Int64(duration * 1000)) }

    func validate() throws {
        _ = try counts()
        guard duration > 0, duration.isFinite else {
            throw ValidationError("--duration must be a positive number of seconds")
        }
        _ = try access.parsedHeaders()
    }

    func run() async throws {
        var configuration = Downloader.Configuration()
        access.apply(to: &configuration)
        stores.apply(to: &configuration)
        addressOptions.apply(to: &configuration)
        let request = DownloadRequest(url: url, headers: try access.parsedHeaders())
        let downloader = Downloader(configuration: configuration)
        let interrupts = InterruptWatcher {}
        defer { interrupts.stop() }
        var results: [ThroughputMeasurement] = []
        // Per count: the machine's busy share and this process's CPU seconds while it was measured.
        var busy: [Int: Double] = [:]
        var threadBusy: [Int: Double] = [:]
        var cpu: [Int: Double] = [:]
        if !json {
            writeStderr(
                "Measuring \(url) for \(Format.fixed(duration, digits: 1)) s per connection count (the bytes are "
                    + "thrown away)\n"
            )
        }
        let firstResponse: ResponseTiming?
        var objectSize: Int64?
        var adaptive: ThroughputMeasurement?
        do {
            (firstResponse, objectSize) = try await Self.firstResponse(request, downloader)
            if !json, let firstResponse { writeStderr(Self.describe(firstResponse) + "\n") }
            for count in try counts() {
                await Self.waitUntilAnswered(request, downloader, like: firstResponse)
                let (machine, process) = (BenchPath.CPUTimes.now(), BenchPath.processCPU())
                let (thread, started) = (BenchPath.transferThreadCPU(), ContinuousClock.now)
                let measurement = try await downloader.measureThroughput(
                    request, connections: count, duration: window)
                results.append(measurement)
                if let machine, let after = BenchPath.CPUTimes.now() { busy[count] = after.busyShare(since: machine) }
                cpu[count] = BenchPath.processCPU() - process
                if let thread, let after = BenchPath.transferThreadCPU() {
                    threadBusy[count] = (after - thread) / (ContinuousClock.now - started).seconds
                }
                // As each count ends, its figure; the table, with bars against the best of all, at the end.
                if !json {
                    writeStderr(Messages.benchLine(connections: count, figure: Self.figure(measurement)) + "\n")
                }
            }
            await Self.waitUntilAnswered(request, downloader, like: firstResponse)
            adaptive = try await downloader.measureAdaptiveThroughput(
                request, maximum: try counts().max() ?? 64, duration: window)
            if !json, let adaptive {
                writeStderr(
                    "  the default (adaptive): \(Self.figure(adaptive)), settled on "
                        + "\(Wording.count(adaptive.connections, "connection"))\n")
            }
        } catch let error as DownloadError {
            await downloader.shutdown()
            throw CommandFailure(status: ExitStatus(error), message: error.commandLineMessage)
        }
        let knee = BenchKnee.find(results)
        let recommended = knee?.recommended
        if !json {
            let best = results.map(\.bytesPerSecond).max() ?? 0
            print("connections   throughput      per connection   vs best (\(Format.rate(best)))")
            for measurement in results { print(Self.row(measurement, best: best)) }
            if let knee {
                let count = knee.recommended.connections
                print(
                    "recommended: \(count) connection\(count == 1 ? "" : "s") "
                        + "(\(Format.rate(knee.recommended.bytesPerSecond))): \(knee.reason)")
            }
            if let adaptive {
                let percent = knee.map {
                    Int((100 * adaptive.bytesPerSecond / max(1, $0.recommended.bytesPerSecond)).rounded())
                }
                let share = percent.map { ", \($0)% of the knee's rate" } ?? ""
                print(
                    "the default settled on \(Wording.count(adaptive.connections, "connection")) "
                        + "(\(Format.rate(adaptive.bytesPerSecond))\(share))")
            }
        }
        let addresses: [AddressRate]
        do {
            addresses = try await measureAddresses(request, downloader, connections: recommended?.connections ?? 4)
        } catch let error as DownloadError {
            await downloader.shutdown()
            throw CommandFailure(status: ExitStatus(error), message: error.commandLineMessage)
        }
        await downloader.shutdown()
        let path = measurePath(
            knee: knee, results: results, busy: busy, threadBusy: threadBusy, cpu: cpu, objectSize: objectSize)
        if json {
            printJSON(
                BenchSummary(
                    url: url, results: results, knee: knee, addresses: addresses, firstResponse: firstResponse,
                    adaptive: adaptive, path: path))
        }
        if let chart {
            do {
                try BenchChart.svg(results, url: url, recommended: recommended?.connections).write(
                    toFile: chart, atomically: true, encoding: .utf8)
                if !json { writeStderr("chart written to \(chart)\n") }
            } catch {
                throw CommandFailure(status: .localIO, message: "cannot write the chart to \(chart): \(error)")
            }
        }
    }

    /// The rest of the path at the knee: the disk (unless --no-disk), the processors, and the limit.
    struct PathFigures {
        var disk: Double?
        var busy: Double?
        var transferThreadBusy: Double?
        var cpuPerGiB: Double?
        var limit: (part: BenchPath.Part, reason: String)?
    }

    private func measurePath(
        knee: BenchKnee?, results: [ThroughputMeasurement], busy: [Int: Double], threadBusy: [Int: Double],
        cpu: [Int: Double], objectSize: Int64?
    ) -> PathFigures {
        var figures = PathFigures()
        if let knee {
            let count = knee.recommended.connections
            figures.busy = busy[count]
            figures.transferThreadBusy = threadBusy[count]
            if let seconds = cpu[count], knee.recommended.bytes > 0 {
                figures.cpuPerGiB = seconds / (Double(knee.recommended.bytes) / 1_073_741_824)
            }
        }
        if !noDisk {
            let bytes = BenchPath.diskProbeBytes(objectSize: objectSize)
            let probe = BenchPath.diskRate(in: ".", bytes: bytes)
            figures.disk = probe.rate
            if !json {
                if let rate = probe.rate {
                    print(
                        "disk: durable writes at \(Format.rate(rate)) here (\(Format.bytes(Int64(bytes))) written, "
                            + "fsync'ed, removed)")
                } else {
                    print("disk: not measured (\(probe.failure ?? "no time measured")): run it where get would write")
                }
            }
        }
        if let knee {
            if !json, let share = figures.busy {
                let perGiB = figures.cpuPerGiB.map { ", swoop \(Format.fixed($0, digits: 2)) s of CPU per GiB" } ?? ""
                print(
                    "processors: \(Int((share * 100).rounded()))% busy at \(knee.recommended.connections) "
                        + "connection\(knee.recommended.connections == 1 ? "" : "s") (the whole machine)\(perGiB)"
                        + (figures.transferThreadBusy.map { "; the transfer thread \(Int(($0 * 100).rounded()))% busy" }
                            ?? ""))
            }
            let limit = BenchPath.limit(
                recommended: (knee.recommended.connections, knee.recommended.bytesPerSecond), knee: knee.reason,
                growsWithCount: knee.growsWithCount,
                rates: results.map { ($0.connections, $0.bytesPerSecond) }, disk: figures.disk, busy: figures.busy,
                cpuPerGiB: figures.cpuPerGiB, transferThread: figures.transferThreadBusy)
            figures.limit = limit
            if !json { print("the path's limit: \(limit.part.rawValue): \(limit.reason)") }
        }
        return figures
    }

    /// One address of the host, measured alone.
    struct AddressRate: Encodable {
        var address: String
        var bytesPerSecond: Double
        var worthUsing: Bool
    }

    /// Each address of a name with several, alone with `connections` connections, and whether it
    /// is worth using (at least a quarter of the best one's rate); none for a single address.
    private func measureAddresses(
        _ request: DownloadRequest, _ downloader: Downloader, connections: Int
    ) async throws -> [AddressRate] {
        let addresses = try downloader.addresses(of: request.url)
        guard addresses.count > 1 else { return [] }
        if !json { print("addresses (each alone, \(connections) connection\(connections == 1 ? "" : "s")):") }
        var rates: [(String, Double)] = []
        for address in addresses {
            let measurement = try await downloader.measureThroughput(
                request, connections: connections, duration: window, address: address)
            rates.append((address, measurement.bytesPerSecond))
        }
        let best = rates.map(\.1).max() ?? 0
        let rows = rates.map { AddressRate(address: $0.0, bytesPerSecond: $0.1, worthUsing: $0.1 >= best / 4) }
        if !json {
            for row in rows {
                let verdict =
                    row.worthUsing
                    ? "worth using" : "not worth using: under a quarter of the best (\(Format.rate(best)))"
                let rate = Format.rate(row.bytesPerSecond)
                print(
                    "  " + row.address + String(repeating: " ", count: max(1, 16 - row.address.count)) + rate
                        + String(repeating: " ", count: max(2, 16 - rate.count)) + verdict)
            }
        }
        return rows
    }

    /// The first response's timing (a new connection, then one request) and the object's size:
    /// the head of a stream of the object, cancelled once the head has arrived.
    static func firstResponse(
        _ request: DownloadRequest, _ downloader: Downloader
    ) async throws -> (timing: ResponseTiming?, size: Int64?) {
        let (bytes, response) = try await downloader.bytes(for: request, window: DownloadBytes.minimumWindow)
        bytes.task.cancel()
        _ = try? await bytes.task.result()
        return (response.timing, response.expectedContentLength)
    }

    /// Waits until the server answers a request as fast as it answered the first (within 1.5 times
    /// and 20 ms), at most 10 s. The requests a count's window cut off may still cost the server
    /// (a server that reads the whole object for every request goes on working on each one that
    /// was cancelled): the next count would be measured against that backlog.
    static func waitUntilAnswered(
        _ request: DownloadRequest, _ downloader: Downloader, like first: ResponseTiming?
    ) async {
        guard let first else { return }
        let quiet = max(1.5 * Format.seconds(first.firstByte), Format.seconds(first.firstByte) + 0.02)
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            guard let timing = try? await firstResponse(request, downloader).timing,
                Format.seconds(timing.firstByte) > quiet
            else { return }
            try? await Task.sleep(for: .milliseconds(100))
        }
    }

    /// "round trip 40.2 ms (the TCP handshake), TLS handshake 41.0 ms, first response after 42.3 ms".
    static func describe(_ timing: ResponseTiming) -> String {
        func milliseconds(_ duration: Duration) -> String {
            "\(Format.fixed(Format.seconds(duration) * 1000, digits: 2)) ms"
        }
        var parts: [String] = []
        if let connect = timing.connect { parts.append("round trip \(milliseconds(connect)) (the TCP handshake)") }
        if let tls = timing.tlsHandshake { parts.append("TLS handshake \(milliseconds(tls))") }
        parts.append(
            "first response after \(milliseconds(timing.firstByte)) (a round trip and the server's time to answer)")
        return parts.joined(separator: ", ")
    }

    /// One count's figure: the steady rate and its spread, and how often the object came whole.
    static func figure(_ measurement: ThroughputMeasurement) -> String {
        let spread = "\(Format.rate(measurement.spread.lowerBound))-\(Format.rate(measurement.spread.upperBound))"
        let passes = measurement.completed ? ", the object fetched \(measurement.passes)x" : ""
        return "\(Format.rate(measurement.bytesPerSecond)) (10-90%: \(spread)\(passes))"
    }

    /// A row of the final table: the bar is the share of `best`, the best of all counts.
    static func row(_ measurement: ThroughputMeasurement, best: Double) -> String {
        let count = String(measurement.connections)
        let rate = Format.rate(measurement.bytesPerSecond)
        let each = Format.rate(measurement.bytesPerSecondPerConnection)
        let share = best > 0 ? measurement.bytesPerSecond / best : 0
        let bar = String(repeating: "#", count: Int((share * 30).rounded()))
        return String(repeating: " ", count: max(0, 11 - count.count)) + count + "   "
            + rate + String(repeating: " ", count: max(0, 14 - rate.count)) + "  "
            + each + String(repeating: " ", count: max(0, 15 - each.count)) + "  " + bar
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
