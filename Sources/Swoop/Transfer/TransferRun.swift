import Logging
import SwoopStore
import SwoopTransfer

/// Hears how the transfer stage ends.
protocol TransferRunDelegate: AnyObject {
    /// Every byte is stored and no connection is busy.
    func transferDidComplete(_ run: TransferRun)
    /// The object changed on the server mid-transfer (or its servers serve two versions):
    /// `versions` are the validators of the two responses whose bytes differed, if known.
    func transfer(_ run: TransferRun, foundObjectChanged reason: String, versions: [ObjectIdentity.Validators])
    /// The transfer cannot go on.
    func transfer(_ run: TransferRun, didFailWith error: DownloadError)
    /// The single stream (a server without ranges) broke off with a failure that another try
    /// may not meet: only starting over can get the object.
    func transfer(_ run: TransferRun, streamBrokeOff error: DownloadError)
}

/// The transfer stage of one download: decides which request each idle slot of its
/// ``ConnectionPool`` sends next (from the plan, the ``TransferPolicy`` and the sources), and what
/// an ended request means (``TransferRun+Failures.swift``: the ``FailurePolicy``; tuning the
/// pool: ``TransferRun+Tuning.swift``). Body bytes never pass through here: connections write
/// them to the ``DownloadStore``; only outcomes arrive. Transfer thread only.
final class TransferRun: ConnectionDelegate, HostWatcher {
    let loop: TransferLoop
    let settings: Settings
    let object: RemoteObject
    let store: DownloadStore
    let counters: DownloadCounters
    let logger: Logger
    weak var delegate: (any TransferRunDelegate)?
    /// The connection slots.
    let pool: ConnectionPool
    /// Where requests go: the first URL's server, and mirrors once they agree with it.
    let sources: SourceSet
    /// Fresh URLs for the first source when its URL is refused (``DownloadRequest/urlProvider``).
    let refresher: URLRefresher?
    /// Adaptive mode: grows or shrinks the pool's target with measured throughput.
    var controller: ConnectionController?
    /// Every 100 ms: connection rates, slow-connection replacement, adaptation.
    var housekeepingTimer: LoopTimer?
    /// Every 25 ms while the adaptive count climbs or tries a step.
    var controllerTimer: LoopTimer?
    private var retryTimer: LoopTimer?
    private(set) var stopped = false
    /// The probe's range, near which a source's bytes are compared.
    private(set) var firstRange = ByteRange(0, 0)
    /// What the bytes themselves showed about validators and versions (``VersionWatch``).
    var versions = VersionWatch()

    /// What the run reads from the configuration, once.
    struct Settings {
        let configuration: Downloader.Configuration
        let options: TransferOptions
        let policy: TransferPolicy
        let failures: FailurePolicy
        /// Mirrors to check once the first source's bytes are coming in.
        let mirrors: [RemoteURL]

        init(_ settings: ExchangeSettings, mirrors: [RemoteURL]) {
            configuration = settings.configuration
            options = settings.options
            policy = TransferPolicy(configuration)
            failures = settings.failures
            self.mirrors = mirrors
        }
    }

    init(
        object: RemoteObject, store: DownloadStore, headers: RequestHeaders, settings: ExchangeSettings,
        loop: TransferLoop, counters: DownloadCounters, logger: Logger,
        mirrors: [RemoteURL] = [], requestHeaders: [(name: String, value: String)] = [],
        refresher: URLRefresher? = nil
    ) {
        self.loop = loop
        self.settings = Settings(settings, mirrors: mirrors)
        self.object = object
        self.store = store
        self.counters = counters
        self.logger = logger
        self.refresher = refresher
        self.pool = ConnectionPool(loop: loop, target: settings.configuration.connections.initial)
        // Mirrors are checked before they contribute, and so is a fresh URL for an expired one.
        let context =
            mirrors.isEmpty && refresher == nil
            ? nil
            : SourceChecks.Context(
                requestHeaders: requestHeaders, settings: settings, loop: loop, logger: logger)
        self.sources = SourceSet(
            first: object, headers: headers, store: store, hosts: loop.hosts, logger: logger, checking: context)
        sources.onSourceAdded = { [weak self] in
            self?.controller?.sourcesChanged(at: .now)
            self?.loop.afterCallbacks { self?.dispatchWork() }
        }
        sources.watcher = self
    }

