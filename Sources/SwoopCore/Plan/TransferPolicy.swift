/// What a connection is doing, as the transfer policy sees it: measurements, no handles.
package struct ConnectionSample: Equatable {
    package var id: Int
    /// Bytes per second, smoothed; 0 until measured.
    package var rate: Double
    /// Seconds from request to first body byte, smoothed; 0 until measured.
    package var timeToFirstByte: Double
    /// Its exchange is under way and is not the probe.
    package var isTransferring: Bool
    /// Seconds since its current response's first body byte, if one arrived.
    package var secondsSinceFirstByte: Double?
    /// How often its connection was already replaced for being slow.
    package var replacements: Int
    /// The segment it fills, if any.
    package var segment: SegmentSample?

    package init(
        id: Int, rate: Double, timeToFirstByte: Double, isTransferring: Bool, secondsSinceFirstByte: Double? = nil,
        replacements: Int, segment: SegmentSample? = nil
    ) {
        self.id = id
        self.rate = rate
        self.timeToFirstByte = timeToFirstByte
        self.isTransferring = isTransferring
        self.secondsSinceFirstByte = secondsSinceFirstByte
        self.replacements = replacements
        self.segment = segment
    }
}

/// A segment as the transfer policy sees it.
package struct SegmentSample: Equatable {
    /// Everything below is written.
    package var frontier: Int64
    /// One past its last byte.
    package var end: Int64
    /// Part of a hedge pair already.
    package var isHedged: Bool

    package init(frontier: Int64, end: Int64, isHedged: Bool) {
        self.frontier = frontier
        self.end = end
        self.isHedged = isHedged
    }

    package var remaining: Int64 { max(0, end - frontier) }
}

/// What the policy sees of one source (a server) of a download.
package struct SourceSample: Equatable {
    /// Requests in flight to it.
    package var active: Int
    /// The most requests it may have at once now: its learned connection cap, or while it
    /// recovers from an outage its allowance (see ``SourceHealth``); `nil`: no limit.
    package var cap: Int?
    /// Failed requests in a row.
    package var failures: Int
    /// Not dropped.
    package var isUsable: Bool
    /// Held back for now: resting after a failure, or down between trials.
    package var isResting: Bool
    /// A request sent now holds the others back (it is a down source's trial, or finds out whether
    /// a source in doubt went away).
    package var holdsBackAfterSend: Bool
    /// Its host answers as usual: not down, not ramping back up after an outage.
    package var isUp: Bool

    package init(
        active: Int, cap: Int? = nil, failures: Int, isUsable: Bool, isResting: Bool, holdsBackAfterSend: Bool = false,
        isUp: Bool = true
    ) {
        self.active = active
        self.cap = cap
        self.failures = failures
        self.isUsable = isUsable
        self.isResting = isResting
        self.isUp = isUp
        self.holdsBackAfterSend = holdsBackAfterSend
    }

    /// The sample once `count` more requests were sent to the source.
    package func sending(_ count: Int) -> SourceSample {
        guard count > 0 else { return self }
        var sample = self
        sample.active += count
        if holdsBackAfterSend { sample.isResting = true }
        return sample
    }
}

