import Logging
import SwoopStore
import SwoopCurl

/// Hears how the probe ends.
protocol ProberDelegate: AnyObject {
    /// The probe's response carries the object's first bytes (``ProbeDecision/Step/ranged(_:firstRange:)``
    /// or ``ProbeDecision/Step/stream(_:discardsPartial:)``): the transfer takes `connection` over.
    /// Called after the head's callback, never inside libcurl's, with the body held back
    /// (``Connection/holdBody()``): take the connection now (`.now`: the prober lets the body go
    /// on), or once the sink has opened on the disk queue, with ``Prober/completeHandover()``, then
    /// let the body go (``Connection/releaseBody()``; `.whenSinkOpens`). Throwing fails the probe.
    func prober(
        _ prober: Prober, beginTransfer step: ProbeDecision.Step, on connection: Connection
    ) throws(DownloadError) -> Prober.Handover
    /// The probe ended without a transfer: already complete, nothing left to fetch, an empty
    /// object, a restart, or a failure (after the retries it allows). A ``Prober/Purpose/headOnly``
    /// probe always ends here, `ranged` and `stream` included.
    func prober(_ prober: Prober, didEndWith step: ProbeDecision.Step)
    /// Whether the response whose head decided `step` (``ProbeDecision/Step/ranged(_:first:)``)
    /// is kept whole in memory instead of handed over: a small object that arrives whole in it.
    /// Asked inside the head's callback.
    func prober(_ prober: Prober, takesWhole step: ProbeDecision.Step) -> Bool
    /// The response kept whole (``prober(_:takesWhole:)``) ended with `outcome`, its head having
    /// arrived at `since`: its bytes are ``Connection/takeWhole()``'s. The delegate finishes the
    /// object, or starts the transfer on `connection` with them as its first response's.
    func prober(
        _ prober: Prober, tookWhole step: ProbeDecision.Step, outcome: Connection.Outcome, on connection: Connection,
        since: Moment)
}

extension ProberDelegate {
    func prober(_ prober: Prober, takesWhole step: ProbeDecision.Step) -> Bool { false }
    func prober(
        _ prober: Prober, tookWhole step: ProbeDecision.Step, outcome: Connection.Outcome, on connection: Connection,
        since: Moment
    ) {}
}

/// The probe stage: the download's first request (a ``ProbeExchange``: redirects, retries), and
/// what its head means for the download: a transfer that takes its connection over, or an end
/// (already complete, nothing left, empty, a restart, a failure). Its ``ProbeMachine`` (pure, in
/// the core) decides; the prober performs. Transfer thread only.
final class Prober: ProbeExchangeDelegate {
    /// What the probe is for: a download's first request, whose response becomes the transfer's
    /// first segment or stream, or only the final response head (``ObjectLookup``: one byte
    /// asked for, the probe ends with the step that head decided, without a transfer).
    typealias Purpose = ProbeMachine.Purpose

    var purpose: Purpose { machine.purpose }
    private var machine: ProbeMachine
    private let exchange: ProbeExchange
    private let counters: DownloadCounters
    private let logger: Logger
    /// Fresh URLs when the URL in use is refused (``DownloadRequest/urlProvider``).
    private let refresher: URLRefresher?
    weak var delegate: (any ProberDelegate)?
    /// The last response head received: the one that decided the step the probe ends with.
    private(set) var lastHead: ResponseHead?
    /// How long that head took to arrive (connecting, the request's round trip).
    private(set) var lastTiming: ResponseTiming?
    /// When the head of the response kept whole arrived.
    private var keptWholeSince: Moment?

    /// When the transfer takes the probe's connection over.
    enum Handover {
        /// At once, when it is asked to.
        case now
        /// Once the sink has opened (``completeHandover()``); its body waits meanwhile.
        case whenSinkOpens
    }
    private let loop: TransferLoop
    /// How far the first request reaches.
    private let probeSize: Int64