    /// Connections transferring right now.
    var activeConnections: Int { pool.activeConnections }

    /// What the transfer waits for while no request is in flight (`nil`: one is), for the
    /// session's watchdog: a retry's backoff, a down server's next trial, a connection permit, or
    /// nothing at all.
    var idle: IdleWait? {
        guard !pool.isAnyBusy, !sources.isChecking, refresher?.isRefreshing != true else { return nil }
        // A host that is down is tried by one request at a time, maybe another download's.
        if sources.waitingFor != nil { return .outage }
        if let retryTimer, !retryTimer.isCancelled { return .retry }
        if loop.budget.isWaiting(self) { return .permit }
        return .nothing
    }

    /// The server the transfer waits for while no source answers (for progress).
    var waiting: DownloadProgress.Wait? {
        guard let source = sources.waitingFor, let outage = source.health.outage else { return nil }
        let now = ContinuousClock.now
        return DownloadProgress.Wait(
            server: source.hostAndPort, cause: source.lastError?.shortCause ?? "no answer",
            duration: now - outage.since, nextTry: outage.trialInFlight ? nil : max(.zero, outage.nextTrial - now),
            limit: settings.failures.maxOutage)
    }

    // MARK: Start and stop

    /// Takes over the probe's `connection`, whose response carries `firstRange`, plans the
    /// other connections and starts them (after the current callbacks).
    func start(from connection: Connection, first: RangeRequest) throws(DownloadError) {
        guard let plan = store.plan else { return }
        let firstRange = first.own
        let reserved = ByteRange(firstRange.lowerBound, plan.layout.alignUp(firstRange.upperBound))
        guard let segment = plan.reserve(reserved, ownerID: connection.id) else {
            throw .invalidResponse("internal: the probe's range \(firstRange) is not missing")
        }
        self.firstRange = firstRange
        pool.adoptProbe(connection, delegate: self)
        var first = first
        first.response = store.beginResponse(validators: object.identity.validators)
        versions.anchor = first.response
        connection.adopt(.segment(segment, request: first), store: store, object: object)
        plan.noteRequested(segment, upTo: firstRange.upperBound)
        pool.send(connection, to: sources.primary)
        store.variants = { [weak self] in self?.sources.primary.object.identity.variants ?? [] }
        let mirrors = settings.mirrors
        // Too little to split, steal, hedge or replace (a small file): no measuring needed.
        guard plan.remainingBytes >= 2 * plan.minimumStealSize else {
            if !mirrors.isEmpty { logger.info("the object arrives in one response; the mirrors are not needed") }
            return
        }
        if !mirrors.isEmpty, let size = object.size, let range = sources.sampleRange(near: firstRange) {
            sources.checks?.check(mirrors: mirrors, size: size, range: range)
        }
        if case .adaptive(let maximum) = settings.configuration.connections {
            startController(probe: connection, maximum: maximum)
        }
        scheduleHousekeeping()
        plan.split(into: max(0, pool.target - 1))
        if let window = store.sink.window {
            keepWithin(window: window, plan: plan)
        } else if store.verifier?.hashesInOrder == true {
            // A hash follows the complete prefix: what is left to hash at the end is a few pieces.
            plan.takeInOrder(pieces: max(8 << 20, plan.remainingBytes / Int64(16 * pool.target)))
        }
        loop.afterCallbacks { [weak self] in self?.dispatchWork() }
    }

