import CCurl
import SwoopCore

#if canImport(Glibc)
import Glibc
#endif

/// One HTTP GET as the rest of the library sees it: no curl types.
package struct ExchangeRequest: Sendable {
    package var url: String
    /// Header lines, "Name: value".
    package var headerLines: [String]
    /// Sent as a `Range` header.
    package var range: RequestedRange?
    package var options: TransferOptions
    /// Open a new connection rather than reuse an idle one (a connection slot's first request,
    /// so that N slots really are N connections).
    package var freshConnection = false
    /// A `.netrc` login may be sent (the request goes to the original origin; see
    /// ``RequestHeaders/mayCarryCredentials(to:)``).
    package var mayUseNetrc = false
    /// The service whose error responses this request's failures are read by (see ``ObjectService``).
    package var service: (any ObjectService)?
    /// `HOST:PORT:ADDRESS:PORT`: connect to that address instead of resolving the host (a source
    /// pinned to one of its host's addresses; see ``RemoteURL/connectTo``).
    package var connectTo: String?
}

/// What a delegate does with a piece of a response body.
package enum BodyVerdict {
    /// Took it all.
    case take
    /// Wants no more: the transfer stops.
    case stop
    /// Has no room now: the transfer pauses until resumed (an in-order stream's full window).
    case pause
}

/// How an exchange ended.
package enum ExchangeOutcome {
    /// The response was received completely.
    case completed
    /// The delegate stopped it (``BodyDisposition/abort`` or `false` from a body callback).
    case aborted
    /// ``TransferLoop/cancel(_:)`` removed it.
    case cancelled
    /// The transfer failed: connect, TLS, reset, timeout, or a malformed response.
    case failed(TransferFailure)
}

/// A libcurl failure, translated.
package struct TransferFailure: Sendable {
    package var curlCode: Int
    package var message: String
    package var isTLS: Bool
    package var isTimeout: Bool
    /// The server closed or reset the connection in the middle of the TLS handshake, without a
    /// TLS alert: a fault of the network or of a loaded server, not of the certificate or of the
    /// settings, and worth another try (wget and aria2 retry it; curl reports code 35).
    package var isHandshakeCut = false
    /// The connection could not be bound to the local interface or address asked for
    /// (`CURLE_INTERFACE_FAILED`): a setting to fix, not a fault to retry.
    package var isLocalInterface = false
    /// Name resolution failed or the server refused the connection: nobody is there.
    package var isUnreachable = false
    /// The proxy failed: it could not be resolved or connected to, its handshake failed, it
    /// refused the tunnel (a `CONNECT` answered with an error status, such as 407), or it
    /// answered a request itself (see ``proxyAnswer``).
    package var isProxy = false
    /// The proxy the request went through, when the failure is the proxy's (`nil` if the
    /// routing could not tell which one libcurl used).
    package var proxy: ProxyEndpoint?
    /// What the proxy answered itself, instead of the server.
    package var proxyAnswer: ProxyAnswer?
}

/// Receives an exchange's events on the transfer thread. Callbacks must not block.
package protocol ExchangeDelegate: AnyObject {
    func exchange(_ exchange: HTTPExchange, didReceiveHead head: ResponseHead) -> BodyDisposition
    /// Takes the bytes, stops the transfer, or pauses it (nothing taken: libcurl delivers the
    /// same bytes again after ``TransferLoop/resume(_:)``).
    func exchange(_ exchange: HTTPExchange, didReceive body: UnsafeRawBufferPointer) -> BodyVerdict
    func exchange(_ exchange: HTTPExchange, didCompleteWith outcome: ExchangeOutcome)
}

