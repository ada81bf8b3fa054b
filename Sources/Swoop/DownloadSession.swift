import Logging
import SwoopStore
import SwoopTransfer

/// One download as a phase machine: start → probe → transfer → finalize → stop.
///
/// Each stage is its own type: the ``Prober`` (with the pure ``ProbeDecision``), the
/// ``TransferRun`` (with the pure ``TransferPolicy``), the ``DownloadStore`` over a ``BodySink``.
/// Body bytes go from connections to the store and never pass through here; the session hears
/// only how each stage ends, and decides what comes next. Transfer thread only.
final class DownloadSession: ProberDelegate, TransferRunDelegate {
    enum Phase { case starting, probing, transferring, finalizing, stopped }

    private let loop: TransferLoop
    private let configuration: Downloader.Configuration
    private let request: DownloadRequest
    /// The first source (a resumed download's, when its map names one of the mirrors).
    private var url: RemoteURL
    /// The other sources of the same file.
    private var mirrors: [RemoteURL]
    let paths: DownloadPaths
    private let sink: BodySink
    private let logger: Logger
    private let onProgress: (@Sendable (DownloadProgress) -> Void)?
    /// Called once when no more bytes will be fetched (the download finalizes or stops).
    private var onTransferEnd: (() -> Void)?
    private var completion: ((Result<DownloadResult, DownloadError>) -> Void)?
    private var keepAlive: DownloadSession?

    private(set) var phase = Phase.starting
    /// What the disk held at the start (or `.fresh` after a restart).
    private var basis = LocalState.fresh
    private var prober: Prober?
    private var transfer: TransferRun?
    private var store: DownloadStore?
    private var object: RemoteObject?
    /// Computes the digests the object is checked against, while it arrives.
    private var verifier: ObjectVerifier?
    /// Fresh URLs when the URL in use is refused; one for the whole download (a restart too).
    private lazy var refresher = request.urlProvider.map {
        URLRefresher(provider: $0, url: url, configuration: configuration, loop: loop, logger: logger)
    }
    /// Only one restart per run: an object that keeps changing fails.
    private var restartedAfterChange = false
    /// Tries of a single stream (a server without ranges) that broke off, and the wait before the
    /// next: why, and until when (for progress).
    private var streamTries = 0
    private var streamRetryTimer: LoopTimer?
    private var streamRetry: (wait: DownloadProgress.Wait, at: ContinuousClock.Instant)?
    /// Delete the partial state when stopping (a cancel, or an object that changed).
    private var discardOnStop = false

    private let counters = DownloadCounters()
    /// Bytes already on disk when the download was finished without a transfer.
    private var bytesResumed: Int64 = 0
    private let startedAt = ContinuousClock.now
    private var progressTimer: LoopTimer?
    private var meter = ThroughputMeter()
    private var quiet: QuietWatch

    init(
        loop: TransferLoop, configuration: Downloader.Configuration, request: DownloadRequest, url: RemoteURL,
        mirrors: [RemoteURL] = [], paths: DownloadPaths, sink: BodySink, logger: Logger,
        progress: (@Sendable (DownloadProgress) -> Void)?,
        transferEnded: (() -> Void)? = nil,
        completion: @escaping (Result<DownloadResult, DownloadError>) -> Void
    ) {
        self.loop = loop
        self.configuration = configuration
        self.request = request
        self.url = url
        self.mirrors = mirrors
        self.paths = paths
        self.sink = sink
        var logger = logger
        logger[metadataKey: "url"] = "\(url.redacted)"
        self.logger = logger
        self.onProgress = progress
        self.onTransferEnd = transferEnded
        self.completion = completion
        quiet = QuietWatch(configuration)
    }

    // MARK: Start

    /// Starts the download. `reading`: the disk as the launcher read it, off the transfer thread
    /// (``PartialState/read(_:url:rules:)``); `nil` reads it here.
    func start(reading: Result<PartialState, DownloadError>? = nil) {
        loop.assertOnLoopThread()
        keepAlive = self
        if sink.keepsPartialState {
            do {
                basis = try inspectLocalState(reading: reading)
            } catch {
                stop(with: .failure(error))
                return
            }
        }
        scheduleProgress()
        probe()
    }

