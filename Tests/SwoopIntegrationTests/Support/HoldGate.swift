import Dispatch
import Synchronization
import SwoopTestOrigin

/// Holds every thread that calls ``hold(_:)`` until ``release()``, and records what each was about
/// to do: a test fault run on one of a downloader's queues (a part file's opening, a publish
/// group) stands for a disk that does not answer. Never called on Swift's cooperative pool.
final class HoldGate: Sendable {
    private let state = Mutex<(released: Bool, entered: [String])>((false, []))
    private let gate = DispatchSemaphore(value: 0)

    func hold(_ what: String) {
        let released = state.withLock { state in
            state.entered.append(what)
            return state.released
        }
        if !released { gate.wait() }
    }

    /// What the held calls were about to do, in the order they came.
    var entered: [String] { state.withLock { $0.entered } }

    /// Lets every held call go, and every later one pass.
    func release() {
        let waiting = state.withLock { state in
            defer { state.released = true }
            return state.released ? 0 : state.entered.count
        }
        for _ in 0..<waiting { gate.signal() }
    }

    /// Returns once a call is held; throws, naming `what`, after `quietBound` (stretched by the load).
    func waitForEntry(within quietBound: Duration, of what: String) async throws {
        var deadline = MachineLoad.Deadline(quietBound)
        while entered.isEmpty {
            if deadline.exceeded() { throw TestFailure("no \(what) within \(deadline.bound())") }
            try await Task.sleep(for: .milliseconds(10))
        }
    }
}
