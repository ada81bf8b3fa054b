import Logging
import SwoopStore
import SwoopCurl
import Synchronization

/// Asks the server about an object before a download starts: what it calls it (before a download
/// fixes its file name), and its size and validators (before the shares of a shared download
/// agree on them).
///
/// One head-only probe (`Range: bytes=0-0`, since presigned URLs often refuse `HEAD`) through
/// the same ``Prober`` a download uses, so redirects (http and https only), retries, the shared
/// connection budget and credentials that stay with their origin behave exactly as they will for
/// the download. The final response's `Content-Disposition` gives the name
/// (``ContentDisposition/safeFileName``).
///
/// `@unchecked Sendable`: `prober` is touched only on the transfer thread (in closures run by
/// ``TransferLoop/execute(_:)`` and in the prober's callbacks); `state` is a `Mutex`; the rest is
/// immutable.
final class ObjectLookup: ProberDelegate, @unchecked Sendable {
    /// What the final response showed.
    struct Found: Sendable {
        /// The server's name for the object, safe to create in a directory; `nil` when it gave
        /// none that is usable.
        var name: String?
        /// The object: its URL after redirects, size and validators (`nil`: a probe that ended
        /// without one, which a fresh probe does not).
        var object: RemoteObject?
    }
    typealias Outcome = Result<Found, DownloadError>

    private enum State {
        case idle
        case waiting(CheckedContinuation<Outcome, Never>)
        case finished(Outcome)
    }

    private let loop: TransferLoop
    private let url: RemoteURL
    private let headers: RequestHeaders
    private let settings: ExchangeSettings
    private let logger: Logger
    /// Whoever finishes first (the probe, ``stop(_:)``) decides the outcome; later ones are dropped.
    private let state = Mutex(State.idle)
    private var prober: Prober?

    init(
        url: RemoteURL, headers: RequestHeaders, configuration: Downloader.Configuration,
        loop: TransferLoop, logger: Logger
    ) {
        self.url = url
        self.headers = headers
        self.settings = ExchangeSettings(configuration)
        self.loop = loop
        self.logger = logger
    }

    /// Sends the probe and waits for its outcome (at once if ``stop(_:)`` came first).
    func run() async -> Outcome {
        await withCheckedContinuation { continuation in
            let early: Outcome? = state.withLock { state in
                if case .finished(let outcome) = state { return outcome }
                state = .waiting(continuation)
                return nil
            }
            if let early {
                continuation.resume(returning: early)
                return
            }
            if !loop.execute({ [self] in begin() }) {
                finish(.failure(DownloadError(.cancelled, "the downloader was shut down")))
            }
        }
    }

    /// Ends the lookup from any thread: ``run()`` returns `error`, and the probe in flight is
    /// cancelled.
    func stop(_ error: DownloadError) {
        finish(.failure(error))
        loop.execute { [self] in
            prober?.stop()
            prober = nil
        }
    }

    private func begin() {
        let isWaiting = state.withLock { state in
            if case .waiting = state { true } else { false }
        }
        guard isWaiting else { return }
        let prober = Prober(
            url: url, basis: .fresh, headers: headers,
            settings: settings, loop: loop, counters: DownloadCounters(), logger: logger, purpose: .headOnly)
        prober.delegate = self
        self.prober = prober
        prober.start()
    }

    private func finish(_ outcome: Outcome) {
        let waiter: CheckedContinuation<Outcome, Never>? = state.withLock { state in
            switch state {
            case .idle:
                state = .finished(outcome)
                return nil
            case .waiting(let continuation):
                state = .finished(outcome)
                return continuation
            case .finished:
                return nil
            }
        }
        waiter?.resume(returning: outcome)
    }

    // MARK: ProberDelegate

    func prober(
        _ prober: Prober, beginTransfer step: ProbeDecision.Step, on connection: Connection
    ) throws(DownloadError) -> Prober.Handover {
        // A head-only probe ends with its step instead; nothing is transferred.
        throw DownloadError(.cancelled, "an object lookup transfers nothing")
    }

    func prober(_ prober: Prober, didEndWith step: ProbeDecision.Step) {
        guard prober === self.prober else { return }
        self.prober = nil
        let name = { prober.lastHead?.value("content-disposition").flatMap(ContentDisposition.init)?.safeFileName }
        switch step {
        case .ranged(let object, _), .stream(let object, _), .empty(let object):
            finish(.success(Found(name: name(), object: object)))
        case .fail(let error):
            finish(.failure(error))
        case .redirect, .alreadyComplete, .finishResumed, .restart, .compareHeld, .withoutRange, .askAgain:
            // Not reached from a fresh basis: the prober follows redirects and confirmations itself.
            finish(.success(Found()))
        }
    }
}
