import Synchronization

/// A download you can pause, resume and cancel while it runs.
///
/// ```swift
/// let task = try downloader.start(DownloadRequest(url: url), to: "/data/big.iso")
/// task.pause()                         // transfers stop; the state stays on disk
/// task.resume()                        // carries on from the segment map
/// let result = try await task.result() // waits for the end (a pause is not an end)
/// ```
///
/// Cancelling the `Task` that awaits ``result()`` pauses the download, and that call throws
/// ``DownloadError/Kind/interrupted``; ``resume()`` continues it later.
public final class DownloadTask: Sendable {
    /// Where a download stands.
    public enum State: Sendable, Equatable {
        case running
        case paused
        case finished
        case failed
        case cancelled
    }

    private typealias Waiter = CheckedContinuation<Result<DownloadResult, DownloadError>, Never>

    private struct Inner {
        var state = State.running
        var control: DownloadControl?
        var outcome: Result<DownloadResult, DownloadError>?
        var waiters: [Int: Waiter] = [:]
        /// Waiters whose task was cancelled: answered when the current run stops (a pause included).
        var answerOnStop: Set<Int> = []
        /// Cancelled before they were registered, with no run to wait for.
        var interruptedEarly: Set<Int> = []
        var runActive = true
        /// Resumed while the paused run was still stopping: the next run starts when it has
        /// stopped (it lets the target go as it stops, and a run started sooner finds it taken).
        var resumesOnStop = false
        var nextWaiter = 0
        /// Increments with every run, so a late report from an earlier run is ignored.
        var run = 0
        /// The sequences of ``progressUpdates``, ended with the download.
        var progressStreams: [AsyncStream<DownloadProgress>.Continuation] = []

        mutating func nextRun() -> Int {
            run += 1
            runActive = true
            return run
        }
    }

    private let inner = Mutex(Inner())
    private let launch: @Sendable (DownloadTask, Int) -> DownloadControl
    private let onFinish: @Sendable () -> Void
    /// Progress handlers: the first caller's, then those of callers who joined this download.
    private let progressHandlers = Mutex<[@Sendable (DownloadProgress) -> Void]>([])

    init(
        launch: @escaping @Sendable (DownloadTask, Int) -> DownloadControl,
        onFinish: @escaping @Sendable () -> Void = {}
    ) {
        self.launch = launch
        self.onFinish = onFinish
    }

    /// Adds a handler that receives this download's progress from now on.
    func addProgressHandler(_ handler: (@Sendable (DownloadProgress) -> Void)?) {
        guard let handler else { return }
        progressHandlers.withLock { $0.append(handler) }
    }

    /// What ``Downloader/downloadAll(_:maxConcurrentFiles:reportsProgress:)`` hears about each run: when it
    /// stops fetching (its slot is free, before the file is made durable), and how it ended.
    struct RunObserver: Sendable {
        var transferEnded: @Sendable () -> Void
        var runEnded: @Sendable (Result<DownloadResult, DownloadError>) -> Void
    }

    private let observer = Mutex<RunObserver?>(nil)

    /// Sets the observer; call before ``begin()``.
    func observe(_ observer: RunObserver) {
        self.observer.withLock { $0 = observer }
    }

    func reportTransferEnd() {
        observer.withLock { $0 }?.transferEnded()
    }

    /// Hands `progress` to every handler (on the transfer thread).
    func reportProgress(_ progress: DownloadProgress) {
        let handlers = progressHandlers.withLock { $0 }
        for handler in handlers { handler(progress) }
    }

    func begin() {
        let control = launch(self, 0)
        inner.withLock { $0.control = control }
    }

    /// The current state.
    public var state: State { inner.withLock { $0.state } }

    /// This download's progress as an `AsyncSequence`, read on the iterating task (no lock
    /// needed for state it keeps), every ``Downloader/Configuration/progressInterval``.
    ///
    /// The newest report waits for the reader and older unread ones are dropped, so a slow reader
    /// never holds up the download. The sequence ends when the download finishes, fails or is
    /// cancelled (a pause does not end it); at once if it already has.
    ///
    /// ```swift
    /// let task = try downloader.start(request, to: "big.iso")
    /// for await progress in task.progressUpdates {
    ///     print(progress.bytesDone, progress.totalBytes ?? -1)
    /// }
    /// let result = try await task.result()
    /// ```
    public var progressUpdates: AsyncStream<DownloadProgress> {
        let (stream, continuation) = AsyncStream.makeStream(
            of: DownloadProgress.self, bufferingPolicy: .bufferingNewest(1))
        let ended = inner.withLock { inner -> Bool in
            guard inner.outcome == nil else { return true }
            inner.progressStreams.append(continuation)
            return false
        }
        if ended {
            continuation.finish()
        } else {
            addProgressHandler { continuation.yield($0) }
        }
        return stream
    }

    /// Stops transferring and keeps the partial download; ``resume()`` continues it.
    public func pause() {
        let control = inner.withLock { inner -> DownloadControl? in
            guard inner.state == .running else { return nil }
            inner.state = .paused
            inner.resumesOnStop = false
            return inner.control
        }
        control?.pause()
    }