/// One request/response on a pooled easy handle, owned by the transfer thread.
///
/// The easy handle's `CURLOPT_PRIVATE`, `WRITEDATA` and `HEADERDATA` point at this object
/// (unretained); the loop keeps it alive from `start` until the completion callback.
///
/// Its state is kept without the runtime's exclusivity check (`@exclusivity(unchecked)`), which
/// libcurl's callbacks paid on every header line and body write (about 70 instructions an access,
/// a dozen accesses a small file): everything here is read and written on the transfer thread
/// alone, each access a plain read or assignment (or an addition) that calls out to nothing while
/// it lasts, so no two accesses can overlap.
package final class HTTPExchange {
    package let request: ExchangeRequest
    package private(set) weak var delegate: (any ExchangeDelegate)?
    @exclusivity(unchecked) package fileprivate(set) var easy: CurlEasy?
    /// The lists libcurl points at (the header lines, the pin), kept until the exchange ends.
    @exclusivity(unchecked) private var curlLists: [CurlHeaderList] = []
    @exclusivity(unchecked) private var errorBuffer = [CChar](repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)

    /// Only ``didReceiveHeaderLine(_:)`` touches it, and its parser calls out to nothing while it
    /// reads a line.
    @exclusivity(unchecked) private var head = ResponseHeadParser()
    @exclusivity(unchecked) private var disposition: BodyDisposition?
    @exclusivity(unchecked) private var stoppedByDelegate = false
    @exclusivity(unchecked) package private(set) var isCancelled = false
    /// The downloader's byte-rate cap, if it has one; it sees every body write first.
    @exclusivity(unchecked) package fileprivate(set) var limiter: RateLimiter?
    /// Paused by the ``RateLimiter`` until its bucket refills.
    @exclusivity(unchecked) package var isHeldBack = false
    /// Paused by its delegate (no room for the bytes) until ``TransferLoop/resume(_:)``.
    @exclusivity(unchecked) package fileprivate(set) var isPausedByDelegate = false
    /// The status a proxy answered the `CONNECT` for this request with; 0 without a tunnel
    /// (read from the easy handle before it is recycled).
    @exclusivity(unchecked) fileprivate var tunnelStatus = 0
    /// A proxy's reply to the `CONNECT`, if one came, and whether the server's response has begun.
    @exclusivity(unchecked) private var tunnelReply = TunnelReply()
    @exclusivity(unchecked) private var serverResponseBegun = false
    /// The proxy answered this request itself (a 407, or an error its `Proxy-Status` marks as
    /// its own): the transfer was stopped there, and fails with this.
    @exclusivity(unchecked) private var proxyRefusal: ProxyAnswer?

    /// Body bytes delivered to the delegate.
    @exclusivity(unchecked) package private(set) var bodyBytesDelivered: Int64 = 0
    /// When the request was handed to curl, and when its first body byte arrived.
    @exclusivity(unchecked) package private(set) var startedAt: Moment?
    @exclusivity(unchecked) package private(set) var firstByteAt: Moment?

    package init(_ request: ExchangeRequest, delegate: any ExchangeDelegate) {
        self.request = request
        self.delegate = delegate
    }

    /// Configures `easy` for this request. Returns a failure if curl rejected an option.
    fileprivate func configure(_ easy: CurlEasy) -> TransferFailure? {
        self.easy = easy
        let options = request.options
        let me = Unmanaged.passUnretained(self).toOpaque()
        easy.set(CURLOPT_URL, request.url)
        easy.set(CURLOPT_HTTPGET, true)
        easy.set(CURLOPT_NOSIGNAL, true)
        easy.set(CURLOPT_FOLLOWLOCATION, false)  // redirects are checked and followed by the prober
        easy.set(CURLOPT_PROTOCOLS_STR, "http,https")
        easy.set(CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_1_1))  // one stream per TCP connection
        easy.set(CURLOPT_SSL_VERIFYPEER, options.verifiesTLSCertificates)
        easy.set(CURLOPT_SSL_VERIFYHOST, options.verifiesTLSCertificates ? 2 : 0)
        // Only what a setting names: an option left unset keeps libcurl's built-in default
        // (a reset handle has it again). The proxy's CA options are left at their defaults.
        if let file = options.certificateAuthorities.file { easy.set(CURLOPT_CAINFO, file.path) }
        if let directory = options.certificateAuthorities.directory { easy.set(CURLOPT_CAPATH, directory.path) }
        easy.set(CURLOPT_CONNECTTIMEOUT_MS, options.connectTimeoutMilliseconds)
        if options.lowSpeedLimit > 0 {
            easy.set(CURLOPT_LOW_SPEED_LIMIT, options.lowSpeedLimit)
            easy.set(CURLOPT_LOW_SPEED_TIME, options.stallTimeoutSeconds)
        }
        easy.set(CURLOPT_BUFFERSIZE, options.receiveBufferSize)
        easy.set(CURLOPT_TCP_KEEPALIVE, true)
        easy.openSocketsCloseOnExec()
        // A proxy's reply to CONNECT comes to the header callback, which keeps it apart from the
        // response (see didReceiveHeaderLine): a refusal's reason and Proxy-Status are read there.
        easy.set(CURLOPT_SUPPRESS_CONNECT_HEADERS, false)
        if request.freshConnection { easy.set(CURLOPT_FRESH_CONNECT, true) }
        easy.set(CURLOPT_USERAGENT, options.userAgent)
        if let interface = options.localInterface { easy.set(CURLOPT_INTERFACE, interface) }
        configureAccess(easy)
        errorBuffer.withUnsafeMutableBytes { easy.set(CURLOPT_ERRORBUFFER, pointer: $0.baseAddress) }
        // The `Range` is libcurl's own header line, written from its option; the caller's lines are
        // most often ``RequestHeaders/usualLines``, sent from one list made once. libcurl looks for
        // each of its own headers among the caller's lines: two lines of a list made for each
        // request cost a small file about 2k instructions more.
        if let range = request.range { easy.set(CURLOPT_RANGE, range.spec) }
        let usual = request.headerLines == RequestHeaders.usualLines
        let list = usual ? CurlHeaderList.usual : CurlHeaderList(request.headerLines)
        curlLists = [list]
        easy.set(CURLOPT_HTTPHEADER, pointer: UnsafeMutableRawPointer(list.list))
        if let connectTo = request.connectTo {
            let pin = CurlHeaderList([connectTo])
            curlLists.append(pin)
            easy.set(CURLOPT_CONNECT_TO, pointer: UnsafeMutableRawPointer(pin.list))
        }
        easy.set(CURLOPT_HEADERFUNCTION, callback: exchangeHeaderCallback)
        easy.set(CURLOPT_HEADERDATA, pointer: me)
        easy.set(CURLOPT_WRITEFUNCTION, callback: exchangeWriteCallback)
        easy.set(CURLOPT_WRITEDATA, pointer: me)
        easy.set(CURLOPT_PRIVATE, pointer: me)
        if let (option, code) = easy.firstSetoptFailure {
            return TransferFailure(
                curlCode: Int(code.rawValue),
                message: "libcurl rejected option \(option.rawValue): \(code.message)",
                isTLS: false, isTimeout: false)
        }
        return nil
    }

    /// The proxy and the `.netrc` login. Without a proxy setting libcurl reads `http_proxy`,
    /// `https_proxy`, `all_proxy` and `no_proxy` itself, as curl does: nothing here may set
    /// `CURLOPT_PROXY` then, or the environment would be ignored.
    private func configureAccess(_ easy: CurlEasy) {
        let options = request.options
        switch options.proxy {
        case .fromEnvironment: break
        case .direct:
            // "" turns the environment's proxy off; with no proxy `no_proxy` says nothing, and an
            // empty list spares libcurl looking for it in the environment for every request.
            easy.set(CURLOPT_PROXY, "")
            easy.set(CURLOPT_NOPROXY, "")
        case .url(let url): easy.set(CURLOPT_PROXY, url.trimmingWhitespace)
        }
        if let noProxy = options.noProxy { easy.set(CURLOPT_NOPROXY, noProxy) }
        if request.mayUseNetrc {
            switch options.netrc {
            case .off: break
            case .defaultFile: easy.set(CURLOPT_NETRC, Int(CURL_NETRC_OPTIONAL.rawValue))
            case .file(let path):
                easy.set(CURLOPT_NETRC, Int(CURL_NETRC_OPTIONAL.rawValue))
                easy.set(CURLOPT_NETRC_FILE, path)
            }
        }
    }

    fileprivate func didReceiveHeaderLine(_ line: UnsafeRawBufferPointer) -> Bool {
        guard !isCancelled else { return false }
        if !serverResponseBegun {
            // libcurl's response code stays 0 until it has read the server's status line: the
            // lines before it are a proxy's reply to CONNECT, not the response.
            if (easy?.getLong(CURLINFO_RESPONSE_CODE) ?? 0) == 0 {
                tunnelReply.consume(line)
                return true
            }
            serverResponseBegun = true
        }
        guard let finished = head.consume(line) else { return true }
        if let answer = proxysOwnAnswer(finished) {
            proxyRefusal = answer
            return false
        }
        guard let delegate else { return false }
        let disposition = delegate.exchange(self, didReceiveHead: finished)
        self.disposition = disposition
        if disposition == .abort {
            stoppedByDelegate = true
            return false
        }
        return true
    }

    /// The head as the proxy's own answer, when a plain http request went to an HTTP proxy and the
    /// proxy answered it instead of the server (``ProxyAnswer/isOwnAnswer(status:proxyStatus:)``).
    private func proxysOwnAnswer(_ head: ResponseHead) -> ProxyAnswer? {
        guard head.status == 407 || head.status >= 500 else { return nil }
        let proxyStatus = head.intermediaryStatus
        guard ProxyAnswer.isOwnAnswer(status: head.status, proxyStatus: proxyStatus),
            request.url.lowercased().hasPrefix("http:"),
            request.options.proxyRoute.proxy(for: request.url)?.speaksHTTP == true
        else { return nil }
        return ProxyAnswer(
            status: head.status, reasonPhrase: head.reasonPhrase,
            proxyStatus: proxyStatus, refusedTunnel: false)
    }

    /// What the write callback returns: all of `body` taken, 0 to stop the transfer, or
    /// `CURL_WRITEFUNC_PAUSE` when the rate cap holds it back (libcurl delivers it again later).
    fileprivate func didReceiveBody(_ body: UnsafeRawBufferPointer) -> Int {
        // A refused write ends the transfer, except when it was a paused write delivered again
        // inside `curl_easy_pause`; the limiter then ends the exchange, and nothing more is taken.
        guard !isCancelled, !stoppedByDelegate else { return 0 }
        if let limiter, !limiter.admit(body.count, for: self) {
            return Int(CURL_WRITEFUNC_PAUSE)
        }
        switch disposition {
        case .deliver:
            if firstByteAt == nil { firstByteAt = .now }
            bodyBytesDelivered += Int64(body.count)
            guard let delegate else {
                stoppedByDelegate = true
                return 0
            }
            switch delegate.exchange(self, didReceive: body) {
            case .take:
                return body.count
            case .stop:
                stoppedByDelegate = true
                return 0
            case .pause:
                bodyBytesDelivered -= Int64(body.count)  // delivered again on resume
                isPausedByDelegate = true
                return Int(CURL_WRITEFUNC_PAUSE)
            }
        case .discard:
            return body.count
        case .abort, nil:
            // Body before a complete head cannot happen with HTTP/1.x; refuse it rather than guess.
            stoppedByDelegate = true
            return 0
        }
    }

    package func markCancelled() {
        isCancelled = true
    }

    fileprivate func markStarted() {
        startedAt = .now
    }

    /// Called by the loop once curl is done with the handle.
    fileprivate func finish(_ code: CURLcode) {
        let outcome: ExchangeOutcome
        if isCancelled {
            outcome = .cancelled
        } else if stoppedByDelegate {
            outcome = .aborted
        } else if code == CURLE_OK {
            outcome = .completed
        } else {
            outcome = .failed(failure(for: code))
        }
        curlLists = []
        delegate?.exchange(self, didCompleteWith: outcome)
    }

    /// Whether libcurl's message for a failed TLS handshake says the peer closed or reset the
    /// connection. libcurl gives the same code (35) for a refused handshake, so its messages are
    /// the only signal: `SSL_ERROR_SYSCALL` (an end of stream or an `errno`, OpenSSL 1.1 and 3
    /// without strict EOF), "unexpected eof" (OpenSSL 3 with it), "Connection reset by peer", and
    /// "Broken pipe": the socket layer's "Send failure: Broken pipe" when the handshake's next
    /// message meets a connection the peer closed (libcurl keeps the first message of a failure).
    static func isCutShort(handshake detail: String) -> Bool {
        ["SSL_ERROR_SYSCALL", "unexpected eof", "Connection reset by peer", "Broken pipe"].contains {
            detail.contains($0)
        }
    }

    private func failure(for code: CURLcode) -> TransferFailure {
        let detail = errorBuffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        var message = detail.isEmpty ? code.message : detail
        if [CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CACERT_BADFILE, CURLE_SSL_ISSUER_ERROR].contains(code) {
            message += request.options.certificateAuthorities.verificationNote
        }
        let tlsCodes: Set<CURLcode> = [
            CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM,
            CURLE_SSL_CIPHER, CURLE_SSL_CACERT_BADFILE, CURLE_SSL_ISSUER_ERROR,
        ]
        var failure = TransferFailure(
            curlCode: Int(code.rawValue), message: message,
            isTLS: tlsCodes.contains(code), isTimeout: code == CURLE_OPERATION_TIMEDOUT,
            isUnreachable: code == CURLE_COULDNT_CONNECT || code == CURLE_COULDNT_RESOLVE_HOST
                || code == CURLE_COULDNT_RESOLVE_PROXY)
        failure.isHandshakeCut = code == CURLE_SSL_CONNECT_ERROR && Self.isCutShort(handshake: detail)
        failure.isLocalInterface = code == CURLE_INTERFACE_FAILED
        let proxy = request.options.proxyRoute.proxy(for: request.url)
        if let answer = proxyRefusal {
            failure.proxyAnswer = answer
        } else if tunnelStatus >= 300 {
            failure.proxyAnswer = ProxyAnswer(
                status: tunnelStatus, reasonPhrase: tunnelReply.reasonPhrase, proxyStatus: tunnelReply.proxyStatus,
                refusedTunnel: true)
        } else {
            // With a proxy in the way every connection goes to the proxy: a refused connect is its.
            let proxysFailure =
                code == CURLE_COULDNT_RESOLVE_PROXY || code == CURLE_PROXY
                || (code == CURLE_COULDNT_CONNECT && proxy != nil)
            guard proxysFailure else { return failure }
        }
        failure.isProxy = true
        failure.proxy = proxy
        return failure
    }
}

