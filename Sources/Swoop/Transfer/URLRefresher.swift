import Logging
import SwoopCurl

/// Fresh URLs for one download from ``DownloadRequest/urlProvider``: one call at a time, shared
/// by every request that was refused meanwhile (no stampede), bounded by
/// ``Downloader/Configuration/RetryPolicy/maxURLRefreshes`` in a row without progress and by
/// ``Downloader/Configuration/RetryPolicy/urlRefreshTimeout`` per call. Transfer thread only;
/// the provider runs in a task and its answer hops back with ``TransferLoop/execute(_:)``.
///
/// `@unchecked Sendable`: only a weak reference crosses to that task, and it is used only inside
/// the closure `execute` runs on the transfer thread, where all the state lives.
final class URLRefresher: @unchecked Sendable {
    typealias Provider = @Sendable (String) async throws -> String

    private let provider: Provider
    private let loop: TransferLoop
    private let maxTries: Int
    private let timeout: Duration
    private let logger: Logger
    /// The download's URLs, where a fresh one is recorded for everything else to read.
    private let sources: SourceSet
    /// The newest URL of the first source: the request's, then each the provider gave.
    var current: RemoteURL { sources.first.current }
    /// Calls of the provider so far.
    private(set) var refreshes = 0
    /// Refreshes since a byte last arrived.
    private var triesWithoutProgress = 0
    private var waiters: [(Result<RemoteURL, DownloadError>) -> Void] = []
    private var call: Task<Void, Never>?
    private var timer: LoopTimer?
    private var stopped = false

    init(
        provider: @escaping Provider, sources: SourceSet, configuration: Downloader.Configuration,
        loop: TransferLoop, logger: Logger
    ) {
        self.provider = provider
        self.sources = sources
        self.loop = loop
        self.maxTries = max(1, configuration.retry.maxURLRefreshes)
        self.timeout = configuration.retry.urlRefreshTimeout
        self.logger = logger
    }

    /// A provider call is under way.
    var isRefreshing: Bool { !waiters.isEmpty }

    /// Bytes arrived from the current URL: it works, the count of tries starts again.
    func noteProgress() { triesWithoutProgress = 0 }

    /// A request to `refused` was refused. Answers with a newer URL at once if there is one
    /// already, else joins the call under way or starts one.
    func refresh(after refused: RemoteURL, _ done: @escaping (Result<RemoteURL, DownloadError>) -> Void) {
        guard !stopped else { return }
        if refused != current && !isRefreshing {
            done(.success(current))
            return
        }
        waiters.append(done)
        if waiters.count == 1 { startCall() }
    }

    /// The URL the provider gave cannot be used (refused again, or not the same object): counts
    /// as a failed try, and asks again while tries remain.
    func reject(_ url: RemoteURL, because reason: String, _ done: @escaping (Result<RemoteURL, DownloadError>) -> Void)
    {
        logger.warning("the refreshed URL cannot be used: \(reason)", metadata: ["url": "\(url.redacted)"])
        refresh(after: url, done)
    }

    func stop() {
        stopped = true
        call?.cancel()
        timer?.cancel()
        waiters.removeAll()
    }

    private func startCall() {
        triesWithoutProgress += 1
        guard triesWithoutProgress <= maxTries else {
            finish(
                .failure(
                    DownloadError(
                        .urlRefreshFailed,
                        "\(current.redacted) was refused \(Wording.count(maxTries, "time")) in a row after a fresh URL "
                            + "each time",
                        remedy: .checkURLProvider)))
            return
        }
        refreshes += 1
        let provider = provider, loop = loop, old = current.absoluteString, attempt = refreshes
        logger.info(
            "the URL was refused; asking for a fresh one",
            metadata: ["url": "\(current.redacted)", "refresh": "\(attempt)"])
        timer = loop.schedule(after: timeout) { [weak self] in
            self?.answered(
                attempt,
                .failure(
                    DownloadError(
                        .urlRefreshFailed, "the URL refresh did not answer within \(self?.timeout ?? .zero)",
                        remedy: .checkURLProvider)))
        }
        call = Task {
            let result: Result<RemoteURL, DownloadError>
            do {
                let fresh = try await provider(old)
                do throws(DownloadError) {
                    result = .success(try RemoteURL(fresh))
                } catch {
                    // Not the parser's words: they quote the URL, signature included.
                    let shown = RemoteURL.printable(RemoteURL.strippingQuery(fresh))
                    result = .failure(
                        DownloadError(
                            .urlRefreshFailed,
                            "the URL refresh gave an unusable URL '\(shown)' (an absolute http or https URL is needed)",
                            remedy: .checkURLProvider))
                }
            } catch {
                result = .failure(
                    DownloadError(.urlRefreshFailed, "the URL refresh failed: \(error)", remedy: .checkURLProvider))
            }
            loop.execute { [weak self] in self?.answered(attempt, result) }
        }
    }

    /// The provider's answer (or the timeout) for call number `attempt`.
    private func answered(_ attempt: Int, _ result: Result<RemoteURL, DownloadError>) {
        guard !stopped, attempt == refreshes, isRefreshing else { return }
        timer?.cancel()
        call = nil
        switch result {
        case .success(let url):
            sources.refreshed(url)
            logger.info("fresh URL", metadata: ["url": "\(url.redacted)"])
            finish(result)
        case .failure(let error) where triesWithoutProgress < maxTries:
            logger.warning("\(error.reason); asking again")
            startCall()
        case .failure(let error):
            finish(.failure(error.gaveUp(after: triesWithoutProgress)))
        }
    }

    private func finish(_ result: Result<RemoteURL, DownloadError>) {
        let waiting = waiters
        waiters.removeAll()
        for done in waiting { done(result) }
    }
}
