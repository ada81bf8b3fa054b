/// Which version of a remote object some bytes belong to: its size and its validators.
///
/// One rule answers "is this the same object?" everywhere: a response, a completed file's record,
/// a segment map and (later) a mirror are all compared with ``compare(_:observedIn:)``. The
/// identity also gives the precondition every request carries, so that a server whose object
/// changed answers `412` instead of sending the bytes of another version.
///
/// One download can have several sources, each with its own identity (mirrors do not share
/// ETags); what they must agree on is the size, and the bytes.
package struct ObjectIdentity: Sendable, Equatable {
    /// The size in bytes, when known.
    package var size: Int64?
    /// The `ETag` as sent (`"abc"` or `W/"abc"`).
    package var etag: String?
    /// The `Last-Modified` as sent.
    package var lastModified: String?
    /// The content coding the server stores the object in, as its responses name it
    /// (``ResponseValidator/contentCoding(_:)``: `gzip`, or `identity` for none); `nil` when not
    /// observed (records on disk keep no coding). The bytes are kept as stored, never decoded, so
    /// every response of a download must name the same coding.
    package var contentCoding: String?
    /// A response's validators: the `ETag` and `Last-Modified` as sent.
    package struct Validators: Hashable, Sendable, CustomStringConvertible {
        package var etag: String?
        package var lastModified: String?

        package init(etag: String?, lastModified: String?) {
            self.etag = etag
            self.lastModified = lastModified
        }

        package var description: String {
            switch (etag, lastModified) {
            case (let etag?, _): "ETag \(etag)"
            case (nil, let date?): "Last-Modified \(date)"
            case (nil, nil): "no validators"
            }
        }
    }

    package init(size: Int64?, etag: String? = nil, lastModified: String? = nil, contentCoding: String? = nil) {
        self.size = size
        self.etag = etag
        self.lastModified = lastModified
        self.contentCoding = contentCoding
    }

    /// The validators the download is pinned to (the probe's, or the record's): every byte it
    /// uses was served under them (``ValidatorWatch``).
    package var validators: Validators { Validators(etag: etag, lastModified: lastModified) }

    /// The ETag if it is strong, the only kind `If-Match` can use (RFC 9110 §13.1.1).
    package var strongETag: String? {
        guard let etag, !etag.hasPrefix("W/") else { return nil }
        return etag
    }

    /// The precondition requests for this object carry: `If-Match` with its ETag when it is strong
    /// (RFC 9110 §13.1.1), else `If-Unmodified-Since` with its Last-Modified date, else none. One
    /// value, the pinned one: a pool's other nodes answer `412`, which is asked again elsewhere
    /// (``ValidatorWatch``), so their bytes are never used as this object's.
    package var precondition: (name: String, value: String)? {
        if let strong = strongETag { return ("If-Match", strong) }
        guard let lastModified else { return nil }
        return ("If-Unmodified-Since", lastModified)
    }

    /// Whether this identity alone proves that an object found at another URL is the same one.
    /// Only a strong ETag does; a size or a date does not.
    package var provesIdentityAcrossURLs: Bool { strongETag != nil }

    /// Where an observed identity came from, which decides what a missing validator means.
    package enum Observation {
        /// A `200` or `206`: RFC 9110 §15.3.7 has a 206 carry the validators a 200 would, so a
        /// missing strong ETag is a broken response.
        case representation
        /// A `416`, which carries only the size. Its request carried this identity's precondition,
        /// which a server evaluates before the range (RFC 9110 §13.2.2), so an absent validator
        /// is not a change.
        case unsatisfiedRange
        /// A record on disk (a segment map, a completed file's attribute) from an earlier run.
        case record
    }

    /// The verdict of ``compare(_:observedIn:)``.
    package enum Comparison: Equatable {
        case same
        /// A different object (or version): what differs, e.g. `ETag "a" became "b"`.
        case changed(String)
        /// The observation lacks the strong ETag this identity relies on, so it proves nothing.
        case validatorMissing(String)
    }

    /// Compares what was observed with this identity: sizes and content codings must agree when
    /// both are known; a strong ETag must match exactly; a weak ETag must match weakly; without a
    /// strong ETag, the Last-Modified dates must agree when both are known.
    package func compare(
        _ observed: ObjectIdentity, observedIn observation: Observation = .representation
    ) -> Comparison {
        if let size, let other = observed.size, size != other {
            return .changed("its size \(Wording.bytes(size)) became \(Wording.bytes(other))")
        }
        if let coding = contentCoding, let other = observed.contentCoding, coding != other {
            return .changed("its Content-Encoding \(coding) became \(other)")
        }
        if let expected = strongETag {
            guard let etag = observed.etag else {
                return observation == .representation
                    ? .validatorMissing("the server stopped sending an ETag (expected \(expected))") : .same
            }
            return ETagForm.same(etag, expected) ? .same : .changed("ETag \(expected) became \(etag)")
        }
        if let expected = etag, let other = observed.etag, Self.weakTag(expected) != Self.weakTag(other) {
            return .changed("ETag \(expected) became \(other)")
        }
        if let expected = lastModified, let other = observed.lastModified, expected != other {
            return .changed("Last-Modified \(expected) became \(other)")
        }
        return .same
    }

    /// The opaque part of an entity tag, for weak comparison (RFC 9110 §8.8.3.2).
    fileprivate static func weakTag(_ tag: String) -> Substring {
        tag.hasPrefix("W/") ? tag.dropFirst(2) : Substring(tag)
    }
}