private let exchangeHeaderCallback: curl_write_callback = { buffer, size, count, userdata in
    guard let userdata, let buffer else { return 0 }
    let exchange = Unmanaged<HTTPExchange>.fromOpaque(userdata).takeUnretainedValue()
    let length = size * count
    return exchange.didReceiveHeaderLine(UnsafeRawBufferPointer(start: buffer, count: length)) ? length : 0
}

private let exchangeWriteCallback: curl_write_callback = { buffer, size, count, userdata in
    guard let userdata, let buffer else { return 0 }
    let exchange = Unmanaged<HTTPExchange>.fromOpaque(userdata).takeUnretainedValue()
    return exchange.didReceiveBody(UnsafeRawBufferPointer(start: buffer, count: size * count))
}

extension TransferLoop {
    /// Configures a pooled easy handle for `exchange` and queues it; the delegate hears back on
    /// this thread, never synchronously from this call.
    package func start(_ exchange: HTTPExchange) {
        assertOnLoopThread()
        let easy = dequeueEasyHandle()
        exchange.limiter = rateLimiter
        if let cookies { cookies.attach(easy) }
        if let failure = exchange.configure(easy) {
            exchange.easy = nil
            recycle(easy)
            afterCallbacks { exchange.delegate?.exchange(exchange, didCompleteWith: .failed(failure)) }
            return
        }
        exchange.markStarted()
        enqueueAdd(exchange)
    }

