import Crypto
import SwoopCore

/// The segment map (`DIR/.swoop/H.map`): which chunks of the part file are durably on disk, and
/// which object they belong to.
///
/// Binary, little-endian, self-checking:
///
/// ```
/// magic "SWOOPMAP" | version u16 | flags u16 | object size i64 | chunk size i64
/// | ETag (u16 length + UTF-8) | Last-Modified (u16 + UTF-8) | URL (u16 + UTF-8)
/// | bitmap length u32 | bitmap | [CRC runs, when flags bit 0 is set]
/// | SHA-256 of everything before (32 bytes)
///
/// CRC runs: algorithm (u16 length + name) | count u32 | count x (start i64, end i64, crc u64)
/// ```
///
/// Flags bit 1 marked a map whose bytes an earlier Swoop took under other validators too (a pool's
/// "variants", accepted when a few KiB of overlap agreed): such a map is not trusted
/// (``SegmentMapError/bytesUnderOtherValidators``), since a sample of bytes cannot show the rest agree.
///
/// The URL is stored without credentials, query or fragment. Nothing else about the request
/// (headers, tokens) is stored.
package struct SegmentMap: Equatable, Sendable {
    package static let magic: [UInt8] = Array("SWOOPMAP".utf8)
    package static let currentVersion: UInt16 = 1

    package var objectSize: Int64
    package var chunkSize: Int64
    package var etag: String?
    package var lastModified: String?
    /// The source URL, redacted.
    package var url: String
    package var chunks: ChunkSet
    /// The CRCs of stretches already checked (a download verified by a CRC), so a resumed run
    /// does not read them again.
    package var crcRuns: CRCRuns?

    package init(
        objectSize: Int64, chunkSize: Int64, etag: String? = nil, lastModified: String? = nil, url: String,
        chunks: ChunkSet, crcRuns: CRCRuns? = nil
    ) {
        self.objectSize = objectSize
        self.chunkSize = chunkSize
        self.etag = etag
        self.lastModified = lastModified
        self.url = url
        self.chunks = chunks
        self.crcRuns = crcRuns
    }

    package var layout: ChunkLayout { ChunkLayout(objectSize: objectSize, chunkSize: chunkSize) }

    /// Bytes of the object already complete.
    package var completedBytes: Int64 {
        objectSize - missingRanges.reduce(0) { $0 + $1.count }
    }

    package var missingRanges: [ByteRange] {
        chunks.missingRuns.map { layout.byteRange(ofChunks: $0) }
    }

    /// The complete stretches of the object, in order.
    package var completeRanges: [ByteRange] {
        var ranges: [ByteRange] = []
        var cursor: Int64 = 0
        for missing in missingRanges {
            if missing.lowerBound > cursor { ranges.append(ByteRange(cursor, missing.lowerBound)) }
            cursor = missing.upperBound
        }
        if cursor < objectSize { ranges.append(ByteRange(cursor, objectSize)) }
        return ranges
    }

    /// The object the map's bytes belong to: every byte was served under these validators.
    package var identity: ObjectIdentity {
        ObjectIdentity(size: objectSize, etag: etag, lastModified: lastModified)
    }

    package func encoded() -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(96 + url.utf8.count + chunks.count / 8)
        out += Self.magic
        out.appendLittleEndian(Self.currentVersion)
        out.appendLittleEndian(UInt16(crcRuns == nil ? 0 : Self.hasCRCRuns))
        out.appendLittleEndian(objectSize)
        out.appendLittleEndian(chunkSize)
        out.appendString(etag ?? "")
        out.appendString(lastModified ?? "")
        out.appendString(url)
        let bitmap = chunks.bitmapBytes
        out.appendLittleEndian(UInt32(bitmap.count))
        out += bitmap
        if let crcRuns {
            out.appendString(crcRuns.algorithm.rawValue)
            out.appendLittleEndian(UInt32(crcRuns.runs.count))
            for run in crcRuns.runs {
                out.appendLittleEndian(run.range.lowerBound)
                out.appendLittleEndian(run.range.upperBound)
                out.appendLittleEndian(run.crc)
            }
        }
        out += Array(SHA256.hash(data: out))
        return out
    }

    /// Decodes and checks a map; every way it can be wrong is a distinct error.
    package static func decode(_ bytes: [UInt8]) throws(SegmentMapError) -> SegmentMap {
        guard bytes.count >= magic.count + 4 + 32 else { throw .truncated }
        guard Array(bytes.prefix(magic.count)) == magic else { throw .notASegmentMap }
        var reader = ByteReader(bytes: bytes, offset: magic.count)
        let version: UInt16 = try reader.read()
        guard version == currentVersion else { throw .unsupportedVersion(version) }
        let digest = Array(SHA256.hash(data: bytes[..<(bytes.count - 32)]))
        guard digest == Array(bytes.suffix(32)) else { throw .checksumMismatch }
        reader.end = bytes.count - 32
        let flags: UInt16 = try reader.read()
        guard flags & Self.hadVariants == 0 else { throw .bytesUnderOtherValidators }
        guard flags & ~Self.hasCRCRuns == 0 else { throw .malformed("unknown flags \(flags)") }
        let objectSize: Int64 = try reader.read()
        let chunkSize: Int64 = try reader.read()
        // Bounds that keep every later computation (chunk counts, offsets) far from overflow.
        guard objectSize >= 0, objectSize <= 1 << 56, chunkSize > 0, chunkSize <= 1 << 40 else {
            throw .malformed("object size \(objectSize), chunk size \(chunkSize)")
        }
        let etag = try reader.readString()
        let lastModified = try reader.readString()
        let url = try reader.readString()
        let bitmapLength: UInt32 = try reader.read()
        let layout = ChunkLayout(objectSize: objectSize, chunkSize: chunkSize)
        let bitmap = try reader.readBytes(Int(bitmapLength))
        var crcRuns: CRCRuns?
        if flags & Self.hasCRCRuns != 0 {
            let name = try reader.readString()
            let count: UInt32 = try reader.read()
            guard Int(count) <= (reader.end - reader.offset) / 24 else { throw .truncated }
            var runs: [CRCRuns.Run] = []
            for _ in 0..<count {
                let start: Int64 = try reader.read()
                let end: Int64 = try reader.read()
                let crc: UInt64 = try reader.read()
                guard start >= 0, start < end, end <= objectSize else { throw .malformed("CRC run \(start)..<\(end)") }
                runs.append(CRCRuns.Run(range: ByteRange(start, end), crc: crc))
            }
            guard let algorithm = Checksum.Algorithm(rawValue: name),
                let decoded = CRCRuns(algorithm: algorithm, runs: runs)
            else {
                throw .malformed("CRC runs of '\(name)'")
            }
            crcRuns = decoded
        }
        guard reader.offset == reader.end else { throw .malformed("\(reader.end - reader.offset) trailing bytes") }
        guard let chunks = ChunkSet(count: layout.chunkCount, bitmap: bitmap) else {
            throw .malformed(
                "bitmap of \(Wording.bytes(bitmapLength)) for \(Wording.count(layout.chunkCount, "chunk"))")
        }
        return SegmentMap(
            objectSize: objectSize, chunkSize: chunkSize, etag: etag.isEmpty ? nil : etag,
            lastModified: lastModified.isEmpty ? nil : lastModified, url: url, chunks: chunks, crcRuns: crcRuns)
    }

    private static let hasCRCRuns: UInt16 = 1
    /// See the type's comment: no longer written.
    private static let hadVariants: UInt16 = 2
}

