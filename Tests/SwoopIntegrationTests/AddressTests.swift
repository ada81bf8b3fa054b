import Foundation
import Swoop
import SwoopTestOrigin
import Testing

/// One name on four loopback addresses (127.0.0.2-5, through `--resolve`), each served by its own
/// nginx that lets a client have 4 connections (`limit_conn`, 503 beyond) at a per-connection
/// rate: every address is a source, checked against the first before it contributes.
@Suite("One name, many addresses", .serialized)
struct AddressTests {
    static let name = "edges.swoop.test"
    static let hosts = ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"]

    /// Four nginx on one port, edge `i` at `rates[i]` per connection.
    struct Edges {
        var servers: [Nginx]
        var port: Int

        func url(_ path: String) -> String { "http://\(AddressTests.name):\(port)\(path)" }
        var resolve: [String] {
            ["--resolve", "\(AddressTests.name):\(port):" + AddressTests.hosts.joined(separator: ",")]
        }
        func stop() { servers.forEach { $0.stop() } }

        /// The same file on every edge (or, for edges in `other`, a file of the same size with
        /// other bytes); the SHA-256 of the first kind.
        func add(_ file: String, size: Int, seed: UInt64, other: Set<Int> = []) async throws -> String {
            var sha = ""
            for (index, server) in servers.enumerated() {
                let written = try await server.addFile(
                    file, size: size, seed: other.contains(index) ? seed + 1000 : seed)
                if !other.contains(index) { sha = written }
            }
            return sha
        }
    }

    static func start(rates: [String]) async throws -> Edges {
        var lastError: Error?
        for _ in 0..<10 {
            let port = try FreePort.find(host: hosts[0])
            var servers: [Nginx] = []
            do {
                for (host, rate) in zip(hosts, rates) {
                    servers.append(
                        try await Nginx.start(
                            limitRate: rate, extraServerConfig: "limit_conn perclient 4; limit_conn_status 503;",
                            host: host, extraHTTPConfig: "limit_conn_zone $binary_remote_addr zone=perclient:1m;",
                            port: port))
                }
                return Edges(servers: servers, port: port)
            } catch {
                servers.forEach { $0.stop() }
                lastError = error
            }
        }
        throw lastError!
    }

    /// The `--json` summary's sources.
    struct Summary: Decodable {
        struct Source: Decodable {
            var url: String
            var address: String?
            var bytes: Int64
            var state: String
        }
        var sources: [Source]?
        var resumedBytes: Int64?
    }

    static func summary(_ stdout: String) throws -> Summary {
        try JSONDecoder().decode(Summary.self, from: Data(stdout.utf8))
    }

    /// Edges at `rates` serving `size` bytes (other bytes on the edges in `other`); `body` runs
    /// with them, a scratch directory and the SHA-256 of the right bytes.
    static func withEdges(
        rates: [String], size: Int, seed: UInt64, other: Set<Int> = [],
        _ body: (Edges, Scratch, String) async throws -> Void
    ) async throws {
        let edges = try await start(rates: rates)
        defer { edges.stop() }
        let sha = try await edges.add("f.bin", size: size, seed: seed, other: other)
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await body(edges, scratch, sha)
    }

