/// The header lines a download sends: the caller's, with credentials kept to the original origin.
struct RequestHeaders: Sendable {
    /// The caller's headers (``DownloadRequest/headers``).
    let headers: [(name: String, value: String)]
    /// Where the download started; its origin may receive every header.
    let originalURL: RemoteURL
    /// Once a redirect leaves the original origin, credentials stay behind for good.
    private(set) var crossedOrigin = false

    init(_ headers: [(name: String, value: String)], originalURL: RemoteURL) {
        self.headers = headers
        self.originalURL = originalURL
    }

    /// Notes that the download is being sent on to `url` (a redirect).
    mutating func follow(to url: RemoteURL) {
        if !url.isSameOrigin(as: originalURL) { crossedOrigin = true }
    }

    /// The lines for a request to `url`: `Accept-Encoding: identity` and the caller's headers,
    /// without those that may carry credentials when `url` is not the original origin (or a
    /// redirect left it before), plus `precondition` if given.
    func lines(for url: RemoteURL, precondition: (name: String, value: String)? = nil) -> [String] {
        var lines = ["Accept-Encoding: identity"]
        let stripCredentials = crossedOrigin || !url.isSameOrigin(as: originalURL)
        for (name, value) in headers {
            if stripCredentials && !DownloadRequest.headersSafeAcrossHosts.contains(name.lowercased()) { continue }
            lines.append("\(name): \(value)")
        }
        if let precondition { lines.append("\(precondition.name): \(precondition.value)") }
        return lines
    }
}

extension DownloadError {
    /// A transport failure talking to `url`, in words a person can act on. `beforeAnyResponse`:
    /// like curl and wget, a host nobody answers before the first response is not retried; once
    /// a download is under way the same failure is.
    static func transport(_ failure: TransferFailure, url: String, beforeAnyResponse: Bool) -> DownloadError {
        if failure.isUnreachable && beforeAnyResponse {
            return DownloadError(.unreachable, "cannot connect to \(url): \(failure.message); check the host name and port, and that the server is up", curlCode: failure.curlCode)
        }
        if failure.isTLS {
            return DownloadError(.tls, "TLS failure talking to \(url): \(failure.message)", remedy: .checkCertificate, curlCode: failure.curlCode)
        }
        if failure.isTimeout {
            return DownloadError(.network, "timed out talking to \(url): \(failure.message)", curlCode: failure.curlCode)
        }
        return DownloadError(.network, "network error talking to \(url): \(failure.message)", curlCode: failure.curlCode)
    }
}
