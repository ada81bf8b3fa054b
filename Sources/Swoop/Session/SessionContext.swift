import Logging
import SwoopStore
import SwoopCurl

/// What one download runs on, fixed for its whole life: the thread, the settings, the request,
/// where its bytes go, and what it counted.
final class SessionContext {
    let loop: TransferLoop
    /// The configuration, and what every exchange reads from it, made once.
    let settings: ExchangeSettings
    var configuration: Downloader.Configuration { settings.configuration }
    let request: DownloadRequest
    /// The service the request's URL is reached through (an `s3://` object's), with that URL.
    let service: (url: RemoteURL, service: any ObjectService)?
    let paths: DownloadPaths
    let sink: BodySink
    /// Told the object once the probe has found it, with how long its response took, before
    /// the sink opens (a reader of the bytes waits for it: ``Downloader/bytes(for:window:progress:)``).
    let objectFound: ((RemoteObject, ResponseTiming?) -> Void)?
    let logger: Logger
    /// Bytes, requests and retries, across restarts.
    let counters = DownloadCounters()
    let startedAt = Moment.now

    init(
        loop: TransferLoop, settings: ExchangeSettings, request: DownloadRequest,
        service: (url: RemoteURL, service: any ObjectService)?, paths: DownloadPaths, sink: BodySink,
        objectFound: ((RemoteObject, ResponseTiming?) -> Void)?, logger: Logger
    ) {
        self.loop = loop
        self.settings = settings
        self.request = request
        self.service = service
        self.paths = paths
        self.sink = sink
        self.objectFound = objectFound
        self.logger = logger
    }

    /// The request's headers for a download that starts at `url`: with the service only when
    /// `url` is the one it serves (a mirror the session resumed from is reached without it).
    func headers(for url: RemoteURL) -> RequestHeaders {
        let service = self.service.flatMap { $0.url.isSameURL(as: url) ? $0.service : nil }
        return RequestHeaders(request.headers, originalURL: url, service: service)
    }
}
