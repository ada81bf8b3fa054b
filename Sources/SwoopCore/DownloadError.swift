/// An error from a download: what went wrong, the underlying cause (a curl code, an HTTP status,
/// an `errno`) and a message that says what to do about it.
///
/// Compare with the static members, which can grow without breaking callers:
///
/// ```swift
/// catch let error as DownloadError where error.kind == .httpStatus { ... }
/// ```
public struct DownloadError: Error, Sendable, CustomStringConvertible {
    /// The class of a failure. Extensible: new kinds are added as static members.
    public struct Kind: Hashable, Sendable, CustomStringConvertible {
        fileprivate enum Code: Hashable, Sendable {
            case invalidRequest
            case targetExists
            case targetInUse
            case httpStatus
            case network
            case unreachable
            case tls
            case invalidResponse
            case tooManyRedirects
            case objectChanged
            case localIO
            case diskFull
            case interrupted
            case checksumMismatch
            case sizeMismatch
            case cancelled
            case urlRefreshFailed
        }

        fileprivate let code: Code

        /// The request cannot be sent as given: bad URL, unsupported scheme, bad header.
        public static let invalidRequest = Kind(code: .invalidRequest)
        /// The target file already exists and overwriting was not allowed.
        public static let targetExists = Kind(code: .targetExists)
        /// Another download (in this process or another) is writing the same target; it holds
        /// the target's lock until it ends.
        public static let targetInUse = Kind(code: .targetInUse)
        /// The server answered with an HTTP error status (see ``DownloadError/httpStatus``).
        public static let httpStatus = Kind(code: .httpStatus)
        /// A network failure: reset, timeout, a broken response (see ``DownloadError/curlCode``).
        public static let network = Kind(code: .network)
        /// The host name did not resolve or nothing listens at the port.
        public static let unreachable = Kind(code: .unreachable)
        /// TLS handshake or certificate verification failed.
        public static let tls = Kind(code: .tls)
        /// The server's response did not match the request (status, `Content-Range`, length, encoding).
        public static let invalidResponse = Kind(code: .invalidResponse)
        /// Redirects went in a loop, or there were more than
        /// ``Downloader/Configuration/RedirectConfiguration/maxRedirects``. Not retried.
        public static let tooManyRedirects = Kind(code: .tooManyRedirects)
        /// The remote object changed while it was being downloaded (new ETag or size, or a 412).
        public static let objectChanged = Kind(code: .objectChanged)
        /// A local file operation failed (see ``DownloadError/errno``).
        public static let localIO = Kind(code: .localIO)
        /// The disk is full; the partial download is kept and resumes once space is freed.
        public static let diskFull = Kind(code: .diskFull)
        /// The download was paused or interrupted; its state is kept and it can resume.
        public static let interrupted = Kind(code: .interrupted)
        /// The downloaded bytes do not match the expected checksum.
        public static let checksumMismatch = Kind(code: .checksumMismatch)
        /// The object's size is not the one the request expected (``DownloadRequest/expectedSize``).
        public static let sizeMismatch = Kind(code: .sizeMismatch)
        /// The download was cancelled and its state deleted.
        public static let cancelled = Kind(code: .cancelled)
        /// The URL stopped working and ``DownloadRequest/urlProvider`` gave no usable one: it
        /// failed, timed out, kept giving refused URLs, or gave a URL to another object. The
        /// partial download is kept.
        public static let urlRefreshFailed = Kind(code: .urlRefreshFailed)

        /// The kind's name as written in Swift (`httpStatus`), as `print(error.kind)` shows it.
        public var description: String { "\(code)" }

        /// The kind in a few words for people: "HTTP error", "disk full".
        public var summary: String {
            switch code {
            case .invalidRequest: "invalid request"
            case .targetExists: "target exists"
            case .targetInUse: "target in use"
            case .httpStatus: "HTTP error"
            case .network: "network error"
            case .unreachable: "host unreachable"
            case .tls: "TLS error"
            case .invalidResponse: "invalid response"
            case .tooManyRedirects: "too many redirects"
            case .objectChanged: "object changed"
            case .localIO: "local I/O error"
            case .diskFull: "disk full"
            case .interrupted: "interrupted"
            case .checksumMismatch: "checksum mismatch"
            case .sizeMismatch: "size mismatch"
            case .cancelled: "cancelled"
            case .urlRefreshFailed: "URL refresh failed"
            }
        }
    }