/// The transfer's choices as pure functions of measurements: how much to ask for, where to cut
/// a request in flight, which tails to hedge, which connections to replace, which source to ask.
/// ``TransferMachine`` applies them; retries and backoff are the ``FailurePolicy``'s.
package struct TransferPolicy {
    /// The smallest range worth its own request (``Downloader/Configuration/Tuning/minimumSegmentSize``).
    package var minimumSegmentSize: Int64

    package init(minimumSegmentSize: Int64) {
        self.minimumSegmentSize = minimumSegmentSize
    }

    /// The round trip of the path: the quickest first byte seen (slower ones include
    /// retransmissions, queueing and new connections' handshakes); 50 ms before any.
    package static func roundTrip(_ connections: [ConnectionSample]) -> Double {
        connections.map(\.timeToFirstByte).filter { $0 > 0 }.min() ?? 0.05
    }

    /// The size of a connection's next request: about `max(0.5 s, 50 first-byte times)` of its
    /// measured rate, so the idle wait between requests (a round trip, and the server's time to
    /// answer) costs at most about 2%, and connections stay alive between requests; 4 MiB before
    /// it is measured. `requestCost`: the server's own time per request, when the probe showed it
    /// is large (``ConnectionController/requestCost``): then requests are sized by it too, and
    /// before any rate is measured a request takes all it can (every request costs the server as
    /// much as the next, so fewer and larger is faster).
    ///
    /// `refused`: the share of the source's answers refused and asked again (a pool's other node:
    /// ``ValidatorWatch/refusedShare``): each request then costs its refusals' round trips too,
    /// so requests grow by as much (at most 4 times).
    package func requestSize(
        rate: Double, timeToFirstByte: Double, requestCost: Double = 0, refused: Double = 0
    ) -> Int64 {
        let scale = 1 / (1 - min(0.75, max(0, refused)))
        guard rate > 0 else { return requestCost > 0 ? 1 << 30 : Int64(Double(4 << 20) * scale) }
        let seconds = max(0.5, 50 * max(timeToFirstByte, requestCost)) * scale
        return min(1 << 30, max(minimumSegmentSize, Int64(rate * seconds)))
    }

    /// The bytes of the next request for a segment whose connection is at `position` with
    /// `end` to go. A hedge asks for its whole tail, so the pair never splits between requests;
    /// a remainder under half a request is taken along now rather than left as a sliver that
    /// costs a request (a round trip, and on a lossy path a slow start) of its own later.
    package func nextRequest(position: Int64, end: Int64, hedged: Bool, size: Int64) -> ByteRange {
        let left = end - position
        var size = hedged ? left : size
        if left < size + size / 2 { size = left }
        return ByteRange(position, min(end, position + size))
    }

    /// Where to cut `victim`'s request in flight so an idle connection can take the far part,
    /// or `nil` to leave it: only when its connection would need well over a round trip to
    /// finish, and then so that both finish together. (Cutting wastes what the server already
    /// sent.) `others` are the rates of the transferring connections. `requestCost`: the server's
    /// own time per request when it is large (``ConnectionController/requestCost``): a cut is a
    /// request more, so it must save several of those.
    package func cutPoint(
        _ victim: SegmentSample, rate: Double, others: [Double], roundTrip: Double,
        minimumStealSize: Int64, layout: ChunkLayout, requestCost: Double = 0
    ) -> Int64? {
        guard rate > 0 else { return nil }
        let secondsLeft = Double(victim.remaining) / rate
        // The path's round trip, not the victim's own first-byte time: on a lossy path that is
        // inflated by retransmissions, and would leave the last second of a slow tail uncut.
        guard secondsLeft > max(0.25, 4 * roundTrip, 4 * requestCost) else { return nil }
        // Leave each side at least one steal's worth; the scheduler refuses anything smaller.
        guard victim.remaining >= 2 * minimumStealSize else { return nil }
        let measured = others.filter { $0 > 0 }.sorted()
        let thiefRate = measured.isEmpty ? rate : measured[measured.count / 2]
        let victimShare = rate / (rate + thiefRate)
        let point = victim.frontier + Int64(Double(victim.remaining) * victimShare)
        return min(max(point, victim.frontier + minimumStealSize), layout.alignDown(victim.end - minimumStealSize))
    }

    /// Connections delivering under a quarter of the median rate (a bad path, a throttled or
    /// overloaded server node) that are worth closing and reopening: measured long enough
    /// (25 round trips, at least 0.2 s: on a lossy path a healthy connection's rate swings for
    /// seconds with its retransmissions, and a new one starts slow), replaced fewer than three
    /// times, with an unhedged segment big enough to hand back. Needs four measured connections
    /// for a median.
    package func connectionsToReplace(_ connections: [ConnectionSample], minimumStealSize: Int64) -> [Int] {
        let measured = connections.filter { $0.isTransferring && $0.rate > 0 }
        guard measured.count >= 4 else { return [] }
        let median = measured.map(\.rate).sorted()[measured.count / 2]
        let roundTrip = Self.roundTrip(connections)
        return measured.filter { connection in
            guard connection.rate < median / 4, connection.replacements < 3,
                let since = connection.secondsSinceFirstByte, since > max(0.2, 25 * roundTrip),
                let segment = connection.segment, !segment.isHedged,
                segment.remaining >= 2 * minimumStealSize
            else { return false }
            return true
        }.map(\.id)
    }

    /// When connections are idle and nothing is left to claim, the connections whose tails to
    /// fetch a second time (at most `idle`, the latest expected finish first): those an idle
    /// connection at the median rate would clearly beat, a round trip to ask and then the bytes,
    /// times 1.5 so rate noise alone does not start a hedge. That covers a straggler (a slow
    /// server node or path) and the end game of a lossy path, where the last connections stall
    /// in retransmission timeouts. Idle connections have nothing better to do, and a pair shares
    /// one frontier, so whichever is ahead writes and no byte is fetched more than twice. Only
    /// responses already flowing (for two round trips) are judged: a request just sent has no
    /// rate of its own yet.
    package func tailsToHedge(busy: [ConnectionSample], idle: Int, roundTrip: Double) -> [Int] {
        guard idle > 0 else { return [] }
        let withSegments = busy.filter { $0.segment != nil }
        let rates = withSegments.map(\.rate).filter { $0 > 0 }
        guard rates.count >= 2 else { return [] }
        let median = rates.sorted()[rates.count / 2]
        var chosen: [(id: Int, timeLeft: Double)] = []
        for connection in withSegments {
            guard let segment = connection.segment, !segment.isHedged, segment.remaining > 0, connection.rate > 0,
                let since = connection.secondsSinceFirstByte, since > 2 * roundTrip
            else { continue }
            let timeLeft = Double(segment.remaining) / connection.rate
            let timeOnFresh = Double(segment.remaining) / median
            if timeLeft > 1.5 * (roundTrip + timeOnFresh) { chosen.append((connection.id, timeLeft)) }
        }
        return chosen.sorted { $0.timeLeft > $1.timeLeft }.prefix(idle).map(\.id)
    }

    /// Whether a source may be sent a request now: not dropped, not backing off, below its limit.
    package static func canTakeRequest(_ source: SourceSample) -> Bool {
        source.isUsable && !source.isResting && source.cap.map { source.active < $0 } ?? true
    }

    /// The source for the next request: among the usable ones that are not backing off and are
    /// below their learned connection cap, the one with the fewest requests in flight (then the
    /// fewest failures, then the earlier URL), so connections spread over sources; the work
    /// stealing of the plan then gives faster sources more bytes. `avoiding` (a hedge of a slow
    /// tail) prefers any other source. `nil`: none can take a request now.
    package static func chooseSource(_ sources: [SourceSample], avoiding: Int? = nil) -> Int? {
        let open = sources.indices.filter { canTakeRequest(sources[$0]) }
        let others = open.filter { $0 != avoiding }
        return (others.isEmpty ? open : others).min { a, b in
            (sources[a].active, sources[a].failures, a) < (sources[b].active, sources[b].failures, b)
        }
    }
}
