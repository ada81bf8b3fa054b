import SwoopTestSupport
@testable import SwoopCore

/// A server as the controller simulation models it: what limits each request's bytes and when
/// its first byte comes. Rates in bytes per second, times in seconds.
struct ServerModel: CustomStringConvertible {
    var name: String
    /// The path's round trip.
    var roundTrip = 0.0002
    /// The most bytes per second all connections share (a link, or the machine's CPU).
    var link = 1000.0 * MiB
    /// Every connection beyond the first ``connectionsWithoutOverhead`` costs the shared rate this
    /// fraction (processor time per connection on a machine the server and the client share).
    var perConnectionOverhead = 0.0
    var connectionsWithoutOverhead = 1
    /// The most bytes per second one connection gets (a CDN's cap, a window over a long path).
    var perConnectionCap: Double?
    /// A new connection's cap for its first `seconds` of bytes, above ``perConnectionCap``: TCP's slow
    /// start on a lossy path grows its window until the first losses, then falls to what the loss allows.
    var slowStart: (rate: Double, seconds: Double)?
    /// The server's own time per request (seconds of one core), spent before the first byte.
    var requestWork = 0.0
    /// Cores the server spends `requestWork` on; requests working at once share them.
    var cores = 2.0
    /// Requests served at once; the rest wait in order (a worker pool; 1: a single thread).
    var workers: Int?
    /// Each request on a new connection (a server that closes after every response).
    var closesConnections = false
    /// More requests at once than this are answered 503.
    var refusesAbove: Int?
    /// Rates vary by up to this fraction every 100 ms (seeded).
    var noise = 0.05
    /// What disturbs the download on the client's side or the path's (``Disturbance``).
    var disturbances: [Disturbance] = []

    var description: String { name }

    /// Something that changes the rates for a while, or from a moment on.
    struct Disturbance: CustomStringConvertible {
        enum Kind {
            /// The client takes (almost) no bytes: its page cache writing back, its write queue full.
            case stall
            /// Another process takes one of the client's two cores: everything it receives halves.
            case coreTaken
            /// The path's rates (the link and each connection's cap) change by this factor, for good.
            case step(Double)
        }

        var kind: Kind
        /// When it begins, seconds into the download.
        var at: Double
        /// How long it lasts (`.step`: for good).
        var seconds: Double

        var description: String {
            switch kind {
            case .stall: "a stall of \(Self.format(seconds)) s at \(Self.format(at)) s"
            case .coreTaken: "a core taken for \(Self.format(seconds)) s at \(Self.format(at)) s"
            case .step(let factor): "rates x\(Self.format(factor)) from \(Self.format(at)) s"
            }
        }

        /// The factor on the client's intake (the shared rate) and on the path's rates at `now`.
        func factors(at now: Double) -> (intake: Double, path: Double) {
            switch kind {
            case .stall: (now >= at && now < at + seconds ? 0.02 : 1, 1)
            case .coreTaken: (now >= at && now < at + seconds ? 0.5 : 1, 1)
            case .step(let factor): (1, now >= at ? factor : 1)
            }
        }

        private static func format(_ value: Double) -> String {
            let tenths = Int((value * 10).rounded())
            return "\(tenths / 10).\(tenths % 10)"
        }
    }

    static func capped(_ cap: Double, link: Double = 1100 * MiB) -> ServerModel {
        ServerModel(name: "a cap of \(Int(cap / MiB)) MiB/s per connection", link: link, perConnectionCap: cap)
    }
}

private let MiB = 1_048_576.0

/// A download in virtual time against a ``ServerModel``: the real ``ConnectionController``,
/// ``ConnectionMeter`` and ``TransferPolicy`` decide; a simple plan hands out the bytes (segments
/// split across the connections at the start, an idle connection takes an unowned segment or cuts
/// the far part of a busy one where the policy says so).
struct ControllerSimulation {
    struct Result {
        var seconds: Double
        var finalCount: Int
        var history: [Int]
        var requests: Int
        var refused: Int
        var decisions: [String]
    }

    private final class Segment {
        var position: Int64
        var end: Int64
        var owner: Int?
        init(_ position: Int64, _ end: Int64) {
            self.position = position
            self.end = end
        }
        var remaining: Int64 { end - position }
    }

    private struct Request {
        var segment: Segment
        var end: Int64
        var sentAt: Double
        /// When the server starts on it (after the round trip, and a handshake on a new connection).
        var arrivesAt: Double
        var work: Double
        var hasWorker = false
        var firstByteAt: Double?
        var refused = false
    }