    /// What would fix a failure, in the library's terms. Extensible like ``Kind``.
    ///
    /// A tool built on the library can put the fix in its own terms (the `swoop` command names
    /// its flags) by combining ``DownloadError/reason`` with its own text for the remedy.
    public struct Remedy: Hashable, Sendable, CustomStringConvertible {
        fileprivate enum Code: Hashable, Sendable {
            case replaceTarget
            case nameAFile
            case chooseWritableLocation
            case createDirectory
            case freeSpaceAndResume
            case freeSpace
            case resume
            case startAgain
            case checkCertificate
            case sendCredentials
            case waitForOtherDownload
            case correctExpectedSize
            case checkProxy
            case checkURLProvider
            case checkS3Credentials
            case checkS3Endpoint
            case checkLocalInterface
            case restartShares
        }

        fileprivate let code: Code

        /// The target exists: allow replacing it (``Downloader/Configuration/Files/overwritesExistingFile``)
        /// or choose another path.
        public static let replaceTarget = Remedy(code: .replaceTarget)
        /// The target path is a directory: name a file.
        public static let nameAFile = Remedy(code: .nameAFile)
        /// The target's directory is not writable: choose another location.
        public static let chooseWritableLocation = Remedy(code: .chooseWritableLocation)
        /// The target's directory does not exist: create it.
        public static let createDirectory = Remedy(code: .createDirectory)
        /// The disk is full: free space, then start the same download again; it resumes.
        public static let freeSpaceAndResume = Remedy(code: .freeSpaceAndResume)
        /// The disk is full and nothing could be kept: free space, then start the download again
        /// (from the beginning).
        public static let freeSpace = Remedy(code: .freeSpace)
        /// The partial download is kept: start the same download again to resume it.
        public static let resume = Remedy(code: .resume)
        /// Nothing could be kept (a server without ranges, a file fetched in one response): start
        /// the download again, from the beginning.
        public static let startAgain = Remedy(code: .startAgain)
        /// TLS verification failed: check the certificate, or turn verification off
        /// (``Downloader/Configuration/TLS/verifiesCertificates``; unsafe). For a server with a
        /// private CA, trust that CA instead (``Downloader/Configuration/TLS/certificateAuthorities``).
        public static let checkCertificate = Remedy(code: .checkCertificate)
        /// The server wants credentials: send them in ``DownloadRequest/headers``.
        public static let sendCredentials = Remedy(code: .sendCredentials)
        /// Another download is writing the target: wait for it, or stop it and start this one
        /// again (it resumes what the other one fetched).
        public static let waitForOtherDownload = Remedy(code: .waitForOtherDownload)
        /// The object is not the size the request expected: correct or drop
        /// ``DownloadRequest/expectedSize`` (the object may have changed since it was recorded).
        public static let correctExpectedSize = Remedy(code: .correctExpectedSize)
        /// The proxy failed or refused: check ``Downloader/Configuration/NetworkAccess/proxy``
        /// (its address and credentials) or, when it comes from the environment, `http_proxy`,
        /// `https_proxy`, `all_proxy` and `no_proxy`.
        public static let checkProxy = Remedy(code: .checkProxy)
        /// The URL could not be refreshed: check ``DownloadRequest/urlProvider``; the partial
        /// download is kept, and starting the download again resumes it.
        public static let checkURLProvider = Remedy(code: .checkURLProvider)

        /// An object store refused the credentials, or none were found: check
        /// ``Downloader/Configuration/S3-swift.struct/credentials``, the `AWS_ACCESS_KEY_ID`,
        /// `AWS_SECRET_ACCESS_KEY` and `AWS_SESSION_TOKEN` variables, or the profile in the shared
        /// files; for a public bucket, send requests unsigned.
        public static let checkS3Credentials = Remedy(code: .checkS3Credentials)
        /// An object store does not have the bucket, or is not the one meant: check the bucket's
        /// name, the endpoint (``Downloader/Configuration/S3-swift.struct/endpointURL``,
        /// `AWS_ENDPOINT_URL_S3`, `AWS_ENDPOINT_URL`) and the region.
        public static let checkS3Endpoint = Remedy(code: .checkS3Endpoint)
        /// A connection could not be bound to the local interface or address asked for: name one
        /// of this machine's (``Downloader/Configuration/Addresses/localInterface``).
        public static let checkLocalInterface = Remedy(code: .checkLocalInterface)
        /// The shares of an object fetched so far (``ObjectShare``) are of another version than
        /// the server's now, or cannot be used: start every share over, discarding them
        /// (``Downloader/Configuration/Files/overwritesExistingFile``).
        public static let restartShares = Remedy(code: .restartShares)

