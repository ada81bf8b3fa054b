import Foundation
import Swoop
import SwoopTestOrigin
import SwoopTestSupport
import Testing

/// A server that dies mid-download and comes back: the download waits for it politely (one
/// connection at a time on a backoff, however many byte ranges wait), neither grows its
/// connection count nor gives up within a minute, says what it waits for, and ends with the right
/// bytes. Each test runs nginx and swoop in a network namespace of its own, whose TCP counters
/// count swoop's connection attempts alone.
@Suite("Outages", .enabled(if: NetworkNamespace.unavailable == nil, "\(NetworkNamespace.unavailable ?? "")"))
struct OutageTests {
    /// nginx inside a namespace on a fixed port, paced per connection, killed and restarted at will.
    private final class NamespacedNginx: @unchecked Sendable {
        let namespace: NetworkNamespace
        let prefix: URL
        let port = 8080
        private var process: ChildProcess?

        init(in namespace: NetworkNamespace, limitRate: String) throws {
            self.namespace = namespace
            prefix = try TemporaryDirectory.make(prefix: "swoop-outage-nginx")
            let root = prefix.appendingPathComponent("www")
            try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
            let config = """
                daemon off;
                master_process off;
                worker_processes 1;
                error_log \(prefix.path)/error.log warn;
                pid \(prefix.path)/nginx.pid;
                events { worker_connections 1024; }
                http {
                    default_type application/octet-stream;
                    access_log \(prefix.path)/access.log;
                    client_body_temp_path \(prefix.path)/tmp_body;
                    proxy_temp_path \(prefix.path)/tmp_proxy;
                    fastcgi_temp_path \(prefix.path)/tmp_fastcgi;
                    uwsgi_temp_path \(prefix.path)/tmp_uwsgi;
                    scgi_temp_path \(prefix.path)/tmp_scgi;
                    server {
                        listen 127.0.0.1:\(port);
                        root \(prefix.path)/www;
                        limit_rate \(limitRate);
                        sendfile_max_chunk 64k;
                    }
                }
                """
            try config.write(to: prefix.appendingPathComponent("nginx.conf"), atomically: true, encoding: .utf8)
            try start()
        }

        var url: String { url("big.bin") }

        func url(_ name: String) -> String { "http://127.0.0.1:\(port)/\(name)" }

        func addFile(_ name: String = "big.bin", size: Int, seed: UInt64) async throws -> String {
            try await TestData.write(to: prefix.appendingPathComponent("www/\(name)"), size: size, seed: seed)
        }

        /// Starts nginx and waits until it accepts connections (a probe from inside the namespace).
        func start() throws {
            process = try namespace.start(
                Nginx.executable, ["-c", prefix.appendingPathComponent("nginx.conf").path, "-p", prefix.path],
                stderr: prefix.appendingPathComponent("stderr.log").path)
            let deadline = Date().addingTimeInterval(10)
            while !(try isListening()) {
                guard process?.isRunning == true, Date() < deadline else {
                    throw TestFailure("nginx did not start: \(errors)")
                }
                usleep(20_000)
            }
        }

        /// SIGKILL: every connection is reset, and nothing listens until ``start()``.
        func kill() {
            guard let process, process.isRunning else { return }
            process.signal(SIGKILL)
            _ = process.waitBlocking()
        }

        private func isListening() throws -> Bool {
            // Listening sockets in the namespace (ss would need another package): /proc/net/tcp, state 0A.
            let hexPort = String(format: "%04X", port)
            let probe = try namespace.start("/bin/sh", ["-c", "grep -q ':\(hexPort) 00000000:0000 0A' /proc/net/tcp"])
            return probe.waitBlocking() == 0
        }

        var errors: String {
            (try? String(contentsOf: prefix.appendingPathComponent("error.log"), encoding: .utf8)) ?? ""
        }

        func stop() {
            kill()
            try? FileManager.default.removeItem(at: prefix)
        }
    }

    /// A download at `arguments` from a paced nginx that is killed once `killAfter` bytes are on
    /// disk and restarted `outage` later; checks the file, and returns swoop's result and the
    /// connections swoop opened while nothing listened.
    ///
    /// `limitRate` paces each connection, so that however many connections swoop opens (at
    /// most `connections`), the download lasts far longer than the wait for `killAfter` bytes.
    private func downloadThroughOutage(
        _ arguments: [String], limitRate: String, outage: Duration = .seconds(10), killAfter: Int64
    ) async throws -> (result: CLI.Result, attemptsDuringOutage: Int) {
        let namespace = try await NetworkNamespace.make()
        defer { namespace.remove() }
        let nginx = try await offThePool { try NamespacedNginx(in: namespace, limitRate: limitRate) }
        defer { nginx.stop() }
        let expected = try await nginx.addFile(size: 48 << 20, seed: 61)
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        let target = scratch.path("big.bin")
        let running = try namespace.startCLI([nginx.url] + arguments, in: scratch.url)
        let started = try await waitThenAct(
            within: .seconds(60), until: { Downloader.status(of: target).bytesDone >= killAfter },
            then: { nginx.kill() })
        #expect(started, "the download recorded \(killAfter) bytes before the server was killed")
        let before = try await namespace.activeOpens()
        try await Task.sleep(for: outage)
        let attempts = try await namespace.activeOpens() - before
        #expect(running.process.isRunning, "swoop waited out the outage: \(running.stderrSoFar.suffix(600))")
        try await offThePool { try nginx.start() }
        let result = try await running.wait(timeout: .seconds(120))
        let actual = FileManager.default.fileExists(atPath: target) ? try await TestData.sha256(of: target) : "missing"
        #expect(actual == expected, "the file is byte-identical")
        return (result, attempts)
    }

