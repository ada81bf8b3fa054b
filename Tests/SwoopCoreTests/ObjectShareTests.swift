import Testing
@testable import SwoopCore

/// How an object is cut into shares (every task must decide the same from the size alone), and
/// the ledger of one share: the other shares' bytes are left alone, its own still compared.
@Suite("ObjectShare")
struct ObjectShareTests {
    private static let MiB: Int64 = 1 << 20

    @Test("every byte is in exactly one share; stripes are whole chunks, spread round robin")
    func sharesCoverTheObject() throws {
        let sizes: [Int64] = [0, 1, 65_535, 4 * Self.MiB + 1, 1 << 30, 3 * (1 << 30) + 12_345, 100 * (1 << 30)]
        for size in sizes {
            let layout = ChunkLayout(objectSize: size)
            for count in [1, 2, 3, 4, 8, 13] {
                let shares = (0..<count).map { ObjectShare(index: $0, count: count)! }
                let ranges = shares.flatMap { $0.ranges(of: layout) }.sorted { $0.lowerBound < $1.lowerBound }
                let covered: Int64 = ranges.reduce(0) { $0 + $1.count }
                #expect(covered == size, "size \(size), \(count) shares")
                for (left, right) in zip(ranges, ranges.dropFirst()) { #expect(left.upperBound == right.lowerBound) }
                let stripe = shares[0].stripeSize(of: layout)
                #expect(stripe % layout.chunkSize == 0)
                #expect(
                    stripe >= ObjectShare.smallestStripe && stripe <= max(ObjectShare.largestStripe, layout.chunkSize))
                for share in shares {
                    let own = share.ranges(of: layout)
                    let foreign = share.foreignRanges(of: layout)
                    let ownBytes: Int64 = own.reduce(0) { $0 + $1.count }
                    let foreignBytes: Int64 = foreign.reduce(0) { $0 + $1.count }
                    #expect(ownBytes + foreignBytes == size)
                    // The map of a new share counts every foreign chunk done, and none of its own.
                    let chunks = share.freshChunks(of: layout)
                    let missing: Int64 = chunks.missingRuns.map { layout.byteRange(ofChunks: $0) }.reduce(0) {
                        $0 + $1.count
                    }
                    #expect(missing == ownBytes)
                }
            }
        }
    }

    @Test("a 1 GiB object in 4 shares: 64 stripes of 16 MiB, 16 a share, 63 seams")
    func oneGiBInFour() {
        let layout = ChunkLayout(objectSize: 1 << 30)
        let share = ObjectShare(index: 1, count: 4)!
        #expect(share.stripeSize(of: layout) == 16 * Self.MiB)
        #expect(share.ranges(of: layout).count == 16)
        #expect(share.ranges(of: layout).first == ByteRange(16 * Self.MiB, 32 * Self.MiB))
        #expect(share.seams(of: layout).count == 63)
        #expect(ObjectShare(index: 0, count: 1)!.seams(of: layout).isEmpty)
        #expect(ObjectShare(index: 4, count: 4) == nil && ObjectShare(index: -1, count: 4) == nil)
        // Stripes stay within 4–64 MiB: a small object's shares are few, a huge one's seams too.
        #expect(share.stripeSize(of: ChunkLayout(objectSize: 10 * Self.MiB)) == 4 * Self.MiB)
        #expect(ObjectShare(index: 3, count: 4)!.ranges(of: ChunkLayout(objectSize: 10 * Self.MiB)).isEmpty)
        #expect(share.stripeSize(of: ChunkLayout(objectSize: 100 << 30)) == 64 * Self.MiB)
    }

    /// A file in memory the ledger reads held bytes from, and a version's bytes.
    private final class File {
        var bytes: [UInt8]
        init(size: Int) { bytes = [UInt8](repeating: 0, count: size) }
        func read(_ range: ByteRange) -> [UInt8]? { Array(bytes[Int(range.lowerBound)..<Int(range.upperBound)]) }
    }

    private static func content(_ range: ByteRange, version: Int = 0) -> [UInt8] {
        (range.lowerBound..<range.upperBound).map {
            UInt8(truncatingIfNeeded: ($0 &* 2_654_435_761) >> 7) &+ UInt8(version)
        }
    }

    @Test("one share's ledger: overlap into other shares is neither compared nor kept; its own bytes still are")
    func ledgerOfOneShare() {
        // Stripes of 10 000 bytes: this share has [10 000, 20 000) and [30 000, 40 000).
        let foreign = [ByteRange(0, 10_000), ByteRange(20_000, 30_000)]
        let ledger = AgreementLedger(size: 40_000, foreign: foreign)
        let file = File(size: 40_000)
        func write(_ range: ByteRange, _ response: Int, version: Int = 0) -> AgreementLedger.Disagreement? {
            let bytes = Self.content(range, version: version)
            let found = bytes.withUnsafeBytes { ledger.write($0, at: range.lowerBound, by: response) }
            if found == nil { file.bytes.replaceSubrange(Int(range.lowerBound)..<Int(range.upperBound), with: bytes) }
            return found
        }
        func compare(_ range: ByteRange, _ response: Int, version: Int = 0) -> AgreementLedger.Disagreement? {
            Self.content(range, version: version).withUnsafeBytes {
                ledger.compare($0, at: range.lowerBound, from: response, read: file.read)
            }
        }
        let (a, b, c) = (ledger.beginResponse(), ledger.beginResponse(), ledger.beginResponse())
        // A lead into the stripe before (another share's, zeros here): ignored, not a change.
        #expect(compare(ByteRange(9_000, 10_000), a, version: 5) == nil)
        #expect(write(ByteRange(10_000, 15_000), a) == nil)
        #expect(compare(ByteRange(14_000, 15_000), b) == nil && write(ByteRange(15_000, 20_000), b) == nil)
        // The second stripe: written by a response never compared with the first stripe's.
        #expect(compare(ByteRange(29_000, 30_000), c, version: 7) == nil)
        #expect(write(ByteRange(30_000, 40_000), c) == nil)
        #expect(ledger.waitingBytes == 0 && ledger.breaks.isEmpty)
        #expect(ledger.isStitched, "stripes apart are the finishing task's to check")
        // Within a stripe the bytes are still the reference: another version's lead is a change.
        let d = ledger.beginResponse()
        #expect(compare(ByteRange(34_000, 35_000), d, version: 1) != nil)
        // And two pieces that meet without agreeing are not stitched.
        let apart = AgreementLedger(size: 40_000, foreign: foreign)
        let (e, f) = (apart.beginResponse(), apart.beginResponse())
        _ = Self.content(ByteRange(10_000, 15_000)).withUnsafeBytes { apart.write($0, at: 10_000, by: e) }
        _ = Self.content(ByteRange(15_000, 20_000)).withUnsafeBytes { apart.write($0, at: 15_000, by: f) }
        #expect(!apart.isStitched && apart.breaks == [15_000])
    }

    @Test("ByteRange.subtracting")
    func subtracting() {
        let range = ByteRange(10, 100)
        #expect(range.subtracting([]) == [range])
        #expect(
            range.subtracting([ByteRange(0, 20), ByteRange(50, 60), ByteRange(90, 200)]) == [
                ByteRange(20, 50), ByteRange(60, 90),
            ])
        #expect(range.subtracting([ByteRange(0, 200)]).isEmpty)
    }
}
