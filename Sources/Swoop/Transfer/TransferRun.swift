import Logging
import SwoopStore
import SwoopTransfer

/// Hears how the transfer stage ends.
protocol TransferRunDelegate: AnyObject {
    /// Every byte is stored and no connection is busy.
    func transferDidComplete(_ run: TransferRun)
    /// The object changed on the server mid-transfer.
    func transfer(_ run: TransferRun, foundObjectChanged reason: String)
    /// The transfer cannot go on.
    func transfer(_ run: TransferRun, didFailWith error: DownloadError)
    /// The single stream (a server without ranges) broke off with a failure that another try
    /// may not meet: only starting over can get the object.
    func transfer(_ run: TransferRun, streamBrokeOff error: DownloadError)
}

/// The transfer stage of one download: keeps its connections busy on the plan, retries failed
/// requests, and applies the ``TransferPolicy`` (request sizes, cuts, hedges, replacements)
/// and the adaptive ``ConnectionController``. Body bytes never pass through here: connections
/// write them to the ``DownloadStore``; only outcomes arrive. Transfer thread only.
final class TransferRun: ConnectionDelegate {
    private let loop: TransferLoop
    private let configuration: Downloader.Configuration
    private let options: TransferOptions
    private let policy: TransferPolicy
    private let failurePolicy: FailurePolicy
    let object: RemoteObject
    let store: DownloadStore
    private let headers: RequestHeaders
    private let counters: DownloadCounters
    private let logger: Logger
    weak var delegate: (any TransferRunDelegate)?

    private var connections: [Connection] = []
    private var targetConnections: Int
    /// Adaptive mode: grows or shrinks `targetConnections` with measured throughput.
    private var controller: ConnectionController?
    /// Every 100 ms: connection rates, slow-connection replacement, adaptation.
    private var housekeepingTimer: LoopTimer?
    private var retryTimer: LoopTimer?
    private var stopped = false
    /// Where requests go: the first URL's server, and mirrors once they agree with it.
    let sources: SourceSet
    /// The source of each connection's request in flight, by connection id.
    private var sourceOf: [Int: Source] = [:]
    /// Mirrors to check once the first source's bytes are coming in, with what they need.
    private let mirrors: [RemoteURL]
    private let requestHeaders: [(name: String, value: String)]
    private let target: String
    /// Fresh URLs for the first source when its URL is refused (``DownloadRequest/urlProvider``).
    private let refresher: URLRefresher?
    /// The probe's range, near which a source's bytes are compared.
    private var firstRange = ByteRange(0, 0)

    init(
        object: RemoteObject, store: DownloadStore, headers: RequestHeaders, configuration: Downloader.Configuration,
        loop: TransferLoop, counters: DownloadCounters, logger: Logger,
        mirrors: [RemoteURL] = [], requestHeaders: [(name: String, value: String)] = [], target: String = "",
        refresher: URLRefresher? = nil
    ) {
        self.refresher = refresher
        self.sources = SourceSet(first: object, headers: headers, store: store, logger: logger)
        self.mirrors = mirrors
        self.requestHeaders = requestHeaders
        self.target = target
        self.loop = loop
        self.configuration = configuration
        self.options = TransferOptions(configuration)
        self.policy = TransferPolicy(configuration)
        self.failurePolicy = FailurePolicy(configuration)
        self.object = object
        self.store = store
        self.headers = headers
        self.counters = counters
        self.logger = logger
        self.targetConnections = max(1, configuration.connections.initial)
        sources.onSourceAdded = { [weak self] in self?.loop.afterCallbacks { self?.dispatchWork() } }
    }

    /// Connections transferring right now.
    var activeConnections: Int { connections.count(where: \.isTransferring) }

    /// What the transfer waits for while no request is in flight (`nil`: one is), for the
    /// session's watchdog: a retry's backoff, a down server's next trial, a connection permit, or
    /// nothing at all.
    var idle: IdleWait? {
        guard !connections.contains(where: \.isBusy), !sources.isChecking, refresher?.isRefreshing != true else { return nil }
        if let retryTimer, !retryTimer.isCancelled { return sources.waitingFor != nil ? .outage : .retry }
        if loop.budget.isWaiting(self) { return .permit }
        return .nothing
    }

