import SwoopCurl

/// Where a request's next try waits: the one owner of retry timers. A single request's (a probe, a
/// mirror's check, a document) is decided by its ``RequestRetries``; a byte range's by the transfer
/// machine, which names the instant (``TransferAction/wake(at:)``, ``wait(until:on:send:)``). This
/// runs the one loop timer either names. Transfer thread only.
struct RetryTimer {
    private(set) var retries = RequestRetries()
    private var timer: LoopTimer?

    /// A next try (or a host's wake) is waited for.
    var isWaiting: Bool { timer.map { !$0.isCancelled } ?? false }

    /// Try number `tries + 1` failed with `error`: `send` runs again after the policy's backoff, or
    /// the error to give up with is returned, saying how many tries it took.
    mutating func failed(
        _ error: DownloadError, retryAfter: Int?, policy: FailurePolicy, on loop: TransferLoop,
        send: @escaping () -> Void
    ) -> DownloadError? {
        switch retries.failed(error, retryAfter: retryAfter, policy: policy, at: .now) {
        case .again(let delay):
            schedule(after: delay, on: loop, send)
            return nil
        case .giveUp(let final):
            return final
        }
    }

    /// `send` runs after `delay`, following `error` (a download that starts over).
    mutating func wait(
        _ delay: Duration, failing error: DownloadError, on loop: TransferLoop, send: @escaping () -> Void
    ) {
        retries.waits(delay, failing: error, at: .now)
        schedule(after: delay, on: loop, send)
    }

    /// `send` runs at `instant` (a host that is down names its next trial), or only when woken
    /// otherwise if `nil`.
    mutating func wait(until instant: ContinuousClock.Instant?, on loop: TransferLoop, send: @escaping () -> Void) {
        timer?.cancel()
        timer = instant.map { loop.schedule(after: max(.zero, $0 - .now), send) }
    }

    mutating func cancel() {
        timer?.cancel()
    }

    private mutating func schedule(after delay: Duration, on loop: TransferLoop, _ send: @escaping () -> Void) {
        timer?.cancel()
        timer = loop.schedule(after: delay, send)
    }
}
