import SwoopTestSupport
import Testing
@testable import SwoopCore

private let MiB: Int64 = 1 << 20
private let GiB: Int64 = 1 << 30

@Suite("ChunkSet and ChunkLayout")
struct ChunkSetTests {
    /// Runs of indices in `0..<count` not in `members`, computed the slow way.
    private func naiveMissingRuns(count: Int, members: Set<Int>) -> [Range<Int>] {
        var runs: [Range<Int>] = []
        for chunk in 0..<count where !members.contains(chunk) {
            if let last = runs.last, last.upperBound == chunk {
                runs[runs.count - 1] = last.lowerBound..<chunk + 1
            } else {
                runs.append(chunk..<chunk + 1)
            }
        }
        return runs
    }

    @Test("random sets round-trip through their bitmap and agree with a naive model", arguments: 0..<4)
    func bitmapRoundTrip(batch: Int) {
        var random = SplitMix64(seed: 0xC4C4 &+ UInt64(batch))
        for _ in 0..<60 {
            let count = Int(random.logUniform(0...70_000))
            var set = ChunkSet(count: count)
            var members = Set<Int>()
            let density = Double.random(in: 0...1, using: &random)
            let inserts = count == 0 ? 0 : Int(Double(count) * density * Double.random(in: 0...1.5, using: &random))
            for _ in 0..<min(inserts, 5000) {
                let chunk = Int.random(in: 0..<count, using: &random)
                set.insert(chunk)
                members.insert(chunk)
            }
            if count > 0 && random.chance(0.3) {
                let run = Int.random(in: 0..<count, using: &random)..<count
                set.insert(contentsOf: run)
                members.formUnion(run)
            }
            #expect(set.completedCount == members.count)
            #expect(set.isComplete == (members.count == count))

            let bytes = set.bitmapBytes
            #expect(bytes.count == (count + 7) / 8)
            for chunk in members.prefix(50) {
                #expect(bytes[chunk / 8] & (1 << UInt8(chunk % 8)) != 0)
            }
            #expect(bytes.reduce(0) { $0 + $1.nonzeroBitCount } == members.count)
            let decoded = ChunkSet(count: count, bitmap: bytes)
            #expect(decoded == set)
            #expect(decoded?.completedCount == members.count)
            if count < 5000 {
                #expect(set.missingRuns == naiveMissingRuns(count: count, members: members))
            }
        }
    }

    @Test func bitmapLayoutIsLowBitFirst() {
        var set = ChunkSet(count: 11)
        set.insert(0)
        set.insert(3)
        set.insert(8)
        set.insert(10)
        #expect(set.bitmapBytes == [0b0000_1001, 0b0000_0101])
        #expect(ChunkSet(count: 11, bitmap: [0b0000_1001, 0b0000_0101]) == set)
    }

    @Test func insertIsIdempotent() {
        var set = ChunkSet(count: 3)
        set.insert(1)
        set.insert(1)
        set.insert(contentsOf: 0..<2)
        #expect(set.completedCount == 2)
        #expect(!set.isComplete)
        set.insert(2)
        #expect(set.isComplete)
        #expect(set.missingRuns.isEmpty)
    }

    @Test("bits past the last chunk are refused", arguments: 1...15)
    func rejectsBitsPastTheEnd(count: Int) {
        let byteCount = (count + 7) / 8
        for bit in count..<(byteCount * 8) {
            var bytes = [UInt8](repeating: 0, count: byteCount)
            bytes[bit / 8] |= 1 << UInt8(bit % 8)
            #expect(ChunkSet(count: count, bitmap: bytes) == nil, "bit \(bit) of \(count)")
        }
        // Every legitimate bit is accepted.
        let all = [UInt8](repeating: 0xFF, count: byteCount)
        if count % 8 == 0 {
            #expect(ChunkSet(count: count, bitmap: all)?.isComplete == true)
        } else {
            #expect(ChunkSet(count: count, bitmap: all) == nil)
            var full = all
            full[byteCount - 1] = UInt8((1 << (count % 8)) - 1)
            #expect(ChunkSet(count: count, bitmap: full)?.isComplete == true)
        }
    }

    @Test func rejectsWrongBitmapLength() {
        #expect(ChunkSet(count: 9, bitmap: [0]) == nil)
        #expect(ChunkSet(count: 9, bitmap: [0, 0, 0]) == nil)
        #expect(ChunkSet(count: 0, bitmap: [0]) == nil)
        #expect(ChunkSet(count: 0, bitmap: [])?.isComplete == true)
        #expect(ChunkSet(count: 8, bitmap: [0xFF]) != nil)
    }

    @Test func missingRunsOfSimpleSets() {
        var set = ChunkSet(count: 10)
        #expect(set.missingRuns == [0..<10])
        set.insert(0)
        set.insert(4)
        set.insert(5)
        set.insert(9)
        #expect(set.missingRuns == [1..<4, 6..<9])
        #expect(ChunkSet(count: 0).missingRuns.isEmpty)
    }

    // MARK: ChunkLayout

    static let chunkSizeCases: [(Int64, Int64)] = [
        (4 * GiB, 64 << 10), (4 * GiB + 1, 128 << 10), (64 * GiB, MiB), (64 * GiB + 1, 2 * MiB), (128 * GiB, 2 * MiB),
        (128 * GiB + 1, 4 * MiB),
        (1 << 50, 16 * GiB), (999_999_999_999_999_999, 16 << 40),
    ]