    /// The server the transfer waits for while no source answers (for progress).
    var waiting: DownloadProgress.Wait? {
        guard let source = sources.waitingFor, let outage = source.health.outage else { return nil }
        let now = ContinuousClock.now
        return DownloadProgress.Wait(
            server: source.hostAndPort, cause: source.lastError?.shortCause ?? "no answer",
            duration: now - outage.since,
            nextTry: outage.trialInFlight ? nil : max(.zero, outage.nextTrial - now), limit: failurePolicy.maxOutage)
    }

    // MARK: Start and stop

    /// Takes over the probe's `connection`, whose response carries `firstRange`, plans the
    /// other connections and starts them (after the current callbacks).
    func start(from connection: Connection, firstRange: ByteRange) throws(DownloadError) {
        guard let plan = store.plan else { return }
        let layout = plan.layout
        guard let segment = plan.reserve(ByteRange(firstRange.lowerBound, layout.alignUp(firstRange.upperBound)), ownerID: connection.id) else {
            throw .invalidResponse("internal: the probe's range \(firstRange) is not missing")
        }
        self.firstRange = firstRange
        adopt(connection)
        connection.adopt(.segment(segment, request: firstRange), store: store, object: object)
        plan.noteRequested(segment, upTo: firstRange.upperBound)
        sourceOf[connection.id] = sources.primary
        sources.primary.active += 1
        // Too little to split, steal, hedge or replace (a small file): no measuring needed.
        guard plan.remainingBytes >= 2 * plan.minimumStealSize else {
            if !mirrors.isEmpty { logger.info("the object arrives in one response; the mirrors are not needed") }
            return
        }
        if !mirrors.isEmpty, let range = sources.sampleRange(near: firstRange) {
            sources.check(mirrors, range: range, requestHeaders: requestHeaders, target: target, configuration: configuration, loop: loop)
        }
        if case .adaptive(let maximum) = configuration.connections {
            let headAfter = connection.exchange?.startedAt.map { (ContinuousClock.now - $0).seconds } ?? 0
            targetConnections = ConnectionController.initialCount(probeTimeToFirstByte: headAfter, maximum: maximum)
            controller = ConnectionController(initial: targetConnections, maximum: maximum)
        }
        scheduleHousekeeping()
        plan.split(into: max(0, targetConnections - 1))
        if let window = store.sink.window {
            keepWithin(window: window, plan: plan)
        } else if store.verifier?.hashesInOrder == true {
            // A hash follows the complete prefix: what is left to hash at the end is a few pieces.
            plan.takeInOrder(pieces: max(8 << 20, plan.remainingBytes / Int64(16 * max(1, targetConnections))))
        }
        loop.afterCallbacks { [weak self] in self?.dispatchWork() }
    }

    /// Takes over the probe's `connection`, whose response is the whole object.
    func startStream(from connection: Connection) {
        adopt(connection)
        connection.adopt(.stream, store: store, object: object)
        // An in-order sink pauses the stream when its window is full; room lets it go on.
        store.sink.observeRoom { [weak connection] _ in connection?.resumeIfPaused() }
        logger.info("the server does not support ranges; downloading in one stream")
    }

    /// An in-order sink (a pipe): connections take the lowest work first and nothing that starts
    /// beyond the reader's position plus the window less one piece, so every byte fetched fits the
    /// window; as the reader takes bytes the limit follows. Pieces are small (half the window over
    /// the connections, 1 MiB at least): the reader waits for the lowest piece, so the pieces near
    /// it must be fetched side by side, not one connection crawling through a long one.
    private func keepWithin(window: Int64, plan: SegmentScheduler) {
        let piece = plan.takeInOrder(pieces: max(1 << 20, min(window / 4, window / Int64(2 * max(1, targetConnections)))))
        plan.limit = max(plan.layout.chunkSize, window - piece)
        store.sink.observeRoom { [weak self, weak plan] consumed in
            guard let self, let plan else { return }
            plan.limit = consumed + max(plan.layout.chunkSize, window - piece)
            dispatchWork()
        }
    }

