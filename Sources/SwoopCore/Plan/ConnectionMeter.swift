/// One connection's throughput and first-byte time, smoothed: what the transfer policy reads
/// of it. Pure: the caller passes the instants of its exchange.
package struct ConnectionMeter {
    /// Bytes per second, smoothed; 0 until measured.
    package private(set) var rate: Double = 0
    /// Seconds from sending a request to its first body byte, smoothed; 0 until measured.
    package private(set) var timeToFirstByte: Double = 0
    /// Body bytes of the current (or just finished) request.
    package private(set) var requestBytes: Int64 = 0
    private var delivered: Int64 = 0
    private var sampledBytes: Int64 = 0
    private var sampledAt: Moment?

    package init() {}

    /// A request is being sent; `freshConnection`: on a new connection, whose path is measured anew.
    package mutating func beginRequest(freshConnection: Bool) {
        if freshConnection { rate = 0 }
        sampledAt = nil
        requestBytes = 0
    }

    /// `count` body bytes arrived.
    @inline(__always)
    package mutating func deliver(_ count: Int) {
        delivered += Int64(count)
        requestBytes += Int64(count)
    }

    /// Blends the rate since the last sample in, at `now`; `firstByteAt`: when the response in
    /// flight delivered its first byte, if it did.
    package mutating func sample(at now: Moment, firstByteAt: Moment?) {
        defer {
            sampledAt = now
            sampledBytes = delivered
        }
        guard let firstByteAt, let previous = sampledAt else { return }
        let elapsed = (now - max(previous, firstByteAt)).seconds
        guard elapsed > 0.01 else { return }
        blend(rate: Double(delivered - sampledBytes) / elapsed)
    }

    /// A request that was sent at `startedAt` and delivered its first byte at `firstByteAt` ended
    /// at `now`: its first-byte time, and its throughput when it carried enough bytes to tell.
    /// A body that came within a millisecond (a server that works on each request, then sends
    /// it at once over loopback) counts as a millisecond's: left unmeasured, the connection would
    /// keep asking for the smallest requests, each costing the server's work again.
    package mutating func finishRequest(
        startedAt: Moment, firstByteAt: Moment, now: Moment
    ) {
        let ttfb = (firstByteAt - startedAt).seconds
        timeToFirstByte = timeToFirstByte == 0 ? ttfb : 0.7 * timeToFirstByte + 0.3 * ttfb
        let elapsed = (now - firstByteAt).seconds
        if requestBytes >= 256 << 10 {
            blend(rate: Double(requestBytes) / max(0.001, elapsed))
        }
    }

    private mutating func blend(rate sampled: Double) {
        rate = rate == 0 ? sampled : 0.5 * rate + 0.5 * sampled
    }
}
