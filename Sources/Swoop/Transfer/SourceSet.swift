import Logging
import SwoopStore
import SwoopCurl

/// Every source of one download, the one place its URLs are held: each source as it was asked for
/// (its identity: what the segment map names, what a resume is matched by) and as it is used now
/// (a fresh URL from ``DownloadRequest/urlProvider`` replaces the first source's), and, during a
/// transfer, the sources it fetches from: the first, mirrors in use, and those dropped (and why);
/// which one the next request goes to, and what the failure policy makes of each failure. The
/// session makes it and each transfer begins on it (``begin(first:headers:store:checking:)``): the
/// probe, a restart, the refresher and the checkpoint read the same URLs. Mirrors and fresh URLs
/// join through ``checks``, which compares their bytes with the first source's first, so a file
/// never mixes two objects. Transfer thread only.
final class SourceSet {
    /// A source's URLs.
    struct Entry {
        /// The URL as given (or as the address lookup pinned it).
        let asked: RemoteURL
        /// The URL requests go to now.
        var current: RemoteURL
    }

    /// Every source given, the first first.
    private(set) var entries: [Entry]
    /// The sources the transfer under way fetches from, by index: the first, then each mirror
    /// that agreed with it.
    private(set) var sources: [Source] = []
    private var store: DownloadStore?
    private let logger: Logger
    /// The checks of mirrors and fresh URLs in the transfer under way; none for a download that has
    /// neither (most).
    private(set) var checks: SourceChecks?
    /// A mirror joined: the transfer can use more connections.
    var onSourceAdded: (() -> Void)?

    /// The downloader's hosts, whose health every source shares with its host's other users.
    private let hosts: HostTable
    /// Told when a source's host may take requests again.
    weak var watcher: (any HostWatcher)? {
        didSet { for source in sources { source.watcher = watcher } }
    }

    init(first: RemoteURL, mirrors: [RemoteURL], hosts: HostTable, logger: Logger) {
        entries = ([first] + mirrors).map { Entry(asked: $0, current: $0) }
        self.hosts = hosts
        self.logger = logger
    }

    // MARK: URLs

    /// The first source: the one probed, whose map is kept.
    var first: Entry { entries[0] }

    /// The other sources' URLs, as in use now.
    var mirrors: [RemoteURL] { entries.dropFirst().map(\.current) }

    /// The object arrives in one response from the first source: the others (mirrors, a name's
    /// other addresses) are not asked; the log says so once when there are any. `true`: there are.
    @discardableResult
    func oneResponseSuffices() -> Bool {
        guard entries.count > 1 else { return false }
        logger.info("the object arrives in one response; the mirrors are not needed")
        return true
    }

    /// A resumed map was written for the source asked as `redacted`: that one goes first (its
    /// validators are that source's).
    func putFirst(named redacted: String) {
        guard entries[0].asked.redacted != redacted,
            let index = entries.firstIndex(where: { $0.asked.redacted == redacted })
        else { return }
        entries.swapAt(0, index)
    }

    /// The provider gave a fresh URL for the first source: the probe asks it from now on; a
    /// transfer checks it before its first source uses it (``SourceChecks/refresh(_:refused:refresher:range:done:)``).
    func refreshed(_ url: RemoteURL) {
        entries[0].current = url
    }

    // MARK: The transfer under way

    /// A transfer begins on `first`, the object the probe found at the first source: the
    /// sources of an earlier one (before a restart) are let go, and mirrors are checked again.
    /// The transfer then sets ``watcher`` and ``onSourceAdded`` for itself.
    func begin(
        first: RemoteObject, headers: RequestHeaders, store: DownloadStore, checking context: SourceChecks.Context?
    ) {
        self.store = store
        sources = [Source(index: 0, object: first, headers: headers, hosts: hosts)]
        checks = context.map { SourceChecks(store: store, context: $0) }
        checks?.onAgreement = { [unowned self] object, headers in add(object, headers: headers) }
        checks?.firstSourceURL = { [unowned self] in primary.object.url }
    }

    /// A mirror that agreed with the first source: it takes requests from now on.
    private func add(_ object: RemoteObject, headers: RequestHeaders) {
        let source = Source(index: sources.count, object: object, headers: headers, hosts: hosts)
        source.watcher = watcher
        sources.append(source)
        onSourceAdded?()
    }

