import Logging
import SwoopStore
import SwoopTransfer

/// Hears how the probe ends.
protocol ProberDelegate: AnyObject {
    /// The probe's response carries the object's first bytes (``ProbeDecision/Step/ranged(_:firstRange:)``
    /// or ``ProbeDecision/Step/stream(_:discardsPartial:)``): start the transfer on `connection`
    /// now, inside the head callback, so its body is stored. Throwing fails the probe.
    func prober(_ prober: Prober, beginTransfer step: ProbeDecision.Step, on connection: Connection) throws(DownloadError)
    /// The probe ended without a transfer: already complete, nothing left to fetch, an empty
    /// object, a restart, or a failure (after the retries it allows). A ``Prober/Purpose/headOnly``
    /// probe always ends here, `ranged` and `stream` included.
    func prober(_ prober: Prober, didEndWith step: ProbeDecision.Step)
}

/// The probe stage: sends the first request, follows redirects, retries transient failures,
/// and has ``ProbeDecision`` judge each response head. Transfer thread only.
final class Prober: ConnectionDelegate {
    /// What the probe is for.
    enum Purpose {
        /// A download's first request: its response carries the first bytes and becomes the
        /// transfer's first segment or its stream.
        case download
        /// Only the final response head (``FileNameLookup``): the probe asks for one byte and
        /// ends with the step that head decided, without a transfer.
        case headOnly
    }

    let purpose: Purpose
    private let loop: TransferLoop
    private let options: TransferOptions
    private let policy: FailurePolicy
    private let probeSize: Int64
    private let counters: DownloadCounters
    private let logger: Logger
    /// Fresh URLs when the URL in use is refused (``DownloadRequest/urlProvider``).
    private let refresher: URLRefresher?
    weak var delegate: (any ProberDelegate)?

    /// The decision's inputs: the URL so far, redirects so far, what is on disk.
    private(set) var decision: ProbeDecision
    /// The headers to send, and whether a redirect left the original origin.
    private(set) var headers: RequestHeaders
    /// The last response head received: the one that decided the step the probe ends with.
    private(set) var lastHead: ResponseHead?
    private var connection: Connection!
    private var tries = 0
    private var retryTimer: LoopTimer?
    /// The last failure, since when the probe has been failing, and when it is sent next.
    private var failing: (error: DownloadError, since: ContinuousClock.Instant, nextTry: ContinuousClock.Instant)?
    /// What the last head decided, acted on when its exchange ends.
    private var pending: ProbeDecision.Step?
    /// The range a ``ProbeDecision/Step/confirm(_:)`` asked for, sent instead of the basis's.
    private var confirming: RequestedRange?
    private var headRetryAfter: Int?
    /// The connection went on to the transfer; the prober is done.
    private var handedOver = false
    private var stopped = false

    init(
        url: RemoteURL, basis: ProbeBasis, target: String, headers: RequestHeaders,
        configuration: Downloader.Configuration, loop: TransferLoop, counters: DownloadCounters, logger: Logger,
        purpose: Purpose = .download, refresher: URLRefresher? = nil, expectedSize: Int64? = nil
    ) {
        self.purpose = purpose
        self.refresher = refresher
        self.loop = loop
        var options = TransferOptions(configuration)
        // The first response is at most about a MiB: a smaller receive buffer does it no harm,
        // and with many small files in flight each buffer is memory held per file.
        options.receiveBufferSize = min(options.receiveBufferSize, 64 << 10)
        self.options = options
        self.policy = FailurePolicy(configuration)
        self.probeSize = switch purpose {
        case .download: ProbeDecision.probeSize(minimumSegmentSize: configuration.minimumSegmentSize)
        case .headOnly: 1
        }
        self.counters = counters
        self.logger = logger
        self.headers = headers
        self.decision = ProbeDecision(
            url: url, originalURL: headers.originalURL, basis: basis, redirects: 0,
            maxRedirects: configuration.redirect.maxRedirects, target: target, expectedSize: expectedSize,
            resolve: RemoteURL.resolve)
        self.connection = Connection(id: 0, loop: loop, delegate: self)
    }

    /// Sends a probe to the current URL (once a connection permit is free).
    func start() {
        guard !stopped else { return }
        var (range, precondition) = ProbeDecision.request(for: decision.basis, probeSize: probeSize)
        if let confirming { range = confirming }
        let url = decision.url
        guard connection.acquirePermit(for: url, owner: self, retry: { [weak self] in self?.start() }) else { return }
        pending = nil
        headRetryAfter = nil
        let request = headers.request(for: url, precondition: precondition, range: range, options: options)
        connection.begin(.probe(range), url: url, request: request)
        counters.willSend(busy: 1)
    }

