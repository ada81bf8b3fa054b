import SwoopStore
import SwoopCurl

/// Tuning the pool as the transfer goes: rates sampled every 100 ms, slow connections replaced,
/// the adaptive count moved (the machine's target), slow tails hedged (the machine's to decide).
extension TransferRun {
    /// Every 100 ms: samples each connection's rate, replaces slow connections, and lets the
    /// adaptive controller see the throughput.
    func scheduleHousekeeping() {
        housekeepingTimer = loop.schedule(after: .milliseconds(100)) { [weak self] in
            guard let self, !stopped else { return }
            let now = Moment.now
            pool.sampleRates(at: now)
            if let machine { perform(machine.replaceSlow(at: now)) }
            adaptConnections(at: now)
            // Rates move while connections sit idle at the end: a tail may become worth a hedge.
            if let machine { perform(machine.hedge(at: now)) }
            scheduleHousekeeping()
        }
    }

    /// A connection far slower than the others goes (``TransferAction/replace(slot:)``): its
    /// request is cancelled, the bytes it wrote are kept, and the rest of its segment goes back
    /// to the plan; the slot reconnects.
    func replace(slot: Int) {
        guard let connection = pool.connection(slot) else { return }
        logger.debug(
            "replacing a slow connection", metadata: ["connection": "\(slot)", "rate": "\(Int(connection.recentRate))"])
        connection.replacements += 1
        connection.wantsFreshConnection = true
        connection.cancel()
    }

    /// Starts the adaptive count from the probe's first response on `probe`: its round trip and
    /// the server's time to answer (``ConnectionController/start(firstByte:connect:maximum:)``).
    func startController(probe: Connection, maximum: Int) {
        let start = readStart(probe: probe, maximum: maximum)
        machine?.target = start.count
        controller = ConnectionController(start: start, maximum: maximum)
        counters.settledConnections = start.count
        // The first sample now: a first connection alone is measured from here.
        adaptConnections(at: .now)
        scheduleControllerTick()
    }

    /// What the probe's first response on `probe` says about the path and the server
    /// (``ConnectionController/start(firstByte:connect:maximum:)``). Its request cost is the
    /// server's, whatever the count: with a fixed count too, requests are made large when every
    /// one of them costs the server long. On a connection already open (an earlier download's,
    /// or a benchmark's earlier pass) the round trip is the host's quickest handshake so far
    /// (``HostEntry/roundTrip``): without one, the server's time could not be told from the
    /// path's, and a server that works on every request looked like a long link (64 connections).
    @discardableResult
    func readStart(probe: Connection, maximum: Int) -> ConnectionController.Start {
        let timing = probe.exchange?.timing()
        let host = sources.sources[0].host
        if let connect = timing?.connect { host.noteHandshake(connect) }
        let firstByte =
            timing?.firstByte.seconds ?? probe.exchange?.startedAt.map { (Moment.now - $0).seconds / 2 } ?? 0
        let start = ConnectionController.start(
            firstByte: firstByte, connect: (timing?.connect ?? host.roundTrip)?.seconds, maximum: maximum)
        machine?.requestCost = start.requestCost
        if start.requestCost > 0 {
            logger.debug(
                "the server takes long to answer each request: fewer, larger requests",
                metadata: ["seconds": "\(start.requestCost)", "connections": "\(start.count)"])
        }
        return start
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
    func adaptConnections(at now: Moment) {
        guard var controller, let machine else { return }
        defer { self.controller = controller }
        let wasSettled = controller.isSettled
        let count = machine.adapt(
            &controller, totalBytes: counters.bytesReceived, busy: pool.busyCount, localWait: store.sink.localWait,
            at: now)
        if let count {
            logger.debug(
                "adapting connections",
                metadata: ["from": "\(machine.target)", "to": "\(count)", "why": "\(controller.lastReason)"])
            machine.target = count
            counters.settledConnections = count
            self.controller = controller
            dispatchWork()
        } else if controller.isSettled && !wasSettled {
            logger.debug(
                "connections settled", metadata: ["count": "\(machine.target)", "why": "\(controller.lastReason)"])
        }
    }
}