    /// Cancels every exchange and timer; outcomes that arrive later are ignored.
    func stop() {
        guard !stopped else { return }
        stopped = true
        sources.stop()
        loop.budget.cancelWait(self)
        housekeepingTimer?.cancel()
        retryTimer?.cancel()
        for connection in connections where connection.isBusy { connection.cancel() }
    }

    private func adopt(_ connection: Connection) {
        connection.delegate = self
        precondition(connections.isEmpty && connection.id == 0, "the probe's connection is the first")
        connections.append(connection)
    }

    private func makeConnection() -> Connection {
        let connection = Connection(id: connections.count, loop: loop, delegate: self)
        connection.attach(to: store, object: object)
        connections.append(connection)
        return connection
    }

    // MARK: Work

    /// Gives idle connections work; reports completion when nothing is left.
    private func dispatchWork() {
        guard !stopped, !configuration.faults.transferSendsNothing, let plan = store.plan else { return }
        if plan.isComplete {
            if !connections.contains(where: \.isBusy) { delegate?.transferDidComplete(self) }
            return
        }
        sources.settleAgreements()
        let now = ContinuousClock.now
        let roundTrip = TransferPolicy.roundTrip(samples(at: now))
        for slot in 0..<targetConnections {
            // Slots open as work appears: an object that arrives whole never opens a second one.
            if slot < connections.count && connections[slot].isBusy { continue }
            guard let source = sources.choose(now: now) else { break }
            let connection = slot < connections.count ? connections[slot] : makeConnection()
            guard acquirePermit(connection, for: source) else { break }
            guard let segment = plan.claim(now: now, ownerID: connection.id, cut: { [self] in cutPoint($0, roundTrip: roundTrip, now: now) }) else {
                connection.releasePermit()
                break
            }
            request(segment, on: connection, from: source)
        }
        hedgeSlowTailIfAllowed(now: now)
        if !connections.contains(where: \.isBusy), let next = [plan.nextRetryTime, sources.nextWake].compactMap({ $0 }).min() {
            retryTimer?.cancel()
            retryTimer = loop.schedule(after: max(.zero, next - .now)) { [weak self] in self?.dispatchWork() }
        }
    }

    private func acquirePermit(_ connection: Connection, for source: Source) -> Bool {
        connection.acquirePermit(for: source.object.url, owner: self) { [weak self] in self?.dispatchWork() }
    }

    /// Sends `connection`'s next request for `segment` to `source`.
    private func request(_ segment: Segment, on connection: Connection, from source: Source) {
        guard let plan = store.plan else { return }
        let size = policy.requestSize(rate: connection.recentRate, timeToFirstByte: connection.timeToFirstByte)
        let range = policy.nextRequest(position: segment.position, end: segment.end, hedged: segment.partner != nil, size: size)
        plan.noteRequested(segment, upTo: range.upperBound)
        let object = source.object
        logger.trace("request", metadata: ["connection": "\(connection.id)", "range": "\(range)", "source": "\(source.index)"])
        connection.attach(to: store, object: object)
        sourceOf[connection.id] = source
        source.active += 1
        source.health.willSend()
        connection.begin(
            .segment(segment, request: range), url: object.url,
            request: source.headers.request(for: object.url, precondition: object.precondition, range: .bounded(range), options: options))
        counters.willSend(busy: connections.count(where: \.isBusy))
    }

    private func samples(at now: ContinuousClock.Instant) -> [ConnectionSample] {
        connections.map { $0.sample(at: now) }
    }

    /// Where to cut `victim`'s request in flight for an idle connection (see
    /// ``TransferPolicy/cutPoint(_:rate:others:roundTrip:minimumStealSize:layout:)``).
    private func cutPoint(_ victim: Segment, roundTrip: Double, now: ContinuousClock.Instant) -> Int64? {
        // A response checked against its own digest (Content-Digest) is never cut, nor hedged.
        guard let plan = store.plan, !store.checksEachResponse, let id = victim.ownerID, connections.indices.contains(id),
              connections[id].isTransferring else { return nil }
        let others = connections.filter(\.isTransferring).map(\.recentRate)
        return policy.cutPoint(
            SegmentSample(frontier: victim.frontier, end: victim.end, isHedged: victim.partner != nil),
            rate: connections[id].recentRate, others: others, roundTrip: roundTrip,
            minimumStealSize: plan.minimumStealSize, layout: plan.layout)
    }