    /// What the probe waits for while no request is in flight (`nil`: one is).
    var idle: IdleWait? {
        guard !connection.isBusy, !handedOver, refresher?.isRefreshing != true else { return nil }
        if let retryTimer, !retryTimer.isCancelled { return .retry }
        if loop.budget.isWaiting(self) { return .permit }
        return .nothing
    }

    /// The server the probe waits for between tries (for progress).
    var waiting: DownloadProgress.Wait? {
        guard let failing, !handedOver else { return nil }
        let now = ContinuousClock.now
        let waitsForTimer = retryTimer.map { !$0.isCancelled } ?? false
        return DownloadProgress.Wait(
            server: "\(decision.url.host):\(decision.url.port)", cause: failing.error.shortCause,
            duration: now - failing.since, nextTry: waitsForTimer ? max(.zero, failing.nextTry - now) : nil, limit: nil)
    }

    /// Stops probing: cancels the probe in flight (unless it became the transfer) and any retry.
    func stop() {
        stopped = true
        retryTimer?.cancel()
        loop.budget.cancelWait(self)
        if !handedOver { connection.cancel() }
    }

    // MARK: ConnectionDelegate

    func connection(_ connection: Connection, didReceiveProbeHead head: ResponseHead, requested: RequestedRange) -> BodyDisposition {
        headRetryAfter = head.retryAfterSeconds
        lastHead = head
        let (step, body) = decision.decide(head, requested: requested)
        switch (step, purpose) {
        case (.ranged, .headOnly):
            // One byte: read it, and the connection stays open for the download that follows.
            pending = step
            return .discard
        case (.stream, .headOnly):
            // A 200: the whole object would follow.
            pending = step
            return .abort
        case (.ranged, .download), (.stream, .download):
            do throws(DownloadError) {
                try delegate?.prober(self, beginTransfer: step, on: connection)
                handedOver = true
                return body
            } catch {
                pending = .fail(error)
                return .abort
            }
        default:
            pending = step
            return body
        }
    }

    func connection(_ connection: Connection, didFinish job: Connection.Job, with outcome: Connection.Outcome) {
        guard !stopped, !handedOver else { return }
        if let step = pending {
            pending = nil
            switch (step, outcome) {
            case (.fail(let error), _):
                failed(error, retryAfter: headRetryAfter)
            case (.redirect, .failed(let error, _)):
                failed(error, retryAfter: nil)
            case (.confirm(let range), _):
                confirming = range
                start()
            case (.redirect(let next), _):
                headers.follow(to: next)
                logger.debug("redirected", metadata: ["to": "\(next.redacted)"])
                decision.followed(to: next)
                start()
            default:
                delegate?.prober(self, didEndWith: step)
            }
            return
        }
        switch outcome {
        case .failed(let error, let retryAfter):
            failed(error, retryAfter: retryAfter)
        case .completed, .stopped:
            failed(.invalidResponse("the server's response ended without a complete header (\(decision.url))"), retryAfter: nil)
        case .cancelled:
            break
        }
    }

    /// Retries a failed probe after a backoff, or gives up.
    private func failed(_ error: DownloadError, retryAfter: Int?) {
        if error.kind == .objectChanged {
            delegate?.prober(self, didEndWith: .restart(error.message))
            return
        }
        if let refresher, URLExpiry.isRefusal(error, url: decision.url, now: URLExpiry.now) {
            // A presigned URL that expired: probe a fresh one (the refresher bounds the tries).
            refresher.refresh(after: refresher.current) { [weak self] result in
                guard let self, !stopped else { return }
                switch result {
                case .success(let url):
                    decision.restart(at: url)
                    start()
                case .failure(let error):
                    delegate?.prober(self, didEndWith: .fail(error))
                }
            }
            return
        }
        tries += 1
        guard let delay = policy.retryDelay(after: tries, error, retryAfter: retryAfter) else {
            delegate?.prober(self, didEndWith: .fail(tries > 1 ? error.adding(" (after \(tries) tries)") : error))
            return
        }
        counters.retries += 1
        failing = (error, failing?.since ?? .now, .now + delay)
        logger.info("probe failed; retrying", metadata: ["error": "\(error)", "delay": "\(delay)"])
        retryTimer = loop.schedule(after: delay) { [weak self] in self?.start() }
    }
}
