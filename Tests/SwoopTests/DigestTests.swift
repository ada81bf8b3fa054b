import Crypto
import Foundation
import SwoopTestSupport
import Testing
@testable import Swoop
@testable import SwoopStore

/// The digests: CRC check values and combination, the headers servers publish them in, the
/// runs kept in the segment map, and the scheduler's hold on a response being verified.
@Suite("Digests")
struct DigestTests {
    private static let check = Array("123456789".utf8)

    private func crc(_ crc: CRC, _ bytes: [UInt8]) -> UInt64 {
        bytes.withUnsafeBytes { crc.update(0, $0) }
    }

    @Test func standardCheckValues() {
        #expect(crc(.crc32, Self.check) == 0xCBF4_3926)
        #expect(crc(.crc32c, Self.check) == 0xE306_9283)
        #expect(crc(.crc64xz, Self.check) == 0x995D_C9BB_DF19_39FA)
        #expect(crc(.crc64nvme, Self.check) == 0xAE8B_1486_0A79_9888)
        #expect(crc(.crc32c, []) == 0)
    }

    @Test(arguments: [CRC.crc32, .crc32c, .crc64xz, .crc64nvme])
    func combineEqualsTheCRCOfTheWhole(_ kind: CRC) {
        var random = SplitMix64(seed: 7)
        let bytes = (0..<200_003).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        let whole = crc(kind, bytes)
        for cut in [0, 1, 7, 8, 65_536, 100_000, 199_999, 200_003] {
            let first = crc(kind, Array(bytes[..<cut]))
            let second = crc(kind, Array(bytes[cut...]))
            #expect(kind.combine(first, second, secondLength: Int64(bytes.count - cut)) == whole, "cut at \(cut)")
        }
        // Incremental updates agree with one pass, at any split (the tail loop and the 8-byte loop).
        let incremental = bytes.withUnsafeBytes { all in
            kind.update(
                kind.update(0, UnsafeRawBufferPointer(rebasing: all[..<13])),
                UnsafeRawBufferPointer(rebasing: all[13...]))
        }
        #expect(incremental == whole)
    }

    @Test(arguments: [CRC.crc32, .crc32c, .crc64xz, .crc64nvme])
    func everyPathGivesTheTablesCRC(_ kind: CRC) {
        // The carry-less fold (64-bit CRCs on x86-64 with PCLMULQDQ), the lanes and the tables.
        var random = SplitMix64(seed: 3)
        let bytes = (0..<70_001).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        for count in [0, 1, 15, 16, 17, 255, 256, 257, 1000, 4096, 16_400, 65_536, 70_001] {
            let start = UInt64(count) &* 0x9E37_79B9_7F4A_7C15 & (kind.width == 64 ? .max : 0xFFFF_FFFF)
            bytes.withUnsafeBytes { all in
                let piece = UnsafeRawBufferPointer(rebasing: all[..<count])
                var reference = ~start & (kind.width == 64 ? .max : 0xFFFF_FFFF)
                for byte in piece {
                    reference ^= UInt64(byte)
                    for _ in 0..<8 {
                        reference = reference & 1 != 0 ? (reference >> 1) ^ kind.polynomial : reference >> 1
                    }
                }
                reference = ~reference & (kind.width == 64 ? .max : 0xFFFF_FFFF)
                #expect(kind.update(start, piece) == reference, "\(count) bytes")
                #expect(kind.tableUpdate(start, piece) == reference, "\(count) bytes (tables)")
            }
        }
    }

    @Test func runsMergeInAnyOrderIntoTheWholeCRC() {
        var random = SplitMix64(seed: 11)
        let bytes = (0..<10_000).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        let pieces = stride(from: 0, to: 10_000, by: 1000).map { ByteRange(Int64($0), Int64(min($0 + 1000, 10_000))) }
        var runs = CRCRuns(algorithm: .crc64xz)
        for piece in pieces.shuffled(using: &random) {
            #expect(runs.whole(size: 10_000) == nil)
            runs.insert(piece, crc: crc(.crc64xz, Array(bytes[Int(piece.lowerBound)..<Int(piece.upperBound)])))
        }
        #expect(runs.runs.count == 1)
        #expect(runs.whole(size: 10_000) == crc(.crc64xz, bytes))
        #expect(runs.gaps(in: ByteRange(0, 10_000)).isEmpty)
    }

    @Test func gapsAreWhatNoRunCovers() {
        var runs = CRCRuns(algorithm: .crc32c)
        runs.insert(ByteRange(10, 20), crc: 1)
        runs.insert(ByteRange(30, 40), crc: 2)
        #expect(runs.gaps(in: ByteRange(0, 50)) == [ByteRange(0, 10), ByteRange(20, 30), ByteRange(40, 50)])
        #expect(runs.gaps(in: ByteRange(12, 35)) == [ByteRange(20, 30)])
        #expect(runs.gaps(in: ByteRange(10, 20)).isEmpty)
    }