    /// When idle connections remain and a connection far behind the others holds the last work,
    /// fetch its tail on an idle connection too. Not for responses checked against their own
    /// digest, nor under a byte-rate cap (it would spend the cap on bytes fetched twice).
    private func hedgeSlowTailIfAllowed(now: ContinuousClock.Instant) {
        guard configuration.hedgesSlowTail, !store.checksEachResponse, !isCapped(at: now),
              let plan = store.plan, plan.allAvailableWorkOwned else { return }
        let all = samples(at: now)
        let busy = all.filter { connections[$0.id].isBusy && $0.segment != nil }
        let idleSlots = targetConnections - connections.prefix(targetConnections).count(where: \.isBusy)
        let victims = policy.tailsToHedge(busy: busy, idle: idleSlots, roundTrip: TransferPolicy.roundTrip(all))
        guard !victims.isEmpty else { return }
        while connections.count < targetConnections { _ = makeConnection() }
        var helpers = connections.prefix(targetConnections).filter { !$0.isBusy }.makeIterator()
        for id in victims {
            // Another source if there is one: the straggler's server may be the slow part.
            guard let victim = connections[id].segment, let source = sources.choose(avoiding: sourceOf[id], now: now),
                  let helper = helpers.next(), acquirePermit(helper, for: source) else { return }
            guard let hedge = plan.hedge(victim, ownerID: helper.id) else {
                helper.releasePermit()
                return
            }
            logger.debug("hedging a slow tail", metadata: ["segment": "\(victim)", "rate": "\(Int(connections[id].recentRate))"])
            request(hedge, on: helper, from: source)
        }
    }

    // MARK: Housekeeping

    /// Whether the downloader's byte-rate cap is holding bytes back: the connections' rates are
    /// then their shares of the cap, not what their paths can do, so slow-connection
    /// replacement, tail hedging and connection adaptation leave them alone. (Hedging would
    /// also spend the cap on bytes fetched twice.)
    private func isCapped(at now: ContinuousClock.Instant) -> Bool {
        loop.rateLimiter?.isHoldingBack(at: now) ?? false
    }

    /// Every 100 ms: samples each connection's rate, replaces slow connections, and lets the
    /// adaptive controller see the throughput.
    private func scheduleHousekeeping() {
        housekeepingTimer = loop.schedule(after: .milliseconds(100)) { [weak self] in
            guard let self, !self.stopped else { return }
            let now = ContinuousClock.now
            for connection in connections { connection.sampleRate(at: now) }
            replaceSlowConnections(at: now)
            adaptConnections(at: now)
            // Rates move while connections sit idle at the end: a tail may become worth a hedge.
            hedgeSlowTailIfAllowed(now: now)
            scheduleHousekeeping()
        }
    }

    /// Closes connections far slower than the others; each slot reconnects. The request is
    /// cancelled, the bytes it wrote are kept, and the rest of its segment goes back to the plan.
    private func replaceSlowConnections(at now: ContinuousClock.Instant) {
        guard configuration.replacesSlowConnections, !isCapped(at: now), let plan = store.plan else { return }
        let slow = policy.connectionsToReplace(samples(at: now), minimumStealSize: plan.minimumStealSize)
        for id in slow {
            let connection = connections[id]
            logger.debug("replacing a slow connection", metadata: ["connection": "\(id)", "rate": "\(Int(connection.recentRate))"])
            connection.replacements += 1
            connection.wantsFreshConnection = true
            connection.cancel()
        }
    }

