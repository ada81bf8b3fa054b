import SwoopStore
import SwoopTransfer

/// Routes pause and cancel from any thread to a session on the transfer thread.
///
/// `@unchecked Sendable`: `session` and `pauseRequested` are touched only on the transfer thread
/// (inside closures run by ``TransferLoop/execute(_:)``); the rest is immutable.
final class DownloadControl: @unchecked Sendable {
    private let loop: TransferLoop
    private let disk: DiskQueue
    private let paths: DownloadPaths
    private var session: DownloadSession?
    private var pauseRequested = false

    init(loop: TransferLoop, disk: DiskQueue, paths: DownloadPaths) {
        self.loop = loop
        self.disk = disk
        self.paths = paths
    }

    func attach(_ session: DownloadSession) {
        self.session = session
        if pauseRequested { loop.afterCallbacks { session.pause() } }
    }

    /// The session reported its end: let it go. (It holds the task's progress handler, and the
    /// task holds this control: kept, every finished download would stay in memory.)
    func sessionEnded() {
        session = nil
    }

    func pause() {
        loop.execute { [self] in
            pauseRequested = true
            session?.pause()
        }
    }

    /// Cancels a running session (which deletes its state as it stops), or deletes the state a
    /// stopped one left; `discarded` runs in the latter case once the files are gone.
    func cancel(discarded: @escaping @Sendable () -> Void) {
        let accepted = loop.execute { [self] in
            if let session, !session.isStopped {
                // Still running: it deletes its state as it stops.
                session.cancel()
                return
            }
            // Queued behind the stopped session's last checkpoint on the same serial queue.
            disk.run { [paths] in
                // Not if another download took the target over meanwhile: it is its state now.
                TargetLock.discardUnlessInUse(paths)
                discarded()
            }
        }
        if !accepted { discarded() }
    }
}
