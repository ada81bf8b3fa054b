/// A byte range one connection is responsible for. Bytes `start ..< position` have been written;
/// `end` can shrink while the segment is in flight, when another connection steals its tail.
///
/// Two segments can form a *hedge pair*: both fetch the same tail and share one frontier, so
/// whichever connection is ahead writes new bytes and the other's are skipped.
package final class Segment: CustomStringConvertible {
    /// Chunk-aligned first byte.
    package let start: Int64
    /// Next byte this segment's connection will deliver.
    package fileprivate(set) var position: Int64
    /// One past the last byte; shrinks when stolen from.
    package fileprivate(set) var end: Int64
    /// A connection is working on it.
    package fileprivate(set) var isOwned = false
    /// Tries in a row that ended without progress.
    package fileprivate(set) var failuresWithoutProgress = 0
    /// Not to be retried before this instant.
    package fileprivate(set) var notBefore: Moment?
    /// The other half of a hedge pair.
    package fileprivate(set) weak var partner: Segment?
    /// This segment was created as a hedge of `partner`.
    package fileprivate(set) var isHedge = false
    /// Bytes below this offset were written by a former hedge partner.
    fileprivate var coveredUpTo: Int64
    /// One past the last byte requested so far by the owning connection; bytes from here to
    /// `end` can be stolen without cutting a request short.
    package fileprivate(set) var requestedUpTo: Int64
    /// An identifier of the connection that owns it, for the caller's bookkeeping.
    package fileprivate(set) var ownerID: Int?
    /// Set while a response that must be verified first (its `Content-Digest`) is written: where
    /// it started and the failure count then. Its chunks count as complete only once confirmed.
    fileprivate var held: (from: Int64, failures: Int)?

    fileprivate init(start: Int64, end: Int64) {
        self.start = start
        self.position = start
        self.end = end
        self.coveredUpTo = start
        self.requestedUpTo = start
    }

    /// Bytes not yet asked for: stealable without cutting a request.
    package var unrequested: Int64 { max(0, end - max(frontier, requestedUpTo)) }

    /// Everything below this offset is written (by this segment or its hedge partner).
    package var frontier: Int64 {
        guard let partner else { return max(position, coveredUpTo) }
        return max(position, coveredUpTo, partner.position, partner.coveredUpTo)
    }
    /// Bytes still missing.
    package var remaining: Int64 { max(0, end - frontier) }
    package var isDone: Bool { frontier >= end }

    package var description: String {
        "[\(start) \(position)/\(end)\(isOwned ? " owned" : "")\(partner != nil ? " hedged" : "")]"
    }
}