    /// Stops `exchange`; its delegate receives ``ExchangeOutcome/cancelled`` (later, on this thread).
    package func cancel(_ exchange: HTTPExchange) {
        assertOnLoopThread()
        guard !exchange.isCancelled, exchange.easy != nil else { return }
        exchange.markCancelled()
        enqueueRemove(exchange)
    }

    /// Unpauses an exchange its delegate paused; libcurl delivers the held bytes again (from
    /// inside this call, in libcurl 7.88). A failure there ends the exchange.
    package func resume(_ exchange: HTTPExchange) {
        assertOnLoopThread()
        guard exchange.isPausedByDelegate, !exchange.isCancelled, let easy = exchange.easy else { return }
        exchange.isPausedByDelegate = false
        let code = easy.unpause()
        if code != CURLE_OK { end(exchange, code: code) }
    }

    /// Ends `exchange` with `code` (later, on this thread): libcurl failed it outside
    /// `curl_multi_perform`, where it would not report the failure itself.
    package func end(_ exchange: HTTPExchange, code: CURLcode) {
        assertOnLoopThread()
        guard exchange.easy != nil else { return }
        enqueueRemove(exchange, code: code)
    }

    package func finish(_ exchange: HTTPExchange, code: CURLcode) {
        if exchange.isHeldBack { rateLimiter?.forget(exchange) }
        if let easy = exchange.easy {
            if code != CURLE_OK { exchange.tunnelStatus = easy.getLong(CURLINFO_HTTP_CONNECTCODE) ?? 0 }
            exchange.easy = nil
            recycle(easy)
        }
        exchange.finish(code)
    }
}