    /// `swoop get` of the edges' file into `f.bin` with `--json`, checked byte for byte; its sources.
    static func get(
        _ edges: Edges, _ scratch: Scratch, sha: String, url: String? = nil, arguments: [String]? = nil,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> [Summary.Source] {
        let result = try await CLI.run(
            ["get", url ?? edges.url("/f.bin"), "-o", "f.bin", "--json", "-q"] + (arguments ?? edges.resolve),
            in: scratch.url)
        #expect(result.status == 0, "\(result.stderr)", sourceLocation: sourceLocation)
        #expect(try await TestData.sha256(of: scratch.path("f.bin")) == sha, sourceLocation: sourceLocation)
        return try summary(result.stdout).sources ?? []
    }

    @Test("four addresses of one name: identical bytes, every address contributes, each named in --json")
    func spread() async throws {
        try await Self.withEdges(rates: ["2m", "2m", "2m", "2m"], size: 32 << 20, seed: 1) { edges, scratch, sha in
            let sources = try await Self.get(edges, scratch, sha: sha)
            #expect(Set(sources.compactMap(\.address)) == Set(Self.hosts), "\(sources)")
            #expect(sources.allSatisfy { $0.bytes > 0 && $0.state == "used" }, "\(sources)")
            for (host, server) in zip(Self.hosts, edges.servers) {
                #expect(try server.log().contains { $0.status == 206 }, "\(host) served nothing")
            }
        }
    }

    @Test("an address ten times slower than the others ends with few bytes")
    func slowAddress() async throws {
        let size = 32 << 20
        try await Self.withEdges(rates: ["2m", "2m", "2m", "200k"], size: size, seed: 2) { edges, scratch, sha in
            let slow = try await Self.get(edges, scratch, sha: sha).first { $0.address == Self.hosts[3] }
            // At their caps the slow address's fair share is 3%; under 10% on a quiet machine. On a
            // loaded one the fast addresses are held back by the processors, not by their caps, so
            // they are less than ten times faster (a full CI run saw 10.4%): under 20% there, well
            // below the 25% of an even split.
            let share = MachineLoad.stretch <= 1.1 ? 10 : 5
            #expect(
                (slow?.bytes ?? 0) < Int64(size) / Int64(share),
                "the slow address delivered \(slow?.bytes ?? -1) bytes (load \(MachineLoad.stretch))")
        }
    }

    @Test("an address that serves other bytes of the same size never contributes: the file is never mixed")
    func otherBytes() async throws {
        try await Self.withEdges(rates: ["2m", "2m", "2m", "2m"], size: 24 << 20, seed: 3, other: [2]) {
            edges, scratch, sha in
            let other = try await Self.get(edges, scratch, sha: sha).first { $0.address == Self.hosts[2] }
            #expect(other?.state == "dropped" && other?.bytes == 0, "\(String(describing: other))")
        }
    }

