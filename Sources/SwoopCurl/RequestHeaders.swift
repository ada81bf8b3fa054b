import SwoopCore

/// The header lines a download sends: the caller's, with credentials kept to the original origin.
package struct RequestHeaders: Sendable {
    /// The caller's headers (``DownloadRequest/headers``).
    package let headers: [(name: String, value: String)]
    /// Where the download started; its origin may receive every header.
    package let originalURL: RemoteURL
    /// Once a redirect leaves the original origin, credentials stay behind for good.
    package private(set) var crossedOrigin = false
    /// The service the original origin speaks (S3), if any: its requests are signed for it, and
    /// only while they go to that origin.
    package let service: (any ObjectService)?

    /// Headers that carry no credentials: sent to any host, also after a redirect elsewhere
    /// (``DownloadRequest/headersSafeAcrossHosts``).
    package static let safeAcrossHosts: Set<String> = [
        "accept", "accept-language", "user-agent", "cache-control", "pragma",
    ]

    package init(
        _ headers: [(name: String, value: String)], originalURL: RemoteURL, service: (any ObjectService)? = nil
    ) {
        self.headers = headers
        self.originalURL = originalURL
        self.service = service
    }

    /// Notes that the download is being sent on to `url` (a redirect).
    package mutating func follow(to url: RemoteURL) {
        if !url.isSameOrigin(as: originalURL) { crossedOrigin = true }
    }

    /// Whether a request to `url` may carry credentials: the caller's headers that may hold
    /// them, and a `.netrc` login. Only the original origin gets them, and only until a redirect
    /// has left it.
    package func mayCarryCredentials(to url: RemoteURL) -> Bool {
        !crossedOrigin && url.isSameOrigin(as: originalURL)
    }

    /// A GET of `url` with these headers (see ``fields(for:precondition:)``), `range` and
    /// `options`; a `.netrc` login and the ``service``'s signature only where credentials may go.
    package func request(
        for url: RemoteURL, precondition: (name: String, value: String)? = nil, range: RequestedRange?,
        options: TransferOptions
    ) -> ExchangeRequest {
        let mayCarryCredentials = mayCarryCredentials(to: url)
        var fields = fields(for: url, precondition: precondition)
        if let service, mayCarryCredentials {
            let sent = range.map { fields + [(name: "Range", value: $0.headerValue)] } ?? fields
            fields += service.authorization(get: url.absoluteString, headers: sent)
        }
        // Most requests send `Accept-Encoding` alone (the first of the fields, always): its line
        // is made once (``usualLines``).
        let lines = fields.count == 1 ? Self.usualLines : fields.map { "\($0.name): \($0.value)" }
        var request = ExchangeRequest(url: url.absoluteString, headerLines: lines, range: range, options: options)
        request.mayUseNetrc = mayCarryCredentials
        request.service = mayCarryCredentials ? service : nil
        request.connectTo = url.connectTo
        return request
    }

    /// The header lines of a request with no field but `Accept-Encoding: identity` (every request
    /// that carries no precondition and no caller's header): made once, and sent from one list of
    /// libcurl's (``CurlHeaderList/usual``).
    package static let usualLines = ["\(acceptEncoding.name): \(acceptEncoding.value)"]

    /// The object as stored: a coding the server names is the object's (``ResponseValidator``).
    static let acceptEncoding = (name: "Accept-Encoding", value: "identity")

    /// The header fields for a request to `url`: `Accept-Encoding: identity` and the caller's
    /// headers, without those that may carry credentials when `url` is not the original origin (or
    /// a redirect left it before), plus `precondition` if given. (`Range` is the request's own.)
    package func fields(
        for url: RemoteURL, precondition: (name: String, value: String)? = nil
    ) -> [(name: String, value: String)] {
        var fields = [Self.acceptEncoding]
        let stripCredentials = !mayCarryCredentials(to: url)
        for (name, value) in headers {
            if stripCredentials && !Self.safeAcrossHosts.contains(name.lowercased()) { continue }
            fields.append((name, value))
        }
        if let precondition { fields.append(precondition) }
        return fields
    }
}

extension DownloadError {
    /// A transport failure talking to `url`, in words a person can act on. `beforeAnyResponse`:
    /// like curl and wget, a host nobody answers before the first response is not retried; once
    /// a download is under way the same failure is.
    package static func transport(_ failure: TransferFailure, url: String, beforeAnyResponse: Bool) -> DownloadError {
        if failure.isProxy {
            if let answer = failure.proxyAnswer {
                return .proxyAnswered(
                    answer, proxy: failure.proxy, url: url, beforeAnyResponse: beforeAnyResponse,
                    curlCode: answer.refusedTunnel ? failure.curlCode : nil)
            }
            if let proxy = failure.proxy, failure.isUnreachable {
                return .proxyUnreachable(
                    proxy, detail: failure.message, url: url, beforeAnyResponse: beforeAnyResponse,
                    curlCode: failure.curlCode)
            }
            return .proxyFailed(
                failure.proxy, detail: failure.message, url: url, beforeAnyResponse: beforeAnyResponse,
                curlCode: failure.curlCode)
        }
        if failure.isLocalInterface {
            // Every connection would fail the same way: said at once, never retried.
            return DownloadError(
                .invalidRequest,
                "cannot connect to \(url) from the local interface or address asked for: "
                    + "\(failure.message)", remedy: .checkLocalInterface, curlCode: failure.curlCode)
        }
        if failure.isUnreachable && beforeAnyResponse {
            return DownloadError(
                .unreachable,
                "cannot connect to \(url): \(failure.message); check the host name and port, and that the server is up",
                curlCode: failure.curlCode)
        }
        if failure.isHandshakeCut {
            return DownloadError(
                .network, "connection closed during the TLS handshake with \(url): \(failure.message)",
                curlCode: failure.curlCode)
        }
        if failure.isTLS {
            return DownloadError(
                .tls, "TLS failure talking to \(url): \(failure.message)", remedy: .checkCertificate,
                curlCode: failure.curlCode)
        }
        if failure.isTimeout {
            return DownloadError(
                .network, "timed out talking to \(url): \(failure.message)", curlCode: failure.curlCode)
        }
        return DownloadError(
            .network, "network error talking to \(url): \(failure.message)", curlCode: failure.curlCode)
    }
}