    @Test(
        "chunk size doubles from 64 KiB so there are at most 65 536 chunks: 1 MiB at 64 GiB, 2 MiB above",
        arguments: chunkSizeCases)
    func chunkSizeDoubling(size: Int64, expected: Int64) {
        let layout = ChunkLayout(objectSize: size)
        #expect(layout.chunkSize == expected)
        #expect(layout.chunkCount <= 65_536)
        // Half the chunk size would have been too many chunks.
        #expect((size + expected / 2 - 1) / (expected / 2) > 65_536)
    }

    @Test func smallObjectsUseTheBaseChunkSize() {
        let base = ChunkLayout(objectSize: 0).chunkSize
        #expect(base.nonzeroBitCount == 1 && base >= 64 << 10 && base <= MiB, "base chunk size \(base)")
        for size in [1, base - 1, base, base + 1, 1000 * base, 65_536 * base - 1, 65_536 * base] {
            #expect(ChunkLayout(objectSize: size).chunkSize == base, "size \(size)")
        }
        #expect(ChunkLayout(objectSize: 65_536 * base + 1).chunkSize == 2 * base)
        #expect(ChunkLayout(objectSize: 2 * 65_536 * base).chunkSize == 2 * base)
        #expect(ChunkLayout(objectSize: 2 * 65_536 * base + 1).chunkSize == 4 * base)
        // Always the smallest doubling of the base that fits.
        var random = SplitMix64(seed: 77)
        for _ in 0..<500 {
            let size = random.logUniform(0...(1 << 55))
            let layout = ChunkLayout(objectSize: size)
            #expect(layout.chunkCount <= 65_536)
            #expect(layout.chunkSize % base == 0 && (layout.chunkSize / base).nonzeroBitCount == 1)
            if layout.chunkSize > base {
                #expect((size + layout.chunkSize / 2 - 1) / (layout.chunkSize / 2) > 65_536, "size \(size)")
            }
        }
    }

    @Test func chunkCountRoundsUp() {
        #expect(ChunkLayout(objectSize: 0, chunkSize: MiB).chunkCount == 0)
        #expect(ChunkLayout(objectSize: 1, chunkSize: MiB).chunkCount == 1)
        #expect(ChunkLayout(objectSize: MiB, chunkSize: MiB).chunkCount == 1)
        #expect(ChunkLayout(objectSize: MiB + 1, chunkSize: MiB).chunkCount == 2)
    }

    @Test func byteRangeOfChunksClampsToTheObject() {
        let layout = ChunkLayout(objectSize: 2 * MiB + 5, chunkSize: MiB)
        #expect(layout.byteRange(ofChunks: 0..<1) == ByteRange(0, MiB))
        #expect(layout.byteRange(ofChunks: 1..<3) == ByteRange(MiB, 2 * MiB + 5))
        #expect(layout.byteRange(ofChunks: 2..<3).count == 5)
    }

    @Test func alignment() {
        let layout = ChunkLayout(objectSize: 10 * MiB + 3, chunkSize: MiB)
        #expect(layout.alignDown(0) == 0)
        #expect(layout.alignDown(MiB - 1) == 0)
        #expect(layout.alignDown(MiB) == MiB)
        #expect(layout.alignUp(0) == 0)
        #expect(layout.alignUp(1) == MiB)
        #expect(layout.alignUp(MiB) == MiB)
        #expect(layout.alignUp(10 * MiB + 1) == 10 * MiB + 3)  // the object's end
        #expect(layout.alignUp(10 * MiB + 3) == 10 * MiB + 3)
    }

    @Test func chunksCompletedEdgeCases() {
        let layout = ChunkLayout(objectSize: 2 * MiB + MiB / 2, chunkSize: MiB)  // 3 chunks, the last half full
        #expect(layout.chunksCompleted(from: 0, to: 0) == 0..<0)
        #expect(layout.chunksCompleted(from: 0, to: MiB - 1) == 0..<0)
        #expect(layout.chunksCompleted(from: 0, to: MiB) == 0..<1)
        #expect(layout.chunksCompleted(from: 0, to: 2 * MiB + 1) == 0..<2)
        #expect(layout.chunksCompleted(from: 0, to: 2 * MiB + MiB / 2 - 1) == 0..<2)
        // Reaching the object's end completes the last, partial chunk.
        #expect(layout.chunksCompleted(from: 0, to: 2 * MiB + MiB / 2) == 0..<3)
        #expect(layout.chunksCompleted(from: 2 * MiB, to: 2 * MiB + MiB / 2) == 2..<3)
        #expect(layout.chunksCompleted(from: MiB, to: MiB + 5) == 1..<1)
        #expect(layout.chunksCompleted(from: MiB, to: 2 * MiB) == 1..<2)

        // An object that ends exactly on a boundary has no partial chunk.
        let exact = ChunkLayout(objectSize: 2 * MiB, chunkSize: MiB)
        #expect(exact.chunksCompleted(from: MiB, to: 2 * MiB) == 1..<2)
        // An object smaller than one chunk.
        let tiny = ChunkLayout(objectSize: 10, chunkSize: MiB)
        #expect(tiny.chunksCompleted(from: 0, to: 9) == 0..<0)
        #expect(tiny.chunksCompleted(from: 0, to: 10) == 0..<1)
        #expect(ChunkLayout(objectSize: 0, chunkSize: MiB).chunksCompleted(from: 0, to: 0) == 0..<0)
    }

    @Test func byteRangeDescription() {
        #expect(ByteRange(0, 100).description == "0-99")
        #expect(ByteRange(5, 5).description == "empty@5")
        #expect(ByteRange(10, 20).clamped(to: ByteRange(15, 30)) == ByteRange(15, 20))
        #expect(ByteRange(10, 20).clamped(to: ByteRange(30, 40)) == ByteRange(30, 30))
        #expect(ByteRange(10, 20).contains(19) && !ByteRange(10, 20).contains(20))
    }
}
