import SwoopTestSupport
import Testing
@testable import SwoopCore

/// What must hold after every step.
extension SchedulerSimulation {
    func checkInvariants(full: Bool) {
        let segments = scheduler.segments
        let chunk = layout.chunkSize
        let size = layout.objectSize
        var inFlight = IntervalSet()
        for segment in segments {
            check(segment.start % chunk == 0, "segment \(segment) starts off a chunk boundary")
            check(segment.end % chunk == 0 || segment.end == size, "segment \(segment) ends off a chunk boundary")
            check(
                segment.start <= segment.position && segment.position <= segment.end && segment.end <= size,
                "segment \(segment) out of order")
            check(
                missing.contains(segment.start..<segment.end), "segment \(segment) covers bytes that were not missing")
            if let partner = segment.partner {
                check(partner.partner === segment, "hedge partners not mutual: \(segment)")
                check(segments.contains { $0 === partner }, "partner of \(segment) is not planned")
                check(
                    partner.end == segment.end && segment.isOwned && partner.isOwned,
                    "hedge pair \(segment) / \(partner) disagree or unowned")
            }
            if !segment.isOwned {
                check(segment.partner == nil, "unowned segment \(segment) still paired")
            }
            // What a segment still has to fetch is not on disk yet (else it would be written twice).
            if segment.frontier < segment.end {
                let ahead = segment.frontier..<segment.end
                check(
                    !written.intersects(ahead),
                    "segment \(segment) (frontier \(segment.frontier)) still plans \(written.overlapCount(ahead)) "
                        + "written bytes"
                )
            }
            // Below its frontier, everything of the segment is on disk.
            check(
                written.contains(segment.start..<min(segment.frontier, segment.end)),
                "segment \(segment) claims \(segment.start)..<\(segment.frontier) written, but it is not")
            inFlight.formUnion(segment.frontier..<max(segment.frontier, segment.end))
        }
        // No two segments overlap, except the two halves of a hedge pair (taken as one span here).
        var spans: [(lower: Int64, upper: Int64, segment: Segment)] = []
        for segment in segments {
            if let partner = segment.partner, ObjectIdentifier(partner) < ObjectIdentifier(segment) { continue }
            spans.append((min(segment.start, segment.partner?.start ?? segment.start), segment.end, segment))
        }
        spans.sort { $0.lower < $1.lower }
        for (left, right) in zip(spans, spans.dropFirst()) where left.upper > right.lower {
            check(false, "segments overlap: \(left.segment) and \(right.segment)")
        }
        // Every missing byte not yet written is some segment's job: nothing falls through the cracks.
        let outstanding = missing.subtracting(written)
        let orphaned = outstanding.subtracting(inFlight)
        check(orphaned.ranges.isEmpty, "bytes \(orphaned) are missing but no segment will fetch them")
        check(
            scheduler.bytesWritten == written.count,
            "bytesWritten \(scheduler.bytesWritten) != bytes written \(written.count)")
        check(
            scheduler.written.completedCount == completeChunks,
            "written has \(scheduler.written.completedCount) chunks, \(completeChunks) are complete")
        check(scheduler.isComplete == segments.isEmpty, "isComplete disagrees with segments")
        check(scheduler.ownedCount == segments.filter(\.isOwned).count, "ownedCount wrong")
        if full {
            for index in 0..<layout.chunkCount {
                let complete = chunkBytes[index] == layout.byteRange(ofChunks: index..<index + 1).count
                if scheduler.written.contains(index) != complete {
                    check(false, "chunk \(index): written says \(!complete), \(chunkBytes[index]) bytes present")
                    break
                }
            }
            let expectedMissing = IntervalSet(scheduler.missingRanges.map { $0.lowerBound..<$0.upperBound })
            var incomplete = IntervalSet()
            for index in 0..<layout.chunkCount
            where chunkBytes[index] != layout.byteRange(ofChunks: index..<index + 1).count {
                let bounds = layout.byteRange(ofChunks: index..<index + 1)
                incomplete.formUnion(bounds.lowerBound..<bounds.upperBound)
            }
            check(expectedMissing == incomplete, "missingRanges \(expectedMissing) != incomplete chunks \(incomplete)")
        }
    }
}