    /// Takes over the probe's `connection`, whose response is the whole object.
    func startStream(from connection: Connection) {
        pool.adoptProbe(connection, delegate: self)
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
        let piece = plan.takeInOrder(pieces: max(1 << 20, min(window / 4, window / Int64(2 * pool.target))))
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
        sources.checks?.stop()
        loop.budget.cancelWait(self)
        housekeepingTimer?.cancel()
        controllerTimer?.cancel()
        retryTimer?.cancel()
        pool.cancelAll()
    }

    // MARK: Work

    /// Gives idle slots work; reports completion when nothing is left.
    func dispatchWork() {
        guard !stopped, !settings.configuration.tuning.faults.transferSendsNothing, let plan = store.plan else {
            return
        }
        if plan.isComplete {
            // Every byte is here; it is one version only once every piece was seen to agree.
            if !store.isStitched { return bridgeBreaks() }
            if !pool.isAnyBusy { delegate?.transferDidComplete(self) }
            return
        }
        sources.checks?.settleAgreements()
        let now = ContinuousClock.now
        let roundTrip = TransferPolicy.roundTrip(pool.samples(at: now))
        for index in 0..<pool.target {
            // Slots open as work appears: an object that arrives whole never opens a second one.
            if index < pool.connections.count && pool.connections[index].isBusy { continue }
            guard let source = sources.choose(now: now) else { break }
            let connection = pool.slot(index, store: store, object: object, delegate: self)
            guard acquirePermit(connection, for: source) else { break }
            let cut = { [self] (victim: Segment) in cutPoint(victim, roundTrip: roundTrip) }
            guard let segment = plan.claim(now: now, ownerID: connection.id, cut: cut) else {
                connection.releasePermit()
                break
            }
            request(segment, on: connection, from: source)
        }
        hedgeSlowTailIfAllowed(now: now)
        if !pool.isAnyBusy, let next = [plan.nextRetryTime, sources.nextWake].compactMap({ $0 }).min() {
            retryTimer?.cancel()
            retryTimer = loop.schedule(after: max(.zero, next - .now)) { [weak self] in self?.dispatchWork() }
        }
    }

    func acquirePermit(_ connection: Connection, for source: Source) -> Bool {
        connection.acquirePermit(for: source.object.url, owner: self) { [weak self] in self?.dispatchWork() }
    }

    /// Sends `connection`'s next request for `segment` to `source`: its own bytes, and the
    /// overlap with the bytes around them (``RangeRequest``).
    func request(_ segment: Segment, on connection: Connection, from source: Source) {
        guard let plan = store.plan else { return }
        let policy = settings.policy
        let size = policy.requestSize(
            rate: connection.recentRate, timeToFirstByte: connection.timeToFirstByte, requestCost: requestCost)
        let range = policy.nextRequest(
            position: segment.position, end: segment.end, hedged: segment.partner != nil, size: size)
        plan.noteRequested(segment, upTo: range.upperBound)
        let response = store.beginResponse(validators: nil)
        let ranged =
            store.ledger.map { ledger in
                RangeRequest.overlapping(
                    range, size: plan.layout.objectSize, window: ledger.window,
                    heldAfter: ledger.needsTrail(at: range.upperBound), response: response)
            } ?? RangeRequest(own: range, response: response)
        // After a 412, once without the precondition: the overlap decides.
        let unconditional = versions.unconditional.remove(ObjectIdentifier(segment)) != nil
        send(
            .segment(segment, request: ranged), range: ranged.sent, on: connection, to: source,
            unconditional: unconditional)
    }

    /// Sends `job`, asking for `range`, on `connection` to `source`.
    func send(
        _ job: Connection.Job, range: ByteRange, on connection: Connection, to source: Source,
        unconditional: Bool = false
    ) {
        let object = source.object
        logger.trace(
            "request", metadata: ["connection": "\(connection.id)", "range": "\(range)", "source": "\(source.index)"])
        connection.attach(to: store, object: object)
        pool.send(connection, to: source)
        let request = source.headers.request(
            for: object.url, precondition: unconditional ? nil : object.precondition, range: .bounded(range),
            options: settings.options)
        connection.begin(job, url: object.url, request: request)
        counters.willSend(busy: pool.busyCount)
    }