    @Test func mapKeepsRunsAndDropsThoseOfIncompleteChunks() throws {
        var chunks = ChunkSet(count: 10)
        chunks.insert(contentsOf: 0..<4)
        var runs = CRCRuns(algorithm: .crc64nvme)
        runs.insert(ByteRange(0, 4096), crc: 0xDEAD_BEEF_0000_0001)
        runs.insert(ByteRange(6 * 1024, 8 * 1024), crc: 42)  // chunks 6 and 7: not complete
        let map = SegmentMap(
            objectSize: 10 * 1024, chunkSize: 1024, etag: "\"e\"", url: "https://h/x", chunks: chunks, crcRuns: runs)
        let decoded = try SegmentMap.decode(map.encoded())
        #expect(decoded == map)
        let kept = try #require(decoded.crcRuns).keeping(complete: decoded.chunks, layout: decoded.layout)
        #expect(kept.runs == [CRCRuns.Run(range: ByteRange(0, 4096), crc: 0xDEAD_BEEF_0000_0001)])
        // A map without runs is the same bytes as before (flags 0).
        let plain = SegmentMap(objectSize: 10 * 1024, chunkSize: 1024, url: "u", chunks: chunks)
        #expect(plain.encoded()[10] == 0 && plain.encoded()[11] == 0)
        #expect(try SegmentMap.decode(plain.encoded()).crcRuns == nil)
    }

    @Test func checksumsParseEveryAlgorithmByName() throws {
        #expect(try Checksum(parsing: "sha256=" + String(repeating: "ab", count: 32)).algorithm == .sha256)
        #expect(try Checksum(parsing: "SHA-512=" + String(repeating: "01", count: 64)).algorithm == .sha512)
        #expect(try Checksum(parsing: "crc64ecma=995dc9bbdf1939fa").algorithm == .crc64xz)
        #expect(try Checksum(parsing: "crc32c=e3069283").crcValue == 0xE306_9283)
        #expect(Checksum(algorithm: .crc32c, crc: 0xE306_9283).description == "crc32c=e3069283")
    }