        /// The fix in the library's terms.
        public var description: String {
            switch code {
            case .replaceTarget: "set Configuration.files.overwritesExistingFile to replace it, or choose another path"
            case .nameAFile: "the target path must name a file, not a directory"
            case .chooseWritableLocation: "choose a writable location for the target"
            case .createDirectory: "create the directory first"
            case .freeSpaceAndResume: "free some space and start the same download again to resume"
            case .freeSpace:
                "free some space and start the download again (nothing was kept, it starts from the beginning)"
            case .resume: "the partial download is kept; start the same download again to resume"
            case .startAgain: "nothing was kept; start the download again (from the beginning)"
            case .checkCertificate:
                "check the certificate; for a private CA, trust its certificate with "
                    + "Configuration.tls.certificateAuthorities (or CURL_CA_BUNDLE, SSL_CERT_FILE or SSL_CERT_DIR "
                    + "in the environment); "
                    + "or set Configuration.tls.verifiesCertificates to false to skip verification (unsafe)"
            case .sendCredentials: "send them in DownloadRequest.headers ('Authorization: ...')"
            case .waitForOtherDownload:
                "wait for it to finish, or stop it and start this download again (it resumes what was fetched)"
            case .correctExpectedSize:
                "correct DownloadRequest.expectedSize or leave it unset (the object may have changed since its size "
                    + "was recorded)"
            case .checkURLProvider:
                "check DownloadRequest.urlProvider; the partial download is kept, and starting the same download again "
                    + "resumes it"
            case .checkS3Credentials:
                "check Configuration.s3.credentials, or AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and "
                    + "AWS_SESSION_TOKEN, or the profile (Configuration.s3.profile, AWS_PROFILE) in the shared "
                    + "credentials file; for a public bucket set Configuration.s3.signsRequests to false"
            case .checkS3Endpoint:
                "check the bucket's name, the endpoint (Configuration.s3.endpointURL, AWS_ENDPOINT_URL_S3 or "
                    + "AWS_ENDPOINT_URL) and the region (Configuration.s3.region, AWS_REGION)"
            case .checkProxy:
                "check Configuration.access.proxy (address and credentials), or the http_proxy, https_proxy, "
                    + "all_proxy and no_proxy environment variables it defaults to"
            case .checkLocalInterface:
                "set Configuration.addresses.localInterface to one of this machine's interfaces (its name) or IP "
                    + "addresses, or leave it unset"
            case .restartShares:
                "start every share again with Configuration.files.overwritesExistingFile set: the shares fetched so "
                    + "far are discarded"
            }
        }
    }

    /// The class of failure.
    public let kind: Kind
    /// What happened, and where: the cause alone, without the fix.
    public let reason: String
    /// What would fix it, when there is something to do.
    public let remedy: Remedy?
    /// The HTTP status that caused the failure, if any.
    public let httpStatus: Int?
    /// The libcurl result code (`CURLcode`) that caused the failure, if any.
    public let curlCode: Int?
    /// The `errno` of the failed system call, if any.
    public let errno: Int32?
    /// The proxy, as `scheme://host:port`, when the failure is the proxy's rather than the
    /// server's: it could not be reached, refused the tunnel, wanted credentials, or answered
    /// with an error of its own (``httpStatus`` is then the proxy's status).
    public package(set) var proxy: String?
    /// A failure that looks permanent by its kind and status but may pass when tried again: an
    /// object store's "the session token expired" (a 400 or 403), once its credentials are read
    /// again (see ``isTransient``).
    package var passesWhenRetried = false

    package init(
        _ kind: Kind, _ reason: String, remedy: Remedy? = nil,
        httpStatus: Int? = nil, curlCode: Int? = nil, errno: Int32? = nil
    ) {
        self.kind = kind
        // A reason often quotes a server (a key, a header, an error body): never a control
        // sequence for the terminal or log that shows it.
        self.reason = reason.escapingControlCharacters()
        self.remedy = remedy
        self.httpStatus = httpStatus
        self.curlCode = curlCode
        self.errno = errno
    }

    /// A one-line explanation naming the cause and, where there is one, the fix.
    public var message: String {
        guard let remedy else { return reason }
        return "\(reason); \(remedy)"
    }

    public var description: String { message }

    /// The same failure with more said about it (appended to the reason); the remedy stays.
    package func adding(_ detail: String, remedy: Remedy? = nil) -> DownloadError {
        replacing(reason: reason + detail, remedy: remedy ?? self.remedy)
    }

    /// The same failure (kind, causes, proxy) told with another reason and remedy.
    package func replacing(reason: String, remedy: Remedy?) -> DownloadError {
        var error = DownloadError(
            kind, reason, remedy: remedy, httpStatus: httpStatus, curlCode: curlCode, errno: errno)
        error.passesWhenRetried = passesWhenRetried
        error.proxy = proxy
        return error
    }