    /// Continues a paused download from its segment map (once the paused run has stopped, when
    /// it has not yet).
    public func resume() {
        let run = inner.withLock { inner -> Int? in
            guard inner.state == .paused else { return nil }
            inner.state = .running
            guard !inner.runActive else {
                inner.resumesOnStop = true
                return nil
            }
            return inner.nextRun()
        }
        if let run { relaunch(run) }
    }

    private func relaunch(_ run: Int) {
        let control = launch(self, run)
        inner.withLock { inner in
            if inner.run == run { inner.control = control }
        }
    }

    /// Stops the download and deletes its partial state; ``result()`` throws
    /// ``DownloadError/Kind/cancelled``.
    public func cancel() {
        let control = inner.withLock { inner -> DownloadControl? in
            guard inner.state == .running || inner.state == .paused else { return nil }
            inner.state = .cancelled
            inner.resumesOnStop = false
            return inner.control
        }
        control?.cancel { [self] in
            finish(.failure(DownloadError(.cancelled, "download cancelled; partial data deleted")))
        }
    }

    /// Waits for the download to finish, fail or be cancelled.
    public func result() async throws(DownloadError) -> DownloadResult {
        let id = inner.withLock { inner -> Int in
            inner.nextWaiter += 1
            return inner.nextWaiter
        }
        let outcome = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: Waiter) in
                let ready = inner.withLock { inner -> Result<DownloadResult, DownloadError>? in
                    if let outcome = inner.outcome { return outcome }
                    if inner.interruptedEarly.remove(id) != nil { return DownloadTask.interrupted }
                    inner.waiters[id] = continuation
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            // Another caller still waits for this (coalesced) download: just stop waiting.
            let detached = inner.withLock { inner -> Waiter? in
                let others = inner.waiters.keys.filter { $0 != id && !inner.answerOnStop.contains($0) }
                guard !others.isEmpty else { return nil }
                if let waiter = inner.waiters.removeValue(forKey: id) { return waiter }
                inner.interruptedEarly.insert(id)
                return nil
            }
            if let detached {
                detached.resume(returning: DownloadTask.interrupted)
                return
            }
            if inner.withLock({ $0.interruptedEarly.contains(id) }) { return }
            // Pause, and answer this caller once the run has stopped and saved its state.
            self.pause()
            let waiter = inner.withLock { inner -> Waiter? in
                if inner.runActive {
                    inner.answerOnStop.insert(id)
                    return nil
                }
                if let waiter = inner.waiters.removeValue(forKey: id) { return waiter }
                inner.interruptedEarly.insert(id)
                return nil
            }
            waiter?.resume(returning: DownloadTask.interrupted)
        }
        return try outcome.get()
    }

    private static let interrupted: Result<DownloadResult, DownloadError> =
        .failure(DownloadError(.interrupted, "download paused", remedy: .resume))

    /// A run ended. A pause is not an outcome; anything else is.
    func runEnded(_ outcome: Result<DownloadResult, DownloadError>, run: Int) {
        let current = inner.withLock { inner -> Bool in
            guard inner.run == run else { return false }
            inner.runActive = false
            return true
        }
        guard current else { return }
        guard case .failure(let error) = outcome, error.kind == .interrupted else {
            finish(outcome)
            observer.withLock { $0 }?.runEnded(outcome)
            return
        }
        let (interrupted, next) = inner.withLock { inner -> ([Waiter], Int?) in
            var next: Int?
            if inner.resumesOnStop {
                // Resumed while it stopped: the download goes on, with a new run.
                inner.resumesOnStop = false
                next = inner.nextRun()
            } else if inner.state == .running {
                inner.state = .paused
            }
            let ids = inner.answerOnStop
            inner.answerOnStop.removeAll()
            let waiters = ids.compactMap { id -> Waiter? in
                if let waiter = inner.waiters.removeValue(forKey: id) { return waiter }
                inner.interruptedEarly.insert(id)
                return nil
            }
            return (waiters, next)
        }
        for waiter in interrupted { waiter.resume(returning: outcome) }
        if let next {
            relaunch(next)
        } else {
            observer.withLock { $0 }?.runEnded(outcome)
        }
    }

    private func finish(_ outcome: Result<DownloadResult, DownloadError>) {
        typealias Ending = (
            waiters: [Waiter], final: Result<DownloadResult, DownloadError>, first: Bool,
            streams: [AsyncStream<DownloadProgress>.Continuation]
        )
        let ending = inner.withLock { inner -> Ending in
            let first = inner.outcome == nil
            if inner.outcome == nil {
                inner.outcome = outcome
                switch outcome {
                case .success: inner.state = .finished
                case .failure(let error) where error.kind == .cancelled: inner.state = .cancelled
                case .failure: inner.state = .failed
                }
            }
            defer {
                inner.waiters.removeAll()
                inner.progressStreams.removeAll()
            }
            return (Array(inner.waiters.values), inner.outcome!, first, inner.progressStreams)
        }
        for stream in ending.streams { stream.finish() }
        if ending.first { onFinish() }
        for waiter in ending.waiters { waiter.resume(returning: ending.final) }
    }
}