/// Why a segment map was not trusted.
package enum SegmentMapError: Error, Equatable, CustomStringConvertible {
    case truncated
    case notASegmentMap
    case unsupportedVersion(UInt16)
    case checksumMismatch
    case malformed(String)
    /// An earlier Swoop took some of its bytes under other validators (see ``SegmentMap``).
    case bytesUnderOtherValidators

    package var description: String {
        switch self {
        case .truncated: "it is truncated"
        case .notASegmentMap: "it is not a Swoop segment map"
        case .unsupportedVersion(let version):
            "it is from another version of Swoop (format \(version), this one reads \(SegmentMap.currentVersion))"
        case .checksumMismatch: "it is corrupt (checksum mismatch)"
        case .bytesUnderOtherValidators:
            "an earlier Swoop took some of its bytes under other validators, which this one does not trust"
        case .malformed(let detail): "it is malformed (\(detail))"
        }
    }
}

private struct ByteReader {
    package let bytes: [UInt8]
    package var offset: Int
    package var end: Int

    package init(bytes: [UInt8], offset: Int) {
        self.bytes = bytes
        self.offset = offset
        self.end = bytes.count
    }

    package mutating func read<T: FixedWidthInteger>() throws(SegmentMapError) -> T {
        let size = MemoryLayout<T>.size
        guard end - offset >= size else { throw .truncated }
        var value: T = 0
        for index in 0..<size {
            value |= T(truncatingIfNeeded: bytes[offset + index]) << (8 * index)
        }
        offset += size
        return value
    }

    package mutating func readBytes(_ count: Int) throws(SegmentMapError) -> ArraySlice<UInt8> {
        guard count >= 0, end - offset >= count else { throw .truncated }
        defer { offset += count }
        return bytes[offset..<(offset + count)]
    }

    package mutating func readString() throws(SegmentMapError) -> String {
        let length: UInt16 = try read()
        let raw = try readBytes(Int(length))
        guard let string = String(validating: raw, as: UTF8.self) else { throw .malformed("invalid UTF-8") }
        return string
    }
}

extension [UInt8] {
    fileprivate mutating func appendLittleEndian<T: FixedWidthInteger>(_ value: T) {
        for index in 0..<MemoryLayout<T>.size {
            append(UInt8(truncatingIfNeeded: value >> (8 * index)))
        }
    }

    /// A u16 length and the UTF-8 bytes, cut at a character boundary if longer than 65 535.
    fileprivate mutating func appendString(_ string: String) {
        var text = Substring(string)
        while text.utf8.count > Int(UInt16.max) { text.removeLast() }
        let utf8 = Array(text.utf8)
        appendLittleEndian(UInt16(utf8.count))
        self += utf8
    }
}

extension SegmentScheduler {
    /// The plan for an object of `objectSize` bytes: everything, or what `map` says is missing
    /// when resuming (on the map's chunk layout).
    package convenience init(objectSize: Int64, resuming map: SegmentMap?, minimumSegmentSize: Int64) {
        self.init(
            layout: map?.layout ?? ChunkLayout(objectSize: objectSize),
            missing: map?.missingRanges ?? [ByteRange(0, objectSize)], minimumSegmentSize: minimumSegmentSize)
    }
}
