/// How an object advertises its entity tag.
public enum ETagStyle: Sendable, Hashable {
    /// `ETag: "<hex>"`, usable for `If-Match` and `If-Range`.
    case strong
    /// `ETag: W/"<hex>"`, which never matches a strong comparison.
    case weak
    /// No `ETag` header.
    case none
}

/// A file the origin serves: `size` bytes of ``Payload`` stream `seed`.
///
/// The validators are derived from (seed, size, ``mtimeOffsetSeconds``), so an object whose seed
/// changes looks like a file that was replaced on the server: new content, new ETag, later
/// Last-Modified.
public struct TestObject: Sendable, Hashable {
    /// The length of the content in bytes.
    public var size: Int64
    /// The ``Payload`` stream the content is taken from.
    public var seed: UInt64
    /// Whether and how the `ETag` header is sent.
    public var etag: ETagStyle
    /// Whether a `Last-Modified` header is sent.
    public var lastModified: Bool
    /// The `Content-Type` header value.
    public var contentType: String = "application/octet-stream"
    /// A `Content-Disposition` header value sent verbatim with the object's 200 and 206
    /// responses (e.g. `attachment; filename="report.pdf"`); none when `nil`.
    public var contentDisposition: String? = nil
    /// More header fields sent verbatim with the object's 200 and 206 responses (a digest the
    /// "server" publishes: `x-goog-hash`, `Repr-Digest`, ...).
    public var headers: [String: String] = [:]
    /// Seconds added to the modification time: another copy of the same bytes, made later (as
    /// the copies on a pool's nodes are). It changes `Last-Modified` and the ETag, as a server's
    /// mtime-size ETag changes, and not the bytes; 0 is the object's own time.
    public var mtimeOffsetSeconds: Int64 = 0

    public init(size: Int64, seed: UInt64 = 1, etag: ETagStyle = .strong, lastModified: Bool = true) {
        precondition(size >= 0, "TestObject size must not be negative")
        self.size = size
        self.seed = seed
        self.etag = etag
        self.lastModified = lastModified
    }

    /// The opaque part of the entity tag (16 hex digits, without quotes).
    var etagOpaque: String {
        var value = PayloadTable.mix(seed ^ PayloadTable.mix(UInt64(bitPattern: size) ^ 0xE7A6_0C5B_D2F1_3149))
        if mtimeOffsetSeconds != 0 {
            value = PayloadTable.mix(value ^ UInt64(bitPattern: mtimeOffsetSeconds))
        }
        let hex = String(value, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }

    /// The exact `ETag` header value it sends, e.g. `"a1b2…"` or `W/"a1b2…"`; nil for `.none`.
    public var etagValue: String? {
        switch etag {
        case .strong: "\"\(etagOpaque)\""
        case .weak: "W/\"\(etagOpaque)\""
        case .none: nil
        }
    }

    /// The modification time in seconds since 1970, whether or not it is sent.
    ///
    /// It grows with the seed (one hour per seed step, plus a seed-dependent jitter under an
    /// hour), so a changed object is always newer. It wraps every 200,000 seeds (≈ 22 years
    /// after 2000-01-01). ``mtimeOffsetSeconds`` is added.
    public var lastModifiedEpochSeconds: Int64 {
        let step = Int64(seed % 200_000)
        let jitter = Int64(PayloadTable.mix(seed ^ 0x1F83_D9AB_FB41_BD6B) % 3600)
        return 946_684_800 + step * 3600 + jitter + mtimeOffsetSeconds
    }

    /// The exact `Last-Modified` header value (an IMF-fixdate) it sends; nil if `lastModified` is false.
    public var lastModifiedValue: String? {
        lastModified ? HTTPDate.format(epochSeconds: lastModifiedEpochSeconds) : nil
    }
}
