import Logging
import SwoopStore
import SwoopCurl

/// The checks another URL passes before it contributes a byte: a mirror, or a fresh URL for the
/// first source (a presigned URL signed again). Each is probed on its own (``MirrorCheck``) and
/// sends the bytes of one range the first source has written; they must be the same bytes (the
/// same size is not the same object). Transfer thread only.
final class SourceChecks: MirrorCheckDelegate {
    /// What a check needs besides the URL.
    struct Context {
        /// The request's headers (a redirect elsewhere keeps only the safe ones).
        let requestHeaders: [(name: String, value: String)]
        let settings: ExchangeSettings
        let loop: TransferLoop
        let logger: Logger
    }

    /// What the check of a fresh URL found.
    enum ReplacementVerdict {
        /// The same object: the source continues with it.
        case same(RemoteObject)
        /// Another object (another size, or other bytes): it must never contribute.
        case otherObject(String)
        /// It cannot be used now (refused, failing): why.
        case unusable(String)
    }

    private let store: DownloadStore
    private let context: Context
    private var logger: Logger { context.logger }
    private var mirrors: [MirrorCheck] = []
    /// Samples waiting for the first source's bytes at the same range to be written.
    private var samples: [(check: MirrorCheck, object: RemoteObject, headers: RequestHeaders, bytes: [UInt8])] = []
    /// Checks of fresh URLs, with what to tell when each ends.
    private var replacements: [(check: MirrorCheck, done: (ReplacementVerdict) -> Void)] = []
    /// Mirrors that never became sources, and why.
    private(set) var rejected: [(url: RemoteURL, reason: String)] = []
    /// The first source's fresh URL is being fetched or checked; it takes no request meanwhile.
    private(set) var isRefreshingPrimary = false
    /// A mirror agreed: its object and headers.
    var onAgreement: ((RemoteObject, RequestHeaders) -> Void)?
    /// The first source's URL, for messages.
    var firstSourceURL: () -> RemoteURL? = { nil }

    init(store: DownloadStore, context: Context) {
        self.store = store
        self.context = context
    }

    /// A check has a request in flight.
    var isBusy: Bool { mirrors.contains(where: \.isBusy) || replacements.contains { $0.check.isBusy } }

    /// Checks each of `urls`, mirrors of an object of `size` bytes, against the bytes at `range`,
    /// which the first source has written or is writing.
    func check(mirrors urls: [RemoteURL], size: Int64, range: ByteRange) {
        for url in urls {
            let check = MirrorCheck(
                url: url, headers: context.requestHeaders, size: size, range: range,
                settings: context.settings, loop: context.loop, logger: logger)
            check.delegate = self
            mirrors.append(check)
            check.start()
        }
    }

    func stop() {
        for check in mirrors + replacements.map(\.check) { check.stop() }
        samples.removeAll()
        replacements.removeAll()
    }

    // MARK: Fresh URLs

    /// Checks that `url`, a fresh URL for `source`, leads to the same object, the way a mirror is
    /// checked: the same size, and the same bytes at `range`, which the source has written.
    /// Credentials go with it only where the source's may.
    func verifyReplacement(
        of source: Source, with url: RemoteURL, range: ByteRange, done: @escaping (ReplacementVerdict) -> Void
    ) {
        guard let size = source.object.size else { return done(.unusable("the object's size is unknown")) }
        let headers =
            source.headers.mayCarryCredentials(to: url)
            ? context.requestHeaders
            : context.requestHeaders.filter { RequestHeaders.safeAcrossHosts.contains($0.name.lowercased()) }
        let check = MirrorCheck(
            url: url, headers: headers, size: size, range: range,
            settings: context.settings, loop: context.loop, logger: logger)
        check.delegate = self
        replacements.append((check, done))
        check.start()
    }

