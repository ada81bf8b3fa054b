/// Chooses how many connections an adaptive download uses, by measuring what each step in the
/// count is worth, in both directions.
///
/// - **Alone first, on a LAN.** Only the first connection runs until its rate is measured (a few
///   tens of milliseconds): a connection that alone already moves ``fastAlone`` leaves little for
///   more to add, and on a machine the server shares (or a server whose threads share one lock)
///   every added connection costs everyone; the count then climbs from 1, trying 2 first. A
///   slower first connection fans out to the usual start at once.
/// - **Climbing.** It measures the throughput at the count it starts with, then grows it
///   multiplicatively while each step pays: 4x at first, then 4x when the last step's gain was
///   nearly proportional, 2x otherwise. When the first bytes already show a per-connection limit (every
///   connection as fast as the probe was alone: a CDN's per-connection cap, a window over a long
///   round trip), the first step goes 8x, so a capped link reaches its knee within a few hundred
///   milliseconds.
/// - **Stepping back.** A step up that gains less than ``payoff`` (more connections must pay for
///   themselves) is undone. When that happens at the first step, it tries fewer instead, and keeps
///   going down while the rate holds within ``tolerance`` of the best seen: a server whose work is
///   per request, a worker pool or a single thread is fastest with fewer connections. A step down
///   that loses is undone. Then it holds, and probes one step up again only rarely (``reprobeAfter``,
///   doubling each time it did not pay), so it does not oscillate, or as soon as the rate it holds
///   falls below ``fallen`` of the rate it chose the count at (a page cache that filled and now
///   waits for the disk: the first tenth of a second misled).
/// - **Queues.** When over a window clearly fewer connections receive bytes than are open (the
///   others wait for a first byte: a worker pool, a connection limit answered with 503, a server
///   busy with each request), the server serves that many at once: the count becomes that number.
///
/// Requests are a cost too: ``start(firstByte:connect:maximum:)`` (in `+Start`) reads the probe's
/// first response, and when the server took long to answer on a short path (its work is per
/// request) the download starts with 2 connections and makes its first requests as large as the
/// plan allows (``requestCost``, which ``TransferPolicy`` reads for request sizes and cuts).
///
/// While the downloader's byte-rate cap holds bytes back, or a server is down or ramping back
/// up after an outage, throughput says nothing about the path, so the caller does not feed it: it
/// restarts the measurement instead (``restartMeasurement(at:)``), and the count stays where it is.
/// A window in which nothing arrived is no measurement either: the count stays.
///
/// Pure logic: the caller feeds observations with their instants and applies the returned targets.
package struct ConnectionController {
    /// What the transfer saw at one instant.
    package struct Observation {
        /// Body bytes received so far, by every connection of the download.
        package var totalBytes: Int64
        /// Bytes the plan still has to fetch.
        package var remainingBytes: Int64
        package var now: Moment
        /// The path's round trip, seconds (the quickest first byte).
        package var roundTrip: Double
        /// Connections whose response body is flowing.
        package var transferring: Int
        /// Connections with a request sent and no first byte yet.
        package var waiting: Int
        /// The first connection's measured rate (bytes/s) while no other connection's is measured
        /// yet, else 0: its probe request, running while the others start, shows what one
        /// connection gets (read once).
        package var firstConnectionRate: Double
        /// How long, in all so far, the client held its bytes back for its own side: the transfer
        /// thread waiting for room to put them (the disk's write queue full, its page cache writing
        /// back). A window with much of it measured the machine, not the count.
        package var localWait: Duration

        package init(
            totalBytes: Int64, remainingBytes: Int64, now: Moment, roundTrip: Double,
            transferring: Int, waiting: Int = 0, firstConnectionRate: Double = 0, localWait: Duration = .zero
        ) {
            self.totalBytes = totalBytes
            self.remainingBytes = remainingBytes
            self.now = now
            self.roundTrip = roundTrip
            self.transferring = transferring
            self.waiting = waiting
            self.firstConnectionRate = firstConnectionRate
            self.localWait = localWait
        }
    }

    /// A count and the rate measured at it.
    package struct Step: Equatable, CustomStringConvertible {
        package var count: Int
        package var rate: Double

        package var description: String { "\(count) at \(Wording.bytes(Int64(rate)))/s" }
    }

    /// Where the controller is, each state with its own data.
    package enum Phase: Equatable {
        /// The first connection alone, its rate being measured for `window`; then `fanOut`
        /// connections open, or 2 when it is fast on its own.
        case alone(fanOut: Int, window: Duration)
        /// Measuring the count it started with.
        case measuring
        /// A step from `from` to the current target is being measured; `best` is the best step seen.
        case trying(from: Step, best: Step)
        /// Settled at `best`; tries a step up again at `reprobeAt`, then waits `backoff` more.
        case holding(best: Step, reprobeAt: Moment, backoff: Duration)
        /// Done for good: too little work left to learn anything.
        case settled
    }

    package let maximum: Int
    package private(set) var target: Int
    package internal(set) var phase: Phase = .measuring
    /// The server's time to answer a request beyond the round trip (seconds), when it is large
    /// enough to size requests by; 0 otherwise.
    package private(set) var requestCost: Double
    /// Why the last decision was taken, for debug logs.
    package internal(set) var lastReason = ""
    /// Every count the controller moved to, in order (for `--json` and `swoop bench`).
    package private(set) var history: [Int] = []

    /// When the current count took effect (or the measurement restarted).
    private var changedAt: Moment?
    var samples: [Sample] = []

    struct Sample {
        var time: Moment
        var bytes: Int64
        var transferring: Int
        var waiting: Int
        var localWait: Duration
    }

    /// The bytes left at the last observation (the wait before a re-probe follows them).
    var remaining: Int64 = .max
    /// When the step being tried was taken (a window that collapsed is measured again until a while after).
    private var triedAt: Moment?
    /// One connection's rate while the others started, if it was measured before theirs.
    private var soloRate: Double = 0

    /// A step up is kept when it gains at least this much (rate ratio).
    package static let payoff = 1.10
    /// A step down is kept while the rate stays within this fraction of the best seen.
    package static let tolerance = 0.95
    /// Quadruple rather than double when the last gain was at least this fraction of proportional.
    package static let nearlyProportional = 0.8
    /// Every connection at least this fraction of one connection alone: the limit is per connection.
    package static let perConnectionLimit = 0.6
    /// Clearly fewer connections received bytes than were open: the server queues the rest.
    package static let queueing = 0.7
    /// The first re-probe after settling, then doubling.
    package static let reprobeAfter = Duration.seconds(8)
    /// A held count is re-probed at once when its rate falls below this fraction of the one it
    /// was chosen at: what was measured no longer holds (a page cache that filled, a path that
    /// changed).
    package static let fallen = 0.75
    /// A window in which the client held its bytes back this share of the time measured the
    /// machine (its disk), not the count: it is measured again, and the count holds meanwhile.
    package static let localLimit = 0.25
    /// A step up whose rate falls below this fraction of the rate it left says more about the
    /// window than the count (every count collapses while the client stalls): it is measured again,
    /// up to ``collapseWait`` after the step was taken.
    package static let collapsed = 0.25
    package static let collapseWait = Duration.seconds(2)
    /// A held count is re-probed at least every eighth of the time the rest would take at its rate
    /// (a second at least): a count held by mistake costs a fraction of what is left, and a probe
    /// that does not pay a fraction of a second.
    package static let reprobeShare = 8.0
    package static let reprobeFloor = Duration.seconds(1)
    /// One connection alone at this rate (bytes/s) or more is fast on its own: 256 MiB/s, above
    /// the per-connection caps and windows more connections exist to get around (a CDN's cap,
    /// a long path's window), and near what a disk or the machine's processors take in.
    package static let fastAlone = 256.0 * 1_048_576
    /// How long the first connection runs alone at least (more on a longer round trip).
    package static let aloneWindow = Duration.milliseconds(20)

    package init(initial: Int, maximum: Int, requestCost: Double = 0) {
        self.maximum = max(1, maximum)
        self.target = min(max(1, initial), self.maximum)
        self.requestCost = requestCost
        history = [target]
    }

    /// A controller that begins as `start` says: alone first when it names a fan-out.
    package init(start: Start, maximum: Int) {
        self.init(initial: start.count, maximum: maximum, requestCost: start.requestCost)
        if let fanOut = start.fanOut, target == 1, fanOut > 1 {
            // A few round trips (the probe's: no request has ended yet to measure one), 20 ms at least.
            let window = max(Self.aloneWindow, .seconds(4 * start.roundTrip))
            phase = .alone(fanOut: min(fanOut, self.maximum), window: window)
        }
    }

    /// How often the caller observes: every 5 ms while the first decisions are near (the first
    /// connection alone, and the first measurement once one connection's rate is known, which may
    /// end early), every 25 ms while a step is measured, not at all while it holds (the caller's
    /// own 100 ms tick then feeds it).
    package var observationInterval: Duration? {
        switch phase {
        case .alone: .milliseconds(5)
        case .measuring: .milliseconds(soloRate > 0 ? 5 : 25)
        case .trying: .milliseconds(25)
        case .holding, .settled: nil
        }
    }

    /// Whether the controller has stopped for good (too little work left).
    package var isSettled: Bool { phase == .settled }

    /// Discards the measurement under way and starts a new one at `now`, at the same count and
    /// with the same steps: what was measured is not the path's throughput (the downloader's
    /// byte-rate cap was the limit, or a server was down).
    package mutating func restartMeasurement(at now: Moment) {
        samples.removeAll(keepingCapacity: true)
        changedAt = now
    }

    /// The sources changed (a mirror or another address joined): what was measured holds for
    /// fewer servers, so a count it settled on is probed upwards at the next observation.
    package mutating func sourcesChanged(at now: Moment) {
        guard case .holding(let best, _, _) = phase else { return }
        reprobeBackoff = nil
        phase = .holding(best: best, reprobeAt: now, backoff: Self.reprobeAfter)
    }

    /// Stops adapting: the rest of the download is too short to measure anything.
    package mutating func settle() {
        phase = .settled
    }

    /// The old entry point: an observation with the connections unknown (taken as all receiving).
    package mutating func observe(
        totalBytes: Int64, remainingBytes: Int64, at now: Moment, roundTrip: Double
    ) -> Int? {
        observe(
            Observation(
                totalBytes: totalBytes, remainingBytes: remainingBytes, now: now, roundTrip: roundTrip,
                transferring: target))
    }

    /// How long new connections get before a measurement, and how long it runs.
    func timing(roundTrip: Double) -> (warmUp: Duration, window: Duration) {
        // New connections need a handshake and a first byte (the server's time too), then a few
        // round trips to get going; the window holds enough round trips for a steady rate.
        let warmUp = max(0.03, 4 * roundTrip, 1.5 * requestCost)
        let window = max(0.1, 6 * roundTrip)
        guard reprobeBackoff != nil else { return (.seconds(warmUp), .seconds(window)) }
        // A re-probe's steps come seconds into a long download, where a short window measures a
        // disk's or a server's noise, and new connections may first wait for the server's reads.
        return (.seconds(max(warmUp, 0.1)), Self.holdSpan(.seconds(window)) / 2)
    }

    /// Records what the transfer saw at `observation.now`; returns a new target when the count
    /// should change.
    package mutating func observe(_ observation: Observation) -> Int? {
        guard !isSettled else { return nil }
        let now = observation.now
        if changedAt == nil { changedAt = now }
        if soloRate == 0, history.count == 1, observation.firstConnectionRate > 0 {
            soloRate = observation.firstConnectionRate
        }
        if observation.transferring + observation.waiting > target, phase != .measuring {
            // Connections beyond a lowered count are still finishing their requests: the count
            // takes effect once they are done, and so does the warm-up.
            restartMeasurement(at: now)
            return nil
        }
        remaining = observation.remainingBytes
        samples.append(
            Sample(
                time: now, bytes: observation.totalBytes, transferring: observation.transferring,
                waiting: observation.waiting, localWait: observation.localWait))
        if case .holding(let best, let reprobeAt, let backoff) = phase {
            return hold(best: best, reprobeAt: reprobeAt, backoff: backoff, observation)
        }
        if case .alone(let fanOut, let window) = phase { return leaveAlone(fanOut: fanOut, window: window, now) }
        let (warmUp, fullWindow) = timing(roundTrip: observation.roundTrip)
        // The first decision may come early when the first bytes already show a per-connection
        // limit: a strong signal that needs no long window.
        let early = phase == .measuring && soloRate > 0
        let window = early ? Duration.seconds(max(0.03, 2 * observation.roundTrip)) : fullWindow
        guard let measured = measure(since: warmUp, window: window, now: now) else { return nil }
        if measured.localShare > Self.localLimit {
            // The machine held the bytes back (its disk): the window says nothing of the count.
            restartMeasurement(at: now)
            lastReason = "the client's own side held its bytes back \(Int(measured.localShare * 100))% of the window"
            return nil
        }
        if measured.rate <= 0 {
            // Nothing arrived (a server that stopped answering, or busy with every request):
            // there is no throughput to compare. Measure again.
            restartMeasurement(at: now)
            lastReason = "nothing arrived in the window"
            return nil
        }
        if Double(observation.remainingBytes) < measured.rate * fullWindow.seconds * 2 {
            // Near the end there is not enough work left to learn anything from another count.
            phase = .settled
            lastReason = "too little work left (\(Wording.bytes(observation.remainingBytes)))"
            return nil
        }
        if early, measured.rate / Double(max(1, target)) < Self.perConnectionLimit * soloRate,
            measured.elapsed < fullWindow
        {
            // No per-connection limit shows yet: measure the whole window.
            return nil
        }
        return decide(rate: measured.rate, served: measured.transferring, waiting: measured.waiting, at: now)
    }

    /// Once the first connection has run alone for the window: its rate decides the fan-out. Fast
    /// on its own, a step to 2 is tried against it (undone if it does not pay); else the usual
    /// start opens, knowing what one connection gets (for the per-connection limit).
    private mutating func leaveAlone(fanOut: Int, window: Duration, _ now: Moment) -> Int? {
        guard let changedAt, now - changedAt >= window, let first = samples.first, let last = samples.last,
            last.time > first.time
        else { return nil }
        let rate = Double(last.bytes - first.bytes) / (last.time - first.time).seconds
        let alone = Step(count: 1, rate: rate)
        soloRate = rate
        if rate >= Self.fastAlone {
            lastReason = "\(alone) alone: fast on its own, trying 2"
            return step(from: alone, best: alone, to: 2, at: now)
        }
        // Nothing arrived alone (a server slow to answer): the usual start, with no solo rate.
        lastReason = rate > 0 ? "\(alone) alone" : "nothing arrived alone"
        phase = .measuring
        firstStepAt = history.count + 2
        return move(to: fanOut, at: now)
    }

    /// The rate and mean number of connections receiving over the window after the warm-up, once
    /// the window has passed.
    private func measure(
        since warmUp: Duration, window: Duration, now: Moment
    ) -> (rate: Double, transferring: Double, waiting: Double, elapsed: Duration, localShare: Double)? {
        guard let changedAt, now - changedAt >= warmUp + window else { return nil }
        let start = changedAt + warmUp
        guard let firstIndex = samples.firstIndex(where: { $0.time >= start }), let last = samples.last,
            last.time > samples[firstIndex].time
        else { return nil }
        let first = samples[firstIndex]
        let inWindow = samples[firstIndex...]
        let transferring = Double(inWindow.reduce(0) { $0 + $1.transferring }) / Double(inWindow.count)
        let waiting = Double(inWindow.reduce(0) { $0 + $1.waiting }) / Double(inWindow.count)
        let elapsed = last.time - first.time
        let localShare = (last.localWait - first.localWait).seconds / elapsed.seconds
        return (Double(last.bytes - first.bytes) / elapsed.seconds, transferring, waiting, elapsed, localShare)
    }

    private mutating func decide(
        rate: Double, served: Double, waiting: Double, at now: Moment
    ) -> Int? {
        defer { samples.removeAll(keepingCapacity: true) }
        // Clearly fewer receiving than open, the others waiting for a first byte: the server
        // serves that many at once and queues the rest. (Connections a source's learned limit
        // keeps idle wait for nothing: that limit is the source's, not a reason for this count.)
        let servedCount = max(1, Int(served.rounded()))
        let queued =
            Double(servedCount) <= Self.queueing * Double(target)
            && waiting >= (1 - Self.queueing) * Double(target)
        let here = Step(count: queued ? servedCount : target, rate: rate)
        switch phase {
        case .measuring:
            lastReason = "\(here) at first"
            if queued {
                lastReason += "; the server serves \(servedCount) at once"
                return settle(on: here, at: now)
            }
            let perConnection = rate / Double(target)
            if soloRate > 0 && perConnection >= Self.perConnectionLimit * soloRate {
                lastReason += "; each connection as fast as one alone: a limit per connection"
                return step(from: here, best: here, to: target * 8, at: now)
            }
            // As TCP's slow start, the first step is wide; a step that does not pay is undone.
            return step(from: here, best: here, to: target * 4, at: now)
        case .trying(let from, let best):
            if target > from.count, rate < Self.collapsed * from.rate, let triedAt, now - triedAt < Self.collapseWait {
                // More connections do not take three quarters of the rate away: the client stalled
                // (a page cache writing back, another process), and any count would measure so.
                lastReason = "\(here) after \(from): the window collapsed, measuring again"
                restartMeasurement(at: now)
                return nil
            }
            if target > from.count {
                let gain = rate / from.rate
                lastReason = "\(here) after \(from): gain \(Self.format(gain))"
                if !queued && gain >= Self.payoff {
                    let proportional = Double(target) / Double(from.count)
                    let efficiency = (gain - 1) / max(proportional - 1, 0.01)
                    let factor = efficiency >= Self.nearlyProportional ? 4 : 2
                    return step(from: here, best: here, to: target * factor, at: now)
                }
                if queued { lastReason += "; the server serves \(servedCount) at once" }
                // It did not pay. At the first step, fewer may do as well: try them.
                if history.count == firstStepAt && from.count > 1 && !queued {
                    lastReason += "; trying fewer"
                    return step(from: from, best: from, to: from.count / 2, at: now)
                }
                let back = queued ? Step(count: min(servedCount, from.count), rate: max(rate, from.rate)) : from
                return settle(on: back.rate >= best.rate ? back : best, at: now)
            }
            let kept = rate / best.rate
            lastReason = "\(here) after \(from): \(Self.format(kept)) of the best"
            if kept >= Self.tolerance {
                // As fast with fewer: fewer it is; try fewer still.
                let better = rate > best.rate ? here : Step(count: here.count, rate: best.rate)
                if here.count > 1 && !queued { return step(from: here, best: better, to: here.count / 2, at: now) }
                return settle(on: better, at: now)
            }
            return settle(on: from, at: now)
        case .alone, .holding, .settled:
            return nil
        }
    }

    /// Moves to `count` (within 1 ... maximum) to try it against `from`.
    private mutating func step(from: Step, best: Step, to count: Int, at now: Moment) -> Int? {
        let next = min(maximum, max(1, count))
        guard next != from.count else { return settle(on: best, at: now) }
        phase = .trying(from: from, best: best)
        return move(to: next, at: now)
    }

    /// The wait before the next re-probe, carried through a re-probe's trial.
    var reprobeBackoff: Duration?
    /// The length of ``history`` once the first step up from the measured start is taken (after a
    /// fan-out from ``Phase/alone``, one more).
    private var firstStepAt = 2

    mutating func move(to count: Int, at now: Moment) -> Int? {
        let next = min(maximum, max(1, count))
        guard next != target else { return nil }
        target = next
        changedAt = now
        triedAt = now
        samples.removeAll(keepingCapacity: true)
        history.append(next)
        return next
    }

    static func format(_ ratio: Double) -> String {
        let hundredths = Int((ratio * 100).rounded())
        return "\(hundredths / 100).\(hundredths % 100 < 10 ? "0" : "")\(hundredths % 100)x"
    }
}
