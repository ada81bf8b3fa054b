import Foundation
import Swoop
import SwoopTestOrigin
import Testing

/// The local end of connections (`--interface`, `Configuration.addresses.localInterface`): every
/// request of a download, a list's too, comes from the address asked for, as the test origin
/// sees it; a name or address this machine does not have is said at once, never retried.
@Suite("The local interface", .serialized)
struct LocalInterfaceTests {
    @Test("every request comes from the address or interface asked for; without one, from the system's choice")
    func requestsComeFromTheAddress() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            let large = TestObject(size: 24 << 20, seed: 58)
            origin.addObject(large, at: "/large.bin")
            for index in 0..<8 {
                origin.addObject(TestObject(size: 3000, seed: 580 + UInt64(index)), at: "/s\(index).bin")
            }
            let single = try await CLI.run(
                [origin.url("/large.bin"), "-o", "large.bin", "-c", "4", "--interface", "127.0.0.2", "-q"],
                in: scratch.url)
            #expect(single.status == 0, "\(single.stderr)")
            #expect(try await TestData.sha256(of: scratch.path("large.bin")) == large.sha256)
            let fromLarge = origin.requests.filter { $0.path == "/large.bin" }
            #expect(fromLarge.count >= 2 && fromLarge.allSatisfy { $0.clientAddress == "127.0.0.2" }, "\(fromLarge)")

            let list = (0..<8).map { origin.url("/s\($0).bin") }.joined(separator: "\n")
            try list.write(to: scratch.url.appendingPathComponent("list.txt"), atomically: true, encoding: .utf8)
            let listed = try await CLI.run(
                ["get", "-i", "list.txt", "--jobs", "4", "--interface", "127.0.0.3", "-q"], in: scratch.url)
            #expect(listed.status == 0, "\(listed.stderr)")
            let fromList = origin.requests.filter { $0.path.hasPrefix("/s") }
            #expect(fromList.count == 8 && fromList.allSatisfy { $0.clientAddress == "127.0.0.3" }, "\(fromList)")

            // An interface by name: loopback's own address.
            let named = try await CLI.run(
                [origin.url("/s0.bin"), "-o", "named.bin", "--interface", "lo", "-q"], in: scratch.url)
            #expect(named.status == 0, "\(named.stderr)")
            #expect(origin.requests.last?.clientAddress == "127.0.0.1")
            let plain = try await CLI.run([origin.url("/s1.bin"), "-o", "plain.bin", "-q"], in: scratch.url)
            #expect(plain.status == 0 && origin.requests.last?.clientAddress == "127.0.0.1")
        }
    }

    @Test("the test origin caps each client address over all its connections, whatever the count")
    func perClientCap() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            // 8 MiB at 4 MiB/s per client address: at least 1.9 s (2 s less the first 100 ms) at any
            // count (a lower bound: it holds on a loaded machine). That another address has a rate
            // of its own is ClientAllowanceTests', in virtual time.
            let object = TestObject(size: 8 << 20, seed: 592)
            origin.addObject(object, at: "/capped.bin")
            origin.updateFaults { $0.perClientBytesPerSecond = 4 << 20 }
            for (count, host) in [("1", "127.0.0.2"), ("8", "127.0.0.3")] {
                let started = ContinuousClock.now
                let run = try await CLI.run(
                    [origin.url("/capped.bin"), "-o", "c\(count).bin", "-c", count, "--interface", host, "-q"],
                    in: scratch.url)
                let elapsed = ContinuousClock.now - started
                #expect(run.status == 0, "\(run.stderr)")
                #expect(elapsed >= .milliseconds(1800), "-c \(count) from \(host) beat its address's rate: \(elapsed)")
                #expect(try await TestData.sha256(of: scratch.path("c\(count).bin")) == object.sha256)
            }
            let addresses = Set(origin.requests.filter { $0.path == "/capped.bin" }.compactMap(\.clientAddress))
            #expect(addresses == ["127.0.0.2", "127.0.0.3"])
        }
    }

    @Test("a name or an address this machine does not have: a usage error before any request")
    func unknownInterface() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            origin.addObject(TestObject(size: 3000, seed: 590), at: "/a.bin")
            for (interface, words) in [
                ("nosuch0", "no network interface has that name"), ("192.0.2.9", "not an address"),
            ] {
                let run = try await CLI.run([origin.url("/a.bin"), "--interface", interface], in: scratch.url)
                #expect(run.status == 2, "\(interface): \(run.stderr)")
                #expect(run.stderr.contains(words) && run.stderr.contains("--interface \(interface)"), "\(run.stderr)")
            }
            #expect(origin.requests.isEmpty)
            #expect(!scratch.exists("a.bin"))
        }
    }

    @Test("the library: a connection that cannot be bound fails the download at once, with its remedy, unretried")
    func libraryFailsAtOnce() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            origin.addObject(TestObject(size: 3000, seed: 591), at: "/a.bin")
            var configuration = Downloader.Configuration()
            configuration.addresses.localInterface = "192.0.2.9"
            // A retry would wait at least half its backoff: the failure must come well before.
            configuration.retry.baseDelay = .seconds(30)
            configuration.retry.maxDelay = .seconds(30)
            let started = ContinuousClock.now
            let failure = try await withDownloader(configuration) { downloader -> DownloadError? in
                let task = try downloader.start(DownloadRequest(url: origin.url("/a.bin")), to: scratch.path("a.bin"))
                do throws(DownloadError) {
                    _ = try await task.result()
                    return nil
                } catch {
                    return error
                }
            }
            let elapsed = ContinuousClock.now - started
            let error = try #require(failure, "the download succeeded from an address the machine does not have")
            #expect(error.kind == .invalidRequest && error.remedy == .checkLocalInterface, "\(error)")
            #expect(error.curlCode == 45 && error.message.contains("Configuration.addresses.localInterface"))
            #expect(elapsed < .seconds(15), "\(elapsed)")
            #expect(origin.requests.isEmpty && !scratch.exists("a.bin"))
        }
    }
}