    /// The cause in a few words, for a progress line: "connection refused", "HTTP 503".
    package var shortCause: String {
        if let proxy { return "the proxy \(proxy): " + (httpStatus.map { "HTTP \($0)" } ?? causeOfCurlCode) }
        if let httpStatus { return "HTTP \(httpStatus)" }
        return causeOfCurlCode
    }

    private var causeOfCurlCode: String {
        switch curlCode {
        case 5, 6: return "host not found"  // CURLE_COULDNT_RESOLVE_PROXY, CURLE_COULDNT_RESOLVE_HOST
        case 7: return "connection refused"  // CURLE_COULDNT_CONNECT
        case 18: return "response cut short"  // CURLE_PARTIAL_FILE
        case 28: return "timed out"  // CURLE_OPERATION_TIMEDOUT
        case 52: return "empty reply"  // CURLE_GOT_NOTHING
        case 55, 56: return "connection reset"  // CURLE_SEND_ERROR, CURLE_RECV_ERROR
        case 97: return "handshake failed"  // CURLE_PROXY: a SOCKS proxy's
        default: return kind.summary
        }
    }

    /// Whether retrying the same request later may succeed (network faults, 5xx, 429, bad responses).
    package var isTransient: Bool {
        if passesWhenRetried { return true }
        return switch kind.code {
        case .network, .invalidResponse: true
        case .httpStatus: httpStatus.map { $0 == 408 || $0 == 425 || $0 == 429 || $0 >= 500 } ?? false
        default: false
        }
    }
}

extension DownloadError {
    package static func invalidRequest(_ message: String) -> DownloadError {
        DownloadError(.invalidRequest, message)
    }

    package static func invalidResponse(_ message: String, httpStatus: Int? = nil) -> DownloadError {
        DownloadError(.invalidResponse, message, httpStatus: httpStatus)
    }

    /// An HTTP error status, named the way people search for it, with the usual fix.
    package static func httpStatus(_ status: Int, url: String) -> DownloadError {
        let reason: String
        switch status {
        case 400: reason = "400 Bad Request: the server rejected the request; check the URL and headers"
        case 401: reason = "401 Unauthorized: the server wants credentials"
        case 403: reason = "403 Forbidden: access denied; check credentials or whether a signed URL has expired"
        case 404: reason = "404 Not Found: no object at this URL; check the URL"
        case 405: reason = "405 Method Not Allowed: the server does not allow GET here"
        case 407:
            reason =
                "407 Proxy Authentication Required: the proxy wants credentials (user:password@ in the proxy's URL)"
        case 408: reason = "408 Request Timeout: the server gave up waiting; try again"
        case 410: reason = "410 Gone: the object was removed from the server"
        case 412: reason = "412 Precondition Failed: the object changed on the server"
        case 416: reason = "416 Range Not Satisfiable: the server has fewer bytes than expected"
        case 429:
            reason = "429 Too Many Requests: the server is rate-limiting; try again later or with fewer connections"
        case 500: reason = "500 Internal Server Error: the server failed; try again later"
        case 502: reason = "502 Bad Gateway: a proxy or CDN could not reach the origin; try again later"
        case 503: reason = "503 Service Unavailable: the server is overloaded or down; try again later"
        case 504: reason = "504 Gateway Timeout: a proxy or CDN timed out; try again later"
        default:
            reason =
                status >= 500
                ? "HTTP \(status): the server failed; try again later"
                : "HTTP \(status): the server refused the request"
        }
        return DownloadError(
            .httpStatus, "\(reason) (\(url))",
            remedy: status == 401 ? .sendCredentials : status == 407 ? .checkProxy : nil, httpStatus: status)
    }

    /// An HTTP error status from `head`: as ``httpStatus(_:url:)``, unless a gateway in front of
    /// the server wrote it (``ResponseHead/gatewayAnswer``): then what the gateway said, not "the
    /// server is overloaded". At the first request, a gateway that says the server cannot be
    /// reached at all (refused, no route, no such name) is final, as a refused connection is.
    package static func httpStatus(_ head: ResponseHead, url: String, firstContact: Bool) -> DownloadError {
        guard let gateway = head.gatewayAnswer else { return httpStatus(head.status, url: url) }
        let status = statusText(head.status, phrase: head.reasonPhrase)
        let said =
            gateway.error == nil
            ? "\(Wording.serverText(gateway.name, limit: 60)): it could not fetch the object from the server behind it"
            : proxyStatusText(gateway)
        let unreachable = firstContact && gateway.meansServerUnreachable
        let advice = unreachable ? "" : "; try again later"
        return DownloadError(
            unreachable ? .unreachable : .httpStatus,
            "\(status) from a gateway in front of the server, not the server itself (\(said))\(advice) (\(url))",
            httpStatus: head.status)
    }
}
