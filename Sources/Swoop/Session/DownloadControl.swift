import SwoopStore
import SwoopCurl

/// Routes pause and cancel from any thread to a session on the transfer thread.
///
/// The session arrives after its run is prepared (``Downloader``'s `preparation` queue); a pause
/// or a cancel that comes before it waits here and reaches the session as it attaches.
///
/// `@unchecked Sendable`: `session`, `attached` and the requests are touched only on the transfer
/// thread (inside closures run by ``TransferLoop/execute(_:)``); the rest is immutable.
final class DownloadControl: @unchecked Sendable {
    private let loop: TransferLoop
    private let disk: DiskQueue
    private let paths: DownloadPaths
    private var session: DownloadSession?
    /// A session was attached (it may have ended since).
    private var attached = false
    /// The session handed its file over to be published and has not reported yet.
    private var handedOver = false
    private var pauseRequested = false
    private var cancelRequested = false

    init(loop: TransferLoop, disk: DiskQueue, paths: DownloadPaths) {
        self.loop = loop
        self.disk = disk
        self.paths = paths
    }

    func attach(_ session: DownloadSession) {
        self.session = session
        attached = true
        if cancelRequested {
            loop.afterCallbacks { session.cancel() }
        } else if pauseRequested {
            loop.afterCallbacks { session.pause() }
        }
    }

    /// The session reported its end: let it go. (It holds the task's progress handler, and the
    /// task holds this control: kept, every finished download would stay in memory.)
    func sessionEnded() {
        session = nil
        handedOver = false
    }

    /// The session handed its file over to be published and let go of itself: the run ends as the
    /// publication does, which a pause or a cancel no longer changes (as for a session finalizing).
    func sessionHandedOver() {
        session = nil
        handedOver = true
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
            guard attached else {
                // Still being prepared: the session stops as it starts, and deletes its state.
                cancelRequested = true
                return
            }
            // Being published: the run's end reports it (``sessionHandedOver()``).
            if handedOver { return }
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
