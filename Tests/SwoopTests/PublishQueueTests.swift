import Dispatch
import FoundationEssentials
import Synchronization
import Testing
import SwoopCore
@testable import SwoopStore
import SwoopTestSupport

#if canImport(Glibc)
import Glibc
#endif

/// The group commit of files finished without a segment map: files that wait for their group
/// while the one before it commits are written out once their bytes pass the mark, and nothing
/// appears at a target before its own group's sync.
@Suite("PublishQueue")
struct PublishQueueTests {
    /// Runs the queue's transfer-thread side on one serial queue.
    private final class SerialLoop: LoopExecutor {
        let queue = DispatchQueue(label: "swoop.test.loop")
        func execute(_ work: @escaping @Sendable () -> Void) -> Bool {
            queue.async(execute: work)
            return true
        }
        func afterCallbacks(_ work: @escaping () -> Void) { work() }
    }

    private static func body(_ index: Int, size: Int) -> [UInt8] {
        (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ index) }
    }

    @Test func writesOutWaitingFilesWhileAGroupCommits() async throws {
        let scratch = try TemporaryDirectory("swoop-publish")
        defer { scratch.remove() }
        let directory = scratch.path
        // The first group waits until the test lets it go.
        let gate = DispatchSemaphore(value: 0)
        let groups = Mutex(0)
        let loop = SerialLoop()
        let publisher = PublishQueue(
            loop: loop,
            beforeEachGroup: {
                if groups.withLock({ count -> Int in
                    count += 1
                    return count
                }) == 1 {
                    gate.wait()
                }
            })
        let size = 48 << 10
        // Just enough bytes behind the first file to pass the mark.
        let ahead = (PublishQueue.writeOutAt + size - 1) / size
        let outcomes = Mutex<[Int: DownloadError?]>([:])
        loop.queue.sync {
            for index in 0...ahead {
                let item = Finalizer.Item(
                    body: .held(Self.body(index, size: size)), paths: DownloadPaths(target: directory + "/f\(index)"),
                    size: Int64(size),
                    record: CompletedObject(size: Int64(size), etag: "\"e\(index)\"", lastModified: nil),
                    overwrite: false, removesMap: false)
                publisher.publish(item) { failure in outcomes.withLock { $0[index] = failure } }
            }
        }
        // Written out while the first group is held back, and not named yet.
        try await Waiting.until(.seconds(30), "the files after the first to be written out") {
            loop.queue.sync { publisher.writtenAhead } == ahead
        }
        for index in 0...ahead {
            #expect(access(directory + "/f\(index)", F_OK) != 0, "f\(index) appeared before its group's sync")
        }
        gate.signal()
        try await Waiting.until(.seconds(30), "every file to be published") {
            outcomes.withLock { $0.count } == ahead + 1
        }
        #expect(groups.withLock { $0 } == 2)
        for index in 0...ahead {
            let outcome = outcomes.withLock { $0[index] }
            #expect(outcome != nil && outcome! == nil, "f\(index): \(String(describing: outcome))")
            let data = try Data(contentsOf: URL(fileURLWithPath: directory + "/f\(index)"))
            #expect(Array(data) == Self.body(index, size: size), "f\(index)")
        }
    }
}

/// Waits, without holding a thread of Swift's cooperative pool, until `condition` holds: ends as
/// soon as it does; fails after `timeout` (far above what the case takes: milliseconds).
private enum Waiting {
    static func until(_ timeout: Duration, _ what: String, _ condition: @escaping @Sendable () -> Bool) async throws {
        let deadline = Moment.now + timeout
        while !condition() {
            guard Moment.now < deadline else { throw DownloadError(.localIO, "timed out waiting for \(what)") }
            try await Task.sleep(for: .milliseconds(2))
        }
    }
}
