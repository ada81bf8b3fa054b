import Crypto
import SwoopTestSupport
import Testing
@testable import Swoop
@testable import SwoopStore

/// The segment map format, written independently of `SegmentMap.encoded()` so each field can be
/// set to anything (with a correct checksum) and the decoder's own checks reached.
struct RawSegmentMap {
    var magic = Array("SWOOPMAP".utf8)
    var version: UInt16 = 1
    var flags: UInt16 = 0
    var objectSize: Int64
    var chunkSize: Int64
    var etag: [UInt8] = []
    var lastModified: [UInt8] = []
    var url: [UInt8] = []
    var bitmapLength: UInt32?
    var bitmap: [UInt8] = []
    var trailing: [UInt8] = []

    static func littleEndian<T: FixedWidthInteger>(_ value: T) -> [UInt8] {
        (0..<MemoryLayout<T>.size).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) }
    }

    static func string(_ bytes: [UInt8]) -> [UInt8] { littleEndian(UInt16(bytes.count)) + bytes }

    /// Everything before the checksum.
    var body: [UInt8] {
        magic + Self.littleEndian(version) + Self.littleEndian(flags) + Self.littleEndian(objectSize)
            + Self.littleEndian(chunkSize)
            + Self.string(etag) + Self.string(lastModified) + Self.string(url)
            + Self.littleEndian(bitmapLength ?? UInt32(bitmap.count)) + bitmap + trailing
    }

    var bytes: [UInt8] { Self.sealed(body) }

    /// `body` followed by its SHA-256.
    static func sealed(_ body: [UInt8]) -> [UInt8] { body + Array(SHA256.hash(data: body)) }
}

@Suite("SegmentMap")
struct SegmentMapTests {
    static let strings = [
        "", "\"abc\"", "W/\"abc\"", "Tue, 15 Nov 1994 12:45:26 GMT", "https://example.com/a%20b/c.iso",
        "https://例え.jp/ファイル.iso", "\"🙂-é-\u{301}\"", String(repeating: "x", count: 3000), "ünïcödé/路径/файл",
    ]

    private func randomMap(using random: inout SplitMix64) -> SegmentMap {
        let objectSize = random.logUniform(0...(1 << 50))
        // Any chunk size up to 2^40 that keeps the bitmap reasonable.
        var chunkSize = max(1, random.logUniform(1...(1 << 40)))
        if objectSize / chunkSize > 4000 { chunkSize = objectSize / 4000 + random.logUniform(0...1000) }
        let layout = ChunkLayout(objectSize: objectSize, chunkSize: chunkSize)
        var chunks = ChunkSet(count: layout.chunkCount)
        let density = Double.random(in: 0...1, using: &random)
        for chunk in 0..<layout.chunkCount where random.chance(density) { chunks.insert(chunk) }
        let etag = Self.strings.randomElement(using: &random)!
        let modified = Self.strings.randomElement(using: &random)!
        return SegmentMap(
            objectSize: objectSize, chunkSize: chunkSize, etag: etag.isEmpty ? nil : etag,
            lastModified: modified.isEmpty ? nil : modified, url: Self.strings.randomElement(using: &random)!,
            chunks: chunks)
    }

    @Test("random maps round-trip", arguments: 0..<2)
    func roundTrip(batch: Int) throws {
        var random = SplitMix64(seed: 0x3A9_0000 &+ UInt64(batch))
        for _ in 0..<150 {
            let map = randomMap(using: &random)
            let bytes = map.encoded()
            let decoded = try SegmentMap.decode(bytes)
            #expect(decoded == map)
            #expect(decoded.encoded() == bytes)
            #expect(decoded.missingRanges == map.missingRanges)
            #expect(decoded.completedBytes == map.objectSize - map.missingRanges.reduce(0) { $0 + $1.count })
        }
    }

    @Test func encodingFollowsTheDocumentedLayout() throws {
        var chunks = ChunkSet(count: 10)
        chunks.insert(0)
        chunks.insert(9)
        let map = SegmentMap(
            objectSize: 10 << 20, chunkSize: 1 << 20, etag: "\"e\"", lastModified: nil, url: "https://h/x",
            chunks: chunks)
        let raw = RawSegmentMap(
            objectSize: 10 << 20, chunkSize: 1 << 20, etag: Array("\"e\"".utf8), url: Array("https://h/x".utf8),
            bitmap: [0b1, 0b10])
        #expect(map.encoded() == raw.bytes)
        #expect(map.encoded().count == 8 + 2 + 2 + 8 + 8 + (2 + 3) + 2 + (2 + 11) + 4 + 2 + 32)
    }

