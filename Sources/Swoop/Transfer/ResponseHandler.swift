import SwoopStore
import SwoopCurl

/// What one exchange's response is read for: what its head means, where its body goes, and
/// whether it ended as its request asked. A ``Connection`` reads each response through one, made
/// from its ``Connection/Job`` (``Connection/Job/response(store:object:url:expecting:)``), and keeps
/// what is common to every response: the error body, a held body, the meter, the outcome's form.
protocol ResponseHandler: AnyObject {
    /// The job, as the connection's delegate hears of it.
    var job: Connection.Job { get }
    /// Set when the exchange must fail: a head refused, a body that does not fit its request,
    /// bytes that could not be stored.
    var failure: DownloadError? { get }
    /// Fills the object (a segment, the stream), rather than asking about it.
    var isTransferring: Bool { get }
    /// Asks about the object (the probe's requests): a transport failure before any host's answer
    /// may mean a wrong name.
    var asksAboutObject: Bool { get }
    /// The head arrived (with `connection`'s delegate to tell): what becomes of the body.
    func head(_ head: ResponseHead, on connection: Connection) -> BodyDisposition
    /// A piece of the body. `.pause` takes none of it.
    func body(_ body: UnsafeRawBufferPointer) -> BodyVerdict
    /// libcurl saw the response end whole: why it still falls short of its request, if it does.
    func shortfall(location: String) -> DownloadError?
    /// The exchange ended (`completed`: whole, no failure): why its bytes must not count after all.
    func settle(completed: Bool, location: String) -> DownloadError?
}

extension ResponseHandler {
    var isTransferring: Bool { false }
    var asksAboutObject: Bool { false }
    func shortfall(location: String) -> DownloadError? { nil }
    func settle(completed: Bool, location: String) -> DownloadError? { nil }
}

extension Connection.Job {
    /// The handler that reads a response for this job from `url`, whose bytes go to `store` and
    /// must belong to `object`; a segment whose head was already judged (the probe's) checks `digest`.
    func response(
        store: DownloadStore?, object: RemoteObject?, url: RemoteURL?, expecting digest: PublishedDigest?
    ) -> any ResponseHandler {
        switch self {
        case .probe(let requested):
            return ProbeResponse(requested)
        case .sample(let requested):
            return SampleResponse(sample: requested, location: url?.redacted ?? "")
        case .confirmation(let range):
            return SampleResponse(confirmation: range)
        case .whole(let range):
            return WholeResponse(range)
        case .segment(let segment, let request):
            guard let store, let object else { preconditionFailure("a segment's connection has no store") }
            return RangeResponse(segment: segment, request: request, store: store, object: object, expecting: digest)
        case .bridge(let request):
            guard let store, let object else { preconditionFailure("a bridge's connection has no store") }
            return RangeResponse(segment: nil, request: request, store: store, object: object, expecting: nil)
        case .stream:
            guard let store else { preconditionFailure("the stream's connection has no store") }
            return StreamResponse(store: store)
        case .document(let limit):
            return DocumentResponse(limit: limit, location: url?.redacted ?? "")
        }
    }
}

/// The download's first request: its head is the delegate's to decide (the probe), and, unless
/// the delegate gives the connection another job, its body is not wanted.
final class ProbeResponse: ResponseHandler {
    private let requested: RequestedRange

    init(_ requested: RequestedRange) {
        self.requested = requested
    }

    var job: Connection.Job { .probe(requested) }
    var failure: DownloadError? { nil }
    var asksAboutObject: Bool { true }

    func head(_ head: ResponseHead, on connection: Connection) -> BodyDisposition {
        connection.delegate?.connection(connection, didReceiveProbeHead: head, requested: requested) ?? .abort
    }

    func body(_ body: UnsafeRawBufferPointer) -> BodyVerdict { .stop }
}

/// Bytes kept in memory, never stored: a mirror's sample (exactly the range asked for, its head
/// decided as a probe's) or a confirmation (the first bytes of a probe's response, to compare with
/// the bytes held locally).
final class SampleResponse: ResponseHandler {
    let job: Connection.Job
    /// A sample's request, whose head the delegate decides; `nil`: a confirmation, whose head was
    /// the probe's.
    private let requested: RequestedRange?
    /// At most this many bytes; `nil`: a sample of an open range, which no check sends.
    private let limit: Int64?
    /// A sample must bring exactly `limit` bytes; a confirmation takes the first `limit` and stops
    /// the response only if more follow.
    private let exact: Bool
    private(set) var failure: DownloadError?
    private var sampled: [UInt8] = []
    /// Where the bytes come from, for a failure's message.
    private let location: String

    init(sample requested: RequestedRange, location: String) {
        job = .sample(requested)
        self.requested = requested
        if case .bounded(let range) = requested { limit = range.count } else { limit = nil }
        exact = true
        self.location = location
    }

    init(confirmation range: ByteRange) {
        job = .confirmation(range)
        requested = nil
        limit = range.count
        exact = false
        location = ""
    }

    var asksAboutObject: Bool { true }

    /// Hands over the bytes kept.
    func take() -> [UInt8] {
        defer { sampled = [] }
        return sampled
    }

