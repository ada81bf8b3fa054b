import Logging
import SwoopStore
import SwoopCurl

/// One download as a sequence of stages: start → probe → transfer → finalize → stop.
///
/// Each stage is its own type: the ``Prober`` (with the pure ``ProbeDecision``), the
/// ``TransferRun`` (with the pure ``TransferPolicy`` and ``FailurePolicy``), the
/// ``DownloadStore`` over a ``BodySink``, the ``ObjectVerifier``. The session holds them in its
/// ``Stage``, whose cases carry what each stage owns; it hears how a stage ends, and its
/// ``SessionMachine`` (pure, in the core) decides what comes next: the session performs. Body
/// bytes go from connections to the store and never pass through here. Transfer thread only.
final class DownloadSession: ProberDelegate, TransferRunDelegate {
    let context: SessionContext
    var logger: Logger { context.logger }
    /// Every URL of the download, as asked and as in use (a refresh replaces the first's), and the
    /// sources of the transfer under way.
    let sources: SourceSet
    /// The first source as asked (a resumed download's, when its map names one of the mirrors):
    /// what the map names and messages show.
    var url: RemoteURL { sources.first.asked }
    var stage = SessionStage.starting
    /// What the disk held at the start (or `.fresh` after starting over).
    var basis = LocalState.fresh
    /// The source whose one response, kept whole, was the object (``DownloadSession+Whole``).
    var keptWholeFrom: DownloadResult.Source?
    /// Fresh URLs when the URL in use is refused; one for the whole download (restarts too).
    lazy var refresher = context.request.urlProvider.map {
        URLRefresher(
            provider: $0, sources: sources, configuration: context.configuration, loop: context.loop, logger: logger)
    }
    /// The session's decisions: restarts, lost handovers, what a stop keeps.
    var machine: SessionMachine
    let progress: ProgressReporter
    /// Called once when no more bytes will be fetched (the download finalizes or stops).
    private var onTransferEnd: (() -> Void)?
    /// Called once if the session hands its file over to be published and lets go of itself
    /// (``handOver(_:store:)``).
    private var onHandOver: (() -> Void)?
    private var completion: ((Result<DownloadResult, DownloadError>) -> Void)?
    /// The session keeps itself alive until it has reported.
    private var keepAlive: DownloadSession?

    /// `settings` and `logger` (with the URL in its metadata: ``logger(_:url:)``) are made by the
    /// launcher off the transfer thread.
    init(
        loop: TransferLoop, settings: ExchangeSettings, request: DownloadRequest, url: RemoteURL,
        service: (any ObjectService)? = nil, mirrors: [RemoteURL] = [], paths: DownloadPaths, sink: BodySink,
        objectFound: ((RemoteObject, ResponseTiming?) -> Void)? = nil, logger: Logger,
        progress: (@Sendable (DownloadProgress) -> Void)?,
        transferEnded: (() -> Void)? = nil, handedOver: (() -> Void)? = nil,
        completion: @escaping (Result<DownloadResult, DownloadError>) -> Void
    ) {
        context = SessionContext(
            loop: loop, settings: settings, request: request, service: service.map { (url, $0) },
            paths: paths, sink: sink, objectFound: objectFound, logger: logger)
        self.sources = SourceSet(first: url, mirrors: mirrors, hosts: loop.hosts, logger: context.logger)
        self.machine = SessionMachine(
            settings: .init(
                failures: settings.failures, restartsOnChange: settings.configuration.files.onObjectChange == .restart,
                inOrder: sink.window != nil, expectedSize: request.expectedSize))
        self.progress = ProgressReporter(context, handler: progress)
        self.onTransferEnd = transferEnded
        self.onHandOver = handedOver
        self.completion = completion
    }

    /// `logger` with the download's URL (redacted) in its metadata.
    static func logger(_ logger: Logger, url: RemoteURL) -> Logger {
        var logger = logger
        logger[metadataKey: "url"] = "\(url.redacted)"
        return logger
    }

    var isStopped: Bool {
        if case .stopped = stage { return true }
        return false
    }

    // MARK: Start

