/// The bytes one range request asks for: its `own` bytes, which it writes, and the overlap
/// around them, which it only compares with the bytes of the responses next to it
/// (``AgreementLedger``).
///
/// A request whose bytes do not start at 0 asks for up to a window before them (its `lead`,
/// compared with what is held there or waiting until it is); one whose last byte is followed by
/// bytes already held asks for up to a window after them (its `trail`). A *bridge* has no own
/// bytes: it overlaps a break between two pieces that never met.
package struct RangeRequest: Equatable, Sendable {
    /// The bytes the response writes.
    package var own: ByteRange
    /// Overlap bytes before `own`.
    package var lead: Int64
    /// Overlap bytes after `own`.
    package var trail: Int64
    /// The response's identity in the ledger (``AgreementLedger/beginResponse()``).
    package var response: AgreementLedger.ResponseID

    package init(own: ByteRange, lead: Int64 = 0, trail: Int64 = 0, response: AgreementLedger.ResponseID = -1) {
        precondition(lead >= 0 && trail >= 0 && lead <= own.lowerBound, "overlap outside the object")
        self.own = own
        self.lead = lead
        self.trail = trail
        self.response = response
    }

    /// The request for `own` in an object of `size` bytes with overlap windows of at most
    /// `window` bytes: a lead unless it starts at 0, a trail when `heldAfter` (the byte after it
    /// is written by a response that asked for no lead: an earlier run's). A window is 1/256 of
    /// the own bytes, at least ``minimumWindow``: a short request (a stolen tail) pays in
    /// proportion, and any window of two versions' bytes tells them apart but for changes that
    /// leave it as it was.
    package static func overlapping(
        _ own: ByteRange, size: Int64, window: Int64, heldAfter: Bool, response: AgreementLedger.ResponseID
    ) -> RangeRequest {
        let scaled = min(window, max(minimumWindow, own.count / 256))
        let lead = min(scaled, own.lowerBound)
        let trail = heldAfter ? max(0, min(scaled, size - own.upperBound)) : 0
        return RangeRequest(own: own, lead: lead, trail: trail, response: response)
    }

    /// The smallest overlap window of a request (less only where the object has fewer bytes).
    package static let minimumWindow: Int64 = 1024

    /// A request with no own bytes that overlaps both sides of `point`.
    package static func bridge(
        at point: Int64, size: Int64, window: Int64, response: AgreementLedger.ResponseID
    ) -> RangeRequest {
        RangeRequest(
            own: ByteRange(point, point), lead: min(window, point), trail: max(0, min(window, size - point)),
            response: response)
    }

    /// The range sent in the `Range` header.
    package var sent: ByteRange { ByteRange(own.lowerBound - lead, own.upperBound + trail) }

    /// Overlap bytes this request carries.
    package var overlap: Int64 { lead + trail }

    /// Where `count` body bytes that arrive after `received` bytes of the body belong, as index
    /// ranges into them: overlap before, own bytes, overlap after (anything past the request's end
    /// is in none of them).
    package func parts(received: Int64, count: Int) -> (lead: Range<Int>, own: Range<Int>, trail: Range<Int>) {
        func index(_ bodyOffset: Int64) -> Int {
            Int(min(Int64(count), max(0, bodyOffset - received)))
        }
        let ownStart = index(lead)
        let trailStart = index(lead + own.count)
        let end = index(sent.count)
        return (0..<ownStart, ownStart..<trailStart, trailStart..<end)
    }
}

extension RangeRequest {
    /// This request as answered by a response that holds only `holds` (from the first byte
    /// asked for, and fewer bytes: a server that caps its responses): its own bytes end where
    /// the response does, and any trail it lost is none. `nil` when it does not even reach the
    /// own bytes (a response that holds only overlap is of no use).
    package func truncated(to holds: ByteRange) -> RangeRequest? {
        guard holds.lowerBound == sent.lowerBound, holds.upperBound <= sent.upperBound else { return nil }
        if holds.upperBound >= own.upperBound {
            return RangeRequest(own: own, lead: lead, trail: holds.upperBound - own.upperBound, response: response)
        }
        guard holds.upperBound > own.lowerBound else { return nil }
        return RangeRequest(
            own: ByteRange(own.lowerBound, max(own.lowerBound, holds.upperBound)), lead: lead, trail: 0,
            response: response)
    }
}
