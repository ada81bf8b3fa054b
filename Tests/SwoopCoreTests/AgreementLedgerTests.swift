import Testing
@testable import SwoopCore

/// The ledger alone: overlap compared with held bytes or left waiting, agreement, breaks.
@Suite("AgreementLedger")
struct AgreementLedgerTests {
    /// A file in memory that the ledger reads held bytes from.
    final class File {
        var bytes: [UInt8]
        init(size: Int) { bytes = [UInt8](repeating: 0, count: size) }

        func read(_ range: ByteRange) -> [UInt8]? {
            Array(bytes[Int(range.lowerBound)..<Int(range.upperBound)])
        }
    }

    /// Bytes of version `version` at `range`: different versions differ at every offset.
    static func content(_ range: ByteRange, version: Int = 0) -> [UInt8] {
        (range.lowerBound..<range.upperBound).map {
            UInt8(truncatingIfNeeded: ($0 &* 2_654_435_761) >> 7) &+ UInt8(version)
        }
    }

    private func write(
        _ ledger: AgreementLedger, _ file: File, _ range: ByteRange, by response: Int, version: Int = 0
    ) -> AgreementLedger.Disagreement? {
        let bytes = Self.content(range, version: version)
        let disagreement = bytes.withUnsafeBytes { ledger.write($0, at: range.lowerBound, by: response) }
        if disagreement == nil {
            file.bytes.replaceSubrange(Int(range.lowerBound)..<Int(range.upperBound), with: bytes)
        }
        return disagreement
    }

    private func compare(
        _ ledger: AgreementLedger, _ file: File, _ range: ByteRange, from response: Int, version: Int = 0
    ) -> AgreementLedger.Disagreement? {
        Self.content(range, version: version).withUnsafeBytes {
            ledger.compare($0, at: range.lowerBound, from: response, read: file.read)
        }
    }

    @Test func aLeadOverHeldBytesIsComparedAtOnce() {
        let ledger = AgreementLedger(size: 100_000)
        let file = File(size: 100_000)
        let (left, right) = (ledger.beginResponse(), ledger.beginResponse())
        #expect(write(ledger, file, ByteRange(0, 50_000), by: left) == nil)
        #expect(compare(ledger, file, ByteRange(45_904, 50_000), from: right) == nil)
        #expect(ledger.agree(left, right) && ledger.waitingBytes == 0)
        #expect(write(ledger, file, ByteRange(50_000, 100_000), by: right) == nil)
        #expect(ledger.isStitched && ledger.breaks.isEmpty && ledger.overlapBytes == 4096)
    }

    @Test func aLeadOverMissingBytesWaitsForTheirWriter() {
        let ledger = AgreementLedger(size: 100_000)
        let file = File(size: 100_000)
        let (left, right) = (ledger.beginResponse(), ledger.beginResponse())
        // The right-hand response arrives first: its lead waits.
        #expect(compare(ledger, file, ByteRange(45_904, 50_000), from: right) == nil)
        #expect(ledger.waitingBytes == 4096 && !ledger.agree(left, right))
        #expect(write(ledger, file, ByteRange(50_000, 100_000), by: right) == nil)
        #expect(ledger.waitingBytes == 4096)
        // The left-hand one writes across the waiting bytes in two pieces.
        #expect(write(ledger, file, ByteRange(0, 47_000), by: left) == nil)
        #expect(ledger.waitingBytes == 3000)
        #expect(write(ledger, file, ByteRange(47_000, 50_000), by: left) == nil)
        #expect(ledger.waitingBytes == 0 && ledger.agree(left, right) && ledger.isStitched)
    }

    @Test func differentBytesAreADisagreementWhoeverComesSecond() {
        let file = File(size: 100_000)
        let held = AgreementLedger(size: 100_000)
        let old = held.beginResponse()
        _ = write(held, file, ByteRange(0, 50_000), by: old)
        let new = held.beginResponse()
        let atOnce = compare(held, file, ByteRange(45_904, 50_000), from: new, version: 1)
        #expect(atOnce == AgreementLedger.Disagreement(range: ByteRange(45_904, 50_000), earlier: old, later: new))

        let waiting = AgreementLedger(size: 100_000)
        let (left, right) = (waiting.beginResponse(), waiting.beginResponse())
        #expect(compare(waiting, File(size: 100_000), ByteRange(45_904, 50_000), from: right, version: 1) == nil)
        let later = write(waiting, File(size: 100_000), ByteRange(0, 50_000), by: left)
        #expect(later?.earlier == right && later?.later == left && later?.range == ByteRange(45_904, 50_000))
    }

