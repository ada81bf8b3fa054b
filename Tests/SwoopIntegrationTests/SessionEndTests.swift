import Foundation
@testable import Swoop
import SwoopTestOrigin
import Synchronization
import Testing

/// A session's heartbeat holds the session (its tick) and its timer holds the heartbeat, from the
/// start until the session stops: neither outlives the download, however it ends.
@Suite("A session's end")
struct SessionEndTests {
    @Test("a session that ticked and finished, and one that failed, are let go at their end")
    func heartbeatLetsGo() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            // Larger than the probe's first response (1 MiB): ranged requests, finalized by a stop.
            let object = TestObject(size: 3 << 20, seed: 62)
            origin.addObject(object, at: "/ranged.bin")
            origin.updateFaults { $0.throttleBytesPerSecond = 4 << 20 }
            let sessions = SessionWatch()
            var configuration = quickConfiguration()
            configuration.progressInterval = .milliseconds(20)
            configuration.tuning.faults.sessionStarted = { sessions.started($0) }
            try await withDownloader(configuration) { downloader in
                let ticks = Mutex(0)
                let task = try downloader.start(
                    DownloadRequest(url: origin.url("/ranged.bin")), to: scratch.path("ranged.bin")
                ) { _ in ticks.withLock { $0 += 1 } }
                let result = try await task.result()
                #expect(result.bytes == object.size && result.requests > 1)
                #expect(ticks.withLock { $0 } >= 2, "the heartbeat ticked while the transfer ran")
                let letGo = try await waitThenAct(within: .seconds(10), until: { sessions.alive == 0 })
                #expect(letGo, "the finished session is held after its end")

                await #expect(throws: DownloadError.self) {
                    try await downloader.download(
                        DownloadRequest(url: origin.url("/missing.bin")), to: scratch.path("missing.bin"))
                }
                #expect(sessions.started == 2)
                let failedLetGo = try await waitThenAct(within: .seconds(10), until: { sessions.alive == 0 })
                #expect(failedLetGo, "the failed session is held after its end")
            }
        }
    }
}