    @Test(
        "a checksum that cannot be read is an error that says why, never nil",
        arguments: [
            ("sha-256=deadbeef", "has 8 hex digits; sha-256 has 64"),
            ("sha-256=" + String(repeating: "zz", count: 32), "is not hexadecimal"),
            ("blake3=00", "unknown algorithm 'blake3'"),
            ("deadbeef", "is not ALGORITHM=HEX"),
        ])
    func checksumErrors(_ text: String, _ said: String) {
        #expect {
            try Checksum(parsing: text)
        } throws: { error in
            let error = error as! DownloadError
            return error.kind == .invalidRequest && error.reason.contains(said)
        }
        #expect(throws: DownloadError.self) { try Checksum(algorithm: .md5, digest: [1, 2, 3]) }
    }

    @Test func hasherMatchesSwiftCrypto() {
        let data = Array("hello, digests".utf8)
        var sha = DigestHasher(.sha256)
        sha.update(data)
        #expect(sha.finalize().digest == Array(SHA256.hash(data: data)))
        var md5 = DigestHasher(.md5)
        md5.update(data)
        #expect(md5.finalize().digest == Array(Insecure.MD5.hash(data: data)))
        var crc = DigestHasher(.crc32c)
        crc.update(Self.check)
        #expect(crc.finalize().crcValue == 0xE306_9283)
    }

    // MARK: Headers

    private func head(_ fields: [(String, String)], status: Int = 206) -> ResponseHead {
        ResponseHead(status: status, fields: fields.map { (name: $0.0, value: $0.1) })
    }

    private static let sha = Array(SHA256.hash(data: check))
    private static let shaBase64 = Data(sha).base64EncodedString()

    @Test func reprDigestIsOfTheWholeObjectContentDigestOfTheResponse() throws {
        let found = PublishedDigests(
            head([
                ("Repr-Digest", "sha-256=:\(Self.shaBase64):, unixsum=:AAA=:"),
                ("Content-Digest", "sha-512=:\(Data(repeating: 1, count: 64).base64EncodedString()):"),
            ]), bodyIsWholeObject: false)
        #expect(found.object.map(\.checksum) == [try Checksum(algorithm: .sha256, digest: Self.sha)])
        #expect(found.preferredForResponse?.checksum.algorithm == .sha512)
        #expect(found.unusable.contains { $0.contains("unixsum") })
        #expect(found.preferred?.written(found.preferred!.checksum) == "sha-256=:\(Self.shaBase64):")
    }

    @Test func googleAmazonAndAlibabaHeaders() throws {
        let crc32c = Data([0xE3, 0x06, 0x92, 0x83]).base64EncodedString()
        let found = PublishedDigests(
            head([
                ("x-goog-hash", "crc32c=\(crc32c)"),
                ("x-goog-hash", "md5=\(Data(repeating: 7, count: 16).base64EncodedString())"),
                (
                    "x-amz-checksum-crc64nvme",
                    Data([0xAE, 0x8B, 0x14, 0x86, 0x0A, 0x79, 0x98, 0x88]).base64EncodedString()
                ),
                ("x-oss-hash-crc64ecma", "11051210869376104954"),
            ]), bodyIsWholeObject: false)
        #expect(found.object.count == 4)
        // The CRC-64s come first: checked chunk by chunk.
        #expect(found.preferred?.header == "x-amz-checksum-crc64nvme")
        let oss = try #require(found.object.first { $0.header == "x-oss-hash-crc64ecma" })
        #expect(oss.checksum.crcValue == 0x995D_C9BB_DF19_39FA && oss.checksum.algorithm == .crc64xz)
        #expect(oss.written(oss.checksum) == "11051210869376104954")
    }

    @Test func compositeS3ChecksumsAndPartialContentMD5AreNotUsed() {
        let composite = PublishedDigests(head([("x-amz-checksum-crc32c", "sOO8/Q==-3")]), bodyIsWholeObject: false)
        #expect(composite.object.isEmpty && composite.unusable.first?.contains("composite") == true)
        let typed = PublishedDigests(
            head([("x-amz-checksum-crc32", "AAAAAA=="), ("x-amz-checksum-type", "COMPOSITE")]), bodyIsWholeObject: false
        )
        #expect(typed.object.isEmpty)
        let md5 = Data(repeating: 9, count: 16).base64EncodedString()
        let partial = PublishedDigests(
            head([("Content-MD5", md5), ("Digest", "SHA-256=\(Self.shaBase64)")]), bodyIsWholeObject: false)
        #expect(partial.object.isEmpty && partial.response.isEmpty && partial.unusable.count == 2)
        let whole = PublishedDigests(
            head([("Content-MD5", md5), ("Digest", "SHA-256=\(Self.shaBase64)")], status: 200), bodyIsWholeObject: true)
        #expect(whole.object.count == 2 && whole.preferred?.header == "digest")
    }

    @Test func contentDigestRepeatingTheObjectsOnAPartIsNotUsed() {
        let value = "sha-256=:\(Self.shaBase64):"
        let found = PublishedDigests(
            head([("Repr-Digest", value), ("Content-Digest", value)]), bodyIsWholeObject: false)
        #expect(found.response.isEmpty && found.object.count == 1)
        let whole = PublishedDigests(head([("Content-Digest", value)], status: 200), bodyIsWholeObject: true)
        #expect(whole.response.count == 1 && whole.object.count == 1)
    }

    @Test func aChangedDigestIsAnotherObject() {
        let first = PublishedDigests(head([("x-oss-hash-crc64ecma", "1")]), bodyIsWholeObject: false)
        #expect(
            first.change(in: PublishedDigests(head([("x-oss-hash-crc64ecma", "1")]), bodyIsWholeObject: false)) == nil)
        #expect(first.change(in: PublishedDigests(head([]), bodyIsWholeObject: false)) == nil)
        #expect(
            first.change(in: PublishedDigests(head([("x-oss-hash-crc64ecma", "2")]), bodyIsWholeObject: false))
                == "x-oss-hash-crc64ecma was 1, now 2")
    }

    @Test func garbageHeadersAreReportedNotTrusted() {
        let found = PublishedDigests(
            head([("Repr-Digest", "sha-256=nonsense"), ("x-goog-hash", "crc32c=!!"), ("x-oss-hash-crc64ecma", "-5")]),
            bodyIsWholeObject: false)
        #expect(found.object.isEmpty)
        #expect(found.unusable.count == 3)
    }

    // MARK: The scheduler's hold

    @Test func heldBytesCountOnlyOnceConfirmedAndRewindLosesThem() throws {
        let plan = SegmentScheduler(
            layout: ChunkLayout(objectSize: 8192, chunkSize: 1024), missing: [ByteRange(0, 8192)],
            minimumSegmentSize: 1024)
        var reported: [Range<Int>] = []
        plan.onChunksCompleted = { reported.append($0) }
        let segment = try #require(plan.claim(now: .now))
        plan.advance(segment, by: 1500)
        #expect(reported == [0..<1])
        plan.hold(segment)
        plan.advance(segment, by: 2000)  // to 3500: chunks 1 and 2 would be complete
        #expect(reported == [0..<1] && plan.written.completedCount == 1)
        plan.rewind(segment)
        #expect(segment.position == 1500 && plan.bytesWritten == 1500)
        plan.hold(segment)
        plan.advance(segment, by: 2000)
        plan.confirm(segment)
        #expect(reported == [0..<1, 1..<3] && plan.written.completedCount == 3 && plan.bytesWritten == 3500)
    }
}
