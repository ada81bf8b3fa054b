import Logging
import SwoopStore
import SwoopCurl

/// A download's heartbeat: every ``Downloader/Configuration/progressInterval`` it measures the
/// rate, lets the session report progress and take a checkpoint that is due, and keeps the
/// watchdog (``QuietWatch``). Transfer thread only.
final class ProgressReporter {
    private let loop: TransferLoop
    private let interval: Duration
    private let handler: (@Sendable (DownloadProgress) -> Void)?
    private let counters: DownloadCounters
    private var timer: LoopTimer?
    /// The session's, from ``start(tick:)`` until ``stop()``.
    private var tick: (() -> Void)?
    private var meter = ThroughputMeter()
    private let context: SessionContext
    /// Made at the first look: its limits come from the failure policy, which cost 3k
    /// instructions to work out, and a small file ends before its first tick.
    private lazy var quiet = QuietWatch(context.configuration)

    init(_ context: SessionContext, handler: (@Sendable (DownloadProgress) -> Void)?) {
        loop = context.loop
        interval = context.configuration.progressInterval
        self.handler = handler
        counters = context.counters
        self.context = context
    }

    /// The recent receive rate.
    var bytesPerSecond: Double { meter.bytesPerSecond }

    /// Calls `tick` every interval until ``stop()``, after recording the bytes received so far
    /// for the rate. The reporter holds `tick` and its timer holds the reporter until ``stop()``,
    /// which every start is followed by: the timer's action then captures one reference, the
    /// reporter, and needs no context of its own, nor do weak references their side tables (a list
    /// of small files starts a heartbeat for every file, and most end before their first tick).
    func start(tick: @escaping () -> Void) {
        self.tick = tick
        arm()
    }

    private func arm() {
        timer = loop.schedule(after: interval) { [self] in beat() }
    }

    private func beat() {
        guard let tick else { return }
        meter.record(totalBytes: counters.bytesReceived, at: .now)
        tick()
        if timer != nil { arm() }
    }

    func stop() {
        timer?.cancel()
        timer = nil
        tick = nil
    }

    /// Hands `snapshot` to the caller's handler.
    func report(_ snapshot: DownloadProgress) {
        handler?(snapshot)
    }

    /// One look of the watchdog: the failure to stop with once the download has waited too long
    /// with nothing in flight (see ``QuietWatch/look(idle:bytes:othersActive:now:)``).
    func watch(idle: IdleWait?, bytes: Int64, othersActive: Bool) -> DownloadError? {
        quiet.look(idle: idle, bytes: bytes, othersActive: othersActive, now: .now)
    }
}
