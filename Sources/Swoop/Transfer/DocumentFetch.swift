import SwoopCurl

/// One small document fetched whole on the transfer thread, an S3 listing page: a GET with a
/// connection permit, signed and read by the request's service like every request of a download,
/// its body kept in memory up to `limit` bytes, and failed tries sent again on the
/// ``FailurePolicy``'s backoff. No redirects: a store that moves a listing is answered with an error.
final class DocumentFetch: ExchangeDelegate {
    private let url: RemoteURL
    private let headers: RequestHeaders
    private let options: TransferOptions
    private let policy: FailurePolicy
    private let loop: TransferLoop
    private let limit: Int
    private var completion: ((Result<[UInt8], DownloadError>) -> Void)?
    private var exchange: HTTPExchange?
    private var permitHost: String?
    private var body: [UInt8] = []
    private var failure: DownloadError?
    private var retryAfter: Int?
    private var tries = 0
    private var timer: LoopTimer?

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
    }

    /// Sends the request once a connection permit is free.
    func start() {
        guard completion != nil, exchange == nil else { return }
        let host = "\(url.host):\(url.port)"
        guard loop.budget.acquire(host: host) else {
            let loop = self.loop
            loop.budget.wait(self) { loop.afterCallbacks { [weak self] in self?.start() } }
            return
        }
        permitHost = host
        body = []
        failure = nil
        retryAfter = nil
        let exchange = HTTPExchange(headers.request(for: url, range: nil, options: options), delegate: self)
        self.exchange = exchange
        loop.start(exchange)
    }

    /// Stops; the completion hears ``DownloadError/Kind/cancelled``.
    func cancel() {
        timer?.cancel()
        loop.budget.cancelWait(self)
        if let exchange { loop.cancel(exchange) }
        finish(.failure(DownloadError(.cancelled, "the request for \(url.redacted) was cancelled")))
    }

    private func finish(_ result: Result<[UInt8], DownloadError>) {
        let completion = self.completion
        self.completion = nil
        completion?(result)
    }

    func exchange(_ exchange: HTTPExchange, didReceiveHead head: ResponseHead) -> BodyDisposition {
        retryAfter = head.retryAfterSeconds
        if head.status != 200 {
            failure = .httpStatus(head, url: url.redacted, firstContact: false)
        }
        return .deliver
    }

    func exchange(_ exchange: HTTPExchange, didReceive body: UnsafeRawBufferPointer) -> BodyVerdict {
        self.body.append(contentsOf: body.prefix(limit + 1 - self.body.count))
        guard self.body.count <= limit else {
            if failure == nil {
                failure = .invalidResponse("the response from \(url.redacted) is larger than \(limit) bytes")
            }
            return .stop
        }
        return .take
    }

    func exchange(_ exchange: HTTPExchange, didCompleteWith outcome: ExchangeOutcome) {
        guard exchange === self.exchange else { return }
        self.exchange = nil
        if let host = permitHost {
            permitHost = nil
            loop.budget.release(host: host)
        }
        guard completion != nil else { return }
        let result: Result<[UInt8], DownloadError>
        if let failure {
            let read = exchange.request.service.map { $0.interpret(failure, body: body) } ?? failure
            result = .failure(read)
        } else if case .failed(let transport) = outcome {
            result = .failure(.transport(transport, url: url.redacted, beforeAnyResponse: tries == 0))
        } else {
            result = .success(body)
        }
        if case .failure(let error) = result {
            tries += 1
            if let delay = policy.retryDelay(after: tries, error, retryAfter: retryAfter) {
                timer = loop.schedule(after: delay) { [weak self] in self?.start() }
                return
            }
        }
        finish(result.mapError { tries > 1 ? $0.adding(" (after \(tries) tries)") : $0 })
    }
}

extension DocumentFetch {
    /// Fetches `url` whole, from any task: the request runs on `loop`, and cancelling the task
    /// cancels it.
    static func fetch(
        _ url: RemoteURL, headers: RequestHeaders, options: TransferOptions, policy: FailurePolicy,
        loop: TransferLoop, limit: Int
    ) async -> Result<[UInt8], DownloadError> {
        let slot = Slot()
        return await withTaskCancellationHandler {
            await withCheckedContinuation {
                (continuation: CheckedContinuation<Result<[UInt8], DownloadError>, Never>) in
                let accepted = loop.execute {
                    let fetch = DocumentFetch(
                        url: url, headers: headers, options: options, policy: policy, loop: loop, limit: limit
                    ) { result in
                        slot.fetch = nil
                        continuation.resume(returning: result)
                    }
                    slot.fetch = fetch
                    fetch.start()
                }
                if !accepted {
                    continuation.resume(returning: .failure(DownloadError(.cancelled, "the downloader was shut down")))
                }
            }
        } onCancel: {
            _ = loop.execute { slot.fetch?.cancel() }
        }
    }

    /// The fetch in flight, for a cancellation to reach. `@unchecked Sendable`: `fetch` is touched
    /// only on the transfer thread.
    private final class Slot: @unchecked Sendable {
        var fetch: DocumentFetch?
    }
}
