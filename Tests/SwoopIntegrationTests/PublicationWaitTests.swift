import Foundation
@testable import Swoop
import SwoopTestOrigin
import Synchronization
import Testing

/// A small file waits for its group commit with only its report: the session lets go of itself
/// when it hands the file over (a list's files wait by the hundred), and what it would have done at
/// its end is still done (the last progress, the result), while a pause or a cancel meanwhile
/// changes nothing, as for any download finalizing.
@Suite("A file waiting to be published")
struct PublicationWaitTests {
    @Test(
        "its session is let go while it waits; a pause or a cancel then changes nothing; it ends as the session would")
    func waitsWithoutItsSession() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            let object = TestObject(size: 20_000, seed: 61)
            origin.addObject(object, at: "/small.bin")
            let gate = HoldGate()
            defer { gate.release() }
            let sessions = SessionWatch()
            var configuration = quickConfiguration()
            configuration.tuning.faults.beforeEachPublishGroup = { gate.hold("publish group") }
            configuration.tuning.faults.sessionStarted = { sessions.started($0) }
            try await withDownloader(configuration) { downloader in
                let last = Mutex<DownloadProgress?>(nil)
                let target = scratch.path("small.bin")
                let task = try downloader.start(DownloadRequest(url: origin.url("/small.bin")), to: target) {
                    progress in last.withLock { $0 = progress }
                }
                try await gate.waitForEntry(within: .seconds(10), of: "publish group held")
                // The transfer thread lets go of the session once the call that handed the file
                // over returns.
                let letGo = try await waitThenAct(within: .seconds(10), until: { sessions.alive == 0 })
                #expect(letGo, "the session is held while its file waits to be published")
                #expect(sessions.started == 1)
                #expect(!FileManager.default.fileExists(atPath: target), "published before its group's sync")
                #expect(task.state == .running)

                task.pause()
                task.cancel()
                gate.release()
                let result = try await task.result()
                #expect(result.bytes == object.size && result.bytesReceived == object.size && result.requests == 1)
                #expect(result.path == target && result.etag == object.etagValue)
                #expect(task.state == .finished)
                #expect(try await TestData.sha256(of: target) == object.sha256)
                let final = try #require(last.withLock { $0 })
                #expect(final.bytesDone == object.size && final.totalBytes == object.size)
                #expect(!FileManager.default.fileExists(atPath: scratch.part("small.bin")))
            }
        }
    }
}