/// The remote object as the probe found it: where it is, which version, and whether it can be
/// fetched in ranges.
package struct RemoteObject: Sendable, Equatable {
    /// The URL every segment is fetched from (after the probe's redirects).
    package var url: RemoteURL {
        get { storage.value.url }
        set { storage.update { $0.url = newValue } }
    }
    /// Size and validators.
    package var identity: ObjectIdentity {
        get { storage.value.identity }
        set { storage.update { $0.identity = newValue } }
    }
    /// The server answered a range request with 206.
    package var acceptsRanges: Bool {
        get { storage.value.acceptsRanges }
        set { storage.update { $0.acceptsRanges = newValue } }
    }
    /// The digests the probe's response published (of the object, and of that response).
    package var digests: PublishedDigests {
        get { storage.value.digests }
        set { storage.update { $0.digests = newValue } }
    }
    /// The probe's `Content-Type`, for a reader of the bytes (not part of the identity).
    package var contentType: String? {
        get { storage.value.contentType }
        set { storage.update { $0.contentType = newValue } }
    }

    private struct Fields: Equatable, Sendable {
        var url: RemoteURL
        var identity: ObjectIdentity
        var acceptsRanges: Bool
        var digests = PublishedDigests()
        var contentType: String?
    }

    /// One retain a copy (``CopyOnWrite``): a download hands its object to every request,
    /// response check, result and message.
    private var storage: CopyOnWrite<Fields>

    package init(
        url: RemoteURL, size: Int64?, etag: String? = nil, lastModified: String? = nil, acceptsRanges: Bool,
        contentCoding: String? = "identity"
    ) {
        storage = CopyOnWrite(
            Fields(
                url: url,
                identity: ObjectIdentity(
                    size: size, etag: etag, lastModified: lastModified, contentCoding: contentCoding),
                acceptsRanges: acceptsRanges))
    }

    package static func == (lhs: RemoteObject, rhs: RemoteObject) -> Bool {
        lhs.storage == rhs.storage
    }

    /// The size in bytes, when the server said.
    package var size: Int64? {
        get { identity.size }
        set { identity.size = newValue }
    }

    /// The `ETag` header as sent.
    package var etag: String? {
        get { identity.etag }
        set { identity.etag = newValue }
    }

    /// The `Last-Modified` header as sent.
    package var lastModified: String? {
        get { identity.lastModified }
        set { identity.lastModified = newValue }
    }

    /// The content coding its bytes are stored in (see ``ObjectIdentity/contentCoding``).
    package var contentCoding: String? {
        get { identity.contentCoding }
        set { identity.contentCoding = newValue }
    }

    package var strongETag: String? { identity.strongETag }
    package var precondition: (name: String, value: String)? { identity.precondition }
}

/// A range as requested in a `Range` header.
package enum RequestedRange: Equatable, Sendable {
    /// `bytes=first-last`.
    case bounded(ByteRange)
    /// `bytes=first-`.
    case from(Int64)

    package var headerValue: String { "bytes=" + spec }

    /// The range without its unit, `first-last` or `first-`: libcurl's `CURLOPT_RANGE`. Joined
    /// from the numbers' own texts, which fit a small string (up to 15 bytes) and allocate nothing,
    /// rather than interpolated (a buffer of its own: 900 instructions, for every request).
    package var spec: String {
        switch self {
        case .bounded(let range): String(range.lowerBound) + "-" + String(range.upperBound - 1)
        case .from(let offset): String(offset) + "-"
        }
    }

    package var lowerBound: Int64 {
        switch self {
        case .bounded(let range): range.lowerBound
        case .from(let offset): offset
        }
    }
}
