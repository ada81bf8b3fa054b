import SwoopCore

/// The CRC of each stretch of an object checked so far: runs of bytes, disjoint and in order,
/// each with its CRC. Adjacent runs merge by ``CRC/combine(_:_:secondLength:)``, so a finished
/// object is one run whose CRC is the object's. Kept in the segment map, so a resumed download
/// does not read again what it already checked. Pure.
package struct CRCRuns: Equatable, Sendable {
    package struct Run: Equatable, Sendable {
        package var range: ByteRange
        package var crc: UInt64
    }

    package let algorithm: Checksum.Algorithm
    package private(set) var runs: [Run] = []

    package init(algorithm: Checksum.Algorithm) {
        precondition(algorithm.isCRC, "\(algorithm) is not a CRC")
        self.algorithm = algorithm
    }

    /// Runs as decoded from a map: `nil` unless they are in order, disjoint and not adjacent.
    package init?(algorithm: Checksum.Algorithm, runs: [Run]) {
        guard algorithm.isCRC else { return nil }
        for (index, run) in runs.enumerated()
        where run.range.isEmpty || (index > 0 && runs[index - 1].range.upperBound >= run.range.lowerBound) {
            return nil
        }
        self.algorithm = algorithm
        self.runs = runs
    }

    /// The parts of `range` no run covers yet.
    package func gaps(in range: ByteRange) -> [ByteRange] {
        var gaps: [ByteRange] = []
        var cursor = range.lowerBound
        for run in runs where run.range.upperBound > cursor && run.range.lowerBound < range.upperBound {
            if run.range.lowerBound > cursor { gaps.append(ByteRange(cursor, run.range.lowerBound)) }
            cursor = max(cursor, run.range.upperBound)
        }
        if cursor < range.upperBound { gaps.append(ByteRange(cursor, range.upperBound)) }
        return gaps
    }

    /// Adds the CRC of `range`, which no run covers, merging it with its neighbours.
    package mutating func insert(_ range: ByteRange, crc value: UInt64) {
        guard !range.isEmpty, let crc = algorithm.crc else { return }
        let index = runs.firstIndex { $0.range.lowerBound >= range.upperBound } ?? runs.endIndex
        if index > 0 {
            precondition(
                runs[index - 1].range.upperBound <= range.lowerBound, "\(range) overlaps \(runs[index - 1].range)")
        }
        var run = Run(range: range, crc: value)
        var at = index
        if at > 0, runs[at - 1].range.upperBound == range.lowerBound {
            let before = runs.remove(at: at - 1)
            run = Run(
                range: ByteRange(before.range.lowerBound, range.upperBound),
                crc: crc.combine(before.crc, run.crc, secondLength: range.count))
            at -= 1
        }
        if at < runs.count, runs[at].range.lowerBound == range.upperBound {
            let after = runs.remove(at: at)
            run = Run(
                range: ByteRange(run.range.lowerBound, after.range.upperBound),
                crc: crc.combine(run.crc, after.crc, secondLength: after.range.count))
        }
        runs.insert(run, at: at)
    }

    /// The object's CRC, once one run covers all `size` bytes (0 bytes: the CRC of nothing).
    package func whole(size: Int64) -> UInt64? {
        if size == 0 { return 0 }
        guard runs.count == 1, runs[0].range == ByteRange(0, size) else { return nil }
        return runs[0].crc
    }

    /// Only the runs made of chunks `chunks` says are complete (a map's own record, on resume).
    package func keeping(complete chunks: ChunkSet, layout: ChunkLayout) -> CRCRuns {
        var kept = CRCRuns(algorithm: algorithm)
        kept.runs = runs.filter { run in
            let aligned =
                run.range.lowerBound == layout.alignDown(run.range.lowerBound)
                && (run.range.upperBound == layout.objectSize
                    || run.range.upperBound == layout.alignDown(run.range.upperBound))
            guard aligned, run.range.upperBound <= layout.objectSize else { return false }
            let first = Int(run.range.lowerBound / layout.chunkSize)
            let last = Int((run.range.upperBound + layout.chunkSize - 1) / layout.chunkSize)
            return (first..<last).allSatisfy(chunks.contains)
        }
        return kept
    }
}