    @Test("an address that dies mid-download: the others finish the file")
    func addressDies() async throws {
        let edges = try await Self.start(rates: ["1m", "1m", "1m", "1m"])
        defer { edges.stop() }
        let sha = try await edges.add("f.bin", size: 48 << 20, seed: 4)
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        let run = try CLI.start(["get", edges.url("/f.bin"), "-o", "f.bin", "-q"] + edges.resolve, in: scratch.url)
        let target = scratch.path("f.bin")
        try await waitThenAct(
            within: .seconds(60),
            until: { !run.process.isRunning || Downloader.status(of: target).bytesDone >= 8 << 20 },
            then: { edges.servers[1].stop() })
        let result = try await run.wait(timeout: .seconds(120))
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try await TestData.sha256(of: scratch.path("f.bin")) == sha)
    }

    @Test("kill -9 of a spread download, then the same command resumes to the identical file")
    func killAndResume() async throws {
        let edges = try await Self.start(rates: ["1m", "1m", "1m", "1m"])
        defer { edges.stop() }
        let sha = try await edges.add("f.bin", size: 48 << 20, seed: 5)
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        let command = ["get", edges.url("/f.bin"), "-o", "f.bin"] + edges.resolve
        let slow = try CLI.start(command + ["-q"], in: scratch.url)
        let target = scratch.path("f.bin")
        let seen = try await killOnceSaved(slow, target: target, atLeast: 8 << 20)
        _ = try await slow.wait(timeout: .seconds(30))
        let saved = try #require(seen, "the download never got going")
        try #require(saved.bytesDone >= 8 << 20, "no progress before the kill")
        let resumed = try await CLI.run(command + ["--json", "-q"], in: scratch.url)
        #expect(resumed.status == 0, "\(resumed.stderr)")
        #expect(try await TestData.sha256(of: scratch.path("f.bin")) == sha)
        #expect((try Self.summary(resumed.stdout).resumedBytes ?? 0) >= saved.bytesDone, "\(resumed.stdout)")
    }

    @Test("--single-address: one address only, as curl; a bad --resolve is a usage error")
    func singleAddress() async throws {
        try await Self.withEdges(rates: ["4m", "4m", "4m", "4m"], size: 8 << 20, seed: 6) { edges, scratch, sha in
            let sources = try await Self.get(edges, scratch, sha: sha, arguments: edges.resolve + ["--single-address"])
            #expect(sources.isEmpty, "one source: \(sources)")
            #expect(try !edges.servers[0].log().isEmpty, "the first address served it")
            for server in edges.servers.dropFirst() { #expect(try server.log().isEmpty) }
            let bad = try await CLI.run(
                ["get", edges.url("/f.bin"), "--resolve", "\(Self.name):\(edges.port):not-an-address"],
                in: scratch.url)
            #expect(bad.status == 2, "\(bad.stderr)")
            #expect(bad.stderr.contains("not an IPv4 or IPv6 address"), "\(bad.stderr)")
        }
    }

    @Test("a small file from a name with four addresses arrives whole from the first: one request, one source")
    func smallFileFromFirst() async throws {
        let size = 40_000
        try await Self.withEdges(rates: ["2m", "2m", "2m", "2m"], size: size, seed: 30) { edges, scratch, sha in
            let sources = try await Self.get(edges, scratch, sha: sha)
            #expect(sources.count == 1, "\(sources)")
            #expect(sources.first?.address == Self.hosts[0] && sources.first?.bytes == Int64(size), "\(sources)")
            let served = try edges.servers.map { try $0.log().count }
            #expect(served == [1, 0, 0, 0], "requests per address: \(served)")
        }
    }

    @Test("a list from one name spreads its large files over the name's addresses")
    func listSpreads() async throws {
        let edges = try await Self.start(rates: ["2m", "2m", "2m", "2m"])
        defer { edges.stop() }
        var expected: [String: String] = [:]
        for index in 0..<3 {
            expected["f\(index).bin"] = try await edges.add("f\(index).bin", size: 12 << 20, seed: UInt64(10 + index))
        }
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try expected.keys.sorted().map { edges.url("/\($0)") }.joined(separator: "\n").write(
            to: scratch.url.appendingPathComponent("list.txt"), atomically: true, encoding: .utf8)
        let result = try await CLI.run(["get", "-i", "list.txt", "-d", "out", "-q"] + edges.resolve, in: scratch.url)
        #expect(result.status == 0, "\(result.stderr)")
        for (name, sha) in expected {
            #expect(try await TestData.sha256(of: scratch.path("out/" + name)) == sha, "\(name)")
        }
        for (host, server) in zip(Self.hosts, edges.servers) {
            #expect(try server.log().contains { $0.status == 206 }, "\(host) served nothing")
        }
    }

    @Test(
        "a name with four addresses in /etc/hosts spreads without --resolve",
        .enabled(if: getuid() == 0 && FileManager.default.isWritableFile(atPath: "/etc/hosts")))
    func hostsFile() async throws {
        try await Self.withEdges(rates: ["2m", "2m", "2m", "2m"], size: 24 << 20, seed: 20) { edges, scratch, sha in
            try await Self.getThroughHostsFile(edges, scratch, sha: sha)
        }
    }

    /// Adds the edges' addresses to `/etc/hosts` under a name of this test's, downloads by that
    /// name alone, and takes the lines out again.
    private static func getThroughHostsFile(_ edges: Edges, _ scratch: Scratch, sha: String) async throws {
        let name = "hosts-edges-\(getpid()).swoop.test"
        // Appended, then cut back to the original length: every other line stays readable to the
        // other suites' lookups (localhost) the whole time; no rename (a container bind-mounts it).
        let file = try FileHandle(forUpdating: URL(fileURLWithPath: "/etc/hosts"))
        let original = try file.seekToEnd()
        defer {
            try? file.truncate(atOffset: original)
            try? file.close()
        }
        var lines = hosts.map { "\($0) \(name)\n" }.joined()
        if original > 0 {
            try file.seek(toOffset: original - 1)
            if file.readData(ofLength: 1) != Data("\n".utf8) { lines = "\n" + lines }
        }
        try file.seekToEnd()
        try file.write(contentsOf: Data(lines.utf8))
        try file.synchronize()

        let url = "http://\(name):\(edges.port)/f.bin"
        let sources = try await get(edges, scratch, sha: sha, url: url, arguments: [])
        #expect(Set(sources.compactMap(\.address)) == Set(hosts), "\(sources)")
    }

    @Test("a fixed count: an address whose sample arrives before the first address's bytes joins once they are written")
    func sampleBeforeTheFirstBytes() async throws {
        // The first address sends its first MiB in about 4 s, the second its sample in a tenth of
        // a second: the check waits for the first address's bytes, and only a request's end says
        // they are there (a fixed count has no controller ticks). Before d26cb06: 0 bytes from it.
        let object = TestObject(size: 8 << 20, seed: 31)
        try await Self.download(object, from: ["127.0.0.2", "127.0.0.3"], rates: [256 << 10, 8 << 20], connections: 2) {
            result, _, _ in
            let second = result.sources.first { $0.address == "127.0.0.3" }
            #expect((second?.bytes ?? 0) >= 2 << 20, "\(result.sources)")
        }
    }

    @Test("an IPv6 and an IPv4 address of one name are both sources: identical bytes from both")
    func ipv6AndIPv4() async throws {
        let object = TestObject(size: 24 << 20, seed: 30)
        try await Self.download(object, from: ["::1", "127.0.0.2"], rates: [2 << 20, 2 << 20], connections: 8) {
            result, origins, host in
            let used = result.sources.filter { $0.bytes > 0 }.compactMap(\.address)
            #expect(Set(used) == ["::1", "127.0.0.2"], "\(result.sources)")
            for origin in origins {
                #expect(origin.requests.contains { $0.header("host") == host }, "the name, not the address")
            }
        }
    }

    /// Serves `object` from test origins on `hosts` (one port; each throttled to its rate), downloads
    /// it by the name at a fixed count of `connections`, checks its bytes, then hands `check` the
    /// result, the origins and the name's `host:port`. The origins stop however it ends.
    private static func download(
        _ object: TestObject, from hosts: [String], rates: [Int], connections: Int,
        _ check: (DownloadResult, [TestOrigin], String) throws -> Void
    ) async throws {
        let origins = try await originPair(hosts: hosts)
        do {
            for (origin, rate) in zip(origins, rates) {
                origin.addObject(object, at: "/o.bin")
                origin.updateFaults { $0.throttleBytesPerSecond = rate }
            }
            let host = "\(name):\(origins[0].port)"
            var configuration = Downloader.Configuration()
            configuration.connections = .fixed(connections)
            configuration.addresses.resolve = [host: hosts]
            let scratch = try Scratch()
            defer { scratch.cleanup() }
            let result = try await withDownloader(configuration) { downloader in
                try await downloader.download(DownloadRequest(url: "http://\(host)/o.bin"), to: scratch.path("o.bin"))
            }
            #expect(try await TestData.sha256(of: scratch.path("o.bin")) == object.sha256)
            try check(result, origins, host)
        } catch {
            for origin in origins { try? await origin.shutdown() }
            throw error
        }
        for origin in origins { try await origin.shutdown() }
    }

    /// Test origins on `hosts`, all on one port (another program may hold it on one of them: the
    /// pair is started again on another).
    static func originPair(hosts: [String]) async throws -> [TestOrigin] {
        for _ in 0..<10 {
            let first = try await TestOrigin.start(host: hosts[0])
            var origins = [first]
            for host in hosts.dropFirst() {
                guard let next = try? await TestOrigin.start(host: host, port: first.port) else { break }
                origins.append(next)
            }
            if origins.count == hosts.count { return origins }
            for origin in origins { try? await origin.shutdown() }
        }
        throw TestFailure("no port free on all of \(hosts)")
    }

    @Test("swoop bench measures each address alone and says which are worth using")
    func bench() async throws {
        try await Self.withEdges(rates: ["4m", "4m", "4m", "400k"], size: 64 << 20, seed: 30) { edges, scratch, _ in
            let result = try await CLI.run(
                ["bench", edges.url("/f.bin"), "-c", "2", "--duration", "1", "--json"] + edges.resolve, in: scratch.url)
            #expect(result.status == 0, "\(result.stderr)")
            struct Report: Decodable {
                struct Address: Decodable {
                    var address: String
                    var bytesPerSecond: Double
                    var worthUsing: Bool
                }
                var addresses: [Address]?
            }
            let addresses = try JSONDecoder().decode(Report.self, from: Data(result.stdout.utf8)).addresses ?? []
            #expect(addresses.map(\.address) == Self.hosts, "\(result.stdout)")
            #expect(addresses.map(\.worthUsing) == [true, true, true, false], "\(result.stdout)")
        }
    }
}