    private struct Slot {
        var meter = ConnectionMeter()
        var request: Request?
        var idleUntil = 0.0
        var opened = false
        /// When this connection's first bytes flowed (``ServerModel/slowStart``).
        var flowingSince: Double?
    }

    let model: ServerModel
    let size: Int64
    let dt = 0.002

    init(_ model: ServerModel, size: Int64) {
        self.model = model
        self.size = size
    }

    /// Runs the download with `fixed` connections, or the adaptive default (`nil`).
    func run(fixed: Int? = nil, maximum: Int = 64, seed: UInt64 = 1) -> Result {
        var random = SplitMix64(seed: seed)
        let policy = TransferPolicy(minimumSegmentSize: 1 << 20)
        let layout = ChunkLayout(objectSize: size)
        let origin = Moment.now
        func instant(_ t: Double) -> Moment { origin + .seconds(t) }

        var now = 0.0
        var slots = [Slot()]
        var segments: [Segment] = []
        var target = 1
        var controller: ConnectionController?
        var requestCost = 0.0
        var learnedCap: Int?
        var received: Int64 = 0
        var requests = 0
        var refused = 0
        var noiseFactor = 1.0
        var queue: [Int] = []  // slots waiting for a worker, in order
        var started = false
        var restingUntil: Double?
        var decisions: [String] = []
        var localWait = 0.0

        // The probe: the first 1 MiB (or the whole object) on connection 0.
        let probe = Segment(0, min(size, 1 << 20))
        probe.owner = 0
        segments.append(probe)
        func send(_ slot: Int, _ segment: Segment, upTo end: Int64, fresh: Bool) {
            let handshake = fresh || model.closesConnections ? model.roundTrip : 0
            slots[slot].meter.beginRequest(freshConnection: fresh)
            slots[slot].request = Request(
                segment: segment, end: end, sentAt: now, arrivesAt: now + handshake + model.roundTrip / 2,
                work: model.requestWork)
            if fresh || model.closesConnections { slots[slot].flowingSince = nil }
            slots[slot].opened = true
            requests += 1
        }
        send(0, probe, upTo: probe.end, fresh: true)

        func active() -> [Int] { slots.indices.filter { slots[$0].request != nil } }

        func claim(_ slot: Int) -> Segment? {
            let free = segments.filter { $0.owner == nil && $0.remaining > 0 }
            if let free = free.max(by: { $0.remaining < $1.remaining }) {
                free.owner = slot
                return free
            }
            // Half of the largest tail nobody has asked for yet.
            var tails: [(segment: Segment, from: Int64)] = []
            for segment in segments where segment.owner != nil {
                let requested = segment.owner.flatMap {
                    slots[$0].request?.segment === segment ? slots[$0].request?.end : nil
                }
                let from = requested ?? segment.position
                if segment.end - from >= 2 << 20 { tails.append((segment, from)) }
            }
            if let tail = tails.max(by: { $0.segment.end - $0.from < $1.segment.end - $1.from }) {
                let half = tail.from + (tail.segment.end - tail.from) / 2
                let far = Segment(half, tail.segment.end)
                far.owner = slot
                tail.segment.end = half
                segments.append(far)
                return far
            }
            // Cut the far part of the busy segment that would take longest, where the policy says so.
            let rates = slots.compactMap { $0.request?.firstByteAt != nil ? $0.meter.rate : nil }
            let roundTrip = slots.map(\.meter.timeToFirstByte).filter { $0 > 0 }.min() ?? 0.05
            for victim in segments.filter({ $0.owner != nil && $0.remaining > 0 }).sorted(by: {
                $0.remaining > $1.remaining
            }) {
                guard let owner = victim.owner, slots[owner].request?.segment === victim,
                    slots[owner].request?.firstByteAt != nil
                else { continue }
                let sample = SegmentSample(frontier: victim.position, end: victim.end, isHedged: false)
                guard
                    let point = policy.cutPoint(
                        sample, rate: slots[owner].meter.rate, others: rates, roundTrip: roundTrip,
                        minimumStealSize: 64 << 10, layout: layout, requestCost: requestCost)
                else { continue }
                let far = Segment(point, victim.end)
                far.owner = slot
                victim.end = point
                if var request = slots[owner].request, request.end > point {
                    request.end = point
                    slots[owner].request = request
                }
                segments.append(far)
                return far
            }
            return nil
        }

        func dispatch() {
            let cap = min(target, learnedCap ?? target)
            while slots.count < target { slots.append(Slot()) }
            // Slots beyond the target wind down: their segments go back once their requests end.
            for segment in segments {
                if let owner = segment.owner, owner >= target, slots[owner].request == nil { segment.owner = nil }
            }
            var busy = active().count
            for slot in 0..<target where slots[slot].request == nil && slots[slot].idleUntil <= now {
                guard busy < cap else { break }
                let segment: Segment
                if let owned = segments.first(where: { $0.owner == slot && $0.remaining > 0 }) {
                    segment = owned
                } else if let claimed = claim(slot) {
                    segment = claimed
                } else {
                    continue
                }
                let size = policy.requestSize(
                    rate: slots[slot].meter.rate, timeToFirstByte: slots[slot].meter.timeToFirstByte,
                    requestCost: requestCost)
                let range = policy.nextRequest(
                    position: segment.position, end: segment.end, hedged: false, size: size)
                send(slot, segment, upTo: range.upperBound, fresh: !slots[slot].opened)
                busy += 1
            }
        }

        func startTransfer() {
            started = true
            let timeToFirstByte = (slots[0].request?.firstByteAt ?? now) - (slots[0].request?.sentAt ?? 0)
            if let fixed {
                target = fixed
            } else {
                let start = ConnectionController.start(
                    firstByte: timeToFirstByte - model.roundTrip, connect: model.roundTrip, maximum: maximum)
                target = start.count
                requestCost = start.requestCost
                controller = ConnectionController(start: start, maximum: maximum)
            }
            // The rest of the object, in one segment per other connection.
            let rest = size - probe.end
            let parts = Int64(max(1, target - 1))
            var position = probe.end
            for index in 0..<parts where rest > 0 {
                let end = index == parts - 1 ? size : probe.end + rest * (index + 1) / parts
                if end > position { segments.append(Segment(position, end)) }
                position = end
            }
            dispatch()
        }

        var lastSample = 0.0
        var lastControl = 0.0
        var observed = false
        var lastNoise = 0.0
        while received < size || active().count > 0 {
            now += dt
            if now - lastNoise >= 0.1 {
                lastNoise = now
                noiseFactor = 1 + model.noise * (2 * Double.random(in: 0...1, using: &random) - 1)
            }
            // Arrivals: refused above the limit, queued for a worker, or worked on.
            let inFlight = active()
            for slot in inFlight {
                guard var request = slots[slot].request, now >= request.arrivesAt, request.firstByteAt == nil,
                    !request.hasWorker
                else { continue }
                if let limit = model.refusesAbove, inFlight.filter({ slots[$0].request!.hasWorker }).count >= limit {
                    request.refused = true
                    request.firstByteAt = now + model.roundTrip / 2
                    slots[slot].request = request
                    continue
                }
                if let workers = model.workers {
                    let serving = inFlight.filter { slots[$0].request!.hasWorker }.count
                    if serving >= workers || (!queue.isEmpty && queue.first != slot) {
                        if !queue.contains(slot) { queue.append(slot) }
                        continue
                    }
                    queue.removeAll { $0 == slot }
                }
                request.hasWorker = true
                slots[slot].request = request
            }
            // The server's work: cores shared by the requests working.
            let working = inFlight.filter {
                let r = slots[$0].request!
                return r.hasWorker && r.work > 0 && r.firstByteAt == nil
            }
            let speed = working.isEmpty ? 0 : min(1, model.cores / Double(working.count))
            for slot in working {
                slots[slot].request!.work -= speed * dt
                if slots[slot].request!.work <= 0 {
                    slots[slot].request!.firstByteAt = now + model.roundTrip / 2
                }
            }
            for slot in inFlight {
                let r = slots[slot].request!
                if r.hasWorker && r.work <= 0 && r.firstByteAt == nil {
                    slots[slot].request!.firstByteAt = now + model.roundTrip / 2
                }
            }
            // Bytes: the link shared by the responses flowing, each within its cap.
            let flowing = inFlight.filter {
                let r = slots[$0].request!
                return !r.refused && r.firstByteAt.map { now >= $0 } == true
            }
            var (intake, path) = (1.0, 1.0)
            for disturbance in model.disturbances {
                let factors = disturbance.factors(at: now)
                (intake, path) = (intake * factors.intake, path * factors.path)
                // A stall is the client's disk: its transfer thread waits for room meanwhile.
                if case .stall = disturbance.kind, factors.intake < 1 { localWait += dt }
            }
            let link =
                model.link * noiseFactor * intake * path
                / (1 + model.perConnectionOverhead * Double(max(0, flowing.count - model.connectionsWithoutOverhead)))
            let share = flowing.isEmpty ? 0 : link / Double(flowing.count)
            func each(_ slot: Int) -> Double {
                var cap = model.perConnectionCap.map { $0 * path }
                if let burst = model.slowStart, now - (slots[slot].flowingSince ?? now) < burst.seconds {
                    cap = burst.rate * path
                }
                return min(share, cap.map { $0 * noiseFactor * intake } ?? share)
            }
            var ended: [Int] = []
            for slot in inFlight {
                guard let request = slots[slot].request else { continue }
                if request.refused {
                    if let firstByte = request.firstByteAt, now >= firstByte + model.roundTrip / 2 {
                        ended.append(slot)
                    }
                    continue
                }
                guard flowing.contains(slot) else { continue }
                if slots[slot].flowingSince == nil { slots[slot].flowingSince = now }
                let segment = request.segment
                let bytes = min(Int64((each(slot) * dt).rounded()), request.end - segment.position)
                if bytes > 0 {
                    segment.position += bytes
                    received += bytes
                    slots[slot].meter.deliver(Int(bytes))
                }
                if segment.position >= request.end { ended.append(slot) }
            }
            for slot in ended {
                let request = slots[slot].request!
                slots[slot].request = nil
                queue.removeAll { $0 == slot }
                if request.refused {
                    // A 503: the source learns its limit, and the slot rests a while.
                    refused += 1
                    learnedCap = model.refusesAbove
                    slots[slot].idleUntil = now + 0.25
                    restingUntil = min(restingUntil ?? .infinity, now + 0.25)
                    continue
                }
                if let firstByte = request.firstByteAt {
                    slots[slot].meter.finishRequest(
                        startedAt: instant(request.sentAt), firstByteAt: instant(firstByte), now: instant(now))
                }
                if request.segment.remaining == 0 || slot >= target { request.segment.owner = nil }
                if model.closesConnections { slots[slot].opened = false }
            }
            if !started {
                if let firstByte = slots[0].request?.firstByteAt, now >= firstByte {
                    startTransfer()
                } else if slots[0].request == nil {
                    startTransfer()
                }
            }
            if started, !ended.isEmpty || (restingUntil.map { now >= $0 } ?? false) {
                restingUntil = slots.filter { $0.request == nil && $0.idleUntil > now }.map(\.idleUntil).min()
                segments.removeAll { $0.remaining == 0 && $0.owner == nil }
                if segments.contains(where: { $0.remaining > 0 }) { dispatch() }
            }
            if now - lastSample >= 0.1 {
                lastSample = now
                for slot in slots.indices {
                    slots[slot].meter.sample(
                        at: instant(now), firstByteAt: slots[slot].request?.firstByteAt.map { instant($0) })
                }
            }
            // The transfer's first observation comes as it starts, the others as the controller asks
            // (every 100 ms while it holds: the transfer's housekeeping).
            let interval = controller?.observationInterval?.seconds ?? 0.1
            if started, var running = controller, now - lastControl >= interval - 1e-9 || !observed {
                observed = true
                lastControl = now
                let all = active()
                let transferring = all.filter {
                    let request = slots[$0].request!
                    return !request.refused && request.firstByteAt.map { now >= $0 } == true
                }.count
                let roundTrip = slots.map(\.meter.timeToFirstByte).filter { $0 > 0 }.min() ?? 0.05
                let remaining = segments.reduce(Int64(0)) { $0 + $1.remaining }
                let observation = ConnectionController.Observation(
                    totalBytes: received, remainingBytes: remaining, now: instant(now), roundTrip: roundTrip,
                    transferring: transferring, waiting: all.count - transferring,
                    firstConnectionRate: slots.dropFirst().allSatisfy({ $0.meter.rate == 0 })
                        ? slots[0].meter.rate : 0, localWait: .seconds(localWait))
                if let count = running.observe(observation) {
                    decisions.append("\(Int(now * 1000)) ms: \(count) (\(running.lastReason))")
                    target = count
                    dispatch()
                }
                controller = running
            }
            if now > 600 { break }
        }
        return Result(
            seconds: now, finalCount: controller?.target ?? target, history: controller?.history ?? [target],
            requests: requests, refused: refused, decisions: decisions)
    }
}
