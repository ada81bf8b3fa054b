import Foundation
import Swoop
import SwoopTestOrigin
import Synchronization
import Testing

/// `downloadAll` with an events handler: what the handler hears, and how the caller stops the run.
@Suite("Bulk downloads through an events handler", .serialized)
struct BulkEventsTests {
    @Test("each file's events reach the handler in order, one outcome each, and the call returns the summary")
    func eventsInOrder() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            let objects = (0..<6).map { TestObject(size: Int64(1 << 20) * Int64($0 + 1), seed: UInt64(300 + $0)) }
            var items = addObjects(6, named: "h", to: origin, into: scratch) { objects[$0] }
            items.insert(BulkItem(DownloadRequest(url: origin.url("/nope.bin")), to: scratch.path("nope.bin")), at: 3)
            var configuration = quickConfiguration()
            configuration.progressInterval = .milliseconds(20)
            origin.updateFaults { $0.throttleBytesPerSecond = 16 << 20 }
            let heard = Mutex<[Int: [String]]>([:])
            let summary = try await withDownloader(configuration) { downloader in
                await downloader.downloadAll(items, maxConcurrentFiles: 3) { event in
                    let (index, name): (Int, String) =
                        switch event {
                        case .started(let index): (index, "started")
                        case .progress(let index, _): (index, "progress")
                        case .finished(let index, _): (index, "finished")
                        case .failed(let index, _): (index, "failed")
                        case .completed: (-1, "completed")
                        }
                    heard.withLock { $0[index, default: []].append(name) }
                }
            }
            let events = heard.withLock { $0 }
            #expect(events[-1] == nil, "the summary is returned, not handed to the handler")
            #expect(Set(events.keys) == Set(0..<7))
            for (index, names) in events where index >= 0 {
                let outcome = index == 3 ? "failed" : "finished"
                #expect(
                    names.first == "started" && names.last == outcome
                        && names.dropFirst().dropLast().allSatisfy { $0 == "progress" },
                    "file \(index): \(names)")
            }
            #expect(events.values.contains { $0.contains("progress") }, "progress reached the handler")
            #expect(summary.files == 7 && summary.succeeded == 6 && summary.failed == 1)
            #expect(summary.failures.first?.index == 3 && summary.failures.first?.error.httpStatus == 404)
            for (object, item) in zip(objects, items.enumerated().filter { $0.offset != 3 }.map(\.element)) {
                #expect(try await TestData.sha256(of: item.destination) == object.sha256)
            }
        }
    }

    @Test("cancelling the caller pauses the files in flight, keeping them; a second run resumes them")
    func cancellingPauses() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            let objects = (0..<3).map { TestObject(size: 8 << 20, seed: UInt64(320 + $0)) }
            let items = addObjects(3, named: "c", to: origin, into: scratch) { objects[$0] }
            var configuration = quickConfiguration()
            configuration.progressInterval = .milliseconds(20)
            configuration.files.checkpointInterval = .milliseconds(50)
            origin.updateFaults { $0.throttleBytesPerSecond = 4 << 20 }
            // Cancelled from the handler, on the transfer thread: a wait on the cooperative pool could
            // resume after the files had ended, on a loaded machine.
            let trigger = ProgressTrigger(atBytes: 1 << 20)
            let first = try await withDownloader(configuration) { downloader in
                let run = Task {
                    await downloader.downloadAll(items, maxConcurrentFiles: 3) { event in
                        if case .progress(_, let progress) = event { trigger.handler(progress) }
                    }
                }
                trigger.arm { run.cancel() }
                return await run.value
            }
            #expect(first.files == 3 && first.failed >= 1, "\(first.succeeded) succeeded")
            for failure in first.failures {
                #expect(failure.error.kind == .interrupted, "\(failure.destination): \(failure.error)")
                #expect(Downloader.status(of: failure.destination).state == .partial)
            }
            origin.updateFaults { $0.throttleBytesPerSecond = nil }
            let second = try await withDownloader(quickConfiguration()) { downloader in
                await downloader.downloadAll(items, maxConcurrentFiles: 3) { _ in }
            }
            #expect(second.succeeded == 3 && second.failed == 0)
            #expect(second.bytesReceived < 3 * (8 << 20), "resumed: \(second.bytesReceived) bytes received")
            for (object, item) in zip(objects, items) {
                #expect(try await TestData.sha256(of: item.destination) == object.sha256)
            }
        }
    }
}
