import SwoopCurl

/// One small document fetched whole on the transfer thread, an S3 listing page: a GET on a
/// ``Connection`` (its permit, its exchange, the body kept in memory up to `limit` bytes by a
/// ``DocumentResponse``), signed and read by the request's service like every request of a
/// download. Failed tries are sent again as its ``RetryTimer`` says, and its host's turn is taken
/// like a probe's (``HostTurn``): it waits for a host that is down, and what it learns of the host
/// counts for every download.
final class DocumentFetch: ConnectionDelegate, HostWatcher {
    private let url: RemoteURL
    private let headers: RequestHeaders
    private let options: TransferOptions
    private let policy: FailurePolicy
    private let loop: TransferLoop
    private let limit: Int
    private var completion: ((Result<[UInt8], DownloadError>) -> Void)?
    private let connection: Connection
    private var retry = RetryTimer()
    private var turn = HostTurn()

    init(
        url: RemoteURL, headers: RequestHeaders, options: TransferOptions, policy: FailurePolicy, loop: TransferLoop,
        limit: Int, completion: @escaping (Result<[UInt8], DownloadError>) -> Void
    ) {
        self.url = url
        self.headers = headers
        self.options = options
        self.policy = policy
        self.loop = loop
        self.limit = limit
        self.completion = completion
        self.connection = Connection(id: 0, loop: loop, delegate: nil)
        connection.delegate = self
    }

    /// Sends the request once its host may take it and a connection permit is free.
    func start() {
        guard completion != nil, !connection.isBusy else { return }
        let send = { [weak self] in self?.start() ?? () }
        guard turn.mayAsk(url, loop: loop, watcher: self, retry: &retry, send: send) else { return }
        guard connection.acquirePermit(for: url, owner: self, retry: send) else { return }
        turn.willSend(by: connection.token)
        connection.begin(
            .document(limit: limit), url: url, request: headers.request(for: url, range: nil, options: options))
    }

    func hostMayTakeRequests() {
        guard turn.isHeld else { return }
        start()
    }

    /// Stops; the completion hears ``DownloadError/Kind/cancelled``.
    func cancel() {
        retry.cancel()
        loop.budget.cancelWait(self)
        turn.leave(self)
        if connection.isBusy { turn.abandon(by: connection.token) }
        connection.cancel()
        finish(.failure(DownloadError(.cancelled, "the request for \(url.redacted) was cancelled")))
    }

    private func finish(_ result: Result<[UInt8], DownloadError>) {
        let completion = self.completion
        self.completion = nil
        completion?(result)
    }

    func connection(_ connection: Connection, didFinish job: Connection.Job, with outcome: Connection.Outcome) {
        guard completion != nil else { return }
        switch outcome {
        case .completed:
            turn.answered(sentAt: connection.sentAt)
            finish(.success(connection.takeDocument()))
        case .stopped, .cancelled:
            turn.abandon(by: connection.token)
        case .failed(let error, let retryAfter):
            let answered = connection.wasAnswered
            if answered, FailurePolicy.scope(of: error, answered: true) != .server {
                turn.answered(sentAt: connection.sentAt)
            }
            turn.failed(error, answered: answered, retryAfter: retryAfter, policy: policy, by: connection.token)
            if let final = turn.final(error) { return finish(.failure(final)) }
            let send = { [weak self] in self?.start() ?? () }
            if let final = retry.failed(error, retryAfter: retryAfter, policy: policy, on: loop, send: send) {
                finish(.failure(final))
            }
        }
    }
}

extension DocumentFetch: LoopJob {
    /// Fetches `url` whole, from any task: the request runs on `loop`, and cancelling the task
    /// cancels it.
    static func fetch(
        _ url: RemoteURL, headers: RequestHeaders, options: TransferOptions, policy: FailurePolicy,
        loop: TransferLoop, limit: Int
    ) async -> Result<[UInt8], DownloadError> {
        await loop.result(
            of: { completion in
                DocumentFetch(
                    url: url, headers: headers, options: options, policy: policy, loop: loop, limit: limit,
                    completion: completion)
            }, shutDown: .failure(DownloadError(.cancelled, "the downloader was shut down")))
    }
}
