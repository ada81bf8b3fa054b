/// The remote object as the probe found it: where it is, how big, and which version.
struct RemoteObject: Sendable, Equatable {
    /// The URL every segment is fetched from (after the probe's redirects).
    var url: RemoteURL
    /// The size in bytes, when the server said.
    var size: Int64?
    /// The `ETag` header as sent (`"abc"` or `W/"abc"`).
    var etag: String?
    /// The `Last-Modified` header as sent.
    var lastModified: String?
    /// The server answered a range request with 206.
    var acceptsRanges: Bool

    /// The ETag if it is strong, the only kind `If-Match` can use.
    var strongETag: String? {
        guard let etag, !etag.hasPrefix("W/") else { return nil }
        return etag
    }

    /// The precondition every segment request carries, so a changed object is refused with 412
    /// instead of mixing versions: `If-Match` with a strong ETag, else `If-Unmodified-Since`.
    var precondition: (name: String, value: String)? {
        if let strongETag { return ("If-Match", strongETag) }
        if let lastModified { return ("If-Unmodified-Since", lastModified) }
        return nil
    }
}

/// A range as requested in a `Range` header.
enum RequestedRange: Equatable, Sendable {
    /// `bytes=first-last`.
    case bounded(ByteRange)
    /// `bytes=first-`.
    case from(Int64)

    var headerValue: String {
        switch self {
        case .bounded(let range): "bytes=\(range.lowerBound)-\(range.upperBound - 1)"
        case .from(let offset): "bytes=\(offset)-"
        }
    }

    var lowerBound: Int64 {
        switch self {
        case .bounded(let range): range.lowerBound
        case .from(let offset): offset
        }
    }
}
