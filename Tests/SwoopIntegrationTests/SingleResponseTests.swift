import Foundation
import Swoop
import SwoopTestOrigin
import Testing

/// An object that arrives whole in the probe's response goes without the transfer's machine
/// (`TransferRun+Single`) unless that response needs one: these are the cases where it does, each
/// with what the machine would have done had it been there from the start. Objects of 300 KiB and
/// less come whole in the probe's response (it asks for the first MiB).
@Suite("One response with the whole object")
struct SingleResponseTests {
    @Test("a whole-object response cut partway goes on from where it broke: nothing fetched twice")
    func cutResponseResumes() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            let object = TestObject(size: 300_000, seed: 61)
            origin.addObject(object, at: "/cut.bin")
            origin.updateFaults { $0.drops = .init(afterBytes: 100_000, firstRequests: 1) }
            let result = try await withDownloader(quickConfiguration(connections: 4)) {
                try await $0.download(DownloadRequest(url: origin.url("/cut.bin")), to: scratch.path("cut.bin"))
            }
            #expect(try await TestData.sha256(of: scratch.path("cut.bin")) == object.sha256)
            let log = origin.requests
            #expect(log.first?.faultApplied == "drop" && log.first?.bodyBytesSent == 100_000, "\(log)")
            #expect(result.retries >= 1)
            // The rest, and at most a few KiB before it to compare with the bytes held.
            let sent = log.reduce(0) { $0 + $1.bodyBytesSent }
            #expect(sent <= object.size + 8192, "bytes sent \(sent) for an object of \(object.size): \(log)")
            #expect(log.dropFirst().allSatisfy { $0.header("if-match") == object.etagValue }, "\(log)")
        }
    }

    @Test("a whole-object response that lasts 100 ms or more is confirmed by one request after it")
    func slowResponseConfirmed() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            // 256 KiB at 1 MiB/s: a quarter of a second, however fast the machine.
            let object = TestObject(size: 256 << 10, seed: 62)
            origin.addObject(object, at: "/slow.bin")
            origin.updateFaults { $0.throttleBytesPerSecond = 1 << 20 }
            let result = try await withDownloader(quickConfiguration(connections: 4)) {
                try await $0.download(DownloadRequest(url: origin.url("/slow.bin")), to: scratch.path("slow.bin"))
            }
            #expect(try await TestData.sha256(of: scratch.path("slow.bin")) == object.sha256)
            #expect(result.objectChanges == 0 && result.retries == 0)
            let log = origin.requests
            #expect(log.count == 2, "the probe's response and one confirmation: \(log.map(\.status))")
            #expect(log.first?.bodyBytesSent == object.size)
            if log.count == 2 {
                #expect(log[1].header("if-match") == object.etagValue)
                #expect(log[1].status == 206 && log[1].bodyBytesSent <= 8192, "\(log[1])")
            }
        }
    }

    @Test("the object replaced while its one response is read: the confirmation sees it, the new version is fetched")
    func replacedDuringResponse() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            let object = TestObject(size: 256 << 10, seed: 63)
            origin.addObject(object, at: "/moving.bin")
            origin.updateFaults {
                $0.throttleBytesPerSecond = 1 << 20
                // The response under way goes on with the bytes it began with (a file replaced by a rename).
                $0.changeAfterBodyBytes = .init(path: "/moving.bin", bytes: 100_000)
            }
            let result = try await withDownloader(quickConfiguration(connections: 4)) {
                try await $0.download(DownloadRequest(url: origin.url("/moving.bin")), to: scratch.path("moving.bin"))
            }
            let now = try #require(origin.object(at: "/moving.bin"))
            #expect(now.seed == object.seed + 1)
            #expect(try await TestData.sha256(of: scratch.path("moving.bin")) == now.sha256, "the new version")
            #expect(result.objectChanges == 1)
            #expect(result.etag == now.etagValue)
        }
    }
}
