import Logging
import SwoopStore
import SwoopTransfer

/// One server a download fetches from: the first URL's, or a mirror that passed its check. Each
/// has its own object identity (mirrors do not share `ETag`s), so its own precondition, and its
/// own ``SourceHealth``.
final class Source {
    let index: Int
    /// Its URL and identity; the first source's URL changes when a fresh one replaces it.
    var object: RemoteObject
    let headers: RequestHeaders
    /// Requests in flight to it.
    var active = 0
    /// Body bytes it delivered.
    var bytes: Int64 = 0
    /// Whether it answers, what it may be sent, and its failures.
    var health = SourceHealth()
    /// Its last failure.
    var lastError: DownloadError?
    /// Why it is no longer used.
    var dropped: String?

    init(index: Int, object: RemoteObject, headers: RequestHeaders) {
        self.index = index
        self.object = object
        self.headers = headers
    }

    func sample(at now: ContinuousClock.Instant) -> SourceSample {
        let limit = health.limit(at: now)
        return SourceSample(
            active: active, cap: limit.count, failures: health.failuresInARow + health.failedAnswers,
            isUsable: dropped == nil, isResting: limit.isHeldBack)
    }

    /// `host:port`, for progress and messages.
    var hostAndPort: String { "\(object.url.host):\(object.url.port)" }
}

/// The sources of one download: the first, mirrors being checked, mirrors in use, and those
/// dropped (and why). Checks a mirror's sample against the bytes the first source wrote before
/// letting it contribute, so a file never mixes two objects. Transfer thread only.
final class SourceSet: MirrorCheckDelegate {
    private(set) var sources: [Source]
    private let store: DownloadStore
    private let logger: Logger
    private var checks: [MirrorCheck] = []
    /// Samples waiting for the first source's bytes at the same range to be written.
    private var samples: [(check: MirrorCheck, object: RemoteObject, headers: RequestHeaders, bytes: [UInt8])] = []
    /// Mirrors that never became sources, and why.
    private var rejected: [(url: String, reason: String)] = []
    /// A mirror joined: the transfer can use more connections.
    var onSourceAdded: (() -> Void)?
    /// Checks of fresh URLs for a source (``verifyReplacement(of:with:range:requestHeaders:target:configuration:loop:done:)``),
    /// with what to tell when each ends.
    private var replacements: [(check: MirrorCheck, done: (ReplacementVerdict) -> Void)] = []

    init(first: RemoteObject, headers: RequestHeaders, store: DownloadStore, logger: Logger) {
        self.sources = [Source(index: 0, object: first, headers: headers)]
        self.store = store
        self.logger = logger
    }

    var primary: Source { sources[0] }
    var usable: [Source] { sources.filter { $0.dropped == nil } }
    var hasSeveral: Bool { usable.count > 1 }
    /// A mirror check, or the check of a fresh URL, has a request in flight.
    var isChecking: Bool { checks.contains(where: \.isBusy) || replacements.contains { $0.check.isBusy } }

    /// The range another source's bytes are compared on (a mirror before it contributes, a
    /// fresh URL before it replaces the old one): one chunk the first source has written, or is
    /// writing now (`firstRange`, the probe's).
    func sampleRange(near firstRange: ByteRange) -> ByteRange? {
        guard let plan = store.plan else { return nil }
        let layout = plan.layout
        let chunk = (0..<layout.chunkCount).first { plan.written.contains($0) } ?? Int(firstRange.lowerBound / layout.chunkSize)
        let start = layout.byteRange(ofChunks: chunk..<(chunk + 1)).lowerBound
        return ByteRange(start, min(start + min(layout.chunkSize, 1 << 20), layout.objectSize))
    }

    /// The source the next request goes to (see ``TransferPolicy/chooseSource(_:avoiding:)``).
    func choose(avoiding: Source? = nil, now: ContinuousClock.Instant) -> Source? {
        TransferPolicy.chooseSource(sources.map { $0.sample(at: now) }, avoiding: avoiding?.index).map { sources[$0] }
    }

    /// The source a connection's next request in its segment goes to: `current` while it may take
    /// one (keeping its connection), else whichever the policy picks.
    func next(after current: Source?, now: ContinuousClock.Instant) -> Source? {
        if let current, TransferPolicy.canTakeRequest(current.sample(at: now)) { return current }
        return choose(now: now)
    }

