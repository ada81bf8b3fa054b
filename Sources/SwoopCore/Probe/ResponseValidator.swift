/// Checks every response against its request before a byte of its body is written.
///
/// Pure functions of the response head, the request and what the probe learnt, so they can be
/// fuzzed: a response that passes delivers exactly the requested bytes of the same object.
package enum ResponseValidator {
    /// What a probe response says.
    package enum ProbeResult: Equatable {
        /// 206: the body holds `range` of an object of known size.
        case partial(RemoteObject, ByteRange)
        /// 200: the server ignores ranges; the whole object follows (size known or not).
        case whole(RemoteObject)
        /// 416: nothing at the requested offset; the object has `total` bytes, when the server said
        /// (Apache httpd and lighttpd send no `Content-Range` with it).
        case unsatisfiable(total: Int64?, etag: String?)
        /// 3xx with a `Location`.
        case redirect(location: String)
        /// 412: a precondition (a resumed download's `If-Match`) failed: the object changed.
        case preconditionFailed
    }

    package static func probe(
        _ head: ResponseHead, requested: RequestedRange, url: RemoteURL
    ) throws(DownloadError) -> ProbeResult {
        switch head.status {
        case 200 where head.contentRange != nil, 206:
            // A 200 that carries a Content-Range holds what that says, not the whole object
            // (some S3 implementations): read like a 206.
            try checkSingleValued(head, url: url)
            try checkNotMultipart(head, url: url)
            guard let value = head.contentRange, let contentRange = ContentRange(value) else {
                throw .invalidResponse(
                    "the server answered 206 without a valid Content-Range (\(quoted(head.contentRange))) at \(url)")
            }
            guard case .satisfied(let range, let total?) = contentRange else {
                throw .invalidResponse("the server's Content-Range '\(value)' does not give the object's size (\(url))")
            }
            let expectedUpper: Int64
            switch requested {
            case .bounded(let asked): expectedUpper = min(asked.upperBound, total)
            case .from: expectedUpper = total
            }
            // From the first byte asked for: all of it, or less when the server caps its
            // responses (the rest is asked for again).
            guard range.lowerBound == requested.lowerBound, range.upperBound <= expectedUpper, !range.isEmpty else {
                throw .invalidResponse(
                    "the server sent bytes \(range) for a request of \(requested.headerValue) (Content-Range "
                        + "'\(value)', \(url))"
                )
            }
            try checkLength(head, expected: range.count, url: url)
            var object = RemoteObject(
                url: url, size: total, etag: head.etag, lastModified: head.lastModified, acceptsRanges: true,
                contentCoding: contentCoding(head))
            object.contentType = head.contentType
            if PublishedDigests.mayBeIn(head) { object.digests = PublishedDigests(head, bodyIsWholeObject: false) }
            return .partial(object, range)
        case 200:
            try checkSingleValued(head, url: url)
            if let raw = head.value("content-length"), head.contentLength == nil {
                throw .invalidResponse("the server sent an invalid Content-Length '\(raw)' (\(url))")
            }
            let chunked = head.transferEncoding?.lowercased().contains("chunked") ?? false
            let size = chunked ? nil : head.contentLength
            var object = RemoteObject(
                url: url, size: size, etag: head.etag, lastModified: head.lastModified, acceptsRanges: false,
                contentCoding: contentCoding(head))
            object.contentType = head.contentType
            if PublishedDigests.mayBeIn(head) { object.digests = PublishedDigests(head, bodyIsWholeObject: true) }
            return .whole(object)
        case 416:
            try checkSingleValued(head, url: url)
            guard let value = head.contentRange else { return .unsatisfiable(total: nil, etag: head.etag) }
            guard case .unsatisfied(let total)? = ContentRange(value) else {
                let message =
                    "the server answered 416 Range Not Satisfiable with an invalid Content-Range "
                    + "'\(value)' (\(url))"
                throw .invalidResponse(message, httpStatus: 416)
            }
            return .unsatisfiable(total: total, etag: head.etag)
        case 301, 302, 303, 307, 308:
            guard let location = head.location, !location.isEmpty else {
                throw .invalidResponse(
                    "the server answered \(head.status) (a redirect) without a Location header (\(url))",
                    httpStatus: head.status)
            }
            return .redirect(location: location)
        case 412:
            return .preconditionFailed
        default:
            throw .httpStatus(head, url: url.redacted, firstContact: true)
        }
    }

    /// What a segment's response head says about the bytes that follow.
    package enum SegmentVerdict: Equatable {
        /// The validators the download is pinned to: its bytes are the object's.
        case pinned
        /// Other validators: another version, or a pool's other node (``ValidatorWatch`` tells
        /// which over time). Its bytes are not used.
        case other(ObjectIdentity.Validators)
    }

    /// Checks a segment's response framing as a whole: a 206 (or a 200 that says with
    /// `Content-Range` it is partial) for exactly the `requested` bytes of an object of the
    /// planned size, with a matching `Content-Length`, the same content coding, and validators
    /// that are the pinned ones or others (``SegmentVerdict``).
    ///
    /// A response may hold fewer bytes than asked, from the first byte asked for (a store that
    /// caps the bytes per response says so in its `Content-Range`): `holds` is what it holds.
    package static func segment(
        _ head: ResponseHead, requested: ByteRange, object: RemoteObject
    ) throws(DownloadError) -> (verdict: SegmentVerdict, holds: ByteRange) {
        let url = object.url
        switch head.status {
        case 206:
            break
        case 200 where head.contentRange != nil:
            // A partial body under a full-object status (some S3 implementations): what it
            // holds is what its Content-Range says, checked below like a 206's.
            break
        case 412:
            throw DownloadError(
                .objectChanged,
                "the server refused \(object.precondition?.name ?? "the precondition") for bytes \(requested) "
                    + "(412 Precondition Failed at \(url))",
                httpStatus: 412)
        case 200:
            let type = head.contentType.map { " (\($0))" } ?? ""
            let hint = head.contentType?.lowercased().contains("text/html") == true ? ", likely an error page" : ""
            throw .invalidResponse(
                "the server answered a range request with 200\(type) instead of 206\(hint) (\(url))", httpStatus: 200)
        case 416:
            throw DownloadError(
                .objectChanged,
                "the server no longer has bytes \(requested) (416 Range Not Satisfiable); the object shrank (\(url))",
                httpStatus: 416)
        default:
            throw .httpStatus(head, url: url.redacted, firstContact: false)
        }
        try checkSingleValued(head, url: url)
        try checkNotMultipart(head, url: url)
        guard let value = head.contentRange, let contentRange = ContentRange(value) else {
            throw .invalidResponse(
                "the server answered \(head.status) without a valid Content-Range (\(quoted(head.contentRange))) for "
                    + "bytes \(requested) (\(url))"
            )
        }
        guard case .satisfied(let range, let total) = contentRange, range.lowerBound == requested.lowerBound,
            range.upperBound <= requested.upperBound, !range.isEmpty
        else {
            throw .invalidResponse(
                "the server's Content-Range '\(value)' does not match the requested bytes \(requested) (\(url)); "
                    + "its bytes are not used")
        }
        if let size = object.size, total != size {
            throw DownloadError(
                .objectChanged,
                "the object's size changed from \(size) to \(total.map(String.init) ?? "unknown") bytes (Content-Range "
                    + "'\(value)', \(url))"
            )
        }
        try checkLength(head, expected: range.count, url: url)
        let verdict = try checkIdentity(head, object: object)
        try checkDigests(head, object: object)
        return (verdict, range)
    }

    /// A whole-object digest the probe saw, with another value now: another version.
    package static func checkDigests(_ head: ResponseHead, object: RemoteObject) throws(DownloadError) {
        guard !object.digests.object.isEmpty, PublishedDigests.mayBeIn(head) else { return }
        if let change = object.digests.change(in: PublishedDigests(head, bodyIsWholeObject: false)) {
            throw DownloadError(.objectChanged, "the object changed on the server: \(change) (\(object.url))")
        }
    }

    /// The response's validators against the pinned ones (``ObjectIdentity/compare(_:observedIn:)``).
    /// A changed content coding is another object whatever the validators, and a missing strong
    /// ETag a broken response.
    package static func checkIdentity(
        _ head: ResponseHead, object: RemoteObject
    ) throws(DownloadError) -> SegmentVerdict {
        let observed = ObjectIdentity(
            size: nil, etag: head.etag, lastModified: head.lastModified, contentCoding: contentCoding(head))
        let identity = object.identity
        if let coding = identity.contentCoding, let other = observed.contentCoding, coding != other {
            throw DownloadError(
                .objectChanged,
                "the object changed on the server: its Content-Encoding \(coding) became \(other) "
                    + "(\(object.url))")
        }
        switch identity.compare(observed) {
        case .same:
            return .pinned
        case .validatorMissing(let what):
            throw .invalidResponse("\(what) at \(object.url)")
        case .changed:
            return .other(observed.validators)
        }
    }

    /// The content coding a response names: its `Content-Encoding` codings, lowercased, in
    /// order, without `identity`; `identity` when it names none. Swoop asks for
    /// `Accept-Encoding: identity`, so a coding here is how the server stores the object (a
    /// `.tar.gz` under Apache's `AddEncoding`, an S3 object put with `ContentEncoding`): its
    /// ranges are ranges of those stored bytes, which are saved as they are.
    package static func contentCoding(_ head: ResponseHead) -> String {
        guard head.fields.contains(where: { ResponseHead.isNamed($0.name, "content-encoding") }) else {
            return "identity"
        }
        let codings = head.values("content-encoding")
            .flatMap { $0.split(separator: ",") }
            .map { $0.trimmingWhitespace.lowercased() }
            .filter { !$0.isEmpty && $0 != "identity" }
        return codings.isEmpty ? "identity" : codings.joined(separator: ", ")
    }

    /// We ask for one range; a multipart body would be written as if it were file bytes.
    private static func checkNotMultipart(_ head: ResponseHead, url: RemoteURL) throws(DownloadError) {
        let multipart = "multipart/".utf8
        let isMultipart = head.fields.contains { field in
            ResponseHead.isNamed(field.name, "content-type") && field.value.utf8.count >= multipart.count
                && zip(field.value.utf8, multipart).allSatisfy { ASCIIBytes.lowercased($0) == $1 }
        }
        if isMultipart {
            throw .invalidResponse(
                "the server sent a multipart body (\(head.values("content-type").joined(separator: ", "))) for a "
                    + "single range (\(url))"
            )
        }
    }

    private static func checkSingleValued(_ head: ResponseHead, url: RemoteURL) throws(DownloadError) {
        for name in singleValued where head.isConflicting(name) {
            throw .invalidResponse(
                "the server sent conflicting \(name) headers (\(head.values(name).joined(separator: ", "))) at \(url)")
        }
    }

    /// The fields a response may repeat only with one value.
    private static let singleValued = ["content-range", "content-length", "etag", "content-type"]

    private static func checkLength(_ head: ResponseHead, expected: Int64, url: RemoteURL) throws(DownloadError) {
        if let raw = head.value("content-length") {
            guard let length = head.contentLength, length == expected else {
                throw .invalidResponse(
                    "the server's Content-Length \(raw) does not match its Content-Range (\(Wording.bytes(expected))) "
                        + "at \(url)"
                )
            }
        }
    }

    private static func quoted(_ value: String?) -> String {
        value.map { "'\($0)'" } ?? "none"
    }
}
