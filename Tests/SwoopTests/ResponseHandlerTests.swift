import Testing

@testable import Swoop
@testable import SwoopStore
@testable import SwoopCurl

/// The response handlers a connection reads each response through, built without a server: heads
/// and bodies handed in as libcurl would, against a real store and plan.
@Suite("Response handlers")
struct ResponseHandlerTests {
    /// Counts the answers a range response reports.
    private final class Recorder: ConnectionDelegate {
        var answered = 0
        func connectionWasAnswered(_ connection: Connection) { answered += 1 }
        func connection(_ connection: Connection, didFinish job: Connection.Job, with outcome: Connection.Outcome) {}
    }

    private static let size: Int64 = 4 << 20

    /// A range response for the first MiB of a 4 MiB object whose ETag is `"v1"`, with the store
    /// and plan behind it, and a connection whose delegate records answers.
    private final class Fixture {
        let loop: TransferLoop
        let recorder = Recorder()
        let connection: Connection
        let store: DownloadStore
        let plan: SegmentScheduler
        let object: RemoteObject
        let segment: Segment

        init() throws {
            loop = try #require(TransferLoop(budget: ConnectionBudget(total: 4, perHost: 4)))
            connection = Connection(id: 0, loop: loop, delegate: recorder)
            plan = SegmentScheduler(objectSize: size, resuming: nil, minimumSegmentSize: 1 << 20)
            store = DownloadStore(
                sink: DiscardSink(loop: InlineExecutor()), plan: plan, bytesResumed: 0, checkpoint: nil,
                checkpointInterval: nil, counters: DownloadCounters(), startedAt: .now)
            object = RemoteObject(
                url: try RemoteURL("http://example.com/a.bin"), size: size, etag: "\"v1\"", lastModified: nil,
                acceptsRanges: true)
            segment = try #require(plan.reserve(ByteRange(0, 1 << 20), ownerID: 0))
        }

        func response(for range: ByteRange) -> RangeResponse {
            RangeResponse(
                segment: segment, request: RangeRequest(own: range), store: store, object: object, expecting: nil)
        }

        func head(_ status: Int, range: String?, etag: String = "\"v1\"") -> ResponseHead {
            var fields = [(name: "ETag", value: etag)]
            if let range { fields.append((name: "Content-Range", value: range)) }
            return ResponseHead(status: status, fields: fields)
        }

        func shutdown() async { await loop.shutdown() }
    }

    /// `count` bytes of body handed in as `pieces` callbacks; the last verdict.
    private func feed(_ response: some ResponseHandler, count: Int, pieces: Int = 4) -> BodyVerdict {
        let bytes = [UInt8](repeating: 7, count: count)
        var verdict = BodyVerdict.take
        let step = max(1, count / pieces)
        var offset = 0
        while offset < count, verdict == .take {
            let end = min(count, offset + step)
            verdict = bytes[offset..<end].withUnsafeBytes { response.body($0) }
            offset = end
        }
        return verdict
    }

    @Test("a range response that matches its request is delivered, answered, stored and whole")
    func wholeRange() async throws {
        let fixture = try Fixture()
        let response = fixture.response(for: ByteRange(0, 1 << 20))
        #expect(response.head(fixture.head(206, range: "bytes 0-1048575/4194304"), on: fixture.connection) == .deliver)
        #expect(fixture.recorder.answered == 1)
        #expect(feed(response, count: 1 << 20) == .take)
        #expect(response.failure == nil)
        #expect(response.shortfall(location: "x") == nil)
        #expect(fixture.segment.isDone, "every byte of the segment was written to the plan")
        #expect(response.isTransferring)
        await fixture.shutdown()
    }