    /// A request to `source` failed (`answered`: after its response head): what the failure
    /// policy makes of it (see ``SourceHealth/failed(_:reason:active:refused:retryAfter:sharesWork:policy:at:)``).
    /// Logs when the source goes down.
    func failed(
        _ source: Source, _ error: DownloadError, answered: Bool, retryAfter: Int?, policy: FailurePolicy
    ) -> SourceHealth.Verdict {
        guard source.dropped == nil else { return .rest }
        source.lastError = error
        let wasDown = source.health.isDown
        let refused = error.httpStatus == 503 || error.httpStatus == 429
        let sharesWork = usable.contains { $0 !== source }
        let verdict = source.health.failed(
            FailurePolicy.scope(of: error, answered: answered), reason: error.reason, active: source.active,
            refused: refused, retryAfter: retryAfter, sharesWork: sharesWork, policy: policy, at: .now)
        switch verdict {
        case .limited:
            logger.debug("source limits connections", metadata: ["source": "\(source.object.url.redacted)", "cap": "\(source.active)"])
        case .down where !wasDown:
            let seconds = (trial: Int(policy.maxTrialInterval.seconds), outage: Int(policy.maxOutage.seconds))
            logger.warning("""
                \(source.hostAndPort) is not answering (\(error.reason)); trying one connection at a time, \
                at most every \(seconds.trial) s, for up to \(seconds.outage) s
                """)
        default:
            break
        }
        return verdict
    }

    /// A response head from `source` was usable: it answers (an outage ends, a recovery widens).
    /// Returns whether it may now take more requests than before.
    func answered(_ source: Source) -> Bool {
        let before = source.health.state
        source.health.answered()
        guard before != source.health.state else { return false }
        if case .down(let outage) = before {
            let seconds = Int((ContinuousClock.now - outage.since).seconds.rounded())
            logger.warning("\(source.hostAndPort) answers again after \(seconds) s; resuming")
        }
        return true
    }

    /// The source whose outage holds the download up, when no usable source answers now.
    var waitingFor: Source? {
        let open = usable
        guard !open.isEmpty, open.allSatisfy(\.health.isDown) else { return nil }
        return open.min { ($0.health.nextWake ?? .now) < ($1.health.nextWake ?? .now) }
    }

    /// The earliest moment a resting source may be asked again.
    var nextWake: ContinuousClock.Instant? {
        usable.compactMap(\.health.nextWake).min()
    }

    func drop(_ source: Source, _ reason: String) {
        guard source.dropped == nil else { return }
        source.dropped = reason
        logger.warning("source dropped: \(reason)", metadata: ["source": "\(source.object.url.redacted)"])
    }

    // MARK: Mirror checks

    /// Checks each mirror against the bytes at `range`, which the first source has written or is
    /// writing.
    func check(_ mirrors: [RemoteURL], range: ByteRange, requestHeaders: [(name: String, value: String)], target: String,
               configuration: Downloader.Configuration, loop: TransferLoop) {
        guard let size = primary.object.size else { return }
        for url in mirrors {
            let check = MirrorCheck(
                url: url, headers: requestHeaders, size: size, range: range, target: target,
                configuration: configuration, loop: loop, logger: logger)
            check.delegate = self
            checks.append(check)
            check.start()
        }
    }

    func stop() {
        for check in checks + replacements.map(\.check) { check.stop() }
        samples.removeAll()
        replacements.removeAll()
    }

    // MARK: Fresh URLs

    /// What the check of a fresh URL found.
    enum ReplacementVerdict {
        /// The same object: the source continues with it.
        case same(RemoteObject)
        /// Another object (another size, or other bytes): it must never contribute.
        case otherObject(String)
        /// It cannot be used now (refused, failing): why.
        case unusable(String)
    }

    /// Checks that `url`, a fresh URL for `source` (a presigned URL signed again), leads to the
    /// same object, the way a mirror is checked: the same size, and the same bytes at `range`,
    /// which the source has written. Credentials go with it only where the source's may.
    func verifyReplacement(
        of source: Source, with url: RemoteURL, range: ByteRange, requestHeaders: [(name: String, value: String)], target: String,
        configuration: Downloader.Configuration, loop: TransferLoop, done: @escaping (ReplacementVerdict) -> Void
    ) {
        guard let size = source.object.size else { return done(.unusable("the object's size is unknown")) }
        let headers = source.headers.mayCarryCredentials(to: url)
            ? requestHeaders : requestHeaders.filter { DownloadRequest.headersSafeAcrossHosts.contains($0.name.lowercased()) }
        let check = MirrorCheck(
            url: url, headers: headers, size: size, range: range, target: target,
            configuration: configuration, loop: loop, logger: logger)
        check.delegate = self
        replacements.append((check, done))
        check.start()
    }

    /// The first source's fresh URL is being fetched or checked; it takes no request meanwhile.
    private(set) var isRefreshingPrimary = false

