import Foundation
import Swoop
import SwoopTestOrigin
import SwoopTestSupport
import Synchronization

/// Waits for a moment in a running download, then acts on it at once: both on a thread of its own.
///
/// A test that polls on Swift's cooperative pool (two threads here) and then acts — stops a server,
/// fills a disk, kills a process — acts when the pool gives it a thread back, which on a loaded
/// machine can be seconds after the moment it waited for; by then the download may have ended.
/// Here the poll and the action share one thread that nothing else holds.
///
/// `probe` is asked every `interval` until it returns a value or `quietBound` (stretched by the
/// load while it lasts) has passed; `act` then runs with that value, or with `nil` when the bound
/// passed first. Returns the value.
@discardableResult
func waitThenAct<T: Sendable>(
    within quietBound: Duration, every interval: Duration = .milliseconds(10),
    until probe: @escaping @Sendable () -> T?, then act: @escaping @Sendable (T?) throws -> Void = { _ in }
) async throws -> T? {
    try await offThePool {
        var deadline = MachineLoad.Deadline(quietBound)
        let pause = useconds_t(interval / .microseconds(1))
        var found = probe()
        while found == nil && !deadline.exceeded() {
            usleep(pause)
            found = probe()
        }
        try act(found)
        return found
    }
}

/// ``waitThenAct(within:every:until:then:)`` for a condition: `act` runs once `condition` holds or
/// the bound has passed. Returns whether the condition held.
@discardableResult
func waitThenAct(
    within quietBound: Duration, every interval: Duration = .milliseconds(10),
    until condition: @escaping @Sendable () -> Bool, then act: @escaping @Sendable () throws -> Void = {}
) async throws -> Bool {
    let held = try await waitThenAct(
        within: quietBound, every: interval, until: { condition() ? true : nil }, then: { _ in try act() })
    return held != nil
}

/// Kills `run` once its target's segment map records at least `bytes` (or once it has ended by
/// itself), from a thread of its own (``waitThenAct(within:every:until:then:)``); returns the
/// status seen then (`nil`: neither within a minute, stretched by the load).
func killOnceSaved(_ run: CLI.Running, target: String, atLeast bytes: Int64) async throws -> DownloadStatus? {
    try await waitThenAct(
        within: .seconds(60),
        until: { () -> DownloadStatus? in
            let saved = Downloader.status(of: target)
            return saved.state == .partial && saved.bytesDone >= bytes || !run.process.isRunning ? saved : nil
        },
        then: { _ in run.signal(SIGKILL) })
}

/// Runs an action once, when a download's progress reaches a threshold, on the thread that reports
/// the progress (the transfer thread): no wait on the cooperative pool between the moment and the act.
///
/// The progress handler (``handler``) is made before the task it acts on exists; ``arm(_:)`` hands
/// the action over once it does, and runs it at once if the threshold was already reached.
final class ProgressTrigger: Sendable {
    private struct State {
        var reached = false
        var action: (@Sendable () -> Void)?
        var done = false
    }

    private let threshold: Int64
    private let state = Mutex(State())

    init(atBytes threshold: Int64) {
        self.threshold = threshold
    }

    /// The handler to pass as the download's progress handler.
    var handler: @Sendable (DownloadProgress) -> Void {
        { [self] progress in
            guard progress.bytesDone >= threshold else { return }
            fire { $0.reached = true }
        }
    }

    /// Sets the action; it runs once, when the threshold is reached (now, if it already was).
    func arm(_ action: @escaping @Sendable () -> Void) {
        fire { $0.action = action }
    }

    private func fire(_ change: (inout State) -> Void) {
        let action = state.withLock { state -> (@Sendable () -> Void)? in
            change(&state)
            guard state.reached, !state.done, let action = state.action else { return nil }
            state.done = true
            return action
        }
        action?()
    }
}