    /// Starts the download. `basis`: what the disk holds for a sink that keeps partial state, as
    /// the launcher found it off the transfer thread, holding the target's lock when it resumes
    /// (``PartialState/basis(for:url:sink:rules:logger:reading:)``).
    func start(basis found: Result<LocalState, DownloadError>?) {
        context.loop.assertOnLoopThread()
        keepAlive = self
        if let found {
            do {
                basis = try found.get()
            } catch {
                stop(with: .failure(error))
                return
            }
            // A map belongs to one source (its validators are that source's): that source goes first.
            if case .resuming(let map, _) = basis { sources.putFirst(named: map.url) }
        }
        progress.start { [self] in tick() }  // held until the heartbeat stops (``endWork(of:)``)
        probe()
    }

    // MARK: Probe

    /// Probes the first source: now, or after a delay when a broken stream starts over.
    func probe(after delay: (Duration, failing: DownloadError)? = nil) {
        let prober = Prober(
            url: sources.first.current, basis: basis.probeBasis(target: context.paths.target),
            headers: context.headers(for: url), settings: context.settings,
            loop: context.loop, counters: context.counters, logger: logger, refresher: refresher,
            expectedSize: context.request.expectedSize)
        prober.delegate = self
        stage = .probing(prober)
        machine.entered(.probing)
        prober.start(after: delay)
    }

    func isCurrent(_ prober: Prober) -> Bool {
        if case .probing(let current) = stage { return current === prober }
        return false
    }

    var resumedMap: SegmentMap? {
        if case .resuming(let map, _) = basis { return map }
        return nil
    }

    func prober(
        _ prober: Prober, beginTransfer step: ProbeDecision.Step, on connection: Connection
    ) throws(DownloadError) -> Prober.Handover {
        guard isCurrent(prober) else { throw DownloadError(.cancelled, "the download stopped") }
        let found: RemoteObject
        let size: Int64?
        let resuming: Bool
        switch step {
        case .ranged(let object, let first):
            // Under the validators a resumed map's bytes were served under: the probe used no other.
            found = object
            size = found.size ?? first.own.upperBound
            resuming = resumedMap != nil
        case .stream(let object, let discardsPartial):
            // A share writes only its stripes, at their offsets: a whole object in one stream would
            // write over the other shares'.
            if let share = context.paths.share {
                throw DownloadError(
                    .invalidResponse,
                    "\(url.redacted) stopped serving byte ranges: share \(share) cannot be fetched without them")
            }
            if discardsPartial {
                // The sink's open discards what it held (the map first).
                logger.warning("the server no longer answers range requests; starting over in a single stream")
                basis = .fresh
            }
            found = object
            size = object.size
            resuming = false
        default:
            return .now
        }
        context.objectFound?(found, prober.lastTiming)
        if context.sink.opensAtOnce(size: size, resuming: resuming) {
            try openAndStartTransfer(step, of: found, size: size, resuming: resuming, from: prober, on: connection)
            return .now
        }
        // Creating, emptying or reserving the part file waits for the disk: never on this
        // thread. The probe's body still waits in libcurl (and TCP holds the server back).
        context.sink.open(size: size, resuming: resuming) { [weak self] error in
            self?.sinkOpened(error, for: step, of: found, from: prober, on: connection, resuming: resuming)
        }
        return .whenSinkOpens
    }

    /// The sink opened on the disk queue for the transfer `step` begins: it takes the probe's
    /// connection over, and the body held back goes on to it.
    private func sinkOpened(
        _ error: DownloadError?, for step: ProbeDecision.Step, of found: RemoteObject, from prober: Prober,
        on connection: Connection, resuming: Bool
    ) {
        guard isCurrent(prober) else { return }
        if let error { return stop(with: .failure(error)) }
        let handover = prober.completeHandover()
        guard handover != .lost else {
            // Its exchange ended while the body waited.
            return perform(machine.handoverLost(part: context.paths.part, resuming: resuming))
        }
        do throws(DownloadError) {
            try startTransfer(step, of: found, from: prober, on: connection)
        } catch {
            connection.cancel()
            return stop(with: .failure(error))
        }
        // A response without a body ended while the sink opened: the transfer hears how.
        if handover == .endedWhole { connection.reportEndedExchange() } else { connection.releaseBody() }
    }

    /// Opens the sink where it opens at once (``BodySink/opensAtOnce(size:resuming:)``), then
    /// starts the transfer `step` begins (``startTransfer(_:of:from:on:since:)``).
    func openAndStartTransfer(
        _ step: ProbeDecision.Step, of found: RemoteObject, size: Int64?, resuming: Bool, from prober: Prober,
        on connection: Connection, since: Moment = .now
    ) throws(DownloadError) {
        try context.sink.open(size: size, resuming: resuming)
        try startTransfer(step, of: found, from: prober, on: connection, since: since)
    }