    /// What the disk holds for this target (see ``PartialState/basis(for:url:sink:rules:logger:reading:)``).
    /// A map belongs to one source (its validators are that source's): that source goes first.
    private func inspectLocalState(reading: Result<PartialState, DownloadError>?) throws(DownloadError) -> LocalState {
        let basis = try PartialState.basis(
            for: paths, url: url, sink: sink, rules: PartialState.Rules(configuration), logger: logger, reading: reading)
        if case .resuming(let map) = basis, map.url != url.redacted, let index = mirrors.firstIndex(where: { $0.redacted == map.url }) {
            swap(&url, &mirrors[index])
        }
        return basis
    }

    // MARK: Probe

    private func probe() {
        phase = .probing
        let prober = Prober(
            url: url, basis: basis.probeBasis, target: paths.target, headers: RequestHeaders(request.headers, originalURL: url),
            configuration: configuration, loop: loop, counters: counters, logger: logger, refresher: refresher,
            expectedSize: request.expectedSize)
        prober.delegate = self
        self.prober = prober
        prober.start()
    }

    func prober(_ prober: Prober, beginTransfer step: ProbeDecision.Step, on connection: Connection) throws(DownloadError) {
        guard phase == .probing, prober === self.prober else { throw DownloadError(.cancelled, "the download stopped") }
        let transfer: TransferRun
        switch step {
        case .ranged(let found, let firstRange):
            transfer = try beginRanged(found, firstRange: firstRange, on: connection, headers: prober.headers)
        case .stream(let found, let discardsPartial):
            transfer = try beginStream(found, discardsPartial: discardsPartial, on: connection, headers: prober.headers)
        default:
            return
        }
        self.prober = nil
        self.transfer = transfer
        phase = .transferring
        if let coding = object?.contentCoding, coding != "identity" {
            logger.info("the server stores the object with Content-Encoding \(coding); keeping its bytes as stored")
        }
    }

    /// Plan: the probe's 206 arrived; open the sink, plan the missing bytes, start the transfer.
    private func beginRanged(_ found: RemoteObject, firstRange: ByteRange, on connection: Connection, headers: RequestHeaders) throws(DownloadError) -> TransferRun {
        let size = found.size ?? firstRange.upperBound
        var map: SegmentMap?
        if case .resuming(let resumed) = basis { map = resumed }
        try sink.open(size: size, resuming: map != nil)
        let plan = SegmentScheduler(objectSize: size, resuming: map, minimumSegmentSize: configuration.minimumSegmentSize)
        // An object that arrives whole in this first response needs no segment map: a crash
        // loses at most this one response, and the file is published with others in a group.
        let arrivesWhole = map == nil && firstRange == ByteRange(0, size)
        let template = arrivesWhole ? nil : SegmentMap(
            objectSize: size, chunkSize: plan.layout.chunkSize, etag: found.etag, lastModified: found.lastModified,
            url: url.redacted, chunks: map?.chunks ?? ChunkSet(count: plan.layout.chunkCount))
        let store = DownloadStore(
            sink: sink, plan: plan, bytesResumed: map?.completedBytes ?? 0, checkpoint: template,
            checkpointInterval: configuration.checkpointInterval, counters: counters, startedAt: startedAt)
        store.onCheckpointFailure = { [weak self] in self?.stop(with: .failure($0)) }
        if let map { logger.info("resuming", metadata: ["done": "\(map.completedBytes)", "size": "\(size)"]) }
        startVerifying(found, store: store, resumed: map)
        if configuration.verifiesPublishedDigests, found.digests.preferredForResponse != nil {
            store.checksEachResponse = true
            logger.info("the server sends a digest of each response (\(found.digests.preferredForResponse!.header)); checking each before it counts")
        }
        let transfer = makeTransfer(found, store: store, headers: headers)
        try transfer.start(from: connection, firstRange: firstRange)
        object = found
        self.store = store
        // A map from the start, so a crash at any moment leaves something to resume from.
        if map == nil && !arrivesWhole { store.checkpoint() }
        return transfer
    }

    /// The probe's 200 arrived: the server ignores ranges, so this one response is the download.
    private func beginStream(_ found: RemoteObject, discardsPartial: Bool, on connection: Connection, headers: RequestHeaders) throws(DownloadError) -> TransferRun {
        if discardsPartial {
            logger.warning("the server no longer answers range requests; starting over in a single stream")
            try sink.discardPartialState()
            basis = .fresh
        }
        try sink.open(size: found.size, resuming: false)
        let store = DownloadStore(streamingTo: sink, counters: counters)
        startVerifying(found, store: store, resumed: nil)
        let transfer = makeTransfer(found, store: store, headers: headers)
        transfer.startStream(from: connection)
        object = found
        self.store = store
        return transfer
    }