    /// A request to the first source's `refused` URL was refused as expired: gets a fresh URL from
    /// `refresher` (one for every request refused meanwhile: a request sent to an older URL
    /// than the source's now only waits), checks that it leads to the same object, and points
    /// the source at it. `done(nil)` when it may take requests again; `done(error)` when the
    /// download cannot go on.
    func refreshPrimary(
        refused: RemoteURL, refresher: URLRefresher, range: ByteRange, requestHeaders: [(name: String, value: String)], target: String,
        configuration: Downloader.Configuration, loop: TransferLoop, done: @escaping (DownloadError?) -> Void
    ) {
        let source = primary
        guard source.object.url == refused, !isRefreshingPrimary else { return }
        isRefreshingPrimary = true
        source.health.hold(until: .now + .seconds(365 * 86_400))  // rests until its fresh URL is checked
        func fresh(_ result: Result<RemoteURL, DownloadError>) {
            switch result {
            case .failure(let error):
                isRefreshingPrimary = false
                done(error)
            case .success(let url):
                verifyReplacement(of: source, with: url, range: range, requestHeaders: requestHeaders, target: target, configuration: configuration, loop: loop) { [weak self] verdict in
                    guard let self else { return }
                    switch verdict {
                    case .same(let object):
                        source.object = object
                        source.health.hold(until: nil)
                        isRefreshingPrimary = false
                        logger.info("continuing with the fresh URL", metadata: ["source": "\(url.redacted)"])
                        done(nil)
                    case .otherObject(let reason):
                        isRefreshingPrimary = false
                        done(DownloadError(.urlRefreshFailed, "the fresh URL \(url.redacted) leads to another object than \(refused.redacted): \(reason); not mixing two objects", remedy: .checkURLProvider))
                    case .unusable(let reason):
                        refresher.reject(url, because: reason, fresh)
                    }
                }
            }
        }
        refresher.refresh(after: refused, fresh)
    }

    private func takeReplacement(_ check: MirrorCheck) -> ((ReplacementVerdict) -> Void)? {
        guard let index = replacements.firstIndex(where: { $0.check === check }) else { return nil }
        return replacements.remove(at: index).done
    }

    // MARK: Mirror checks (and fresh URLs)

    func mirrorCheck(_ check: MirrorCheck, sampled object: RemoteObject, headers: RequestHeaders, bytes: [UInt8]) {
        samples.append((check, object, headers, bytes))
        settleAgreements()
    }

    func mirrorCheck(_ check: MirrorCheck, failed reason: String) {
        if let done = takeReplacement(check) {
            return done(check.servesOtherObject ? .otherObject(reason) : .unusable(reason))
        }
        checks.removeAll { $0 === check }
        reject(check.url, reason)
    }

    /// Compares each waiting sample with the first source's bytes, once those are written.
    func settleAgreements() {
        guard !samples.isEmpty, let plan = store.plan else { return }
        let layout = plan.layout
        var verdicts: [() -> Void] = []
        defer { for verdict in verdicts { verdict() } }
        samples.removeAll { sample in
            let range = sample.check.range
            let chunks = layout.chunksCompleted(from: layout.alignDown(range.lowerBound), to: layout.alignUp(range.upperBound))
            let written = chunks.allSatisfy { plan.written.contains($0) } || plan.isComplete
            guard written else { return false }
            checks.removeAll { $0 === sample.check }
            let ours = store.readBack(range)
            if let done = takeReplacement(sample.check) {
                let verdict: ReplacementVerdict = ours == nil ? .unusable("the bytes to compare it with cannot be read back")
                    : ours == sample.bytes ? .same(sample.object)
                    : .otherObject("it serves other bytes at \(range) (same size, different content)")
                verdicts.append { done(verdict) }  // after this pass: the verdict may settle more
                return true
            }
            guard let ours else {
                reject(sample.check.url, "the bytes to compare it with cannot be read back")
                return true
            }
            guard ours == sample.bytes else {
                reject(sample.check.url, "it serves other bytes than \(primary.object.url.redacted) at \(range) (same size, different content), so it never contributes: the file never mixes two objects")
                return true
            }
            let source = Source(index: sources.count, object: sample.object, headers: sample.headers)
            sources.append(source)
            logger.info("mirror agrees; fetching from it too", metadata: ["source": "\(sample.object.url.redacted)", "compared": "\(range)"])
            onSourceAdded?()
            return true
        }
    }

    private func reject(_ url: RemoteURL, _ reason: String) {
        rejected.append((url.redacted, reason))
        logger.warning("mirror \(url.redacted) is not used: \(reason)")
    }

    // MARK: Reports

    /// Why the mirrors given are of no use now, when some were given.
    var whyOthersCannotHelp: String? {
        let reasons = sources.dropFirst().compactMap { source in source.dropped.map { "\(source.object.url.redacted): \($0)" } }
            + rejected.map { "\($0.url): \($0.reason)" }
        return reasons.isEmpty ? nil : reasons.joined(separator: "; ")
    }

    /// Every source and every mirror given, with its bytes and state.
    var reports: [DownloadResult.Source] {
        sources.map { DownloadResult.Source(url: $0.object.url.redacted, bytes: $0.bytes, droppedBecause: $0.dropped) }
            + rejected.map { DownloadResult.Source(url: $0.url, bytes: 0, droppedBecause: $0.reason) }
            + checks.map { check in
                check.stopped
                    ? DownloadResult.Source(url: check.url.redacted, bytes: 0, droppedBecause: "the download ended before its check did")
                    : DownloadResult.Source(url: check.url.redacted, bytes: 0, isChecking: true)
            }
    }
}