    /// Where to cut `victim`'s request in flight for an idle connection (see
    /// ``TransferPolicy/cutPoint(_:rate:others:roundTrip:minimumStealSize:layout:)``).
    private func cutPoint(_ victim: Segment, roundTrip: Double) -> Int64? {
        // A response checked against its own digest (Content-Digest) is never cut, nor hedged.
        guard let plan = store.plan, !store.checksEachResponse, let id = victim.ownerID,
            let owner = pool.connection(id), owner.isTransferring
        else { return nil }
        return settings.policy.cutPoint(
            SegmentSample(frontier: victim.frontier, end: victim.end, isHedged: victim.partner != nil),
            rate: owner.recentRate, others: pool.transferringRates, roundTrip: roundTrip,
            minimumStealSize: plan.minimumStealSize, layout: plan.layout, requestCost: requestCost)
    }

    // MARK: HostWatcher

    /// A host of its sources may take requests again (another download's trial was answered, or
    /// failed and set the next one).
    func hostMayTakeRequests() {
        guard !stopped else { return }
        dispatchWork()
    }

    // MARK: ConnectionDelegate

    func connectionWasAnswered(_ connection: Connection) {
        guard !stopped, let source = pool.source(of: connection.id), sources.answered(source, at: .now) else { return }
        // A recovering source may take more requests now.
        loop.afterCallbacks { [weak self] in self?.dispatchWork() }
    }

    func connection(_ connection: Connection, didFinish job: Connection.Job, with outcome: Connection.Outcome) {
        guard !stopped else { return }
        switch job {
        case .segment(let segment, let request):
            segmentEnded(segment, request: request, on: connection, outcome: outcome)
        case .bridge(let request):
            bridgeEnded(request, on: connection, outcome: outcome)
        case .stream:
            streamEnded(outcome)
        case .probe, .sample, .confirmation:
            break
        }
    }

    /// A segment request ended: continue, retry or fail.
    private func segmentEnded(
        _ segment: Segment, request: RangeRequest, on connection: Connection, outcome: Connection.Outcome
    ) {
        guard let plan = store.plan else { return }
        let requested = request.sent
        let source = pool.requestEnded(connection)
        if let variant = connection.variant, let source { versions.heard(variant, from: source, in: request.response) }
        learnVariants()
        logger.trace(
            "request ended",
            metadata: [
                "connection": "\(connection.id)", "range": "\(requested)", "bytes": "\(connection.bytesThisRequest)",
                "outcome": "\(outcome)",
            ])
        if let source, connection.bytesThisRequest > 0 {
            versions.refusedInARow = 0
            source.health.delivered()
            if source === sources.primary { refresher?.noteProgress() }
        }
        if case .failed(let error, let retryAfter) = outcome {
            return requestFailed(
                segment, requested: requested, error: error, retryAfter: retryAfter, on: connection, from: source)
        }
        source?.health.abandonTrial(by: connection.token)
        if case .cancelled = outcome, segment.isDone || segment.partner == nil {
            // A hedge partner won, or the connection was replaced, or the download is stopping.
            if segment.isDone { plan.finish(segment) } else { plan.release(segment, failed: false) }
            return dispatchWork()
        }
        if segment.isDone {
            let partner = segment.partner
            plan.finish(segment)
            // The other half of a hedge pair has nothing left to fetch.
            if let partner { pool.connection(filling: partner)?.cancel() }
        } else if segment.isOwned && segment.partner == nil, pool.isWithinTarget(connection),
            let next = sources.next(after: source, now: .now), acquirePermit(connection, for: next)
        {
            // The request ended inside the segment: the same connection asks for the next part
            // (of the same source while it may be asked, keeping its connection).
            store.checkpointIfDue()
            return self.request(segment, on: connection, from: next)
        } else {
            plan.release(segment, failed: false)
        }
        store.checkpointIfDue()
        dispatchWork()
    }
}