    /// A request to `source`'s (the first source's) `refused` URL was refused as expired: gets a
    /// fresh URL from `refresher` (one for every request refused meanwhile: a request sent to an
    /// older URL than the source's now only waits), checks that it leads to the same object, and
    /// points the source at it. `done(nil)` when it may take requests again; `done(error)` when
    /// the download cannot go on.
    func refresh(
        _ source: Source, refused: RemoteURL, refresher: URLRefresher, range: ByteRange,
        done: @escaping (DownloadError?) -> Void
    ) {
        guard source.object.url == refused, !isRefreshingPrimary else { return }
        isRefreshingPrimary = true
        source.isHeld = true  // rests until its fresh URL is checked
        func fresh(_ result: Result<RemoteURL, DownloadError>) {
            switch result {
            case .failure(let error):
                isRefreshingPrimary = false
                done(error)
            case .success(let url):
                verifyReplacement(of: source, with: url, range: range) { [weak self] verdict in
                    guard let self else { return }
                    switch verdict {
                    case .same(let object):
                        source.object = object
                        source.isHeld = false
                        isRefreshingPrimary = false
                        logger.info("continuing with the fresh URL", metadata: ["source": "\(url.redacted)"])
                        done(nil)
                    case .otherObject(let reason):
                        isRefreshingPrimary = false
                        let message =
                            "the fresh URL \(url.redacted) leads to another object than \(refused.redacted): "
                            + "\(reason); not mixing two objects"
                        done(DownloadError(.urlRefreshFailed, message, remedy: .checkURLProvider))
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

    // MARK: MirrorCheckDelegate

    func mirrorCheck(_ check: MirrorCheck, sampled object: RemoteObject, headers: RequestHeaders, bytes: [UInt8]) {
        samples.append((check, object, headers, bytes))
        settleAgreements()
    }

    func mirrorCheck(_ check: MirrorCheck, failed reason: String) {
        if let done = takeReplacement(check) {
            return done(check.servesOtherObject ? .otherObject(reason) : .unusable(reason))
        }
        mirrors.removeAll { $0 === check }
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
            let chunks = layout.chunksCompleted(
                from: layout.alignDown(range.lowerBound), to: layout.alignUp(range.upperBound))
            let written = chunks.allSatisfy { plan.written.contains($0) } || plan.isComplete
            guard written else { return false }
            mirrors.removeAll { $0 === sample.check }
            let ours = store.readBack(range)
            if let done = takeReplacement(sample.check) {
                let verdict: ReplacementVerdict =
                    ours == nil
                    ? .unusable("the bytes to compare it with cannot be read back")
                    : ours == sample.bytes
                        ? .same(sample.object)
                        : .otherObject("it serves other bytes at \(range) (same size, different content)")
                verdicts.append { done(verdict) }  // after this pass: the verdict may settle more
                return true
            }
            guard let ours else {
                reject(sample.check.url, "the bytes to compare it with cannot be read back")
                return true
            }
            guard ours == sample.bytes else {
                reject(
                    sample.check.url,
                    "it serves other bytes than \(firstSourceURL()?.redacted ?? "the first source") at \(range) "
                        + "(same size, different content), "
                        + "so it never contributes: the file never mixes two objects")
                return true
            }
            logger.info(
                "mirror agrees; fetching from it too",
                metadata: ["source": "\(sample.object.url.redacted)", "compared": "\(range)"])
            onAgreement?(sample.object, sample.headers)
            return true
        }
    }

    private func reject(_ url: RemoteURL, _ reason: String) {
        rejected.append((url, reason))
        if url.address != nil {
            // Another address of the host, the engine's own idea: a -v line.
            logger.info("address \(url.hostAndPort) is not used: \(reason)")
        } else {
            logger.warning("mirror \(url.redacted) is not used: \(reason)")
        }
    }

    /// Every mirror that did not become a source, with its state.
    var reports: [DownloadResult.Source] {
        rejected.map {
            DownloadResult.Source(url: $0.url.redacted, address: $0.url.address, bytes: 0, droppedBecause: $0.reason)
        }
            + mirrors.map { check in
                check.stopped
                    ? DownloadResult.Source(
                        url: check.url.redacted, address: check.url.address, bytes: 0,
                        droppedBecause: "the download ended before its check did")
                    : DownloadResult.Source(
                        url: check.url.redacted, address: check.url.address, bytes: 0, isChecking: true)
            }
    }
}
