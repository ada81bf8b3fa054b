import Logging
import SwoopStore
import SwoopCurl

/// Hears how the transfer stage ends.
protocol TransferRunDelegate: AnyObject {
    /// Every byte is stored and no connection is busy.
    func transferDidComplete(_ run: TransferRun)
    /// The object changed on the server mid-transfer: its validators went, or two responses'
    /// bytes differed.
    func transfer(_ run: TransferRun, foundObjectChanged reason: String)
    /// The transfer cannot go on.
    func transfer(_ run: TransferRun, didFailWith error: DownloadError)
    /// The single stream (a server without ranges) broke off with a failure that another try
    /// may not meet: only starting over can get the object.
    func transfer(_ run: TransferRun, streamBrokeOff error: DownloadError)
}

/// The transfer stage of one download: the shell of its ``TransferMachine``, which decides which
/// request each idle slot of the ``ConnectionPool`` sends next and what an ended request means.
/// The run feeds it events (ends, wakes, ticks) with the time, performs the actions it returns,
/// and answers its questions (``TransferEnvironment``, in `+Environment`: the sources' shared
/// health, the budget's permits). It also runs what is not the machine's: the adaptive count
/// (``TransferRun+Tuning.swift``), mirror checks and fresh URLs (``SourceChecks``), the single
/// stream of a server without ranges (``TransferRun+Stream.swift``), and the probe's response
/// when it is the whole object, without a machine unless it needs one (``TransferRun+Single.swift``).
/// Body bytes never pass through here: connections write them to the ``DownloadStore``; only
/// outcomes arrive. Transfer thread only.
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
    /// The decisions of a transfer in ranges; none for a single stream.
    private(set) var machine: TransferMachine?
    /// Adaptive mode: grows or shrinks the machine's target with measured throughput.
    var controller: ConnectionController?
    /// Every 100 ms: connection rates, slow-connection replacement, adaptation.
    var housekeepingTimer: LoopTimer?
    /// Every 25 ms while the adaptive count climbs or tries a step.
    var controllerTimer: LoopTimer?
    /// The machine's next try of a byte range (``TransferAction/wake(at:)``).
    private var retryTimer = WakeTimer()
    private(set) var stopped = false
    /// The decisions of a single stream: its end, and the confirmation after it (``TransferRun+Stream.swift``).
    var stream: StreamMachine?
    /// The probe's response, while it carries the whole object and no machine is needed yet
    /// (``TransferRun+Single.swift``).
    var single: SingleResponse?

    /// What the run reads from the configuration, once.
    struct Settings {
        let configuration: Downloader.Configuration
        let options: TransferOptions
        let machine: TransferMachine.Settings

        init(_ settings: ExchangeSettings) {
            configuration = settings.configuration
            options = settings.options
            machine = settings.machine
        }

        var policy: TransferPolicy { machine.policy }
        var failures: FailurePolicy { machine.failures }
    }

    init(
        object: RemoteObject, store: DownloadStore, headers: RequestHeaders, settings: ExchangeSettings,
        loop: TransferLoop, counters: DownloadCounters, logger: Logger, sources: SourceSet,
        requestHeaders: [(name: String, value: String)] = [], refresher: URLRefresher? = nil
    ) {
        self.loop = loop
        self.settings = Settings(settings)
        self.object = object
        self.store = store
        self.counters = counters
        self.logger = logger
        self.refresher = refresher
        self.pool = ConnectionPool(loop: loop)
        // Mirrors are checked before they contribute, and so is a fresh URL for an expired one.
        let context =
            sources.mirrors.isEmpty && refresher == nil
            ? nil
            : SourceChecks.Context(
                requestHeaders: requestHeaders, settings: settings, loop: loop, logger: logger)
        self.sources = sources
        sources.begin(first: object, headers: headers, store: store, checking: context)
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
        if retryTimer.isWaiting { return .retry }
        if loop.budget.isWaiting(self) { return .permit }
        return .nothing
    }

    /// The server the transfer waits for while no source answers (for progress).
    var waiting: DownloadProgress.Wait? {
        guard let source = sources.waitingFor, let outage = source.health.outage else { return nil }
        let now = Moment.now
        return DownloadProgress.Wait(
            server: source.hostAndPort, cause: source.lastError?.shortCause ?? "no answer",
            duration: now - outage.since, nextTry: outage.trialInFlight ? nil : max(.zero, outage.nextTrial - now),
            limit: settings.failures.maxOutage)
    }

    // MARK: Start and stop

    /// Takes over the probe's `connection`, whose response carries `first`, plans the other
    /// connections and starts them (after the current callbacks).
    /// `watch`: what the probe showed of the first source's validators (a pool it proved).
    func start(
        from connection: Connection, first: RangeRequest, watch: ValidatorWatch, since: Moment = .now
    ) throws(DownloadError) {
        guard let plan = store.plan else { return }
        pool.adoptProbe(connection, delegate: self)
        var first = first
        first.response = store.beginResponse(validators: object.identity.validators)
        guard let segment = TransferMachine.reserveFirst(first, in: plan) else {
            throw .invalidResponse("internal: the probe's range \(first.own) is not missing")
        }
        connection.adopt(.segment(segment, request: first), store: store, object: object)
        // The probe's request, in flight on slot 0, is the first source's from here.
        willSend(to: 0, from: 0)
        let machine =
            startSingle(first: first, segment: segment, plan: plan, watch: watch, since: since)
            ? nil : makeMachine(plan: plan, watch: watch)
        machine?.adopt(first: first, segment: segment, startedAt: since)
        // The whole object in this response, or too little to split, steal, hedge or replace (a
        // small file): no measuring needed.
        guard let machine, machine.isWorthSplitting else {
            sources.oneResponseSuffices()
            return
        }
        let mirrors = sources.mirrors
        if !mirrors.isEmpty, let size = object.size, let range = sources.sampleRange(near: machine.firstRange) {
            sources.checks?.check(mirrors: mirrors, size: size, range: range)
        }
        switch settings.configuration.connections {
        case .adaptive(let maximum): startController(probe: connection, maximum: maximum)
        case .fixed(let count): readStart(probe: connection, maximum: count)
        }
        scheduleHousekeeping()
        machine.planAhead(window: store.sink.window, hashesInOrder: store.verifier?.hashesInOrder == true)
        if store.sink.window != nil {
            // As the reader takes bytes, the pieces it may be sent follow.
            store.sink.observeRoom { [weak self] consumed in
                guard let self, !stopped, let machine = self.machine else { return }
                perform(machine.roomFreed(consumed: consumed, at: .now))
            }
        }
        loop.afterCallbacks { [weak self] in self?.dispatchWork() }
    }

    /// The machine of a transfer in ranges of `plan`, from the probe's `watch` of the first source.
    func makeMachine(plan: SegmentScheduler, watch: ValidatorWatch) -> TransferMachine {
        let machine = TransferMachine(
            plan: plan, ledger: store.ledger, settings: settings.machine,
            target: settings.configuration.connections.initial, environment: self, firstWatch: watch)
        machine.checksEachResponse = store.checksEachResponse
        self.machine = machine
        return machine
    }

    /// Takes over the probe's `connection`, whose response is the whole object.
    func startStream(from connection: Connection) {
        pool.adoptProbe(connection, delegate: self)
        connection.adopt(.stream, store: store, object: object)
        stream = StreamMachine(
            object: object.identity, startedAt: .now, confirmsAfter: settings.machine.confirmsOneResponseAfter,
            maxTries: settings.failures.maxTries)
        // An in-order sink pauses the stream when its window is full; room lets it go on.
        store.sink.observeRoom { [weak connection] _ in connection?.resumeIfPaused() }
        logger.info("the server does not support ranges; downloading in one stream")
    }

    /// Cancels every exchange and timer; outcomes that arrive later are ignored.
    func stop() {
        guard !stopped else { return }
        stopped = true
        for case .abandonTrial(let source, let slot) in machine?.stop() ?? [] { abandonTrial(of: source, on: slot) }
        if single != nil { abandonTrial(of: 0, on: 0) }
        sources.checks?.stop()
        loop.budget.cancelWait(self)
        housekeepingTimer?.cancel()
        controllerTimer?.cancel()
        retryTimer.cancel()
        pool.cancelAll()
        // Its requests no longer count at their hosts: their outcomes are ignored from here.
        for source in sources.sources { source.active = 0 }
    }

    // MARK: Work

    /// Gives idle slots work; reports completion when nothing is left.
    func dispatchWork() {
        guard !stopped, let machine else { return }
        settleChecks(machine)
        perform(machine.dispatch(at: .now))
    }

    /// Compares the samples of mirrors and addresses being checked with the bytes written so far:
    /// one that agrees is a source before the machine chooses the next work.
    private func settleChecks(_ machine: TransferMachine) {
        if !machine.plan.isComplete && !settings.machine.sendsNothing { sources.checks?.settleAgreements() }
    }

    /// Performs the machine's actions in order, until one of them stops the run.
    func perform(_ actions: [TransferAction]) {
        for action in actions {
            guard !stopped else { return }
            switch action {
            case .send(let send):
                perform(send)
            case .waitForPermit:
                loop.budget.wait(self) { [loop] in loop.afterCallbacks { [weak self] in self?.dispatchWork() } }
            case .dropSource(let index, let reason):
                sources.drop(sources.sources[index], reason)
            case .abandonTrial(let source, let slot):
                abandonTrial(of: source, on: slot)
            case .cancel(let slot):
                pool.connection(slot)?.cancel()
            case .renew(let slot):
                pool.connection(slot)?.wantsFreshConnection = true
            case .replace(let slot):
                replace(slot: slot)
            case .checkpoint:
                store.checkpointIfDue()
            case .retried:
                counters.retries += 1
            case .refresh(let slot):
                refresh(refusedOn: slot)
            case .wake(let instant):
                retryTimer.wait(until: instant, on: loop) { [weak self] in self?.dispatchWork() }
            case .complete:
                delegate?.transferDidComplete(self)
            case .objectChanged(let message):
                delegate?.transfer(self, foundObjectChanged: message)
            case .fail(let error):
                delegate?.transfer(self, didFailWith: error)
            case .note(let note):
                log(note)
            }
        }
    }

    /// Sends the machine's request on its slot's connection, to its source.
    private func perform(_ send: TransferSend) {
        let source = sources.sources[send.source]
        let object = source.object
        let connection = pool.slot(send.slot, store: store, object: object, delegate: self)
        let job: Connection.Job =
            switch send.work {
            case .segment(let segment, let request): .segment(segment, request: request)
            case .bridge(let request): .bridge(request)
            }
        let range = send.work.range
        logger.trace(
            "request", metadata: ["connection": "\(send.slot)", "range": "\(range)", "source": "\(send.source)"])
        connection.attach(to: store, object: object)
        let request = source.headers.request(
            for: object.url, precondition: object.precondition, range: .bounded(range), options: settings.options)
        // The machine counted the permit free; it is taken for the whole exchange.
        let permitted = connection.acquirePermit(for: object.url, owner: self) { [weak self] in self?.dispatchWork() }
        assert(permitted, "the machine sent a request without a free permit")
        willSend(to: send.source, from: send.slot)
        connection.begin(job, url: object.url, request: request)
        counters.willSend(busy: pool.busyCount)
    }

    func log(_ note: TransferNote) {
        switch note {
        case .retrying(let range, let error, let delay):
            logger.info(
                "request failed; retrying", metadata: ["range": "\(range)", "error": "\(error)", "delay": "\(delay)"])
        case .hedging(let segment, let rate):
            logger.debug("hedging a slow tail", metadata: ["segment": "\(segment)", "rate": "\(rate)"])
        case .bridging(let offset, let range):
            logger.debug("bridging a break", metadata: ["offset": "\(offset)", "range": "\(range)"])
        case .askingAgain(let index, let error):
            let message =
                "the server answered under other validators; asking again on a new connection (a change, or a pool's "
                + "other node)"
            logger.info(
                "\(message)",
                metadata: ["source": "\(sources.sources[index].hostAndPort)", "error": "\(error)"])
        case .poolProven(let index):
            let message =
                "the server serves the download's validators and others at once (a pool's nodes); only responses "
                + "under the download's are used"
            logger.info(
                "\(message)",
                metadata: ["source": "\(sources.sources[index].hostAndPort)"])
        case .unconfirmed(let index, let tries):
            let message =
                "could not confirm that the server still serves the object after its last bytes arrived "
                + "(\(Wording.tries(tries))); keeping the bytes, which agree with each other"
            logger.warning(
                "\(message)",
                metadata: ["source": "\(sources.sources[index].hostAndPort)"])
        case .confirming(let index):
            logger.debug(
                "every byte is here; confirming the server still serves the object",
                metadata: ["source": "\(sources.sources[index].hostAndPort)"])
        case .requestEnded(let slot, let range, let bytes):
            logger.trace(
                "request ended", metadata: ["connection": "\(slot)", "range": "\(range)", "bytes": "\(bytes)"])
        }
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
        guard !stopped, let machine, let index = machine.source(of: connection.id) else { return }
        if connection.servedPinned { perform(machine.pinnedHead(slot: connection.id)) }
        guard sources.answered(sources.sources[index], sentAt: connection.sentAt, at: .now) else { return }
        // A recovering source may take more requests now.
        loop.afterCallbacks { [weak self] in self?.dispatchWork() }
    }

    func connection(_ connection: Connection, didFinish job: Connection.Job, with outcome: Connection.Outcome) {
        guard !stopped else { return }
        // The whole object in the probe's response: done, or the machine takes over from here.
        if singleEnded(connection, outcome) { return }
        // Without a machine the run is a single stream, and maybe the confirmation after it.
        guard let machine else {
            if case .probe = job { return streamCheckEnded() }
            return streamEnded(outcome)
        }
        // The request's bytes may be what a check waits for: with a fixed count nothing else
        // settles it (no controller ticks), and the source would never join.
        settleChecks(machine)
        let end = hostHeard(end(of: connection, outcome), on: connection.id, machine: machine)
        perform(machine.requestEnded(slot: connection.id, end, at: .now))
    }
}
