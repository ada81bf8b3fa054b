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

    @Test("the test origin caps each client address over all its connections; another address has its own rate")
    func perClientCap() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            // 8 MiB at 4 MiB/s per client address: at least 1.9 s (2 s less the first 100 ms), at any count.
            let object = TestObject(size: 8 << 20, seed: 592)
            origin.addObject(object, at: "/capped.bin")
            origin.updateFaults { $0.perClientBytesPerSecond = 4 << 20 }
            let started = ContinuousClock.now
            let alone = try await CLI.run(
                [origin.url("/capped.bin"), "-o", "alone.bin", "-c", "8", "--interface", "127.0.0.2", "-q"],
                in: scratch.url)
            let single = ContinuousClock.now - started
            #expect(alone.status == 0, "\(alone.stderr)")
            #expect(single >= .milliseconds(1800), "8 connections from one address shared its 4 MiB/s: \(single)")
            #expect(try await TestData.sha256(of: scratch.path("alone.bin")) == object.sha256)
            // Four addresses at once: four rates. One shared rate would need 8 s for the 32 MiB.
            let together = ContinuousClock.now
            let runs = try (2...5).map { host in
                try CLI.start(
                    [
                        origin.url("/capped.bin"), "-o", "from\(host).bin", "-c", "4", "--interface", "127.0.0.\(host)",
                        "-q",
                    ],
                    in: scratch.url)
            }
            for run in runs {
                let result = try await run.wait(timeout: .seconds(60))
                #expect(result.status == 0, "\(result.stderr)")
            }
            let elapsed = ContinuousClock.now - together
            #expect(
                elapsed < .seconds(6.5), "four addresses shared one rate: \(elapsed) for 32 MiB (one alone: \(single))")
            for host in 2...5 {
                #expect(try await TestData.sha256(of: scratch.path("from\(host).bin")) == object.sha256)
            }
            let addresses = Set(origin.requests.filter { $0.path == "/capped.bin" }.compactMap(\.clientAddress))
            #expect(addresses == ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"])
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
