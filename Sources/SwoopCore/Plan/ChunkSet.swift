/// Which fixed-size chunks of an object are complete, as a bitmap.
package struct ChunkSet: Equatable, Sendable {
    /// The number of chunks.
    package let count: Int
    package private(set) var words: [UInt64]
    /// Chunks marked complete.
    package private(set) var completedCount = 0

    package init(count: Int) {
        precondition(count >= 0)
        self.count = count
        words = Array(repeating: 0, count: (count + 63) / 64)
    }

    /// Rebuilds a set from its bitmap bytes (little-endian bit order, as ``bitmapBytes`` writes).
    package init?(count: Int, bitmap: some Collection<UInt8>) {
        guard bitmap.count == (count + 7) / 8 else { return nil }
        self.init(count: count)
        for (index, byte) in bitmap.enumerated() where byte != 0 {
            for bit in 0..<8 where byte & (1 << bit) != 0 {
                let chunk = index * 8 + bit
                guard chunk < count else { return nil }  // bits past the end mean a corrupt map
                insert(chunk)
            }
        }
    }

    package var isComplete: Bool { completedCount == count }

    package func contains(_ chunk: Int) -> Bool {
        words[chunk >> 6] & (1 << UInt64(chunk & 63)) != 0
    }

    package mutating func insert(_ chunk: Int) {
        precondition(chunk >= 0 && chunk < count, "chunk \(chunk) out of 0..<\(count)")
        let mask: UInt64 = 1 << UInt64(chunk & 63)
        if words[chunk >> 6] & mask == 0 {
            words[chunk >> 6] |= mask
            completedCount += 1
        }
    }

    package mutating func insert(contentsOf chunks: Range<Int>) {
        for chunk in chunks { insert(chunk) }
    }

    package mutating func remove(_ chunk: Int) {
        precondition(chunk >= 0 && chunk < count, "chunk \(chunk) out of 0..<\(count)")
        let mask: UInt64 = 1 << UInt64(chunk & 63)
        if words[chunk >> 6] & mask != 0 {
            words[chunk >> 6] &= ~mask
            completedCount -= 1
        }
    }

    /// The bitmap, one bit per chunk, chunk 0 in the lowest bit of byte 0.
    package var bitmapBytes: [UInt8] {
        var bytes = [UInt8](repeating: 0, count: (count + 7) / 8)
        for chunk in 0..<count where contains(chunk) {
            bytes[chunk >> 3] |= 1 << UInt8(chunk & 7)
        }
        return bytes
    }

    /// Maximal runs of chunks not yet complete.
    package var missingRuns: [Range<Int>] {
        var runs: [Range<Int>] = []
        var start: Int?
        for chunk in 0..<count {
            if contains(chunk) {
                if let first = start { runs.append(first..<chunk); start = nil }
            } else if start == nil {
                start = chunk
            }
        }
        if let first = start { runs.append(first..<count) }
        return runs
    }
}

/// How an object's bytes map onto chunks.
package struct ChunkLayout: Equatable, Sendable {
    package let objectSize: Int64
    package let chunkSize: Int64

    /// One chunk size per object size: 64 KiB (the resume and work-stealing granularity), doubled
    /// until there are at most 65 536 chunks, so the map stays small (8 KiB of bitmap) whatever the
    /// size. Small chunks let the last requests be split finely: on a lossy link a 256 KiB piece
    /// takes a loss-bound connection over half a second, and the end of a download waited on them.
    package init(objectSize: Int64) {
        var chunkSize: Int64 = 64 << 10
        while (objectSize + chunkSize - 1) / chunkSize > 65_536 { chunkSize *= 2 }
        self.init(objectSize: objectSize, chunkSize: chunkSize)
    }

    package init(objectSize: Int64, chunkSize: Int64) {
        precondition(objectSize >= 0 && chunkSize > 0)
        self.objectSize = objectSize
        self.chunkSize = chunkSize
    }

    package var chunkCount: Int { Int((objectSize + chunkSize - 1) / chunkSize) }

    package func byteRange(ofChunks chunks: Range<Int>) -> ByteRange {
        ByteRange(Int64(chunks.lowerBound) * chunkSize, min(Int64(chunks.upperBound) * chunkSize, objectSize))
    }

    /// `offset` rounded up to a chunk boundary (or the object's end).
    package func alignUp(_ offset: Int64) -> Int64 {
        min(objectSize, (offset + chunkSize - 1) / chunkSize * chunkSize)
    }

    /// `offset` rounded down to a chunk boundary.
    package func alignDown(_ offset: Int64) -> Int64 {
        offset / chunkSize * chunkSize
    }

    /// The chunks lying wholly inside `start ..< end`, given that `start` is chunk-aligned: every
    /// chunk up to the one containing `end`, plus the last chunk when `end` is the object's end.
    package func chunksCompleted(from start: Int64, to end: Int64) -> Range<Int> {
        let first = Int(start / chunkSize)
        let last = end >= objectSize ? chunkCount : Int(end / chunkSize)
        return first..<max(first, last)
    }
}
