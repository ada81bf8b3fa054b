import Foundation

/// Weak references to the sessions a downloader started (`Configuration.tuning.faults.sessionStarted`):
/// how many it started, and how many are still alive.
final class SessionWatch: @unchecked Sendable {
    private let lock = NSLock()
    private var sessions: [Weak] = []

    private struct Weak {
        weak var session: AnyObject?
    }

    func started(_ session: AnyObject) {
        lock.withLock { sessions.append(Weak(session: session)) }
    }

    var started: Int { lock.withLock { sessions.count } }
    var alive: Int { lock.withLock { sessions.count { $0.session != nil } } }
}
