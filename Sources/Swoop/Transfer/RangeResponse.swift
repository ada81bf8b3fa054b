import SwoopStore
import SwoopCurl

/// A range response: a segment's (its own bytes written to the segment, its overlap compared with
/// the bytes of the responses next to it) or a bridge's (only overlap, compared with the pieces
/// on both sides of a break; ``AgreementLedger/breaks``). Its head is checked against the request
/// (``ResponseValidator/segment(_:requested:object:)``); a segment's response that carries its own
/// digest, or is checked against the object's, counts only when the digest matches.
final class RangeResponse: ResponseHandler {
    /// The segment filled; `nil`: a bridge.
    let segment: Segment?
    /// The request as the response answers it (fewer bytes, when the server caps them).
    private(set) var request: RangeRequest
    private let store: DownloadStore
    private let object: RemoteObject
    private(set) var failure: DownloadError?
    /// The head was refused for not being under the pinned validators, and how.
    private(set) var refusal: RequestEnd.Refusal?
    /// The head carried the pinned validators: its bytes are the object's.
    private(set) var servedPinned = false
    /// Body bytes received so far.
    private var received: Int64 = 0
    /// The response's digest and the hash of its bytes so far, checked at its end before its bytes
    /// count (see ``DownloadStore/checksEachResponse``).
    private var check: (expected: PublishedDigest, hasher: DigestHasher)?

    init(
        segment: Segment?, request: RangeRequest, store: DownloadStore, object: RemoteObject,
        expecting digest: PublishedDigest?
    ) {
        self.segment = segment
        self.request = request
        self.store = store
        self.object = object
        expect(digest)
    }

    var job: Connection.Job { segment.map { .segment($0, request: request) } ?? .bridge(request) }
    var isTransferring: Bool { segment != nil }

    /// Checks this response's bytes against `digest` before they count, if the store wants it.
    private func expect(_ digest: PublishedDigest?) {
        check = nil
        guard let digest, let segment, store.checksEachResponse, let plan = store.plan, segment.partner == nil else {
            return
        }
        check = (digest, DigestHasher(digest.checksum.algorithm))
        plan.hold(segment)
    }

    func head(_ head: ResponseHead, on connection: Connection) -> BodyDisposition {
        guard let checked = checked(head) else { return .abort }
        request = checked
        if store.checksEachResponse {
            expect(PublishedDigests(head, bodyIsWholeObject: false).preferredForResponse)
        }
        connection.delegate?.connectionWasAnswered(connection)
        return .deliver
    }

    /// The request as `head` answers it, or `nil` when the head is refused (``failure`` and
    /// ``refusal`` say why).
    private func checked(_ head: ResponseHead) -> RangeRequest? {
        do {
            let (verdict, holds) = try ResponseValidator.segment(head, requested: request.sent, object: object)
            guard let answered = request.truncated(to: holds) else {
                failure = .invalidResponse(
                    "the server sent bytes \(holds) for a request of bytes \(request.sent): too few to use "
                        + "(\(object.url))")
                return nil
            }
            let validators = ObjectIdentity.Validators(etag: head.etag, lastModified: head.lastModified)
            store.note(validators, of: request.response)
            switch verdict {
            case .pinned:
                servedPinned = true
            case .other(let validators):
                // A change, or a pool's other node: the source's ValidatorWatch tells, over time.
                refusal = .otherValidators
                failure = DownloadError(
                    .objectChanged,
                    "the server answered with \(validators), not the download's \(object.identity.validators) "
                        + "(\(object.url))")
                return nil
            }
            return answered
        } catch {
            if error.kind == .objectChanged, error.httpStatus == 412 { refusal = .preconditionFailed }
            failure = error
            return nil
        }
    }

    /// The body: its overlap is compared (``DownloadStore/compareOverlap(_:at:response:)``), its
    /// own bytes written to the segment.
    @inline(__always)
    func body(_ body: UnsafeRawBufferPointer) -> BodyVerdict {
        if check != nil { check!.hasher.update(body) }
        let received = self.received
        self.received += Int64(body.count)
        let parts = request.parts(received: received, count: body.count)
        let start = request.sent.lowerBound + received
        if !parts.lead.isEmpty,
            let failure = store.compareOverlap(
                UnsafeRawBufferPointer(rebasing: body[parts.lead]), at: start, response: request.response)
        {
            self.failure = failure
            return .stop
        }
        if !parts.own.isEmpty, let segment {
            let own = UnsafeRawBufferPointer(rebasing: body[parts.own])
            let written = store.write(own, for: segment, requestEnd: request.own.upperBound, response: request.response)
            guard case .more = written else { return written.bodyVerdict(failure: &failure) }
        }
        if !parts.trail.isEmpty,
            let failure = store.compareOverlap(
                UnsafeRawBufferPointer(rebasing: body[parts.trail]), at: start + Int64(parts.trail.lowerBound),
                response: request.response)
        {
            self.failure = failure
            return .stop
        }
        return .take
    }

    func shortfall(location: String) -> DownloadError? {
        if let segment, !segment.isDone, segment.position < min(request.own.upperBound, segment.end) {
            return closedEarly(location)
        }
        if segment == nil, received < request.sent.count { return closedEarly(location) }
        return nil
    }

    private func closedEarly(_ location: String) -> DownloadError {
        .invalidResponse(
            "the server closed the response after \(received) of \(Wording.bytes(request.sent.count)) (\(location))")
    }

    /// A checked response ended: its bytes count if it arrived whole and matches its digest;
    /// otherwise they are fetched again (a mismatch is a bad response, retried).
    func settle(completed: Bool, location: String) -> DownloadError? {
        guard let check, let segment else { return nil }
        self.check = nil
        guard let plan = store.plan else { return nil }
        guard completed else {
            store.rewind(segment)
            return nil
        }
        let computed = check.hasher.finalize()
        guard computed == check.expected.checksum else {
            store.rewind(segment)
            return .invalidResponse(
                "the response for bytes \(request.sent) does not match its \(check.expected.header): it says "
                    + "\(check.expected.written(check.expected.checksum)), "
                    + "its bytes give \(check.expected.written(computed)); fetching them again (\(location))")
        }
        plan.confirm(segment)
        return nil
    }
}
