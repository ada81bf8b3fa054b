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
    /// Bytes rewritten in place, oldest first (a later edit wins where they overlap): the size and
    /// every other byte stay, the modification time moves on 61 s per edit, so the ETag (strong
    /// or weak) and `Last-Modified` change as a file server's do. See ``rewritten(blocksAt:)``.
    public var edits: [Edit] = []

    /// `length` bytes at `offset`, rewritten in place with the bytes of ``Payload`` stream `seed`
    /// at the same offsets.
    public struct Edit: Sendable, Hashable {
        public var offset: Int64
        public var length: Int64
        public var seed: UInt64

        public init(offset: Int64, length: Int64, seed: UInt64) {
            precondition(offset >= 0 && length > 0, "an edit covers at least one byte of the object")
            self.offset = offset
            self.length = length
            self.seed = seed
        }
    }

    public init(size: Int64, seed: UInt64 = 1, etag: ETagStyle = .strong, lastModified: Bool = true) {
        precondition(size >= 0, "TestObject size must not be negative")
        self.size = size
        self.seed = seed
        self.etag = etag
        self.lastModified = lastModified
    }

    /// The object with the `blockSize`-byte blocks at `offsets` rewritten in place (a file
    /// patched where it lies, as a database or an `rsync --inplace` does): new bytes there, the
    /// rest as it was, and new validators.
    public func rewritten(blocksAt offsets: [Int64], blockSize: Int64 = 4096) -> TestObject {
        var object = self
        let seed = PayloadTable.mix(self.seed ^ 0x17E5_1ACE ^ UInt64(edits.count + 1))
        for offset in offsets where offset < size {
            object.edits.append(Edit(offset: offset, length: min(blockSize, size - offset), seed: seed))
        }
        return object
    }

    /// Fills `buffer` with the object's bytes from `offset` on.
    public func fill(_ buffer: UnsafeMutableRawBufferPointer, offset: Int64) {
        Payload.fill(buffer, seed: seed, offset: offset)
        let end = offset + Int64(buffer.count)
        for edit in edits where edit.offset < end && edit.offset + edit.length > offset {
            let from = max(offset, edit.offset)
            let to = min(end, edit.offset + edit.length)
            let part = UnsafeMutableRawBufferPointer(rebasing: buffer[Int(from - offset)..<Int(to - offset)])
            Payload.fill(part, seed: edit.seed, offset: from)
        }
    }

    /// The object's `count` bytes from `offset` on.
    public func bytes(offset: Int64, count: Int) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            fill(UnsafeMutableRawBufferPointer(buffer), offset: offset)
            initialized = count
        }
    }

    /// The opaque part of the entity tag (16 hex digits, without quotes).
    var etagOpaque: String {
        var value = PayloadTable.mix(seed ^ PayloadTable.mix(UInt64(bitPattern: size) ^ 0xE7A6_0C5B_D2F1_3149))
        if mtimeOffsetSeconds != 0 {
            value = PayloadTable.mix(value ^ UInt64(bitPattern: mtimeOffsetSeconds))
        }
        for edit in edits {
            value = PayloadTable.mix(value ^ edit.seed ^ UInt64(bitPattern: edit.offset))
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
        return 946_684_800 + step * 3600 + jitter + mtimeOffsetSeconds + 61 * Int64(edits.count)
    }

    /// The exact `Last-Modified` header value (an IMF-fixdate) it sends; nil if `lastModified` is false.
    public var lastModifiedValue: String? {
        lastModified ? HTTPDate.format(epochSeconds: lastModifiedEpochSeconds) : nil
    }
}