    /// The sink is open for `found`: plans the transfer, and its run takes `connection` over.
    /// `since`: when the response's head arrived (now, unless it was kept whole meanwhile).
    func startTransfer(
        _ step: ProbeDecision.Step, of found: RemoteObject, from prober: Prober, on connection: Connection,
        since: Moment = .now
    ) throws(DownloadError) {
        let store: DownloadStore
        switch step {
        case .ranged(_, let first):
            store = try TransferSetup.ranged(found, firstRange: first.own, resuming: resumedMap, url: url, context)
        case .stream:
            store = TransferSetup.stream(context)
        default:
            return
        }
        store.onCheckpointFailure = { [weak self] in self?.stop(with: .failure($0)) }
        let verifier = TransferSetup.verifier(for: found, store: store, resuming: resumedMap, context)
        let run = TransferRun(
            object: found, store: store, headers: prober.headers, settings: context.settings,
            loop: context.loop, counters: context.counters, logger: logger, sources: sources,
            requestHeaders: context.request.headers, refresher: refresher)
        run.delegate = self
        if case .ranged(_, let first) = step {
            try run.start(from: connection, first: first, watch: prober.validatorWatch, since: since)
            // A map from the start, so a crash at any moment leaves something to resume from.
            if resumedMap == nil && store.keepsPartialState { store.checkpoint() }
        } else {
            run.startStream(from: connection)
        }
        stage = .transferring(SessionStage.Transfer(run: run, store: store, object: found, verifier: verifier))
        machine.entered(.transferring)
        if let coding = found.contentCoding, coding != "identity" {
            logger.info("the server stores the object with Content-Encoding \(coding); keeping its bytes as stored")
        }
    }

    func prober(_ prober: Prober, didEndWith step: ProbeDecision.Step) {
        guard isCurrent(prober) else { return }
        switch step {
        case .alreadyComplete:
            logger.info("already complete", metadata: ["path": "\(context.paths.target)"])
            var size: Int64 = 0
            if case .completed(let record, _) = basis { size = record.size }
            stop(with: .success(result(size: size, object: nil, store: nil, alreadyComplete: true)))
        case .finishResumed(let found):
            finishWithoutTransfer(found, size: found.size ?? 0, resuming: true, after: prober)
        case .empty(let found):
            finishWithoutTransfer(found, size: 0, resuming: false, after: prober)
        case .restart(let reason):
            restartFromScratch(reason)
        case .fail(let error):
            stop(with: .failure(error))
        case .redirect, .ranged, .stream, .compareHeld, .withoutRange, .askAgain:
            break  // the prober acts on these itself
        }
    }

    // MARK: Transfer

    func current(_ run: TransferRun) -> SessionStage.Transfer? {
        if case .transferring(let transfer) = stage, transfer.run === run { return transfer }
        return nil
    }

    func transferDidComplete(_ run: TransferRun) {
        guard let transfer = current(run) else { return }
        let size = transfer.object.size ?? transfer.store.streamPosition
        let next = machine.transferCompleted(size: size, url: url.redacted)
        guard case .finalize = next else { return perform(next) }
        finalize(
            SessionStage.Finishing(
                run: run, store: transfer.store, object: transfer.object, verifier: transfer.verifier, size: size))
    }

    func transfer(_ run: TransferRun, foundObjectChanged reason: String) {
        guard current(run) != nil else { return }
        restartFromScratch(reason)
    }

    func transfer(_ run: TransferRun, didFailWith error: DownloadError) {
        guard current(run) != nil else { return }
        stop(with: .failure(error))
    }

    // MARK: Stop

    /// Pauses: stops every transfer, checkpoints, and reports ``DownloadError/Kind/interrupted``.
    func pause() {
        let kept = "; \(Wording.bytes(bytesDone)) kept in \(context.paths.part)"
        if let next = machine.pause(store: partialState, kept: kept) { perform(next) }
    }

    /// Cancels: stops every transfer and deletes the partial state.
    func cancel() {
        if let next = machine.cancel() { perform(next) }
    }

