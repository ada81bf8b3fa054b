/// One task's share of an object fetched by `count` tasks at once (a Slurm array, several
/// machines onto one shared file system): share `index` of `count`, numbered from 0.
///
/// The object is cut into *stripes* of ``stripeSize(of:)`` bytes, and stripe `i` is share
/// `i % count`'s: every share is spread over the whole object, so each task works at its own rate
/// to the end and a slow one does not leave a long tail to itself. Every task decides the same
/// stripes from the object's size alone (through its ``ChunkLayout``): tasks never talk to each
/// other, they only see each other's segment maps.
public struct ObjectShare: Sendable, Hashable, CustomStringConvertible {
    /// This share, `0 ..< count`.
    public let index: Int
    /// How many shares the object is cut into.
    public let count: Int

    /// Share `index` of `count`; `nil` unless `0 <= index < count`.
    public init?(index: Int, count: Int) {
        guard count >= 1, index >= 0, index < count else { return nil }
        self.index = index
        self.count = count
    }

    public var description: String { "\(index)/\(count)" }

    /// Stripes a share aims to get: enough that the tasks' rates even out over the object, few
    /// enough that the seams the last task checks stay a small part of it.
    package static let stripesPerShare: Int64 = 16
    /// Stripe sizes are kept within these bounds (and rounded up to a whole number of chunks).
    package static let smallestStripe: Int64 = 4 << 20
    package static let largestStripe: Int64 = 64 << 20

    /// The stripe size for an object laid out as `layout`: about 1/16 of a share, 4–64 MiB, a
    /// whole number of chunks (so a segment map's chunk is one share's or another's, never both).
    package func stripeSize(of layout: ChunkLayout) -> Int64 {
        let wanted = layout.objectSize / (Int64(count) * Self.stripesPerShare)
        let bounded = min(Self.largestStripe, max(Self.smallestStripe, wanted))
        let chunks = (bounded + layout.chunkSize - 1) / layout.chunkSize
        return max(1, chunks) * layout.chunkSize
    }

    /// The stripes of the object, in order, each with the share it belongs to.
    package func stripes(of layout: ChunkLayout) -> [(range: ByteRange, share: Int)] {
        let size = stripeSize(of: layout)
        var stripes: [(range: ByteRange, share: Int)] = []
        var start: Int64 = 0
        var number = 0
        while start < layout.objectSize {
            let end = min(layout.objectSize, start + size)
            stripes.append((ByteRange(start, end), number % count))
            start = end
            number += 1
        }
        return stripes
    }

    /// The bytes this share fetches, in order (none when the object has fewer stripes than
    /// there are shares and this one gets none).
    package func ranges(of layout: ChunkLayout) -> [ByteRange] {
        stripes(of: layout).filter { $0.share == index }.map(\.range)
    }

    /// The bytes the other shares fetch, in order, neighbouring stripes merged.
    package func foreignRanges(of layout: ChunkLayout) -> [ByteRange] {
        stripes(of: layout).filter { $0.share != index }.map(\.range).coalesced
    }

    /// Where two stripes of different shares meet: the offsets whose bytes on each side no
    /// single task compared (the task that finishes the object checks them).
    package func seams(of layout: ChunkLayout) -> [Int64] {
        let stripes = stripes(of: layout)
        return zip(stripes, stripes.dropFirst()).compactMap { left, right in
            left.share != right.share ? right.range.lowerBound : nil
        }
    }

    /// A segment map's chunks for this share when nothing of it is held yet: the other shares'
    /// chunks are marked complete (they are not this share's to fetch), its own missing.
    package func freshChunks(of layout: ChunkLayout) -> ChunkSet {
        var chunks = ChunkSet(count: layout.chunkCount)
        for range in foreignRanges(of: layout) {
            chunks.insert(contentsOf: layout.chunksCompleted(from: range.lowerBound, to: range.upperBound))
        }
        return chunks
    }
}