    private func makeTransfer(_ object: RemoteObject, store: DownloadStore, headers: RequestHeaders) -> TransferRun {
        let transfer = TransferRun(
            object: object, store: store, headers: headers, configuration: configuration, loop: loop,
            counters: counters, logger: logger, mirrors: mirrors, requestHeaders: request.headers, target: paths.target,
            refresher: refresher)
        transfer.delegate = self
        return transfer
    }

    func prober(_ prober: Prober, didEndWith step: ProbeDecision.Step) {
        guard phase == .probing, prober === self.prober else { return }
        self.prober = nil
        switch step {
        case .alreadyComplete:
            logger.info("already complete", metadata: ["path": "\(paths.target)"])
            var size: Int64 = 0
            if case .completed(let record) = basis { size = record.size }
            stop(with: .success(result(size: size, alreadyComplete: true)))
        case .finishResumed(let found):
            object = found
            bytesResumed = found.size ?? 0
            var map: SegmentMap?
            if case .resuming(let resumed) = basis { map = resumed }
            startVerifying(found, store: nil, resumed: map)
            openThenFinalize(size: bytesResumed, resuming: true)
        case .empty(let found):
            object = found
            startVerifying(found, store: nil, resumed: nil)
            openThenFinalize(size: 0, resuming: false)
        case .restart(let reason):
            restartFromScratch(reason)
        case .fail(let error):
            stop(with: .failure(error))
        case .redirect, .ranged, .stream, .confirm:
            break  // the prober acts on these itself
        }
    }

    // MARK: Transfer

    func transferDidComplete(_ run: TransferRun) {
        guard phase == .transferring, run === transfer, let store else { return }
        let size = object?.size ?? store.streamPosition
        if let expected = request.expectedSize, size != expected {
            // A stream of unannounced length (the probe checked any announced one): not the object.
            discardOnStop = true
            return stop(with: .failure(DownloadError(
                .sizeMismatch, "\(url.redacted) is \(size) bytes, not the \(expected) expected", remedy: .correctExpectedSize)))
        }
        finalize(size: size)
    }

    func transfer(_ run: TransferRun, foundObjectChanged reason: String) {
        guard phase == .transferring, run === transfer else { return }
        restartFromScratch(reason)
    }

    func transfer(_ run: TransferRun, didFailWith error: DownloadError) {
        guard phase == .transferring, run === transfer else { return }
        stop(with: .failure(error))
    }

    func transfer(_ run: TransferRun, streamBrokeOff error: DownloadError) {
        guard phase == .transferring, run === transfer else { return }
        streamTries += 1
        let noRanges = "; the server does not support ranges, so the download cannot resume"
        // Bytes an in-order sink handed out cannot be taken back: it cannot start over.
        guard sink.window == nil,
              let delay = FailurePolicy(configuration).retryDelay(after: streamTries, error, retryAfter: nil) else {
            let tries = streamTries > 1 ? " (tried \(streamTries) times)" : ""
            return stop(with: .failure(error.adding(noRanges + tries, remedy: sink.window == nil ? .startAgain : nil)))
        }
        let next = "\(streamTries + 1) of \(configuration.retry.maxTries)"
        logger.warning("\(error.reason)\(noRanges); starting over from the first byte in \(delay) (try \(next))")
        counters.retries += 1
        let wait = DownloadProgress.Wait(
            server: "\(url.host):\(url.port)", cause: error.shortCause, duration: .zero, nextTry: delay, limit: nil)
        streamRetry = (wait, .now + delay)
        startOver { [self] in
            streamRetryTimer = loop.schedule(after: delay) { [weak self] in
                guard let self, phase == .starting else { return }
                probe()
            }
        }
    }

    /// Starts over from byte 0 once: the object changed, or the partial state did not match it.
    private func restartFromScratch(_ reason: String) {
        guard configuration.onObjectChange == .restart, !restartedAfterChange else {
            discardOnStop = true
            stop(with: .failure(DownloadError(.objectChanged, "\(reason); not mixing versions, the partial download was discarded")))
            return
        }
        restartedAfterChange = true
        logger.warning("\(reason); starting over from the beginning")
        startOver { [self] in probe() }
    }

    /// Drops every stage and what the sink holds, then runs `next` (on the transfer thread).
    private func startOver(then next: @escaping () -> Void) {
        prober?.stop()
        prober = nil
        transfer?.stop()
        transfer = nil
        store = nil
        object = nil
        verifier?.cancel()
        verifier = nil
        basis = .fresh
        phase = .starting
        sink.close(discarding: true) { [self] in
            guard phase == .starting else { return }
            next()
        }
    }