    @Test func completedBytesCountsThePartialLastChunk() {
        var chunks = ChunkSet(count: 3)
        chunks.insert(2)
        let map = SegmentMap(objectSize: 2 * 1024 + 10, chunkSize: 1024, url: "", chunks: chunks)
        #expect(map.completedBytes == 10)
        #expect(map.missingRanges == [ByteRange(0, 2048)])
        chunks.insert(0)
        chunks.insert(1)
        #expect(SegmentMap(objectSize: 2058, chunkSize: 1024, url: "", chunks: chunks).completedBytes == 2058)
    }

    @Test func strongETag() {
        let map = SegmentMap(objectSize: 0, chunkSize: 1, etag: "W/\"x\"", url: "", chunks: ChunkSet(count: 0))
        #expect(map.identity.strongETag == nil)
        var strong = map
        strong.etag = "\"x\""
        #expect(strong.identity.strongETag == "\"x\"")
    }

    private func sampleMap() -> SegmentMap {
        var chunks = ChunkSet(count: 37)
        for chunk in [0, 1, 2, 10, 36] { chunks.insert(chunk) }
        return SegmentMap(
            objectSize: 37 * 4096 - 100, chunkSize: 4096, etag: "\"v1\"", lastModified: "Tue, 15 Nov 1994 12:45:26 GMT",
            url: "https://example.com/é.bin", chunks: chunks)
    }