    func head(_ head: ResponseHead, on connection: Connection) -> BodyDisposition {
        guard let requested else { return .abort }
        return connection.delegate?.connection(connection, didReceiveProbeHead: head, requested: requested) ?? .abort
    }

    func body(_ body: UnsafeRawBufferPointer) -> BodyVerdict {
        guard exact else {
            // A response of exactly the range asked for ends by itself and keeps its connection:
            // stopped at its last byte, it was closed, and a re-run of a list of complete files
            // opened a connection for each file's confirmation (2,000 files: 2,000 connects).
            let wanted = max(0, Int(limit ?? 0) - sampled.count)
            sampled.append(contentsOf: body.prefix(wanted))
            return body.count > wanted ? .stop : .take
        }
        guard let limit, Int64(sampled.count + body.count) <= limit else {
            failure = .invalidResponse("the server sent more bytes than asked for (\(location))")
            return .stop
        }
        sampled.append(contentsOf: body)
        return .take
    }

    func shortfall(location: String) -> DownloadError? {
        guard exact, let limit, Int64(sampled.count) != limit else { return nil }
        return .invalidResponse(
            "the server sent \(sampled.count) of the \(Wording.bytes(limit)) asked for (\(location))")
    }
}

/// The probe's response when it carries the whole of a small object (``Connection/keepWhole(_:)``):
/// its bytes kept in memory, so the download can finish without a transfer. A response that ends
/// short or fails is the transfer's to judge, with these bytes (``Connection/replay(_:)``); bytes
/// past the range stop it, as a segment's store stops a response at the segment's end.
final class WholeResponse: ResponseHandler {
    private let range: ByteRange
    private var kept: [UInt8] = []

    init(_ range: ByteRange) {
        self.range = range
        kept.reserveCapacity(Int(range.count))
    }

    var job: Connection.Job { .whole(range) }
    var failure: DownloadError? { nil }
    var asksAboutObject: Bool { true }

    /// Bytes kept so far.
    var count: Int64 { Int64(kept.count) }

    /// Hands over the bytes kept.
    func take() -> [UInt8] {
        defer { kept = [] }
        return kept
    }

    /// Its head was the probe's: never asked for itself.
    func head(_ head: ResponseHead, on connection: Connection) -> BodyDisposition { .abort }

    func body(_ body: UnsafeRawBufferPointer) -> BodyVerdict {
        let room = Int(range.count) - kept.count
        kept.append(contentsOf: body.prefix(room))
        return body.count <= room ? .take : .stop
    }

    func shortfall(location: String) -> DownloadError? {
        guard kept.count < Int(range.count) else { return nil }
        return .invalidResponse(
            "the server closed the response after \(kept.count) of \(Wording.bytes(range.count)) (\(location))")
    }
}

/// A small document, whole and in memory: a `200`'s body of at most `limit` bytes. Any other
/// status is the exchange's failure (no redirect is followed: a store that moves a listing is
/// answered with an error).
final class DocumentResponse: ResponseHandler {
    private let limit: Int
    private let location: String
    private(set) var failure: DownloadError?
    private var document: [UInt8] = []

    init(limit: Int, location: String) {
        self.limit = limit
        self.location = location
    }

    var job: Connection.Job { .document(limit: limit) }
    /// A listing is the first request to its host: a wrong name is said as one.
    var asksAboutObject: Bool { true }

    /// Hands over the document.
    func take() -> [UInt8] {
        defer { document = [] }
        return document
    }

    func head(_ head: ResponseHead, on connection: Connection) -> BodyDisposition {
        guard head.status == 200 else {
            failure = .httpStatus(head, url: location, firstContact: false)
            return .abort
        }
        return .deliver
    }

    func body(_ body: UnsafeRawBufferPointer) -> BodyVerdict {
        guard document.count + body.count <= limit else {
            failure = .invalidResponse("the response from \(location) is larger than \(Wording.bytes(limit))")
            return .stop
        }
        document.append(contentsOf: body)
        return .take
    }
}

/// The whole object in one response (the server ignores ranges), written in order.
final class StreamResponse: ResponseHandler {
    private let store: DownloadStore
    private(set) var failure: DownloadError?

    init(store: DownloadStore) {
        self.store = store
    }

    var job: Connection.Job { .stream }
    var isTransferring: Bool { true }

    /// The stream is the probe's response, taken over after its head: never asked for itself.
    func head(_ head: ResponseHead, on connection: Connection) -> BodyDisposition { .abort }

    @inline(__always)
    func body(_ body: UnsafeRawBufferPointer) -> BodyVerdict {
        guard store.hasRoom(for: body.count) else { return .pause }
        return store.writeStream(body).bodyVerdict(failure: &failure)
    }
}

extension DownloadStore.WriteVerdict {
    /// What the exchange does after a write: go on, stop, or stop failing with `failure`.
    @inline(__always)
    func bodyVerdict(failure: inout DownloadError?) -> BodyVerdict {
        switch self {
        case .more:
            return .take
        case .enough:
            return .stop
        case .failed(let error):
            failure = error
            return .stop
        }
    }
}