    // MARK: Finalize and stop

    private func openThenFinalize(size: Int64, resuming: Bool) {
        do {
            try sink.open(size: size, resuming: resuming)
        } catch {
            stop(with: .failure(error))
            return
        }
        finalize(size: size)
    }

    // MARK: Verify

    /// Checks the object against the expected checksum and the server's digest as it arrives.
    private func startVerifying(_ found: RemoteObject, store: DownloadStore?, resumed map: SegmentMap?) {
        // A file is checked by an ObjectVerifier, an in-order sink (a pipe) checks the bytes
        // itself as they go out, a measurement checks nothing.
        guard sink.keepsPartialState || sink.window != nil else { return }
        let checks = DigestCheck.checks(
            expected: request.expectedChecksum, published: found.digests,
            verifyingPublished: configuration.verifiesPublishedDigests, logger: logger)
        guard !checks.isEmpty else { return }
        guard sink.keepsPartialState else {
            sink.verifyInOrder(checks)
            return
        }
        verifier = ObjectVerifier.start(checks, for: found, paths: paths, store: store, resumed: map, loop: loop)
    }

    /// Every byte is in the sink: check its digests, then let it deliver the object (make it
    /// durable, rename). A mismatch deletes the part file: its bytes are wrong.
    private func finalize(size: Int64) {
        guard phase != .finalizing && phase != .stopped else { return }
        phase = .finalizing
        transfer?.stop()
        transferEnded()
        guard let verifier else {
            publish(size: size, verified: [])
            return
        }
        store?.handOverCompletedStretches()
        let inMemory = size <= PartFileSink.holdLimit ? sink.read(ByteRange(0, size)) : nil
        // The bytes go to disk while the verifier checks what it has not yet: the final flush
        // and the last of the hashing overlap; only the rename waits for the verdict.
        if inMemory == nil { sink.makeDurable(size: size, record: completedRecord(size: size)) }
        verifier.finish(size: size, inMemory: inMemory) { [self] outcome in
            guard phase == .finalizing else { return }
            switch outcome {
            case .success(let verified):
                if !verified.isEmpty { logger.info("verified", metadata: ["digests": "\(verified.map(\.description).joined(separator: ", "))"]) }
                publish(size: size, verified: verified)
            case .failure(let error):
                discardOnStop = true
                stop(with: .failure(error))
            }
        }
    }

    private func completedRecord(size: Int64) -> CompletedObject {
        CompletedObject(size: size, etag: object?.etag, lastModified: object?.lastModified)
    }

    private func publish(size: Int64, verified: [VerifiedDigest]) {
        sink.finish(size: size, record: completedRecord(size: size)) { [self] failure in
            if let failure {
                stop(with: .failure(failure))
            } else {
                stop(with: .success(result(size: size, alreadyComplete: false, verified: verified)))
            }
        }
    }

    private func result(size: Int64, alreadyComplete: Bool, verified: [VerifiedDigest] = []) -> DownloadResult {
        var etag = object?.strongETag
        if etag == nil, case .completed(let record) = basis { etag = record.etag }
        return DownloadResult(
            path: paths.target, bytes: size, bytesReceived: counters.bytesReceived,
            bytesResumed: alreadyComplete ? size : (store?.bytesResumed ?? bytesResumed), duration: .now - startedAt,
            connectionsUsed: counters.peakConnections, requests: counters.requests, retries: counters.retries,
            etag: etag, alreadyComplete: alreadyComplete, sources: sourceReports, verified: verified)
    }

    /// Pauses: stops every transfer, checkpoints, and reports ``DownloadError/Kind/interrupted``.
    func pause() {
        guard phase == .probing || phase == .transferring || phase == .starting else { return }
        let kept = store?.keepsPartialState == true ? "; \(bytesDone) bytes are kept in \(paths.part)" : ""
        stop(with: .failure(DownloadError(.interrupted, "download paused" + kept, remedy: .resume)))
    }

    /// Whether a stop now leaves partial state a later run resumes from: a segment map being
    /// kept, or one from an earlier run that this run has not replaced.
    private var keepsResumableState: Bool {
        guard !discardOnStop else { return false }
        if let store { return store.keepsPartialState }
        if case .resuming = basis { return true }
        return false
    }

