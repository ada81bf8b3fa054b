import Foundation
import Logging
import Swoop
import SwoopTestOrigin
import Synchronization
import Testing

/// An object that arrives whole in the probe's response goes without the transfer's machine
/// (`TransferRun+Single`) unless that response needs one: these are the cases where it does, each
/// with what the machine would have done had it been there from the start. Objects of 300 KiB and
/// less come whole in the probe's response (it asks for the first MiB). Each case runs with a
/// larger object, which the transfer reads as its first response, and a small one (at most 64 KiB),
/// which the probe keeps whole in memory (`DownloadSession+Whole`) and hands to a transfer only
/// when its response is troubled: the same requests either way.
@Suite("One response with the whole object")
struct SingleResponseTests {
    /// A size the transfer reads, and one kept whole.
    static let sizes: [Int64] = [300_000, 60_000]

    @Test("a small object that arrives whole and soon is one request, finished without a transfer")
    func keptWhole() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            let object = TestObject(size: 60_000, seed: 60)
            origin.addObject(object, at: "/small.bin")
            let last = Mutex<DownloadProgress?>(nil)
            let log = LogRecord()
            let downloader = Downloader(
                configuration: quickConfiguration(connections: 4),
                logger: Logger(label: "test") { _ in RecordingLogHandler(log) })
            let result: DownloadResult
            do {
                result = try await downloader.download(
                    DownloadRequest(url: origin.url("/small.bin")), to: scratch.path("small.bin")
                ) { progress in last.withLock { $0 = progress } }
                await downloader.shutdown()
            } catch {
                await downloader.shutdown()
                throw error
            }
            let said = log.messages
            #expect(said.contains { $0.hasPrefix("the object arrived whole in the probe's response") }, "\(said)")
            #expect(!said.contains("request ended"), "a transfer heard the response: \(said)")
            #expect(try await TestData.sha256(of: scratch.path("small.bin")) == object.sha256)
            #expect(origin.requests.count == 1, "\(origin.requests)")
            #expect(result.requests == 1 && result.retries == 0 && result.objectChanges == 0)
            #expect(result.bytes == object.size && result.bytesReceived == object.size)
            #expect(result.etag == object.etagValue)
            let final = try #require(last.withLock { $0 })
            #expect(final.bytesDone == object.size && final.totalBytes == object.size)
            #expect(!FileManager.default.fileExists(atPath: scratch.path(".swoop")), "nothing left to resume")
        }
    }

    @Test(
        "a whole-object response cut partway goes on from where it broke: nothing fetched twice",
        arguments: SingleResponseTests.sizes)
    func cutResponseResumes(size: Int64) async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            let object = TestObject(size: size, seed: 61)
            origin.addObject(object, at: "/cut.bin")
            let cut = size / 3
            origin.updateFaults { $0.drops = .init(afterBytes: cut, firstRequests: 1) }
            let result = try await withDownloader(quickConfiguration(connections: 4)) {
                try await $0.download(DownloadRequest(url: origin.url("/cut.bin")), to: scratch.path("cut.bin"))
            }
            #expect(try await TestData.sha256(of: scratch.path("cut.bin")) == object.sha256)
            let log = origin.requests
            #expect(log.first?.faultApplied == "drop" && log.first?.bodyBytesSent == cut, "\(log)")
            #expect(result.retries >= 1)
            // The rest, and at most a few KiB before it to compare with the bytes held.
            let sent = log.reduce(0) { $0 + $1.bodyBytesSent }
            #expect(sent <= object.size + 8192, "bytes sent \(sent) for an object of \(object.size): \(log)")
            #expect(log.dropFirst().allSatisfy { $0.header("if-match") == object.etagValue }, "\(log)")
        }
    }

    @Test(
        "a whole-object response that lasts 100 ms or more is confirmed by one request after it",
        arguments: [256 << 10, 60_000] as [Int64])
    func slowResponseConfirmed(size: Int64) async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            let object = TestObject(size: size, seed: 62)
            origin.addObject(object, at: "/slow.bin")
            let result = try await ResponseHold(origin: origin, bytes: size * 3 / 8)
                .download("/slow.bin", to: scratch.path("slow.bin"))
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

    @Test(
        "the object replaced while its one response is read: the confirmation sees it, the new version is fetched",
        arguments: [256 << 10, 60_000] as [Int64])
    func replacedDuringResponse(size: Int64) async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            let object = TestObject(size: size, seed: 63)
            origin.addObject(object, at: "/moving.bin")
            // The response under way goes on with the bytes it began with (a file replaced by a rename).
            let held = size * 3 / 8
            origin.updateFaults { $0.changeAfterBodyBytes = .init(path: "/moving.bin", bytes: held) }
            let result = try await ResponseHold(origin: origin, bytes: held)
                .download("/moving.bin", to: scratch.path("moving.bin"))
            let now = try #require(origin.object(at: "/moving.bin"))
            #expect(now.seed == object.seed + 1)
            #expect(try await TestData.sha256(of: scratch.path("moving.bin")) == now.sha256, "the new version")
            #expect(result.objectChanges == 1)
            #expect(result.etag == now.etagValue)
        }
    }
}

/// The messages a downloader logged, at every level.
private final class LogRecord: Sendable {
    private let recorded = Mutex<[String]>([])
    var messages: [String] { recorded.withLock { $0 } }
    func append(_ message: String) { recorded.withLock { $0.append(message) } }
}

private struct RecordingLogHandler: LogHandler {
    let record: LogRecord
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    init(_ record: LogRecord) {
        self.record = record
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        record.append("\(event.message)")
    }
}

/// Holds the download's response at `bytes` of its body (the origin sends the loopback client no
/// more) until the download has shown progress, then for `quiet` more, then lets it go on: the
/// response lasts longer than `quiet` from the moment the download began reading it, however late
/// a loaded machine runs either side (a paced response can arrive in one burst at a client that
/// was not scheduled while it was sent).
private final class ResponseHold: Sendable {
    let origin: TestOrigin
    let quiet: Duration
    private let seen = Mutex<ContinuousClock.Instant?>(nil)

    init(origin: TestOrigin, bytes: Int64, quiet: Duration = .milliseconds(300)) {
        self.origin = origin
        self.quiet = quiet
        origin.updateFaults { $0.clientBodyLimits = ["127.0.0.1": bytes] }
    }

    /// Downloads `path` from the origin to `target` (4 connections; a stall only after a minute)
    /// while a thread of its own lifts the hold `quiet` after the download's first progress.
    func download(_ path: String, to target: String) async throws -> DownloadResult {
        async let released = waitThenAct(
            within: .seconds(60), every: .milliseconds(5),
            until: { [self] in seen.withLock { $0.map { ContinuousClock.now - $0 >= quiet } ?? false } },
            then: { [origin] in origin.updateFaults { $0.clientBodyLimits = [:] } })
        let result = try await withDownloader(quickConfiguration(connections: 4, stall: .seconds(60))) { downloader in
            try await downloader.download(DownloadRequest(url: origin.url(path)), to: target) { [self] progress in
                guard progress.bytesDone > 0 else { return }
                seen.withLock { $0 = $0 ?? .now }
            }
        }
        #expect(try await released, "the download showed no progress while held")
        return result
    }
}
