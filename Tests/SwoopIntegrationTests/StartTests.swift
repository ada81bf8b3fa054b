import Foundation
@testable import Swoop
import SwoopTestOrigin
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `Downloader.start` returns at once: the run's preparation (its host's addresses, the first
/// look at the disk, the target's lock) happens off the caller's thread and off the transfer
/// thread, and so does the part file's creation. A disk that does not answer is modelled by a
/// segment map that is a FIFO (reading it blocks until the test opens its other end, as a read
/// from a hung network file system does), and by a gate where the part file is opened.
@Suite("Starting a download", .serialized)
struct StartTests {
    /// A partial download whose segment map is a FIFO with no writer: the first read of it blocks.
    private final class BlockedMap: Sendable {
        let map: String
        private let writer = Mutex<Int32>(-1)

        init(target: String) throws {
            let files = Downloader.workingFiles(of: target)
            map = files.map
            try FileManager.default.createDirectory(
                atPath: (files.part as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try Data(repeating: 7, count: 4096).write(to: URL(fileURLWithPath: files.part))
            guard mkfifo(map, 0o600) == 0 else { throw TestFailure("mkfifo \(map): errno \(errno)") }
        }

        /// Waits until a reader has opened the FIFO (its open blocks until a writer comes): opening
        /// the writing end without blocking succeeds only then.
        func waitForReader(within quietBound: Duration) async throws {
            var deadline = MachineLoad.Deadline(quietBound)
            while true {
                let descriptor = open(map, O_WRONLY | O_NONBLOCK | O_CLOEXEC)
                if descriptor >= 0 {
                    writer.withLock { $0 = descriptor }
                    return
                }
                guard errno == ENXIO else { throw TestFailure("open \(map) for writing: errno \(errno)") }
                if deadline.exceeded() { throw TestFailure("nothing read \(map) within \(deadline.bound())") }
                try await Task.sleep(for: .milliseconds(10))
            }
        }

        /// Lets the blocked read go on: the map is removed (the next look finds none) and the
        /// reader gets an end of file (an empty, untrusted map).
        func release() {
            unlink(map)
            let descriptor = writer.withLock { descriptor in
                defer { descriptor = -1 }
                return descriptor
            }
            if descriptor >= 0 {
                close(descriptor)
            } else {
                // No reader came (or not yet): one that comes later must not block either.
                let reader = open(map, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
                if reader >= 0 { close(reader) }
            }
        }
    }

    /// Calls `downloader.start` on a thread of its own and waits for it to return, at most
    /// `quietBound` (stretched by the machine's load); `nil` if it did not return by then.
    private func startReturning(
        within quietBound: Duration, _ start: @escaping @Sendable () throws -> DownloadTask
    ) async throws -> DownloadTask? {
        let returned = AsyncStream.makeStream(of: Result<DownloadTask, any Error>.self)
        Thread { returned.continuation.yield(Result { try start() }) }.start()
        var deadline = MachineLoad.Deadline(quietBound)
        let timer = Task {
            try? await deadline.sleep()
            returned.continuation.finish()
        }
        defer { timer.cancel() }
        for await outcome in returned.stream { return try outcome.get() }
        return nil
    }

    @Test("start returns while the disk does not answer; the download goes on when it does")
    func returnsWhileTheDiskHangs() async throws {
        try await exclusively {
            let scratch = try Scratch()
            defer { scratch.cleanup() }
            try await withTestOrigin { origin in
                let object = TestObject(size: 4 << 20, seed: 90)
                origin.addObject(object, at: "/s.bin")
                let path = scratch.path("s.bin")
                let blocked = try BlockedMap(target: path)
                defer { blocked.release() }
                try await withDownloader(quickConfiguration()) { downloader in
                    let request = DownloadRequest(url: origin.url("/s.bin"))
                    let task = try await startReturning(within: .seconds(10)) {
                        try downloader.start(request, to: path)
                    }
                    try await blocked.waitForReader(within: .seconds(10))
                    guard let task else {
                        blocked.release()
                        throw TestFailure("start blocked on the segment map")
                    }
                    #expect(task.state == .running)
                    #expect(origin.requests.isEmpty, "no request before the disk has been read")
                    blocked.release()
                    let result = try await task.result()
                    #expect(result.bytes == object.size && result.bytesResumed == 0)
                }
                #expect(try await TestData.sha256(of: path) == object.sha256)
            }
        }
    }

    @Test("a cancel, a pause and a resume that come while the run is prepared reach it")
    func stopWhilePrepared() async throws {
        try await exclusively {
            let scratch = try Scratch()
            defer { scratch.cleanup() }
            try await withTestOrigin { origin in
                let object = TestObject(size: 4 << 20, seed: 91)
                origin.addObject(object, at: "/s.bin")
                try await withDownloader(quickConfiguration()) { downloader in
                    let request = DownloadRequest(url: origin.url("/s.bin"))

                    // Cancelled before its session exists: it ends cancelled, its state deleted.
                    let cancelledPath = scratch.path("c.bin")
                    let cancelledMap = try BlockedMap(target: cancelledPath)
                    defer { cancelledMap.release() }
                    let cancelled = try downloader.start(request, to: cancelledPath)
                    try await cancelledMap.waitForReader(within: .seconds(10))
                    cancelled.cancel()
                    cancelledMap.release()
                    await #expect(throws: DownloadError.self) { try await cancelled.result() }
                    #expect(cancelled.state == .cancelled)
                    #expect(!scratch.exists("c.bin") && !scratch.exists(part: "c.bin") && !scratch.exists(map: "c.bin"))

                    // Paused before its session exists, and resumed before that run has stopped:
                    // the next run starts once it has, and finishes the file.
                    let pausedPath = scratch.path("p.bin")
                    let pausedMap = try BlockedMap(target: pausedPath)
                    defer { pausedMap.release() }
                    let paused = try downloader.start(request, to: pausedPath)
                    try await pausedMap.waitForReader(within: .seconds(10))
                    paused.pause()
                    #expect(paused.state == .paused)
                    pausedMap.release()
                    paused.resume()
                    #expect(paused.state == .running)
                    let result = try await paused.result()
                    #expect(result.bytes == object.size)
                    #expect(try await TestData.sha256(of: pausedPath) == object.sha256)
                }
            }
        }
    }

    @Test("a part file is created off the transfer thread; a stop while it is waits for it, then deletes it")
    func partFileOpensOffTheTransferThread() async throws {
        try await exclusively {
            let scratch = try Scratch()
            defer { scratch.cleanup() }
            try await withTestOrigin { origin in
                let big = TestObject(size: 8 << 20, seed: 92)
                let small = TestObject(size: 10_000, seed: 93)
                origin.addObject(big, at: "/big.bin")
                origin.addObject(small, at: "/small.bin")
                let gate = HoldGate()
                defer { gate.release() }
                var configuration = quickConfiguration()
                configuration.tuning.faults.beforePartFileOpens = { gate.hold($0) }
                try await withDownloader(configuration) { downloader in
                    let bigPath = scratch.path("big.bin")
                    let held = try downloader.start(DownloadRequest(url: origin.url("/big.bin")), to: bigPath)
                    try await gate.waitForEntry(within: .seconds(10), of: "part file opened")
                    #expect(gate.entered == [scratch.part("big.bin")])

                    // A small file (held in memory, published by its own queue) needs neither the
                    // opening queue nor a blocked transfer thread: it finishes meanwhile.
                    let smallDone = Task {
                        try await downloader.download(
                            DownloadRequest(url: origin.url("/small.bin")), to: scratch.path("small.bin"))
                    }
                    var deadline = MachineLoad.Deadline(.seconds(10))
                    while !deadline.exceeded(), !scratch.exists("small.bin") {
                        try await Task.sleep(for: .milliseconds(10))
                    }
                    guard scratch.exists("small.bin") else {
                        gate.release()
                        _ = try? await smallDone.value
                        throw TestFailure("the small file waited for another download's part file")
                    }
                    let smallResult = try await smallDone.value
                    #expect(smallResult.bytes == small.size)
                    #expect(try await TestData.sha256(of: scratch.path("small.bin")) == small.sha256)
                    #expect(held.state == .running)

                    // Cancelled while its part file waits: it ends once the opening is done, and
                    // what it opened goes.
                    held.cancel()
                    gate.release()
                    await #expect(throws: DownloadError.self) { try await held.result() }
                    #expect(held.state == .cancelled)
                    #expect(!scratch.exists("big.bin") && !scratch.exists(part: "big.bin"))
                    #expect(!Downloader.status(of: bigPath).isInUse)

                    // The same target again: nothing of the cancelled run is in the way.
                    let result = try await downloader.download(
                        DownloadRequest(url: origin.url("/big.bin")), to: bigPath)
                    #expect(result.bytes == big.size && result.bytesResumed == 0)
                    #expect(try await TestData.sha256(of: bigPath) == big.sha256)
                }
            }
        }
    }
}
