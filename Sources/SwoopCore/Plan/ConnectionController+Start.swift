/// Where an adaptive download starts: read from the probe's first response, before anything else
/// is measured. The controller itself (``ConnectionController/init(start:maximum:)``) takes it from
/// there.
extension ConnectionController {
    /// Where the controller starts (``start(firstByte:connect:maximum:)``).
    package struct Start: Equatable {
        /// Connections to open now.
        package var count: Int
        /// See ``ConnectionController/requestCost``.
        package var requestCost: Double
        /// When set, the first connection runs alone until its rate is measured (``Phase/alone``);
        /// then this many open, or 2 when it is fast on its own.
        package var fanOut: Int?
        /// The round trip the probe showed (seconds).
        package var roundTrip = 0.0
    }

    /// Where to start, from the probe's first response: `firstByte` is the time from sending the
    /// request to its first byte, `connect` the TCP handshake (a round trip; on a connection already
    /// open, an earlier handshake with the host; `nil` when none is known). On a LAN the first
    /// connection alone, then 8 (or 2, ``Phase/alone``); 64 on long links, where each connection is
    /// slow (a window over the round trip, or the losses, bound it); 2 when the server spent long on
    /// the request itself (at least 50 ms, and 4 round trips): its work is per request, so each
    /// connection and each range costs it, and requests are made large.
    package static func start(firstByte: Double, connect: Double?, maximum: Int) -> Start {
        let maximum = max(1, maximum)
        let roundTrip = connect ?? firstByte
        let serverTime = max(0, firstByte - (connect ?? 0))
        if connect != nil && serverTime >= max(0.05, 4 * roundTrip) {
            return Start(count: min(maximum, 2), requestCost: serverTime, roundTrip: roundTrip)
        }
        if roundTrip < 0.02 {
            return Start(count: 1, requestCost: 0, fanOut: maximum > 1 ? min(maximum, 8) : nil, roundTrip: roundTrip)
        }
        // Wide at once: a climb from fewer is measured over round trips, and in its first ones TCP's slow
        // start shows rates that do not last (on a lossy path, until the first losses); a 64 MiB download
        // over 40 ms and 1% loss was half over before a start at 32 had measured its step to 64, and took
        // 1.5x as long. Fewer are found from here when the server queues or refuses the rest.
        return Start(count: min(maximum, 64), requestCost: 0, roundTrip: roundTrip)
    }
}