    var primary: Source { sources[0] }
    var usable: [Source] { sources.filter { $0.dropped == nil } }
    var hasSeveral: Bool { usable.count > 1 }
    /// A mirror check, or the check of a fresh URL, has a request in flight.
    var isChecking: Bool { checks?.isBusy ?? false }

    /// The range another source's bytes are compared on (a mirror before it contributes, a
    /// fresh URL before it replaces the old one): one chunk the first source has written, or is
    /// writing now (`firstRange`, the probe's).
    func sampleRange(near firstRange: ByteRange) -> ByteRange? {
        guard let plan = store?.plan else { return nil }
        let layout = plan.layout
        let chunk =
            (0..<layout.chunkCount).first { plan.written.contains($0) } ?? Int(firstRange.lowerBound / layout.chunkSize)
        let start = layout.byteRange(ofChunks: chunk..<(chunk + 1)).lowerBound
        return ByteRange(start, min(start + min(layout.chunkSize, 1 << 20), layout.objectSize))
    }

    /// What the source policy sees of every source at `now`, by index (the ``TransferMachine``
    /// chooses from them: ``TransferPolicy/chooseSource(_:avoiding:)``).
    func samples(at now: Moment) -> [SourceSample] {
        sources.map { $0.sample(at: now) }
    }

    /// A request to `source` failed at `now` (`answered`: after its response head): what the
    /// failure policy makes of it (see
    /// ``SourceHealth/failed(_:reason:active:refused:retryAfter:sharesWork:policy:at:)``).
    /// Logs when the source goes down.
    func failed(
        _ source: Source, _ error: DownloadError, answered: Bool, retryAfter: Int?, policy: FailurePolicy,
        by owner: Int, at now: Moment
    ) -> SourceHealth.Verdict {
        guard source.dropped == nil else { return .rest }
        source.lastError = error
        let wasDown = source.health.isDown
        let sharesWork = usable.contains { $0 !== source }
        let active = source.host.active
        let verdict = source.updateHealth {
            $0.failed(
                error, answered: answered, active: active, retryAfter: retryAfter, sharesWork: sharesWork,
                policy: policy, at: now, by: owner)
        }
        switch verdict {
        case .limited:
            logger.debug(
                "source limits connections",
                metadata: ["source": "\(source.object.url.redacted)", "cap": "\(source.host.active)"])
        case .down where !wasDown:
            let seconds = (trial: Int(policy.maxTrialInterval.seconds), outage: Int(policy.maxOutage.seconds))
            logger.warning(
                """
                \(source.hostAndPort) is not answering (\(error.reason)); trying one connection at a time, \
                at most every \(seconds.trial) s, for up to \(seconds.outage) s
                """)
        default:
            break
        }
        return verdict
    }

    /// A response head from `source` to a request sent at `sentAt` was usable at `now`: it answers
    /// (an outage ends, a recovery widens). Returns whether it may now take more requests than before.
    func answered(_ source: Source, sentAt: Moment, at now: Moment) -> Bool {
        let before = source.health.state
        source.updateHealth { $0.answered(sentAt: sentAt) }
        guard before != source.health.state else { return false }
        if case .down(let outage) = before {
            let seconds = Int((now - outage.since).seconds.rounded())
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
    var nextWake: Moment? {
        usable.compactMap(\.health.nextWake).min()
    }

    func drop(_ source: Source, _ reason: String) {
        guard source.dropped == nil else { return }
        source.dropped = reason
        // Another address of the same host is the engine's own choice, not a source the user
        // gave: its end is a -v line.
        let level: Logger.Level = source.object.url.address != nil ? .info : .warning
        logger.log(level: level, "source dropped: \(reason)", metadata: ["source": "\(source.hostAndPort)"])
    }

    // MARK: Reports

    /// Why the mirrors given are of no use now, when some were given.
    var whyOthersCannotHelp: String? {
        let reasons =
            sources.dropFirst().compactMap { source in source.dropped.map { "\(source.object.url.redacted): \($0)" } }
            + (checks?.rejected ?? []).map { "\($0.url.hostAndPort): \($0.reason)" }
        return reasons.isEmpty ? nil : reasons.joined(separator: "; ")
    }

    /// Every source and every mirror given, with its bytes and state.
    var reports: [DownloadResult.Source] {
        sources.map {
            DownloadResult.Source(
                url: $0.object.url.redacted, address: $0.object.url.address, bytes: $0.bytes, droppedBecause: $0.dropped
            )
        }
            + (checks?.reports ?? [])
    }
}