    @Test("a server killed mid-download and back 10 s later: identical bytes, few attempts, the wait said")
    func serverDiesAndComesBack() async throws {
        // 8 connections at 512 KiB/s each: 48 MiB takes 12 s without the outage; killed at 2 MiB.
        let run = try await downloadThroughOutage(["-c", "8"], limitRate: "512k", killAfter: 2 << 20)
        #expect(run.result.status == 0, "stderr: \(run.result.stderr.suffix(800))")
        print("outage test (8 connections): \(run.attemptsDuringOutage) connection attempts during a 10 s outage")
        // Before, 815-2,221 attempts in such an outage; now the 8 failures that make the server
        // down and one trial at a time, at most every 5 s (a backoff from 0.5 s).
        #expect(run.attemptsDuringOutage <= 30, "\(run.attemptsDuringOutage) connection attempts in 10 s")
        let stderr = run.result.stderr
        #expect(stderr.contains("is not answering"), "says the server went away: \(stderr.suffix(800))")
        #expect(stderr.contains("answers again"), "says it is back: \(stderr.suffix(800))")
        #expect(
            stderr.contains("waiting for 127.0.0.1:8080 (connection refused)"),
            "progress says what it waits for: \(stderr.suffix(800))")
    }

    @Test("the adaptive connection count does not grow while the server is down")
    func adaptiveCountHoldsDuringOutage() async throws {
        // At most 64 connections at 64 KiB/s each: 48 MiB takes at least 12 s. Killed at 256 KiB, while
        // the count is still being measured (8, then 16: it is settled only at the ceiling).
        let run = try await downloadThroughOutage(
            ["--max-connections", "64", "-vv"], limitRate: "64k", killAfter: 256 << 10)
        #expect(run.result.status == 0, "stderr: \(run.result.stderr.suffix(800))")
        print("outage test (adaptive): \(run.attemptsDuringOutage) connection attempts during a 10 s outage")
        #expect(run.attemptsDuringOutage <= 100, "\(run.attemptsDuringOutage) connection attempts in 10 s")
        let lines = run.result.stderr.split(separator: "\n")
        let down = try #require(lines.firstIndex { $0.contains("is not answering") }, "the outage was noticed")
        let up = try #require(lines.firstIndex { $0.contains("answers again") }, "the recovery was noticed")
        let adapted = lines[down..<up].filter { $0.contains("adapting connections") }
        #expect(adapted.isEmpty, "the count changed while nothing arrived: \(adapted)")
    }

    @Test("a list of 304 files from one host that is down for 20 s: few attempts for all, every file exact")
    func listThroughOutage() async throws {
        try await exclusively {
            let namespace = try await NetworkNamespace.make()
            defer { namespace.remove() }
            // 64 connections at 64 KiB/s each: 76 MiB take about 19 s without the outage.
            let nginx = try await offThePool { try NamespacedNginx(in: namespace, limitRate: "64k") }
            defer { nginx.stop() }
            let names = (0..<304).map { String(format: "f%03d.bin", $0) }
            var expected: [String: String] = [:]
            for (index, name) in names.enumerated() {
                expected[name] = try await nginx.addFile(name, size: 256 << 10, seed: 700 + UInt64(index))
            }
            let scratch = try Scratch()
            defer { scratch.cleanup() }
            try names.map { nginx.url($0) }.joined(separator: "\n").appending("\n").write(
                toFile: scratch.path("list"), atomically: true, encoding: .utf8)
            // -vv: the failures, waits and recoveries, timed, for a count over the bound to explain.
            let running = try namespace.startCLI(["-i", "list", "-j", "64", "-vv"], in: scratch.url)
            let paths = names.map { scratch.path($0) }
            @Sendable func finished() -> Int { paths.count { FileManager.default.fileExists(atPath: $0) } }
            let started = try await waitThenAct(
                within: .seconds(60), until: { finished() >= 16 }, then: { nginx.kill() })
            #expect(started, "16 files were done before the server was killed")
            let before = try await namespace.activeOpens()
            let outageStart = ContinuousClock.now
            try await Task.sleep(for: .seconds(20))
            let attempts = try await namespace.activeOpens() - before
            let window = ContinuousClock.now - outageStart
            let doneBefore = finished()
            #expect(running.process.isRunning, "swoop waited out the outage: \(running.stderrSoFar.suffix(600))")
            try await offThePool { try nginx.start() }
            let result = try await running.wait(timeout: .seconds(180))
            print(
                "list outage test (304 files, -j 64): \(attempts) connection attempts during a 20 s outage "
                    + "(counted over \(window)) (\(doneBefore) files done before the server came back)")
            #expect(result.status == 0, "stderr: \(result.stderr.suffix(800))")
            // One health table for the downloader: the failures that make the host down, then one
            // trial at a time at most every 5 s for every download of the list (before, 77-160).
            // Until it is down, one new request at a time finds out (a host in doubt): without
            // that, the probes of downloads started as the host died went out together (35).
            let told = result.stderr.split(separator: "\n").filter {
                !$0.contains("every byte is here") && !$0.hasPrefix("progress:")
            }
            #expect(attempts <= 20, "\(attempts) connection attempts in 20 s: \(told.joined(separator: "\n"))")
            var wrong: [String] = []
            for name in names where (try? await TestData.sha256(of: scratch.path(name))) != expected[name] {
                wrong.append(name)
            }
            #expect(wrong.isEmpty, "\(wrong.count) files differ or are missing: \(wrong.prefix(5))")
        }
    }
}
