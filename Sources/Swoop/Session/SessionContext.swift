import Logging
import SwoopStore
import SwoopTransfer

/// What one download runs on, fixed for its whole life: the thread, the settings, the request,
/// where its bytes go, and what it counted.
struct SessionContext {
    let loop: TransferLoop
    let configuration: Downloader.Configuration
    let request: DownloadRequest
    let paths: DownloadPaths
    let sink: BodySink
    let logger: Logger
    /// Bytes, requests and retries, across restarts.
    let counters = DownloadCounters()
    let startedAt = ContinuousClock.now
}