    private func adaptConnections(at now: ContinuousClock.Instant) {
        guard var controller, !controller.isSettled, let plan = store.plan else { return }
        if isCapped(at: now) || sources.sources.contains(where: { $0.health.state != .up }) {
            // The cap is the limit, or a server is down or ramping back up: more connections
            // cannot add throughput, and the rate says nothing about the path. Keep the count,
            // and measure afresh once the cap lets go or the server is back.
            controller.restartMeasurement(at: now)
            self.controller = controller
            return
        }
        let roundTrip = TransferPolicy.roundTrip(samples(at: now))
        if let count = controller.observe(totalBytes: counters.bytesReceived, remainingBytes: plan.remainingBytes, at: now, roundTrip: roundTrip) {
            logger.debug("adapting connections", metadata: ["from": "\(targetConnections)", "to": "\(count)", "why": "\(controller.lastReason)"])
            targetConnections = count
            self.controller = controller
            dispatchWork()
            return
        }
        if controller.isSettled {
            logger.debug("connections settled", metadata: ["count": "\(targetConnections)", "why": "\(controller.lastReason)"])
        }
        self.controller = controller
    }

    // MARK: ConnectionDelegate

    func connection(_ connection: Connection, didReceiveProbeHead head: ResponseHead, requested: RequestedRange) -> BodyDisposition {
        .abort  // probes belong to the prober
    }

    func connection(_ connection: Connection, didFinish job: Connection.Job, with outcome: Connection.Outcome) {
        guard !stopped else { return }
        switch job {
        case .segment(let segment, let requested):
            segmentEnded(segment, requested: requested, on: connection, outcome: outcome)
        case .stream:
            streamEnded(outcome)
        case .probe, .sample:
            break
        }
    }

    func connectionWasAnswered(_ connection: Connection) {
        guard !stopped, let source = sourceOf[connection.id], sources.answered(source) else { return }
        // A recovering source may take more requests now.
        loop.afterCallbacks { [weak self] in self?.dispatchWork() }
    }

    /// A segment request ended: continue, retry or fail.
    private func segmentEnded(_ segment: Segment, requested: ByteRange, on connection: Connection, outcome: Connection.Outcome) {
        guard let plan = store.plan else { return }
        let source = sourceOf.removeValue(forKey: connection.id)
        logger.trace("request ended", metadata: [
            "connection": "\(connection.id)", "range": "\(requested)", "bytes": "\(connection.bytesThisRequest)", "outcome": "\(outcome)"])
        if let source {
            source.active -= 1
            source.bytes += connection.bytesThisRequest
            if connection.bytesThisRequest > 0 { source.health.delivered() }
            if connection.bytesThisRequest > 0 && source === sources.primary { refresher?.noteProgress() }
        }
        switch outcome {
        case .failed(let error, let retryAfter):
            requestFailed(
                segment, requested: requested, error: error, retryAfter: retryAfter, on: connection, from: source)
            return
        case .cancelled where segment.isDone || segment.partner == nil:
            // A hedge partner won, or the connection was replaced, or the download is stopping.
            source?.health.abandonTrial()
            if segment.isDone { plan.finish(segment) } else { plan.release(segment, failed: false) }
            dispatchWork()
            return
        case .completed, .stopped, .cancelled:
            source?.health.abandonTrial()
            if segment.isDone {
                let partner = segment.partner
                plan.finish(segment)
                // The other half of a hedge pair has nothing left to fetch.
                if let partner { connections.first { $0.segment === partner }?.cancel() }
            } else if segment.isOwned && segment.partner == nil,
                      connections.prefix(targetConnections).contains(where: { $0 === connection }),
                      let next = sources.next(after: source, now: .now), acquirePermit(connection, for: next) {
                // The request ended inside the segment: the same connection asks for the next part
                // (of the same source while it may be asked, keeping its connection).
                store.checkpointIfDue()
                request(segment, on: connection, from: next)
                return
            } else {
                plan.release(segment, failed: false)
            }
        }
        store.checkpointIfDue()
        dispatchWork()
    }