    @Test("a response that stops early falls short, and says after how many bytes")
    func closedEarly() async throws {
        let fixture = try Fixture()
        let response = fixture.response(for: ByteRange(0, 1 << 20))
        _ = response.head(fixture.head(206, range: "bytes 0-1048575/4194304"), on: fixture.connection)
        #expect(feed(response, count: 300_000) == .take)
        let shortfall = try #require(response.shortfall(location: "http://example.com/a.bin"))
        #expect(shortfall.kind == .invalidResponse)
        #expect(shortfall.reason.contains("after 300000 of 1048576 bytes"), "\(shortfall.reason)")
        await fixture.shutdown()
    }

    @Test("a server that caps the range: the request is what the response holds")
    func cappedRange() async throws {
        let fixture = try Fixture()
        let response = fixture.response(for: ByteRange(0, 1 << 20))
        #expect(response.head(fixture.head(206, range: "bytes 0-524287/4194304"), on: fixture.connection) == .deliver)
        if case .segment(_, let request) = response.job {
            #expect(request.own == ByteRange(0, 512 << 10))
        } else {
            Issue.record("the job is a segment's")
        }
        #expect(feed(response, count: 512 << 10) == .take)
        #expect(response.shortfall(location: "x") == nil, "the capped response is whole")
        await fixture.shutdown()
    }

    @Test("heads refused: a 200 to a range, other bytes, another ETag, a 412")
    func refusedHeads() async throws {
        let fixture = try Fixture()
        let wholeObject = fixture.response(for: ByteRange(0, 1 << 20))
        #expect(wholeObject.head(fixture.head(200, range: nil), on: fixture.connection) == .abort)
        #expect(wholeObject.failure?.kind == .invalidResponse)

        let elsewhere = fixture.response(for: ByteRange(0, 1 << 20))
        #expect(elsewhere.head(fixture.head(206, range: "bytes 4096-8191/4194304"), on: fixture.connection) == .abort)
        #expect(elsewhere.failure?.reason.contains("does not match the requested bytes") == true)

        let changed = fixture.response(for: ByteRange(0, 1 << 20))
        let head = fixture.head(206, range: "bytes 0-1048575/4194304", etag: "\"v2\"")
        #expect(changed.head(head, on: fixture.connection) == .abort)
        #expect(changed.failure?.kind == .objectChanged)
        #expect(changed.refusal == .otherValidators, "another ETag is refused; the source's watch decides what follows")

        let precondition = fixture.response(for: ByteRange(0, 1 << 20))
        #expect(precondition.head(fixture.head(412, range: nil), on: fixture.connection) == .abort)
        #expect(precondition.failure?.httpStatus == 412)
        #expect(precondition.refusal == .preconditionFailed)
        #expect(fixture.recorder.answered == 0, "no refused head counts as the server's answer to the transfer")
        await fixture.shutdown()
    }

    @Test("a mirror's sample takes exactly its range: more is refused, fewer falls short")
    func sample() async throws {
        let exact = SampleResponse(sample: .bounded(ByteRange(0, 1000)), location: "http://m/a")
        #expect(feed(exact, count: 1000) == .take)
        #expect(exact.shortfall(location: "x") == nil)
        #expect(exact.take().count == 1000)

        let over = SampleResponse(sample: .bounded(ByteRange(0, 1000)), location: "http://m/a")
        #expect(feed(over, count: 1001, pieces: 1) == .stop)
        #expect(over.failure?.reason.contains("more bytes than asked for (http://m/a)") == true)

        let short = SampleResponse(sample: .bounded(ByteRange(0, 1000)), location: "http://m/a")
        #expect(feed(short, count: 600) == .take)
        #expect(short.shortfall(location: "http://m/a")?.reason.contains("sent 600 of the 1000 bytes") == true)
    }

    @Test("a confirmation keeps the first bytes it needs, then stops the response")
    func confirmation() {
        let response = SampleResponse(confirmation: ByteRange(4096, 5120))
        #expect(feed(response, count: 4000, pieces: 2) == .stop)
        #expect(response.take().count == 1024)
        #expect(response.shortfall(location: "x") == nil, "a confirmation's response is cut on purpose")
        #expect(response.asksAboutObject)
    }
}