    @Test func resumedStretchesAgreeWithNothingUntilBridged() {
        // An earlier run's two stretches: each its own piece, agreeing with nothing yet.
        let ledger = AgreementLedger(size: 30_000, held: [ByteRange(0, 10_000), ByteRange(20_000, 30_000)])
        let file = File(size: 30_000)
        file.bytes = Self.content(ByteRange(0, 30_000))
        #expect(!ledger.isStitched && ledger.isHeld(9_999) && !ledger.isHeld(10_000))
        // A request ending where an earlier run's bytes begin asks for a trail into them: no lead
        // of theirs is held in this run.
        #expect(ledger.needsTrail(at: 20_000) && !ledger.needsTrail(at: 15_000))
        // The gap's response: a lead into the first, its own bytes, no trail yet.
        let filler = ledger.beginResponse()
        #expect(compare(ledger, file, ByteRange(5_904, 10_000), from: filler) == nil)
        #expect(write(ledger, file, ByteRange(10_000, 20_000), by: filler) == nil)
        #expect(ledger.breaks == [20_000] && !ledger.isStitched)
        // Bytes of this run came with a lead: no trail needed into them.
        #expect(!ledger.needsTrail(at: 10_000))
        // A bridge over the break: overlap on both sides.
        let bridge = ledger.beginResponse()
        #expect(compare(ledger, file, ByteRange(15_904, 24_096), from: bridge) == nil)
        #expect(ledger.breaks.isEmpty && ledger.isStitched)
    }

    @Test func forgottenBytesAreWrittenAgain() {
        let ledger = AgreementLedger(size: 10_000)
        let file = File(size: 10_000)
        let first = ledger.beginResponse()
        _ = write(ledger, file, ByteRange(0, 10_000), by: first)
        ledger.forget(ByteRange(4_000, 6_000))
        #expect(ledger.writtenBytes == 8_000 && !ledger.isHeld(5_000))
        let again = ledger.beginResponse()
        #expect(compare(ledger, file, ByteRange(3_000, 4_000), from: again) == nil)
        #expect(write(ledger, file, ByteRange(4_000, 6_000), by: again) == nil)
        #expect(ledger.writtenBytes == 10_000)
    }

    @Test func requestsCarryOverlapWithinTheObject() {
        let inner = RangeRequest.overlapping(
            ByteRange(1 << 20, 2 << 20), size: 4 << 20, window: 4096, heldAfter: true, response: 3)
        #expect(inner.sent == ByteRange((1 << 20) - 4096, (2 << 20) + 4096) && inner.overlap == 8192)
        let first = RangeRequest.overlapping(
            ByteRange(0, 1000), size: 1000, window: 4096, heldAfter: false, response: 0)
        #expect(first.sent == ByteRange(0, 1000))
        let near = RangeRequest.overlapping(ByteRange(100, 900), size: 1000, window: 4096, heldAfter: true, response: 0)
        #expect(near.lead == 100 && near.trail == 100)
        let bridge = RangeRequest.bridge(at: 500, size: 1000, window: 4096, response: 1)
        #expect(bridge.own.isEmpty && bridge.sent == ByteRange(0, 1000))
        // Body bytes split into overlap, own bytes and overlap, whatever the chunks.
        let parts = inner.parts(received: 4000, count: 200)
        #expect(parts.lead == 0..<96 && parts.own == 96..<200 && parts.trail.isEmpty)
        let tail = inner.parts(received: inner.sent.count - 100, count: 150)
        #expect(tail.own.isEmpty && tail.trail == 0..<100)
        // A response that holds fewer bytes (a capped store): its own bytes end there, no trail.
        let capped = inner.truncated(to: ByteRange((1 << 20) - 4096, 1 << 20 + 100))
        #expect(capped?.own == ByteRange(1 << 20, (1 << 20) + 100) && capped?.trail == 0)
        #expect(inner.truncated(to: ByteRange((1 << 20) - 4096, (1 << 20) - 1)) == nil)
    }
}
