import Logging
import SwoopCurl

/// Says what a ``ProbeExchange`` asks for, and hears what its responses decided.
protocol ProbeExchangeDelegate: AnyObject {
    /// The next request: its range and precondition, and the job its bytes do.
    func nextRequest(
        of exchange: ProbeExchange
    ) -> (
        range: RequestedRange?, precondition: (name: String, value: String)?,
        job: Connection.Job
    )
    /// A request is being sent (the download counts it).
    func probeExchangeWillSend(_ exchange: ProbeExchange)
    /// A head decided `step` (not a redirect, which the exchange follows itself): what becomes of
    /// its body. The delegate may take the connection over here (``ProbeExchange/connection``).
    func probeExchange(
        _ exchange: ProbeExchange, decided step: ProbeDecision.Step, head: ResponseHead,
        body: BodyDisposition
    ) -> BodyDisposition
    /// The exchange of `step` ended with `outcome`; `step` is `nil` when no head arrived.
    func probeExchange(_ exchange: ProbeExchange, ended step: ProbeDecision.Step?, outcome: Connection.Outcome)
}

/// One URL's first request, as the download's probe, a mirror's check and a name lookup all send
/// it: a connection permit, the request, the head judged by ``ProbeDecision``, redirects followed
/// (with credentials kept to their origin), and failed requests tried again on the
/// ``FailurePolicy``'s backoff. Its host's health is the downloader's (``HostTable``): a request
/// to a host that is down waits until it may be the one trial, whichever download sends it, and
/// its answers and failures count for every download of that host. What a head means for the
/// download is its delegate's to act on. Transfer thread only.
final class ProbeExchange: ConnectionDelegate, HostWatcher {
    private let loop: TransferLoop
    private let options: TransferOptions
    private let policy: FailurePolicy
    let connection: Connection
    /// The decision's inputs: the URL so far, redirects so far, what is on disk.
    var decision: ProbeDecision
    /// The headers to send, and whether a redirect left the original origin.
    private(set) var headers: RequestHeaders
    /// What the last head decided and its `Retry-After`, acted on when its exchange ends.
    private var pending: (step: ProbeDecision.Step, retryAfter: Int?)?
    private var retry = RetryTimer()
    /// The host asked last, whose health the downloader's downloads share.
    private var turn = HostTurn()
    private(set) var stopped = false
    weak var delegate: (any ProbeExchangeDelegate)?

    init(
        decision: ProbeDecision, headers: RequestHeaders, options: TransferOptions, policy: FailurePolicy,
        connectionID: Int, loop: TransferLoop
    ) {
        self.decision = decision
        self.headers = headers
        self.options = options
        self.policy = policy
        self.loop = loop
        self.connection = Connection(id: connectionID, loop: loop, delegate: nil)
        connection.delegate = self
    }

    /// Sends the request to the current URL (once a connection permit is free).
    func start() {
        guard !stopped else { return }
        let url = decision.url
        let send = { [weak self] in self?.start() ?? () }
        guard turn.mayAsk(url, loop: loop, watcher: self, retry: &retry, send: send) else { return }
        guard let (range, precondition, job) = delegate?.nextRequest(of: self) else { return }
        guard connection.acquirePermit(for: url, owner: self, retry: send) else { return }
        pending = nil
        turn.willSend(by: connection.token)
        let request = headers.request(for: url, precondition: precondition, range: range, options: options)
        connection.begin(job, url: url, request: request)
        delegate?.probeExchangeWillSend(self)
    }

    /// Sends the request once `delay` has passed, after `error`: a failed try of this exchange, or
    /// a download starting over (a single stream that broke off). Meanwhile ``idle`` and
    /// ``waiting`` say what it waits for, since when it has been failing and until when.
    func start(after delay: Duration, failing error: DownloadError) {
        guard !stopped else { return }
        retry.wait(delay, failing: error, on: loop) { [weak self] in self?.start() }
    }

    func hostMayTakeRequests() {
        guard turn.isHeld, !stopped else { return }
        start()
    }