    /// Performs what the machine decided (a finalize is begun where the machine says so).
    func perform(_ action: SessionAction) {
        switch action {
        case .startOver(let delay, let replacingTarget, let log):
            if replacingTarget { context.sink.replacesTarget() }
            logger.warning("\(log)")
            if delay != nil { context.counters.retries += 1 }
            startOver { [self] in probe(after: delay) }
        case .probeAgain(let discarding, let log):
            logger.warning("\(log)")
            context.counters.retries += 1
            restartStage(discarding: discarding) { [self] in probe() }
        case .fail(let error):
            stop(with: .failure(error))
        case .finalize:
            assertionFailure("finalizing is begun by the event that decides it")
        }
    }

    /// The download's partial state, as a stop sees it.
    var partialState: SessionMachine.Store {
        guard let store = stage.store else { return .none(resumedMap: resumedMap != nil) }
        if store.keepsPartialState { return .mapped }
        return store.plan == nil ? .stream : .oneResponse
    }

    /// Ends the session once: stops the stages, keeps (one last checkpoint) or discards the
    /// partial state, as the machine says, and reports.
    func stop(with result: Result<DownloadResult, DownloadError>) {
        let ending = stage
        guard let how = machine.stopping(result.map { _ in () }, store: partialState) else { return }
        let store = ending.store
        var result = result
        if let failure = how.failure { result = .failure(failure) }
        if case .success(let done) = result {
            // The last report says the whole object is there, also when it already was (no bytes
            // moved; the stage knows no size then).
            var last = progressSnapshot()
            let total = context.paths.share == nil ? done.bytes : totalBytes ?? done.bytes
            (last.bytesDone, last.totalBytes) = (total, total)
            progress.report(last)
        }
        endWork(of: ending)
        let report = { [self] in
            context.sink.close(discarding: how.discards) { [self] in
                let completion = self.completion
                self.completion = nil
                completion?(result)
                keepAlive = nil
            }
        }
        if how.checkpointsFirst, let store {
            // Keep what arrived: one last checkpoint before reporting.
            store.checkpoint(then: report)
        } else {
            report()
        }
    }

    /// The file is handed over to be published (``publish(_:record:verified:)``) with what the
    /// download reports if that succeeds: nothing is left for the session to do but report how it
    /// ends, which no pause or cancel changes (as for any download finalizing). So it ends its work
    /// here and lets go of itself: what reports (the returned closure) holds only the machine's
    /// decisions, the progress handler, the sink and the completion. A list's small files wait for
    /// their group commit by the hundred, and each held its whole session until then. `store`: the
    /// partial state as a stop would have found it before the stage let its store go.
    func handOver(_ outcome: DownloadResult, store: SessionMachine.Store) -> (DownloadError?) -> Void {
        let ending = stage
        var machine = self.machine
        var last = progressSnapshot()
        (last.bytesDone, last.totalBytes) = (outcome.bytes, outcome.bytes)
        let (progress, sink, startedAt, completion) = (progress, context.sink, context.startedAt, completion)
        self.completion = nil
        // The session's own machine says it stopped: a stop that still reached it would do nothing.
        _ = self.machine.stopping(.success(()), store: store)
        endWork(of: ending)
        onHandOver?()
        onHandOver = nil
        keepAlive = nil
        return { failure in
            // As ``stop(with:)`` reports, decided by the machine as it stood at the handover.
            let ended: Result<Void, DownloadError> = failure.map { .failure($0) } ?? .success(())
            guard let how = machine.stopping(ended, store: store) else { return }
            let result: Result<DownloadResult, DownloadError>
            if let failure = how.failure {
                result = .failure(failure)
            } else {
                var done = outcome
                done.duration = .now - startedAt
                result = .success(done)
                progress.report(last)
            }
            sink.close(discarding: how.discards) { completion?(result) }
        }
    }

    /// Ends what the session runs, as it stops or hands its file over: the stage's work, the
    /// heartbeat, the URL refresher.
    private func endWork(of ending: SessionStage) {
        stage = .stopped
        progress.stop()
        stopWork(of: ending)
        refresher?.stop()
        transferEnded()
    }

    /// Stops what `stage` has running: the probe, the transfer, the verifier.
    func stopWork(of stage: SessionStage) {
        switch stage {
        case .probing(let prober): prober.stop()
        case .transferring(let transfer):
            transfer.run.stop()
            transfer.verifier?.cancel()
        case .finalizing(let finishing):
            finishing.run?.stop()
            finishing.verifier?.cancel()
        case .starting, .stopped: break
        }
    }

    func transferEnded() {
        let hook = onTransferEnd
        onTransferEnd = nil
        hook?()
    }
}