    init(
        url: RemoteURL, basis: ProbeBasis, headers: RequestHeaders,
        settings: ExchangeSettings, loop: TransferLoop, counters: DownloadCounters, logger: Logger,
        purpose: Purpose = .download, refresher: URLRefresher? = nil, expectedSize: Int64? = nil
    ) {
        let configuration = settings.configuration
        self.machine = ProbeMachine(purpose: purpose)
        self.refresher = refresher
        self.counters = counters
        self.logger = logger
        self.loop = loop
        let probeSize =
            switch purpose {
            case .download: ProbeDecision.probeSize(minimumSegmentSize: configuration.tuning.minimumSegmentSize)
            case .headOnly: Int64(1)
            }
        let decision = ProbeDecision(
            url: url, originalURL: headers.originalURL, basis: basis, redirects: 0,
            maxRedirects: configuration.redirect.maxRedirects, expectedSize: expectedSize,
            resolve: RemoteURL.resolve)
        self.probeSize = probeSize
        exchange = ProbeExchange(
            decision: decision, headers: headers, options: settings.probeOptions, policy: settings.failures,
            connectionID: 0, loop: loop)
        exchange.delegate = self
    }

    /// The headers the probe sent, as its redirects left them (the transfer sends the same).
    var headers: RequestHeaders { exchange.headers }

    /// What the probe's answers showed of the validators held: a pool, proven (the transfer
    /// starts from it), or nothing yet.
    var validatorWatch: ValidatorWatch { exchange.decision.watch.isPool ? .provenPool : ValidatorWatch() }

    /// Sends the probe (once a connection permit is free); after `delay` when the download
    /// starts over from a failure (``ProbeExchange/start(after:failing:)``).
    func start(after delay: (Duration, failing: DownloadError)? = nil) {
        if let (delay, error) = delay { exchange.start(after: delay, failing: error) } else { exchange.start() }
    }

    /// What the probe waits for while no request is in flight (`nil`: one is).
    var idle: IdleWait? {
        guard machine.phase != .handedOver, refresher?.isRefreshing != true else { return nil }
        return exchange.idle
    }

    /// The server the probe waits for between tries (for progress).
    var waiting: DownloadProgress.Wait? {
        machine.phase == .handedOver ? nil : exchange.waiting
    }

    /// How a handover the sink's opening waited for went (``ProbeMachine/DelayedHandover``: an
    /// exchange that ended whole is reported to the transfer with ``Connection/reportEndedExchange()``).
    typealias DelayedHandover = ProbeMachine.DelayedHandover

    /// The sink has opened: the transfer takes the connection over now, unless its exchange
    /// ended meanwhile other than whole.
    func completeHandover() -> DelayedHandover {
        machine.sinkOpened(exchangeBusy: exchange.isBusy, endedWhole: exchange.connection.endedWhole)
    }

    /// Stops probing: cancels the probe in flight (unless it became the transfer) and any retry.
    func stop() {
        exchange.stop(keepingExchange: machine.phase == .handedOver)
    }

    // MARK: ProbeExchangeDelegate

    func nextRequest(
        of exchange: ProbeExchange
    ) -> (
        range: RequestedRange?, precondition: (name: String, value: String)?,
        job: Connection.Job
    ) {
        let (range, precondition) = ProbeDecision.request(for: exchange.decision.basis, probeSize: probeSize)
        // Without Range, a 200's bytes start at 0: judged as an answer to "from byte 0".
        if machine.withoutRange { return (nil, precondition, .probe(.from(0))) }
        return (range, precondition, .probe(range))
    }

    func probeExchangeWillSend(_ exchange: ProbeExchange) {
        counters.willSend(busy: 1)
    }

    func probeExchange(
        _ exchange: ProbeExchange, decided step: ProbeDecision.Step, head: ResponseHead,
        body: BodyDisposition
    ) -> BodyDisposition {
        lastHead = head
        lastTiming = exchange.connection.exchange?.timing()
        let takesWhole = purpose == .download && delegate?.prober(self, takesWhole: step) == true
        switch machine.head(decided: step, takesWhole: takesWhole) {
        case .discard:
            // One byte: read it, and the connection stays open for the download that follows.
            return .discard
        case .abort:
            return .abort
        case .collect(let range):
            // The bytes to compare with those held: kept in memory, then judged as it ends.
            exchange.connection.collect(range)
            return .deliver
        case .handOver:
            // The head is the probe's result: the transfer takes the connection over once this
            // callback has returned, and its body waits in libcurl (TCP holds the server back).
            exchange.connection.holdBody()
            loop.afterCallbacks { [weak self] in self?.handOver(step) }
            return body
        case .takeWhole:
            // The whole object follows: kept in memory, and judged as it ends.
            guard case .ranged(_, let first) = step else { return .abort }
            exchange.connection.keepWhole(first.sent)
            keptWholeSince = .now
            return .deliver
        case .asDecided:
            return body
        }
    }