    /// A segment request failed: the URL expired, the object changed, or the failure policy
    /// decides between retrying the range, waiting for its source, another source, or failing.
    private func requestFailed(
        _ segment: Segment, requested: ByteRange, error: DownloadError, retryAfter: Int?, on connection: Connection,
        from source: Source?
    ) {
        guard let plan = store.plan else { return }
        if let refresher, source === sources.primary, let sent = connection.url,
           URLExpiry.isRefusal(error, url: sent, now: URLExpiry.now), let range = sources.sampleRange(near: firstRange) {
            // The URL expired: the range waits for a fresh one, which every refused request shares.
            source?.health.abandonTrial()  // an answer, though not a usable one: no outage
            plan.release(segment, failed: false)
            sources.refreshPrimary(
                refused: sent, refresher: refresher, range: range, requestHeaders: requestHeaders, target: target,
                configuration: configuration, loop: loop) { [weak self] error in
                guard let self, !stopped else { return }
                if let error { delegate?.transfer(self, didFailWith: error) } else { dispatchWork() }
            }
            dispatchWork()
            return
        }
        if error.kind == .objectChanged {
            source?.health.abandonTrial()
            // The first source's change restarts the download; a mirror's only loses the mirror
            // (while another source is left).
            guard let source, source !== sources.primary, sources.usable.contains(where: { $0 !== source }) else {
                delegate?.transfer(self, foundObjectChanged: error.message)
                return
            }
            sources.drop(source, "its object changed (\(error.reason))")
            plan.release(segment, failed: false)
            dispatchWork()
            return
        }
        let verdict = source.map {
            sources.failed($0, error, answered: connection.wasAnswered, retryAfter: retryAfter, policy: failurePolicy)
        } ?? .retryRange
        switch verdict {
        case .limited, .rest, .down:
            // Another source takes the range over, or it waits for its source; it is not to blame.
            if verdict != .limited { counters.retries += 1 }
            plan.release(segment, failed: false)
        case .giveUp(let reason):
            if let source, sources.usable.contains(where: { $0 !== source }) {
                sources.drop(source, reason)
                plan.release(segment, failed: false)
                break
            }
            plan.release(segment, failed: false)
            delegate?.transfer(self, didFailWith: givingUp(error, reason: reason))
            return
        case .retryRange:
            let delay = failurePolicy.backoff(tries: segment.failuresWithoutProgress + 1, retryAfter: retryAfter)
            plan.release(segment, failed: true, retryAt: .now + delay)
            if segment.failuresWithoutProgress >= configuration.retry.maxTries {
                // The segment map keeps everything else; downloading again resumes.
                var detail = " (gave up after \(configuration.retry.maxTries) tries)"
                if let others = sources.whyOthersCannotHelp { detail += "; no other source can take over: " + others }
                delegate?.transfer(self, didFailWith: error.adding(detail, remedy: .resume))
                return
            }
            counters.retries += 1
            logger.info("request failed; retrying", metadata: ["range": "\(requested)", "error": "\(error)", "delay": "\(delay)"])
        }
        store.checkpointIfDue()
        dispatchWork()
    }

    /// The download's failure when the only source is given up: a permanent failure as it is, an
    /// outage with how long it lasted; either way what the other sources could not do.
    private func givingUp(_ error: DownloadError, reason: String) -> DownloadError {
        let others = sources.whyOthersCannotHelp.map { "; no other source can take over: " + $0 } ?? ""
        guard error.isTransient else { return error.adding(others) }
        return DownloadError(
            error.kind, reason + others, remedy: .resume,
            httpStatus: error.httpStatus, curlCode: error.curlCode)
    }

    /// The single stream ended.
    private func streamEnded(_ outcome: Connection.Outcome) {
        switch outcome {
        case .completed:
            if let size = object.size, store.streamPosition != size {
                let message = "the server closed the connection after \(store.streamPosition) of \(size) bytes"
                delegate?.transfer(self, streamBrokeOff: .invalidResponse(message))
                return
            }
            delegate?.transferDidComplete(self)
        case .failed(let error, _) where error.isTransient:
            delegate?.transfer(self, streamBrokeOff: error)
        case .failed(let error, _):
            delegate?.transfer(self, didFailWith: error)
        case .stopped, .cancelled:
            break
        }
    }
}