/// Decides which bytes each connection fetches next.
///
/// Pure planning: no I/O and no clock reads (callers pass `now`). Idle connections take the largest
/// ready unowned segment; when none is left they steal the far half of the largest segment in
/// flight, so no connection idles while work remains. Split points fall on chunk boundaries so the
/// segment map can record every chunk as complete or not.
package final class SegmentScheduler {
    package let layout: ChunkLayout
    /// The initial plan does not cut segments smaller than this (small files are not over-split).
    package let minimumSegmentSize: Int64
    /// Steals take pieces down to this size (one chunk), so no connection idles near the end.
    package var minimumStealSize: Int64 { min(minimumSegmentSize, layout.chunkSize) }
    /// Segments not yet complete.
    package private(set) var segments: [Segment] = []
    /// Chunks whose bytes have all been written (not necessarily durable yet).
    package private(set) var written: ChunkSet
    /// Bytes written for the first time (duplicates from hedging excluded).
    package private(set) var bytesWritten: Int64 = 0
    /// For a sink that delivers in order (a pipe): no segment starting at or beyond this offset
    /// is handed out, and ready segments go lowest first, so connections work near the reader's
    /// position. A segment that starts below it may run past it by up to its own size.
    package var limit: Int64 = .max
    package var inOrder = false
    /// Hears of chunks that became complete (for checking digests as the bytes arrive).
    package var onChunksCompleted: ((Range<Int>) -> Void)?

    /// Plans the `missing` byte ranges (chunk-aligned) of an object; chunks outside them are
    /// already complete.
    package init(layout: ChunkLayout, missing: [ByteRange], minimumSegmentSize: Int64) {
        self.layout = layout
        self.minimumSegmentSize = max(1, minimumSegmentSize)
        written = ChunkSet(count: layout.chunkCount)
        var cursor: Int64 = 0
        for range in missing.sorted(by: { $0.lowerBound < $1.lowerBound }) where !range.isEmpty {
            precondition(range.lowerBound == layout.alignDown(range.lowerBound), "unaligned \(range)")
            markComplete(from: cursor, to: range.lowerBound)
            segments.append(Segment(start: range.lowerBound, end: range.upperBound))
            cursor = range.upperBound
        }
        markComplete(from: cursor, to: layout.objectSize)
        bytesWritten = 0
    }

    package var isComplete: Bool { segments.isEmpty }
    /// Bytes not yet written (a hedge pair's shared tail counted once).
    package var remainingBytes: Int64 {
        segments.reduce(0) { $0 + ($1.isHedge && $1.partner != nil ? 0 : $1.remaining) }
    }
    package var ownedCount: Int { segments.reduce(0) { $0 + ($1.isOwned ? 1 : 0) } }

    /// Carves `range` (chunk-aligned start) out of the unowned work as an owned segment: the
    /// probe's bytes, which arrive before any plan exists.
    package func reserve(_ range: ByteRange, ownerID: Int? = nil) -> Segment? {
        guard let index = segments.firstIndex(where: { !$0.isOwned && $0.start == range.lowerBound }) else {
            return nil
        }
        let host = segments[index]
        let end = min(range.upperBound, host.end)
        if end < host.end {
            let rest = Segment(start: end, end: host.end)
            segments.insert(rest, at: index + 1)
            host.end = end
        }
        host.isOwned = true
        host.ownerID = ownerID
        return host
    }

    /// Divides the unowned work into about `count` equal segments (none below the minimum
    /// segment size): the initial plan for `count` connections.
    package func split(into count: Int) {
        let unowned = segments.filter { !$0.isOwned && !$0.isDone }
        let total = unowned.reduce(0) { $0 + $1.remaining }
        guard count > unowned.count, total > 0 else { return }
        for segment in unowned {
            let share = Int((Double(segment.remaining) / Double(total) * Double(count)).rounded())
            var parts = min(max(1, share), Int(segment.remaining / minimumSegmentSize))
            // Cut the last part off, then the one before it, and so on.
            while parts > 1 {
                guard let piece = splitOff(segment, keeping: Int64(parts - 1), of: Int64(parts)) else { break }
                insert(piece)
                parts -= 1
            }
        }
    }

    /// Cuts every unowned segment into pieces of at most `size` bytes (at chunk boundaries), so
    /// that work handed out below ``limit`` reaches at most `size` past it.
    package func chop(maxSize size: Int64) {
        for segment in segments where !segment.isOwned && !segment.isDone {
            var current = segment
            while current.end - current.frontier > size,
                let piece = split(current, exactlyAt: current.frontier + size, minimum: layout.chunkSize)
            {
                insert(piece)
                current = piece
            }
        }
    }

    /// Lowest work first, in pieces of at most `size` bytes (chunk-aligned, a chunk at least), so
    /// a reader of the object's complete prefix (a pipe, a hash in order) waits for little.
    /// Returns the piece size.
    @discardableResult
    package func takeInOrder(pieces size: Int64) -> Int64 {
        let piece = max(layout.chunkSize, layout.alignDown(size))
        inOrder = true
        chop(maxSize: piece)
        return piece
    }

    /// Every piece of work that may be handed out now is owned (hedging looks at the slow ones).
    package var allAvailableWorkOwned: Bool {
        segments.allSatisfy { $0.isOwned || $0.start >= limit }
    }

    /// The next segment for an idle connection, now owned by it, or `nil` when there is nothing to
    /// take right now (see ``nextRetryTime``).
    ///
    /// In order: the largest ready unowned segment; else half of the largest tail nobody has
    /// requested yet; else, where `cut` names a point, the far part of a request in flight (its
    /// connection then stops at that point).
    package func claim(
        now: Moment, ownerID: Int? = nil, cut: (Segment) -> Int64? = { _ in nil }
    ) -> Segment? {
        let ready = segments.filter {
            !$0.isOwned && !$0.isDone && $0.start < limit && ($0.notBefore.map { $0 <= now } ?? true)
        }
        if let largest = inOrder
            ? ready.min(by: { $0.start < $1.start }) : ready.max(by: { $0.remaining < $1.remaining })
        {
            largest.isOwned = true
            largest.ownerID = ownerID
            largest.notBefore = nil
            return largest
        }
        return steal(ownerID: ownerID, cut: cut)
    }

    /// Takes the far half of the largest tail not yet requested, or failing that a part of a
    /// request in flight at the point `cut` gives; the victim's end shrinks.
    package func steal(ownerID: Int? = nil, cut: (Segment) -> Int64? = { _ in nil }) -> Segment? {
        let candidates = segments.filter { $0.isOwned && $0.partner == nil && !$0.isDone }
        var piece: Segment?
        // Tails nobody asked for yet, largest first: taking one costs nothing.
        for victim in candidates.sorted(by: { $0.unrequested > $1.unrequested })
        where victim.unrequested >= minimumStealSize {
            let half = victim.frontier + (victim.end - victim.frontier) / 2
            if let taken = split(
                victim, near: half, notBelow: max(victim.frontier, victim.requestedUpTo), minimum: minimumStealSize)
            {
                piece = taken
                break
            }
        }
        if piece == nil {
            // Requests in flight, where the session judges cutting worth it.
            for victim in candidates.sorted(by: { $0.remaining > $1.remaining }) {
                guard let point = cut(victim), let taken = split(victim, exactlyAt: point, minimum: minimumStealSize)
                else { continue }
                piece = taken
                break
            }
        }
        guard let piece else { return nil }
        piece.isOwned = true
        piece.ownerID = ownerID
        insert(piece)
        return piece
    }

    /// Records that `segment`'s connection has asked for the bytes up to `offset`.
    package func noteRequested(_ segment: Segment, upTo offset: Int64) {
        segment.requestedUpTo = max(segment.requestedUpTo, min(offset, segment.end))
    }

    /// Starts a hedge of `victim`'s tail: a new owned segment fetching the same bytes from the
    /// chunk boundary at or below the victim's frontier.
    package func hedge(_ victim: Segment, ownerID: Int? = nil) -> Segment? {
        guard victim.isOwned, victim.partner == nil, !victim.isDone else { return nil }
        let hedge = Segment(start: layout.alignDown(victim.frontier), end: victim.end)
        hedge.isOwned = true
        hedge.ownerID = ownerID
        hedge.isHedge = true
        hedge.partner = victim
        victim.partner = hedge
        insert(hedge)
        return hedge
    }

    /// Segments in flight that could be hedged: owned, unpaired, not finished.
    package var hedgeCandidates: [Segment] {
        segments.filter { $0.isOwned && $0.partner == nil && !$0.isDone }
    }

    /// What to do with `count` bytes arriving for `segment` at its position: how many it accepts
    /// (fewer when its end shrank), which of them to write (none that a hedge partner already
    /// wrote) and at what offset. Call ``advance(_:by:)`` once they are written.
    package func plannedWrite(_ segment: Segment, count: Int) -> (accepted: Int, write: Range<Int>, offset: Int64) {
        let accepted = Int(min(Int64(count), max(0, segment.end - segment.position)))
        let skip = Int(min(Int64(accepted), max(0, segment.frontier - segment.position)))
        return (accepted, skip..<accepted, segment.position + Int64(skip))
    }

    /// Records that `segment`'s next `count` bytes are written.
    package func advance(_ segment: Segment, by count: Int) {
        let oldFrontier = segment.frontier
        segment.position += Int64(count)
        let newFrontier = segment.frontier
        if newFrontier > oldFrontier {
            bytesWritten += newFrontier - oldFrontier
            if segment.held == nil { markComplete(from: oldFrontier, to: newFrontier) }
        }
        if count > 0 { segment.failuresWithoutProgress = 0 }
    }

    /// The response about to fill `segment` from its position must be verified before its bytes
    /// count: until ``confirm(_:)``, its chunks are not complete (no checkpoint records them).
    /// Not for a hedge pair (the partner would count on bytes that may be taken back).
    package func hold(_ segment: Segment) {
        precondition(segment.partner == nil, "holding a hedged segment")
        segment.held = (segment.frontier, segment.failuresWithoutProgress)
    }

    /// The held response's bytes are good: they count now.
    package func confirm(_ segment: Segment) {
        guard let held = segment.held else { return }
        segment.held = nil
        markComplete(from: held.from, to: segment.frontier)
    }

    /// The held response's bytes are bad or unverifiable: they are fetched again, and the
    /// response does not count as progress. Returns the bytes taken back.
    @discardableResult
    package func rewind(_ segment: Segment) -> ByteRange? {
        guard let held = segment.held else { return nil }
        let taken = ByteRange(held.from, max(held.from, segment.position))
        segment.held = nil
        bytesWritten -= max(0, segment.frontier - held.from)
        segment.position = min(segment.position, held.from)
        segment.coveredUpTo = min(segment.coveredUpTo, held.from)
        segment.requestedUpTo = segment.position
        segment.failuresWithoutProgress = held.failures
        return taken
    }

    /// Whether the byte at `offset` is written (by any segment, or before the plan began).
    package func isWritten(_ offset: Int64) -> Bool {
        guard offset >= 0, offset < layout.objectSize else { return false }
        return !segments.contains { offset >= $0.frontier && offset < $0.end }
    }

    /// The connection working on `segment` stopped before its end. A failure counts against the
    /// segment's tries (reset by progress) and delays its next try until `retryAt`.
    package func release(_ segment: Segment, failed: Bool, retryAt: Moment? = nil) {
        segment.isOwned = false
        segment.ownerID = nil
        segment.requestedUpTo = segment.frontier
        if failed {
            segment.failuresWithoutProgress += 1
            segment.notBefore = retryAt
        }
        if let partner = segment.partner {
            // A hedge pair falls apart when one side stops early: the other carries on alone,
            // remembering what this side wrote, and this side is no longer needed.
            partner.coveredUpTo = max(partner.coveredUpTo, segment.frontier)
            partner.partner = nil
            segment.partner = nil
            remove(segment)
            return
        }
        if segment.isDone { remove(segment) }
    }

    /// Removes a finished segment (and its hedge partner, which is finished too).
    package func finish(_ segment: Segment) {
        precondition(segment.isDone, "finishing an incomplete segment \(segment)")
        remove(segment)
        if let partner = segment.partner {
            partner.partner = nil
            segment.partner = nil
            if partner.position < partner.end { partner.end = max(partner.position, partner.start) }
            remove(partner)
        }
    }

    /// The earliest time an unowned segment becomes ready again, if one is waiting.
    package var nextRetryTime: Moment? {
        segments.compactMap { $0.isOwned ? nil : $0.notBefore }.min()
    }

    /// The largest number of failed tries without progress among the segments.
    package var worstFailureCount: Int { segments.map(\.failuresWithoutProgress).max() ?? 0 }

    /// All missing bytes as ranges, for the segment map.
    package var missingRanges: [ByteRange] {
        written.missingRuns.map { layout.byteRange(ofChunks: $0) }
    }

    // MARK: Private

    private func remove(_ segment: Segment) {
        segments.removeAll { $0 === segment }
    }

    private func insert(_ segment: Segment) {
        let index = segments.firstIndex { $0.start > segment.start } ?? segments.endIndex
        segments.insert(segment, at: index)
    }

    /// Splits `segment`'s remaining bytes at a chunk boundary near `keeping/of` of the way, returning
    /// the far part as a new unowned segment; `nil` when either part would be smaller than the
    /// minimum segment size.
    private func splitOff(_ segment: Segment, keeping numerator: Int64, of denominator: Int64) -> Segment? {
        let from = segment.frontier
        return split(
            segment, near: from + (segment.end - from) * numerator / denominator, notBelow: from,
            minimum: minimumSegmentSize)
    }

    /// Cuts `segment` at the chunk boundary at or above `offset`, or not at all when that leaves
    /// less than `minimum` bytes on either side.
    private func split(_ segment: Segment, exactlyAt offset: Int64, minimum: Int64) -> Segment? {
        let point = layout.alignUp(offset)
        guard point - segment.frontier >= minimum, segment.end - point >= minimum else { return nil }
        let piece = Segment(start: point, end: segment.end)
        segment.end = point
        return piece
    }

    /// Cuts `segment` at the chunk boundary nearest `target` that leaves at least `minimum` bytes
    /// on each side and is not below `floor`, returning the far part as a new unowned segment;
    /// `nil` when no boundary qualifies.
    private func split(_ segment: Segment, near target: Int64, notBelow floor: Int64, minimum: Int64) -> Segment? {
        let lowest = layout.alignUp(max(floor, segment.frontier + minimum))
        let highest = layout.alignDown(segment.end - minimum)
        guard lowest <= highest, lowest < segment.end else { return nil }
        let point = min(max(layout.alignUp(target), lowest), highest)
        guard point > segment.frontier, point < segment.end else { return nil }
        let piece = Segment(start: point, end: segment.end)
        segment.end = point
        return piece
    }

    private func markComplete(from start: Int64, to end: Int64) {
        guard end > start else { return }
        let chunks = layout.chunksCompleted(from: start, to: end)
        written.insert(contentsOf: chunks)
        if !chunks.isEmpty { onChunksCompleted?(chunks) }
    }
}