    @Test func everyTruncationIsRefused() {
        let bytes = sampleMap().encoded()
        for length in 0..<bytes.count {
            #expect(throws: SegmentMapError.self, "prefix of \(length) bytes") {
                try SegmentMap.decode(Array(bytes.prefix(length)))
            }
        }
        for length in 0..<(8 + 4 + 32) {
            #expect(throws: SegmentMapError.truncated) { try SegmentMap.decode(Array(bytes.prefix(length))) }
        }
    }

    @Test func everySingleByteCorruptionIsDetected() {
        let bytes = sampleMap().encoded()
        var undetected: [(Int, UInt8)] = []
        for index in bytes.indices {
            for value in UInt8.min...UInt8.max where value != bytes[index] {
                var corrupt = bytes
                corrupt[index] = value
                if (try? SegmentMap.decode(corrupt)) != nil { undetected.append((index, value)) }
            }
        }
        #expect(undetected.isEmpty, "undetected corruptions (offset, value): \(undetected.prefix(10))")
    }

    @Test("random single-byte flips in random maps are detected", arguments: 0..<2)
    func randomCorruptions(batch: Int) {
        var random = SplitMix64(seed: 0xF11_9000 &+ UInt64(batch))
        for _ in 0..<100 {
            let bytes = randomMap(using: &random).encoded()
            for _ in 0..<20 {
                var corrupt = bytes
                let index = Int.random(in: 0..<bytes.count, using: &random)
                corrupt[index] ^= UInt8.random(in: 1...255, using: &random)
                #expect(throws: SegmentMapError.self, "offset \(index)") { try SegmentMap.decode(corrupt) }
            }
        }
    }

    @Test func wrongMagic() {
        var raw = RawSegmentMap(objectSize: 0, chunkSize: 1)
        #expect(throws: Never.self) { try SegmentMap.decode(raw.bytes) }
        raw.magic = Array("SWOOPMAQ".utf8)
        #expect(throws: SegmentMapError.notASegmentMap) { try SegmentMap.decode(raw.bytes) }
        raw.magic = Array("swoopmap".utf8)
        #expect(throws: SegmentMapError.notASegmentMap) { try SegmentMap.decode(raw.bytes) }
        #expect(throws: SegmentMapError.notASegmentMap) { try SegmentMap.decode(Array(repeating: 0, count: 100)) }
    }

    @Test("other format versions", arguments: [UInt16(0), 2, 3, 0x0100, 0xFFFF])
    func otherVersions(version: UInt16) {
        var raw = RawSegmentMap(objectSize: 5000, chunkSize: 1024, url: Array("https://h/x".utf8), bitmap: [0b11111])
        raw.version = version
        #expect(throws: SegmentMapError.unsupportedVersion(version)) { try SegmentMap.decode(raw.bytes) }
        #expect(SegmentMapError.unsupportedVersion(version).description.contains("format \(version)"))
    }

    @Test func trailingBytes() {
        // After a valid map, with its checksum: refused by the checksum.
        let bytes = sampleMap().encoded()
        #expect(throws: SegmentMapError.checksumMismatch) { try SegmentMap.decode(bytes + [0]) }
        // Inside the checksummed part: refused as malformed.
        let raw = RawSegmentMap(objectSize: 5000, chunkSize: 1024, bitmap: [0b11111], trailing: [0, 0, 0])
        #expect(throws: SegmentMapError.malformed("3 trailing bytes")) { try SegmentMap.decode(raw.bytes) }
    }

    @Test("a map whose bytes an earlier Swoop took under other validators (its variants) is not trusted")
    func variantsOfAnEarlierRule() {
        // One variant: a count of 1, an empty ETag and an empty date.
        var raw = RawSegmentMap(objectSize: 5000, chunkSize: 1024, bitmap: [0b11111], trailing: [1, 0, 0, 0, 0, 0])
        raw.flags = 2
        #expect(throws: SegmentMapError.bytesUnderOtherValidators) { try SegmentMap.decode(raw.bytes) }
    }

    @Test func fieldChecksBehindAValidChecksum() {
        let valid = RawSegmentMap(objectSize: 5000, chunkSize: 1024, bitmap: [0b10101])
        #expect((try? SegmentMap.decode(valid.bytes))?.chunks.completedCount == 3)

        var flags = valid
        flags.flags = 4  // bit 0 says CRC runs follow, bit 1 variants (no longer trusted); bit 2 means nothing
        var negative = valid
        negative.objectSize = -1
        var zeroChunk = valid
        zeroChunk.chunkSize = 0
        var hugeChunk = valid
        hugeChunk.chunkSize = (1 << 40) + 1
        var shortBitmap = valid
        shortBitmap.bitmap = []
        var longBitmap = valid
        longBitmap.bitmap = [0b10101, 0]
        var bitPastEnd = valid
        bitPastEnd.bitmap = [0b100000]  // chunk 5 of 5
        var badUTF8 = valid
        badUTF8.url = [0x68, 0xC3, 0x28]
        var overlong = valid
        overlong.etag = [0xC0, 0xAF]
        var lyingLength = valid
        lyingLength.bitmapLength = 1000

        let cases: [(String, RawSegmentMap)] = [
            ("flags", flags), ("negative size", negative), ("zero chunk", zeroChunk), ("huge chunk", hugeChunk),
            ("short bitmap", shortBitmap), ("long bitmap", longBitmap), ("bit past the end", bitPastEnd),
            ("invalid UTF-8", badUTF8), ("overlong UTF-8", overlong),
        ]
        for (name, raw) in cases {
            #expect(throws: SegmentMapError.self, "\(name)") { try SegmentMap.decode(raw.bytes) }
            do {
                _ = try SegmentMap.decode(raw.bytes)
            } catch {
                if case .malformed = error {} else { Issue.record("\(name): \(error), expected malformed") }
            }
        }
        // A bitmap length larger than what follows reads past the checksummed part: truncated.
        #expect(throws: SegmentMapError.truncated) { try SegmentMap.decode(lyingLength.bytes) }
        // A string length larger than what follows, likewise.
        var lyingString = RawSegmentMap.sealed(
            Array(valid.body.prefix(28)) + RawSegmentMap.littleEndian(UInt16(500)) + [1, 2, 3])
        #expect(throws: SegmentMapError.truncated) { try SegmentMap.decode(lyingString) }
        lyingString.removeLast()
        #expect(throws: SegmentMapError.checksumMismatch) { try SegmentMap.decode(lyingString) }
    }

    @Test("a checksummed map claiming an absurd object size is refused, not a crash")
    func absurdObjectSize() async {
        // Decoding traps in the child process; a fixed decoder throws `.malformed` and the child exits
        // normally.
        await #expect(processExitsWith: .success) {
            let raw = RawSegmentMap(objectSize: .max, chunkSize: 1 << 20)
            _ = try? SegmentMap.decode(raw.bytes)
        }
    }

    @Test("strings longer than a u16 length are cut at a character boundary and still decode")
    func longStrings() throws {
        // 'é' is 2 bytes: 65 535 bytes end in the middle of one.
        let url = "https://example.com/" + String(repeating: "é", count: 40_000)
        let map = SegmentMap(objectSize: 10, chunkSize: 1, url: url, chunks: ChunkSet(count: 10))
        let decoded = try SegmentMap.decode(map.encoded())
        #expect(url.hasPrefix(decoded.url))
        #expect(decoded.url.utf8.count <= Int(UInt16.max) && decoded.url.utf8.count >= Int(UInt16.max) - 1)
        #expect(decoded.url.hasSuffix("é"))
    }

    @Test func errorDescriptions() {
        #expect(SegmentMapError.truncated.description.contains("truncated"))
        #expect(SegmentMapError.checksumMismatch.description.contains("checksum"))
        #expect(SegmentMapError.notASegmentMap.description.contains("not a Swoop segment map"))
        #expect(SegmentMapError.malformed("x").description.contains("(x)"))
    }
}
