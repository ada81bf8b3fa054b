/// Which response wrote which bytes, which responses were seen to agree, and the overlap bytes
/// still waiting for the response that writes them: the proof that a file is one version.
///
/// Validators can lie (a pool whose nodes have different mtimes, a cache that serves old ones
/// after a replace), so the bytes already held are the reference. Every request for bytes that
/// do not start at 0 also asks for a few KiB before them (its *lead*, see ``RangeRequest``), and
/// one that ends where bytes are already held asks for a few KiB after (its *trail*). Those
/// overlap bytes are compared with what is held, at once; bytes not held yet wait here (a
/// *stash*) and are compared when a response writes them. Two responses that showed the same
/// bytes at the same offsets *agree*; agreement is transitive. The object is *stitched* when
/// every piece of it was written by responses that all agree: only then may it be finalized.
///
/// A disagreement means the server served two versions (the object changed, or a pool serves
/// two): the caller drops the response and follows the change rule. What no overlap can see is a
/// change that leaves every compared window as it was (and no digest covers).
///
/// Pure bookkeeping: the bytes held are read through the closure the caller passes.
package final class AgreementLedger {
    package typealias ResponseID = Int

    /// Two responses showed different bytes at `range`.
    package struct Disagreement: Equatable, Sendable {
        package var range: ByteRange
        /// The response whose bytes were there first (written, or waiting).
        package var earlier: ResponseID
        /// The response that brought the other bytes.
        package var later: ResponseID
    }

    /// Bytes one response wrote.
    private struct Piece {
        var range: ByteRange
        var response: ResponseID
    }

    /// Overlap bytes that arrived before the bytes they overlap were written.
    private struct Stash {
        var range: ByteRange
        var bytes: [UInt8]
        var response: ResponseID
    }

    /// The overlap asked for on each side of a response's own bytes.
    package static let defaultWindow: Int64 = 4096

    package let size: Int64
    package let window: Int64
    /// Disjoint, sorted by offset.
    private var pieces: [Piece] = []
    private var stashes: [Stash] = []
    /// Union-find over responses: agreeing responses share a root.
    private var parent: [ResponseID] = []
    /// Overlap bytes compared or stashed so far (bytes fetched twice).
    package private(set) var overlapBytes: Int64 = 0

    /// Bytes another task fetches (an ``ObjectShare``'s other stripes), sorted: never written
    /// here, so overlap into them is neither compared nor kept, and pieces on either side of them
    /// need not be seen to agree (the task that finishes the object checks those seams).
    package let foreign: [ByteRange]

    /// A ledger for an object of `size` bytes, of which `held` (an earlier run's complete
    /// stretches, sorted) are on disk: each is its own piece, agreeing with nothing yet, since
    /// what an earlier run saw of its neighbours is gone. `foreign`: see ``foreign``.
    package init(
        size: Int64, held: [ByteRange] = [], foreign: [ByteRange] = [], window: Int64 = AgreementLedger.defaultWindow
    ) {
        self.size = size
        self.window = max(1, window)
        self.foreign = foreign.filter { !$0.isEmpty }
        let stretches = held.filter { !$0.isEmpty }
        resumedResponses = stretches.count
        parent = Array(stretches.indices)
        pieces = zip(stretches, stretches.indices).map { Piece(range: $0, response: $1) }
    }

    /// The pieces an earlier run left (responses below this): their leads died with it.
    private let resumedResponses: Int

    /// Whether a request whose own bytes end at `offset` must also ask for the bytes after it (a
    /// trail): only when they are an earlier run's, whose lead no response of this run holds.
    /// Bytes written in this run came with a lead, which either waits for the bytes before them
    /// (and is compared when they are written) or was compared with them already.
    package func needsTrail(at offset: Int64) -> Bool {
        guard let index = pieceIndex(containing: offset), pieces[index].range.contains(offset) else { return false }
        return pieces[index].response < resumedResponses
    }

    /// A new response, agreeing with nothing yet.
    package func beginResponse() -> ResponseID {
        parent.append(parent.count)
        return parent.count - 1
    }

    /// Whether the byte at `offset` is written.
    package func isHeld(_ offset: Int64) -> Bool {
        guard let index = pieceIndex(containing: offset) else { return false }
        return pieces[index].range.contains(offset)
    }

    // MARK: Overlap bytes

    /// `bytes`, which `response` carries at `offset` beside its own, are compared with what is
    /// held there (read by `read`; `nil` when it cannot be read, which proves nothing) and wait
    /// where nothing is held yet. Returns the first disagreement.
    package func compare(
        _ bytes: UnsafeRawBufferPointer, at offset: Int64, from response: ResponseID,
        read: (ByteRange) -> [UInt8]?
    ) -> Disagreement? {
        guard !bytes.isEmpty else { return nil }
        overlapBytes += Int64(bytes.count)
        let span = ByteRange(offset, offset + Int64(bytes.count))
        if !foreign.isEmpty {
            // Overlap into another task's bytes: compared by nobody here (see `foreign`).
            for part in span.subtracting(foreign) {
                let slice = UnsafeRawBufferPointer(
                    rebasing: bytes[Int(part.lowerBound - offset)..<Int(part.upperBound - offset)])
                if let disagreement = compareHere(slice, span: part, from: response, read: read) {
                    return disagreement
                }
            }
            return nil
        }
        return compareHere(bytes, span: span, from: response, read: read)
    }

    /// ``compare(_:at:from:read:)`` for bytes wholly outside ``foreign``.
    private func compareHere(
        _ bytes: UnsafeRawBufferPointer, span: ByteRange, from response: ResponseID, read: (ByteRange) -> [UInt8]?
    ) -> Disagreement? {
        let offset = span.lowerBound
        var cursor = offset
        var index = pieceIndex(containing: offset) ?? 0
        while cursor < span.upperBound {
            // Skip pieces that end before the cursor.
            while index < pieces.count, pieces[index].range.upperBound <= cursor { index += 1 }
            let next = index < pieces.count ? pieces[index] : nil
            if let next, next.range.lowerBound <= cursor {
                let part = ByteRange(cursor, min(span.upperBound, next.range.upperBound))
                if let held = read(part) {
                    let arriving = bytes[Int(part.lowerBound - offset)..<Int(part.upperBound - offset)]
                    guard ByteComparison.equal(held, arriving) else {
                        return Disagreement(range: part, earlier: next.response, later: response)
                    }
                    union(next.response, response)
                }
                cursor = part.upperBound
            } else {
                let gapEnd = min(span.upperBound, next?.range.lowerBound ?? span.upperBound)
                let part = ByteRange(cursor, gapEnd)
                let slice = bytes[Int(part.lowerBound - offset)..<Int(part.upperBound - offset)]
                stash(Stash(range: part, bytes: Array(slice), response: response))
                cursor = gapEnd
            }
        }
        return nil
    }

    /// `response` writes `bytes` at `offset`, where nothing is written yet: they are compared
    /// with any overlap bytes waiting there, then recorded as its piece. Nothing is recorded
    /// when they disagree.
    package func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64, by response: ResponseID) -> Disagreement? {
        guard !bytes.isEmpty else { return nil }
        let span = ByteRange(offset, offset + Int64(bytes.count))
        if !stashes.isEmpty, let disagreement = settleStashes(bytes, span: span, writer: response) {
            return disagreement
        }
        record(span, by: response)
        return nil
    }

    /// The bytes at `range` are taken back (a response that failed its own digest): whatever
    /// wrote them, they will be written again.
    package func forget(_ range: ByteRange) {
        guard !range.isEmpty else { return }
        var kept: [Piece] = []
        kept.reserveCapacity(pieces.count + 1)
        for piece in pieces {
            if piece.range.upperBound <= range.lowerBound || piece.range.lowerBound >= range.upperBound {
                kept.append(piece)
                continue
            }
            if piece.range.lowerBound < range.lowerBound {
                kept.append(Piece(range: ByteRange(piece.range.lowerBound, range.lowerBound), response: piece.response))
            }
            if piece.range.upperBound > range.upperBound {
                kept.append(Piece(range: ByteRange(range.upperBound, piece.range.upperBound), response: piece.response))
            }
        }
        pieces = kept
    }

    // MARK: Stitching

    /// Whether `a` and `b` were seen to agree (directly or through others).
    package func agree(_ a: ResponseID, _ b: ResponseID) -> Bool {
        root(a) == root(b)
    }

    /// Offsets where two written pieces meet whose responses were not seen to agree: each needs a
    /// response that overlaps both sides (a bridge) before the object is one version.
    package var breaks: [Int64] {
        var result: [Int64] = []
        for index in pieces.indices.dropFirst() {
            let (left, right) = (pieces[index - 1], pieces[index])
            if left.range.upperBound == right.range.lowerBound, root(left.response) != root(right.response) {
                result.append(right.range.lowerBound)
            }
        }
        return result
    }

    /// Every written piece comes from responses that all agree (between stretches of
    /// ``foreign`` bytes: pieces they separate are checked by the task that finishes the object).
    package var isStitched: Bool {
        guard let first = pieces.first else { return true }
        var anchor = root(first.response)
        var previous = first.range
        for piece in pieces.dropFirst() {
            if isForeignBetween(previous.upperBound, piece.range.lowerBound) {
                anchor = root(piece.response)
            } else if root(piece.response) != anchor {
                return false
            }
            previous = piece.range
        }
        return true
    }

    /// Whether foreign bytes lie between `from` and `to` (where one piece ends and the next begins).
    private func isForeignBetween(_ from: Int64, _ to: Int64) -> Bool {
        to > from && foreign.contains { $0.lowerBound < to && $0.upperBound > from }
    }

    /// Bytes written, in pieces (for tests and checks).
    package var writtenBytes: Int64 { pieces.reduce(0) { $0 + $1.range.count } }

    /// Overlap bytes still waiting for the bytes they overlap.
    package var waitingBytes: Int64 { stashes.reduce(0) { $0 + $1.range.count } }

    // MARK: Private

    /// The index of the last piece starting at or before `offset`.
    private func pieceIndex(containing offset: Int64) -> Int? {
        var low = 0
        var high = pieces.count
        while low < high {
            let mid = (low + high) / 2
            if pieces[mid].range.lowerBound <= offset { low = mid + 1 } else { high = mid }
        }
        return low == 0 ? nil : low - 1
    }

    private func record(_ span: ByteRange, by response: ResponseID) {
        let before = pieceIndex(containing: span.lowerBound)
        if let before, pieces[before].response == response, pieces[before].range.upperBound == span.lowerBound {
            pieces[before].range.upperBound = span.upperBound
            return
        }
        let at = before.map { $0 + 1 } ?? 0
        pieces.insert(Piece(range: span, response: response), at: at)
    }

    private func stash(_ stash: Stash) {
        stashes.append(stash)
    }

    /// Compares the stashes that `span` covers with `bytes`; agreeing parts are settled and
    /// dropped.
    private func settleStashes(_ bytes: UnsafeRawBufferPointer, span: ByteRange, writer: ResponseID) -> Disagreement? {
        var index = 0
        while index < stashes.count {
            let stash = stashes[index]
            let common = stash.range.clamped(to: span)
            guard !common.isEmpty else {
                index += 1
                continue
            }
            let waiting = stash.bytes[
                Int(common.lowerBound - stash.range.lowerBound)..<Int(common.upperBound - stash.range.lowerBound)]
            let arriving = bytes[Int(common.lowerBound - span.lowerBound)..<Int(common.upperBound - span.lowerBound)]
            guard ByteComparison.equal(waiting, arriving) else {
                return Disagreement(range: common, earlier: stash.response, later: writer)
            }
            union(stash.response, writer)
            // Keep what the write did not reach (at most one part on each side).
            var rest: [Stash] = []
            if stash.range.lowerBound < common.lowerBound {
                let count = Int(common.lowerBound - stash.range.lowerBound)
                rest.append(
                    Stash(
                        range: ByteRange(stash.range.lowerBound, common.lowerBound),
                        bytes: Array(stash.bytes.prefix(count)), response: stash.response))
            }
            if stash.range.upperBound > common.upperBound {
                let count = Int(stash.range.upperBound - common.upperBound)
                rest.append(
                    Stash(
                        range: ByteRange(common.upperBound, stash.range.upperBound),
                        bytes: Array(stash.bytes.suffix(count)), response: stash.response))
            }
            stashes.replaceSubrange(index...index, with: rest)
            index += rest.count
        }
        return nil
    }

    private func root(_ response: ResponseID) -> ResponseID {
        var node = response
        while parent[node] != node {
            parent[node] = parent[parent[node]]
            node = parent[node]
        }
        return node
    }

    private func union(_ a: ResponseID, _ b: ResponseID) {
        let (rootA, rootB) = (root(a), root(b))
        if rootA != rootB { parent[max(rootA, rootB)] = min(rootA, rootB) }
    }
}