    /// `error` as it is true when nothing is kept: a fix that says "resume" becomes "start again",
    /// with why nothing could be kept.
    private func withoutResume(_ error: DownloadError) -> DownloadError {
        let remedy: DownloadError.Remedy
        switch error.remedy {
        case .resume?: remedy = .startAgain
        case .freeSpaceAndResume?: remedy = .freeSpace
        default: return error
        }
        let why = if let store {
            store.plan == nil
                ? " (the server does not support ranges, so a download from it cannot resume)"
                : " (a file that arrives in one response keeps no partial state)"
        } else {
            ""
        }
        return DownloadError(
            error.kind, error.reason + why, remedy: remedy, httpStatus: error.httpStatus, curlCode: error.curlCode,
            errno: error.errno)
    }

    /// Cancels: stops every transfer and deletes the partial state.
    func cancel() {
        guard phase != .stopped && phase != .finalizing else { return }
        discardOnStop = true
        stop(with: .failure(DownloadError(.cancelled, "download cancelled; partial data deleted")))
    }

    /// Ends the session once: stops the stages, keeps (one last checkpoint) or discards the
    /// partial state, and reports.
    private func stop(with result: Result<DownloadResult, DownloadError>) {
        guard phase != .stopped else { return }
        let wasTransferring = phase == .transferring
        phase = .stopped
        // Without a segment map (a small file, a stream) nothing can resume: keep nothing.
        if case .failure = result, let store, !store.keepsPartialState { discardOnStop = true }
        var result = result
        if case .failure(let error) = result, !keepsResumableState { result = .failure(withoutResume(error)) }
        progressTimer?.cancel()
        streamRetryTimer?.cancel()
        prober?.stop()
        transfer?.stop()
        verifier?.cancel()
        refresher?.stop()
        transferEnded()
        if case .success = result { onProgress?(progressSnapshot()) }
        let report = { [self] in
            sink.close(discarding: discardOnStop) { [self] in
                let completion = self.completion
                self.completion = nil
                completion?(result)
                keepAlive = nil
            }
        }
        if case .failure = result, wasTransferring, !discardOnStop, let store {
            // Keep what arrived: one last checkpoint before reporting.
            store.checkpoint(then: report)
        } else {
            report()
        }
    }

    private func transferEnded() {
        let hook = onTransferEnd
        onTransferEnd = nil
        hook?()
    }

    // MARK: Progress

    private func scheduleProgress() {
        progressTimer = loop.schedule(after: configuration.progressInterval) { [weak self] in
            guard let self, phase != .stopped else { return }
            meter.record(totalBytes: counters.bytesReceived, at: .now)
            onProgress?(progressSnapshot())
            if phase == .transferring { store?.checkpointIfDue() }
            watchQuiet()
            scheduleProgress()
        }
    }

    var bytesDone: Int64 { store?.bytesDone ?? bytesResumed }

    /// Ends a download stuck with nothing in flight (see ``QuietWatch``), keeping what it has.
    private func watchQuiet() {
        let idle: IdleWait? = switch phase {
        case .probing: prober?.idle
        case .transferring: transfer?.idle
        default: nil
        }
        guard let failure = quiet.look(idle: idle, bytes: counters.bytesReceived, othersActive: loop.budget.active > 0, now: .now) else { return }
        logger.error("no request in flight and no progress; stopping", metadata: ["waiting for": "\(idle?.description ?? "")"])
        stop(with: .failure(failure))
    }

    /// Each source's bytes and state, for a download from several URLs.
    private var sourceReports: [DownloadResult.Source] {
        guard !mirrors.isEmpty else { return [] }
        return transfer?.sources.reports ?? ([url] + mirrors).map { DownloadResult.Source(url: $0.redacted, bytes: 0, isChecking: true) }
    }

    private func progressSnapshot() -> DownloadProgress {
        DownloadProgress(
            bytesDone: bytesDone, totalBytes: object?.size, bytesPerSecond: meter.bytesPerSecond,
            activeConnections: transfer?.activeConnections ?? 0, elapsed: .now - startedAt, sources: sourceReports,
            waiting: waiting)
    }

    /// What the download waits for, if anything: a server being retried, or a broken stream's next try.
    private var waiting: DownloadProgress.Wait? {
        switch phase {
        case .probing: return prober?.waiting
        case .transferring: return transfer?.waiting
        case .starting:
            guard var retry = streamRetry?.wait, let at = streamRetry?.at, at > .now else { return nil }
            retry.nextTry = at - .now
            return retry
        case .finalizing, .stopped:
            return nil
        }
    }
}