    /// Stops: cancels a retry and, unless `keepingExchange` (it went on to the transfer), the request.
    func stop(keepingExchange: Bool = false) {
        stopped = true
        retry.cancel()
        loop.budget.cancelWait(self)
        turn.leave(self)
        if !keepingExchange {
            if connection.isBusy { turn.abandon(by: connection.token) }
            connection.cancel()
        }
    }

    /// The response kept whole delivered its body: its host serves, and the request is no longer
    /// its trial (what a transfer tells the host of a response that completed).
    func delivered() {
        turn.delivered(by: connection.token)
    }

    /// Whether a request is in flight.
    var isBusy: Bool { connection.isBusy }

    /// What the exchange waits for while no request is in flight (`nil`: one is).
    var idle: IdleWait? {
        guard !connection.isBusy else { return nil }
        if turn.isHeld { return .outage }
        if retry.isWaiting { return .retry }
        if loop.budget.isWaiting(self) { return .permit }
        return .nothing
    }

    /// The server waited for between tries (for progress).
    var waiting: DownloadProgress.Wait? {
        let now = Moment.now
        if turn.isHeld, let outage = turn.host?.health.outage {
            return DownloadProgress.Wait(
                server: "\(decision.url.host):\(decision.url.port)", cause: outage.lastFailure,
                duration: now - outage.since, nextTry: outage.trialInFlight ? nil : max(.zero, outage.nextTrial - now),
                limit: policy.maxOutage)
        }
        guard let failing = retry.retries.failing else { return nil }
        let waitsForTimer = retry.isWaiting
        return DownloadProgress.Wait(
            server: "\(decision.url.host):\(decision.url.port)", cause: failing.error.shortCause,
            duration: now - failing.since, nextTry: waitsForTimer ? max(.zero, failing.nextTry - now) : nil, limit: nil)
    }

    /// Tries the request again after the policy's backoff, or returns the failure to give up
    /// with (``RequestRetries``).
    func retryOrGiveUp(_ error: DownloadError, retryAfter: Int?) -> DownloadError? {
        if let final = turn.final(error) { return final }
        return retry.failed(error, retryAfter: retryAfter, policy: policy, on: loop) { [weak self] in self?.start() }
    }

    // MARK: ConnectionDelegate

    func connection(
        _ connection: Connection, didReceiveProbeHead head: ResponseHead, requested: RequestedRange
    ) -> BodyDisposition {
        let (step, body) = decision.decide(head, requested: requested)
        pending = (step, head.retryAfterSeconds)
        if case .fail(let error) = step, FailurePolicy.scope(of: error, answered: true) == .server {
            // "Not now" (a 5xx, 429): counted as the request's failure when it ends.
        } else {
            turn.answered(sentAt: connection.sentAt)
        }
        if case .redirect = step { return body }
        return delegate?.probeExchange(self, decided: step, head: head, body: body) ?? .abort
    }

    func connection(_ connection: Connection, didFinish job: Connection.Job, with outcome: Connection.Outcome) {
        guard !stopped else { return }
        let decided = pending
        pending = nil
        if case .cancelled = outcome {
            turn.abandon(by: connection.token)
            return  // only a stop cancels a probe
        }
        if case .whole = job {
            // The transfer hears a troubled end as its first response's, and tells the host then.
            return delegate?.probeExchange(self, ended: decided?.step, outcome: outcome) ?? ()
        }
        if case .redirect(let next)? = decided?.step {
            // A redirect whose body broke off is a failed try; a whole one is followed.
            if case .failed = outcome { return delegate?.probeExchange(self, ended: nil, outcome: outcome) ?? () }
            headers.follow(to: next)
            decision.followed(to: next)
            return start()
        }
        let ended =
            decided.map { decided in
                // A head's own failure (a 5xx, a bad head) is the exchange's failure, with its Retry-After.
                if case .fail(let error) = decided.step {
                    return .failed(connection.interpreted(error), retryAfter: decided.retryAfter)
                }
                return outcome
            } ?? outcome
        if case .failed(let error, let retryAfter) = ended {
            // What it says of its host, for every download that uses the host.
            turn.failed(
                error, answered: connection.wasAnswered, retryAfter: retryAfter, policy: policy, by: connection.token)
        }
        delegate?.probeExchange(self, ended: decided?.step, outcome: ended)
    }
}
