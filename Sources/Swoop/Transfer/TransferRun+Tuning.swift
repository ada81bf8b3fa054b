import SwoopStore
import SwoopTransfer

/// Tuning the pool as the transfer goes: rates sampled every 100 ms, slow connections replaced,
/// the adaptive count moved, slow tails hedged.
extension TransferRun {
    /// Whether the downloader's byte-rate cap is holding bytes back: the connections' rates are
    /// then their shares of the cap, not what their paths can do, so slow-connection
    /// replacement, tail hedging and connection adaptation leave them alone. (Hedging would
    /// also spend the cap on bytes fetched twice.)
    func isCapped(at now: ContinuousClock.Instant) -> Bool {
        loop.rateLimiter?.isHoldingBack(at: now) ?? false
    }

    /// Every 100 ms: samples each connection's rate, replaces slow connections, and lets the
    /// adaptive controller see the throughput.
    func scheduleHousekeeping() {
        housekeepingTimer = loop.schedule(after: .milliseconds(100)) { [weak self] in
            guard let self, !stopped else { return }
            let now = ContinuousClock.now
            pool.sampleRates(at: now)
            replaceSlowConnections(at: now)
            adaptConnections(at: now)
            // Rates move while connections sit idle at the end: a tail may become worth a hedge.
            hedgeSlowTailIfAllowed(now: now)
            scheduleHousekeeping()
        }
    }

    /// When idle connections remain and a connection far behind the others holds the last work,
    /// fetch its tail on an idle connection too. Not for responses checked against their own
    /// digest, nor under a byte-rate cap (it would spend the cap on bytes fetched twice).
    func hedgeSlowTailIfAllowed(now: ContinuousClock.Instant) {
        guard settings.configuration.tuning.hedgesSlowTail, !store.checksEachResponse, !isCapped(at: now),
            let plan = store.plan, plan.allAvailableWorkOwned
        else { return }
        let all = pool.samples(at: now)
        let busy = all.filter { pool.connections[$0.id].isBusy && $0.segment != nil }
        let victims = settings.policy.tailsToHedge(
            busy: busy, idle: pool.idleCount, roundTrip: TransferPolicy.roundTrip(all))
        guard !victims.isEmpty else { return }
        var helpers = pool.idleWithinTarget(store: store, object: object, delegate: self).makeIterator()
        for id in victims {
            // Another source if there is one: the straggler's server may be the slow part.
            let straggler = pool.connections[id]
            guard let victim = straggler.segment, let source = sources.choose(avoiding: pool.source(of: id), now: now),
                let helper = helpers.next(), acquirePermit(helper, for: source)
            else { return }
            guard let hedge = plan.hedge(victim, ownerID: helper.id) else {
                helper.releasePermit()
                return
            }
            logger.debug(
                "hedging a slow tail", metadata: ["segment": "\(victim)", "rate": "\(Int(straggler.recentRate))"])
            request(hedge, on: helper, from: source)
        }
    }

    /// Closes connections far slower than the others; each slot reconnects. The request is
    /// cancelled, the bytes it wrote are kept, and the rest of its segment goes back to the plan.
    private func replaceSlowConnections(at now: ContinuousClock.Instant) {
        guard settings.configuration.tuning.replacesSlowConnections, !isCapped(at: now), let plan = store.plan else {
            return
        }
        let slow = settings.policy.connectionsToReplace(pool.samples(at: now), minimumStealSize: plan.minimumStealSize)
        for id in slow {
            let connection = pool.connections[id]
            logger.debug(
                "replacing a slow connection",
                metadata: ["connection": "\(id)", "rate": "\(Int(connection.recentRate))"])
            connection.replacements += 1
            connection.wantsFreshConnection = true
            connection.cancel()
        }
    }

    /// The server's own time per request when the probe showed it is large (see
    /// ``ConnectionController/requestCost``); 0 otherwise, and with a fixed count.
    var requestCost: Double { controller?.requestCost ?? 0 }

    /// Starts the adaptive count from the probe's first response on `probe`: its round trip and
    /// the server's time to answer (``ConnectionController/start(firstByte:connect:maximum:)``).
    func startController(probe: Connection, maximum: Int) {
        let timing = probe.exchange?.timing()
        let firstByte =
            timing?.firstByte.seconds ?? probe.exchange?.startedAt.map { (ContinuousClock.now - $0).seconds / 2 } ?? 0
        let start = ConnectionController.start(
            firstByte: firstByte, connect: timing?.connect?.seconds, maximum: maximum)
        pool.target = start.count
        controller = ConnectionController(start: start, maximum: maximum)
        counters.settledConnections = start.count
        if start.requestCost > 0 {
            logger.debug(
                "the server takes long to answer each request: fewer, larger requests",
                metadata: ["seconds": "\(start.requestCost)", "connections": "\(start.count)"])
        }
        // The first sample now: a first connection alone is measured from here.
        adaptConnections(at: .now)
        scheduleControllerTick()
    }

    /// While the controller climbs or tries a step, it looks more often than the 100 ms
    /// housekeeping (``ConnectionController/observationInterval``): a capped link's knee is
    /// reached within a few hundred milliseconds.
    private func scheduleControllerTick() {
        guard let interval = controller?.observationInterval else {
            controllerTimer = nil
            return
        }
        controllerTimer = loop.schedule(after: interval) { [weak self] in
            guard let self, !stopped, controller != nil else { return }
            adaptConnections(at: .now)
            scheduleControllerTick()
        }
    }

    /// Feeds the controller (from the housekeeping tick while it holds, and from its own faster
    /// tick while it climbs) and applies a new count.
    func adaptConnections(at now: ContinuousClock.Instant) {
        guard var controller, !controller.isSettled, let plan = store.plan else { return }
        defer { self.controller = controller }
        if isCapped(at: now) || sources.sources.contains(where: { $0.health.state != .up }) {
            // The cap is the limit, or a server is down or ramping back up: more connections
            // cannot add throughput, and the rate says nothing about the path. Keep the count,
            // and measure afresh once the cap lets go or the server is back.
            controller.restartMeasurement(at: now)
            return
        }
        let samples = pool.samples(at: now)
        let busy = pool.busyCount
        let transferring = samples.count(where: { $0.isTransferring && $0.secondsSinceFirstByte != nil })
        let observation = ConnectionController.Observation(
            totalBytes: counters.bytesReceived, remainingBytes: plan.remainingBytes, now: now,
            roundTrip: TransferPolicy.roundTrip(samples), transferring: transferring,
            waiting: max(0, busy - transferring),
            firstConnectionRate: samples.dropFirst().allSatisfy({ $0.rate == 0 }) ? samples.first?.rate ?? 0 : 0)
        let wasSettled = controller.isSettled
        if let count = controller.observe(observation) {
            logger.debug(
                "adapting connections",
                metadata: ["from": "\(pool.target)", "to": "\(count)", "why": "\(controller.lastReason)"])
            pool.target = count
            counters.settledConnections = count
            self.controller = controller
            dispatchWork()
            return
        }
        if controller.isSettled && !wasSettled {
            logger.debug(
                "connections settled", metadata: ["count": "\(pool.target)", "why": "\(controller.lastReason)"])
        }
    }
}