    /// The bytes of the response kept whole so far (for progress).
    var bytesKept: Int64 { machine.phase == .takingWhole ? exchange.connection.bytesKept : 0 }

    /// The response kept whole delivered its body: its host serves (the probe's exchange is
    /// otherwise the transfer's to report).
    func deliveredWhole() {
        exchange.delivered()
    }

    /// The probe's head decided `step`, a transfer: its delegate takes the connection over, and
    /// its body goes on to the transfer. If the transfer cannot start, the body goes on to the
    /// probe's own response, which stops at its first byte: the probe ends with the failure. A
    /// response without a body may have ended already: the transfer hears how, as its own.
    private func handOver(_ step: ProbeDecision.Step) {
        guard machine.phase == .handingOver, !exchange.stopped else { return }
        let connection = exchange.connection
        let ended = !exchange.isBusy
        let handover: ProbeMachine.Handover
        do throws(DownloadError) {
            switch try delegate?.prober(self, beginTransfer: step, on: connection) {
            case .whenSinkOpens: handover = .whenSinkOpens
            case .now, nil: handover = .now
            }
        } catch {
            handover = .refused(error)
        }
        switch machine.handoverBegan(handover, exchangeEnded: ended) {
        case .wait: return
        case .fail(let error): return failed(error, retryAfter: nil)
        case .letGo: if ended { connection.reportEndedExchange() } else { connection.releaseBody() }
        }
    }

    func probeExchange(_ exchange: ProbeExchange, ended step: ProbeDecision.Step?, outcome: Connection.Outcome) {
        var failure: (error: DownloadError, retryAfter: Int?)?
        if case .failed(let error, let retryAfter) = outcome { failure = (error, retryAfter) }
        switch machine.ended(step: step, failure: failure, url: "\(exchange.decision.url)") {
        case .nothing:
            return
        case .end(let step):
            delegate?.prober(self, didEndWith: step)
        case .compare(let found, let range):
            let bytes = exchange.connection.takeSample()
            delegate?.prober(self, didEndWith: exchange.decision.confirmed(bytes, at: range, found: found))
        case .askWithoutRange:
            logger.info("the server refused the range (416); asking for the object without Range")
            exchange.start()
        case .askAgain(let why):
            // A change, or a pool's other node: a few answers on new connections tell.
            logger.info("\(why); asking again on a new connection (a change, or a pool's other node)")
            exchange.connection.wantsFreshConnection = true
            exchange.start()
        case .failed(let error, let retryAfter):
            failed(error, retryAfter: retryAfter)
        case .tookWhole:
            guard let step else {
                return delegate?.prober(self, didEndWith: .fail(.invalidResponse("internal: a response kept whole")))
                    ?? ()
            }
            delegate?.prober(
                self, tookWhole: step, outcome: outcome, on: exchange.connection, since: keptWholeSince ?? .now)
        }
    }

    /// A failed probe: what the machine makes of it (a restart when the object changed, a fresh URL
    /// when it expired, else another try after a backoff, or the end), performed.
    private func failed(_ error: DownloadError, retryAfter: Int?) {
        let expired = refresher != nil && URLExpiry.isRefusal(error, url: exchange.decision.url, now: URLExpiry.now)
        switch machine.failed(error, urlExpired: expired) {
        case .restart(let message):
            delegate?.prober(self, didEndWith: .restart(message))
        case .refreshURL:
            // A presigned URL that expired (`expired` says so only with a refresher): probe a fresh
            // one (the refresher bounds the tries).
            guard let refresher else { return delegate?.prober(self, didEndWith: .fail(error)) ?? () }
            refresher.refresh(after: refresher.current) { [weak self] result in
                guard let self, !exchange.stopped else { return }
                switch result {
                case .success(let url):
                    exchange.decision.restart(at: url)
                    exchange.start()
                case .failure(let error):
                    delegate?.prober(self, didEndWith: .fail(error))
                }
            }
        case .retryOrGiveUp:
            if let final = exchange.retryOrGiveUp(error, retryAfter: retryAfter) {
                delegate?.prober(self, didEndWith: .fail(final))
                return
            }
            counters.retries += 1
            logger.info("probe failed; retrying", metadata: ["error": "\(error)"])
        }
    }
}
