import SwoopCurl

/// Where a single request's next try waits (a probe, a mirror's check, a document): its
/// ``RequestRetries`` decide when, its ``WakeTimer`` waits. A byte range's next try is the transfer
/// machine's to name (``TransferAction/wake(at:)``): the run waits on a ``WakeTimer`` alone.
/// Transfer thread only.
struct RetryTimer {
    private(set) var retries = RequestRetries()
    private var wake = WakeTimer()

    /// A next try (or a host's wake) is waited for.
    var isWaiting: Bool { wake.isWaiting }

    /// Try number `tries + 1` failed with `error`: `send` runs again after the policy's backoff, or
    /// the error to give up with is returned, saying how many tries it took.
    mutating func failed(
        _ error: DownloadError, retryAfter: Int?, policy: FailurePolicy, on loop: TransferLoop,
        send: @escaping () -> Void
    ) -> DownloadError? {
        switch retries.failed(error, retryAfter: retryAfter, policy: policy, at: .now) {
        case .again(let delay):
            wake.wait(until: .now + delay, on: loop, send: send)
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
        wake.wait(until: .now + delay, on: loop, send: send)
    }

    /// `send` runs at `instant` (a host that is down names its next trial), or only when woken
    /// otherwise if `nil`.
    mutating func wait(until instant: Moment?, on loop: TransferLoop, send: @escaping () -> Void) {
        wake.wait(until: instant, on: loop, send: send)
    }

    mutating func cancel() {
        wake.cancel()
    }
}

/// The one loop timer a next try waits on: a single request's (``RetryTimer``), or a transfer's,
/// whose machine names the instant (``TransferAction/wake(at:)``). Transfer thread only.
struct WakeTimer {
    private var timer: LoopTimer?

    /// A wake is waited for.
    var isWaiting: Bool { timer.map { !$0.isCancelled } ?? false }

    /// `send` runs at `instant`, or only when woken otherwise if `nil` (a wait before replaces it).
    mutating func wait(until instant: Moment?, on loop: TransferLoop, send: @escaping () -> Void) {
        timer?.cancel()
        timer = instant.map { loop.schedule(after: max(.zero, $0 - .now), send) }
    }

    mutating func cancel() {
        timer?.cancel()
    }
}
