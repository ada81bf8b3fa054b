import Synchronization
import SwoopStore

/// One file of a bulk download: what to fetch and where to put it.
public struct BulkItem: Sendable {
    public var request: DownloadRequest
    /// The target file path.
    public var destination: String

    public init(_ request: DownloadRequest, to destination: String) {
        self.request = request
        self.destination = destination
    }
}

/// What happens to the files of a bulk download, in order for each file.
public enum BulkEvent: Sendable {
    /// The file's download started (`index` is its position in the input).
    case started(index: Int)
    /// Progress of one file, every ``Downloader/Configuration/progressInterval``.
    case progress(index: Int, DownloadProgress)
    /// The file is complete at its destination (or already was).
    case finished(index: Int, DownloadResult)
    /// The file failed; the others go on.
    case failed(index: Int, DownloadError)
    /// Every file has ended: the last event.
    case completed(BulkSummary)
}

/// The outcome of a bulk download.
public struct BulkSummary: Sendable {
    /// A file that failed.
    public struct Failure: Sendable {
        public var index: Int
        /// The URL without credentials or query.
        public var url: String
        public var destination: String
        public var error: DownloadError
    }

    public var files: Int
    public var succeeded: Int
    /// Succeeded without downloading: the file was already complete.
    public var alreadyComplete: Int
    public var failures: [Failure]
    /// Bytes of the files that succeeded, once per distinct URL and destination (two items with
    /// different URLs written to one path count twice).
    public var bytes: Int64
    /// Bytes received over the network.
    public var bytesReceived: Int64
    public var duration: Duration

    public var failed: Int { failures.count }
}

extension Downloader {
    /// Downloads many files, at most `maxConcurrentFiles` at a time, all sharing this downloader's
    /// connections (``Configuration/connectionPool``).
    ///
    /// Small files arrive in a single request; large ones are split over several connections.
    /// One failure never stops the others. The same URL to the same destination is fetched once,
    /// even if it appears twice or another caller is downloading it. Files already complete
    /// are not downloaded again, and partial ones resume.
    ///
    /// ```swift
    /// for await event in downloader.downloadAll(items, maxConcurrentFiles: 16) {
    ///     if case .completed(let summary) = event { print(summary.failed, "failed") }
    /// }
    /// ```
    ///
    /// Stopping the iteration (or cancelling its task) pauses the downloads in flight.
    ///
    /// `reportsProgress: false` leaves out each file's ``BulkEvent/started(index:)`` and
    /// ``BulkEvent/progress(index:_:)``: a caller that shows no per-file progress hears only each
    /// file's outcome and the summary, which spares a list of small files a wake-up of the
    /// iterating task for every event (a tenth of its processor time, measured on 2,000 files).
    ///
    /// `items` is read lazily, as files finish fetching, so a long list (a generated sequence, a
    /// file read line by line) is never held in memory at once: the downloader keeps 20 to 40
    /// bytes per distinct file that succeeded (20 when `items.underestimatedCount` is the whole
    /// count, as an array's is), and the failures in full.
    public func downloadAll<Items: Sequence & Sendable>(
        _ items: Items, maxConcurrentFiles: Int = 8, reportsProgress: Bool = true
    ) -> AsyncStream<BulkEvent> where Items.Element == BulkItem {
        downloadAll(
            BulkItems(items: items), expectedCount: items.underestimatedCount, maxConcurrentFiles: maxConcurrentFiles,
            reportsProgress: reportsProgress)
    }

    /// ``downloadAll(_:maxConcurrentFiles:reportsProgress:)`` for items that arrive over time (a listing read page
    /// by page): downloads start with the first items, and the next are awaited as slots free up.
    /// An item sequence that throws ends the run there: the files started finish, and the summary
    /// reports the error as a failure (index: the next item's).
    public func downloadAll<Items: AsyncSequence & Sendable>(
        _ items: Items, maxConcurrentFiles: Int = 8, reportsProgress: Bool = true
    ) -> AsyncStream<BulkEvent> where Items.Element == BulkItem {
        downloadAll(
            items, expectedCount: 0, maxConcurrentFiles: maxConcurrentFiles, reportsProgress: reportsProgress)
    }

    /// ``downloadAll(_:maxConcurrentFiles:reportsProgress:)`` that hands each event to `events` as
    /// it happens and returns the summary when every file has ended (``BulkEvent/completed(_:)``
    /// is not handed over). Cancelling the calling task pauses the downloads in flight; the call
    /// returns once they have.
    ///
    /// `events` is called on the downloader's own threads, in order for each file; calls for
    /// different files may overlap (a file's progress with another's end), so it must be quick
    /// and safe to call from any thread. It spares each event a wake-up of an iterating task,
    /// which in a list of small files was 5% of the processor time of each file.
    ///
    /// ```swift
    /// let done = Atomic(0)
    /// let summary = await downloader.downloadAll(items, reportsProgress: false) { event in
    ///     if case .finished = event { done.add(1, ordering: .relaxed) }
    /// }
    /// ```
    public func downloadAll<Items: Sequence & Sendable>(
        _ items: Items, maxConcurrentFiles: Int = 8, reportsProgress: Bool = true,
        events: @escaping @Sendable (BulkEvent) -> Void
    ) async -> BulkSummary where Items.Element == BulkItem {
        await runAll(
            BulkItems(items: items), expectedCount: items.underestimatedCount, limit: max(1, maxConcurrentFiles),
            reportsProgress: reportsProgress, emit: events)
    }

    /// ``downloadAll(_:maxConcurrentFiles:reportsProgress:events:)`` for items that arrive over time
    /// (a listing read page by page), as ``downloadAll(_:maxConcurrentFiles:reportsProgress:)`` takes them.
    public func downloadAll<Items: AsyncSequence & Sendable>(
        _ items: Items, maxConcurrentFiles: Int = 8, reportsProgress: Bool = true,
        events: @escaping @Sendable (BulkEvent) -> Void
    ) async -> BulkSummary where Items.Element == BulkItem {
        await runAll(
            items, expectedCount: 0, limit: max(1, maxConcurrentFiles), reportsProgress: reportsProgress, emit: events)
    }

    private func downloadAll<Items: AsyncSequence & Sendable>(
        _ items: Items, expectedCount: Int, maxConcurrentFiles: Int, reportsProgress: Bool
    ) -> AsyncStream<BulkEvent> where Items.Element == BulkItem {
        let (stream, continuation) = AsyncStream.makeStream(of: BulkEvent.self, bufferingPolicy: .unbounded)
        let producer = Task {
            let summary = await runAll(
                items, expectedCount: expectedCount, limit: max(1, maxConcurrentFiles),
                reportsProgress: reportsProgress, emit: { continuation.yield($0) })
            continuation.yield(.completed(summary))
            continuation.finish()
        }
        continuation.onTermination = { _ in producer.cancel() }
        return stream
    }

    private func runAll<Items: AsyncSequence>(
        _ items: Items, expectedCount: Int, limit: Int, reportsProgress: Bool,
        emit: @escaping @Sendable (BulkEvent) -> Void
    ) async -> BulkSummary where Items.Element == BulkItem {
        let started = Moment.now
        var summary = BulkSummary(
            files: 0, succeeded: 0, alreadyComplete: 0, failures: [], bytes: 0, bytesReceived: 0, duration: .zero)
        var ledger = BulkLedger(expected: expectedCount)
        var iterator = items.makeAsyncIterator()
        var input = 0
        // Downloads report to the mailbox from the transfer thread; this loop reads it until every
        // download it started has ended, even after its task is cancelled (they are paused then).
        let mailbox = BulkMailbox()
        // Made once for the list: every download reads the same options, proxy variables and policy.
        let exchange = ExchangeSettings(configuration)
        let active = Mutex<[Int: DownloadTask]>([:])

        func report(
            _ index: Int, _ item: BulkItem, _ outcome: Result<DownloadResult, DownloadError>,
            leader keys: BulkLedger.Keys?
        ) {
            switch outcome {
            case .success(let result):
                summary.succeeded += 1
                if result.alreadyComplete { summary.alreadyComplete += 1 }
                if keys != nil {
                    summary.bytes += result.bytes
                    summary.bytesReceived += result.bytesReceived
                }
                emit(.finished(index: index, result))
            case .failure(let error):
                let url = (try? RemoteURL(item.request.url))?.redacted ?? RemoteURL.strippingQuery(item.request.url)
                summary.failures.append(.init(index: index, url: url, destination: item.destination, error: error))
                emit(.failed(index: index, error))
            }
        }

        // A file holds one of the `limit` slots while it fetches; publishing it (a group commit of
        // small files) does not hold a slot, so the connections stay busy with the next files.
        // But no more than `backlog` files may wait to be published: where creating files is slow,
        // fetching would otherwise run ahead and hold them all in memory. As many as two batches
        // take, the one being committed and a whole next one: each batch costs a sync of the file
        // system, and with one batch's worth a batch and the next shared it, so batches settled near
        // half a batch (20,000 files of 1 KiB on a fresh ext4: 152 batches of 132 on average).
        var fetching = Set<Int>()
        var unfinished = 0
        let backlog = max(limit, 2 * PublishQueue.batchLimit)
        func mayStart() -> Bool { fetching.count < limit && unfinished - fetching.count < backlog }
        func progressHandler(_ index: Int) -> @Sendable (DownloadProgress) -> Void {
            { emit(.progress(index: index, $0)) }
        }
        /// Reads items until one starts a download; repeats of earlier ones join their leader.
        func startNext() async -> Bool {
            while !Task.isCancelled, let item = await nextItem() {
                let index = input
                input += 1
                summary.files += 1
                if reportsProgress { emit(.started(index: index)) }
                let (keys, admission) = ledger.admit(item, index: index)
                switch admission {
                case .follows:
                    continue
                case .repeats(let outcome):
                    report(index, item, outcome.result(for: item, failures: summary.failures), leader: nil)
                    continue
                case .leads:
                    break
                }
                fetching.insert(index)
                unfinished += 1
                let observer = DownloadTask.RunObserver(
                    transferEnded: { mailbox.post(.fetched(index)) },
                    runEnded: { mailbox.post(.ended(index, item, keys, $0)) })
                do throws(DownloadError) {
                    let task = try start(
                        item.request, to: item.destination, configuration: configuration, sink: .partFile,
                        exchange: exchange, observer: observer, progress: reportsProgress ? progressHandler(index) : nil
                    )
                    active.withLock { $0[index] = task }
                } catch {
                    mailbox.post(.ended(index, item, keys, .failure(error)))
                }
                return true
            }
            return false
        }

        /// The next item; a listing that failed ends the items, reported as a failure.
        func nextItem() async -> BulkItem? {
            do {
                return try await iterator.next()
            } catch {
                let failure =
                    error as? DownloadError ?? DownloadError(.invalidRequest, "the list of files failed: \(error)")
                summary.failures.append(.init(index: input, url: "", destination: "", error: failure))
                emit(.failed(index: input, failure))
                return nil
            }
        }

        await withTaskCancellationHandler {
            while mayStart(), await startNext() {}
            while unfinished > 0 {
                switch await mailbox.next() {
                case .fetched(let index):
                    fetching.remove(index)
                case .ended(let leader, let item, let keys, let outcome):
                    fetching.remove(leader)
                    unfinished -= 1
                    active.withLock { _ = $0.removeValue(forKey: leader) }
                    report(leader, item, outcome, leader: keys)
                    for (index, follower) in ledger.finish(
                        keys, index: leader, outcome: outcome, failureIndex: summary.failures.count - 1)
                    {
                        report(index, follower, outcome, leader: nil)
                    }
                }
                while mayStart(), await startNext() {}
            }
        } onCancel: {
            // Stop: pause what runs (each keeps its state); their ends still arrive above.
            for task in active.withLock({ Array($0.values) }) { task.pause() }
        }
        summary.failures.sort { $0.index < $1.index }
        summary.duration = .now - started
        return summary
    }
}

/// What a bulk download's files report to the loop that schedules them.
private enum BulkSignal: Sendable {
    /// The file fetches nothing more: its slot is free.
    case fetched(Int)
    /// A run of the file's download ended.
    case ended(Int, BulkItem, BulkLedger.Keys, Result<DownloadResult, DownloadError>)
}

/// A queue of signals with one reader. Waiting is not cancellation-aware on purpose: after the
/// reader's task is cancelled it still waits for the downloads it paused to report their end.
private final class BulkMailbox: Sendable {
    private struct State {
        /// Each signal is moved out as it is read (`nil` left in its place): a copy of it, then the
        /// release of the one left behind, went through the enum's value witnesses (a list item,
        /// a result or an error in each), 4k instructions a file.
        var queue: [BulkSignal?] = []
        var head = 0
        var waiter: CheckedContinuation<BulkSignal, Never>?
    }

    private let state = Mutex(State())

    func post(_ signal: BulkSignal) {
        let waiter = state.withLock { state -> CheckedContinuation<BulkSignal, Never>? in
            if let waiter = state.waiter {
                state.waiter = nil
                return waiter
            }
            state.queue.append(signal)
            return nil
        }
        waiter?.resume(returning: signal)
    }

    /// The next signal: at once when one waits (no continuation, no suspension: while a list's
    /// downloads end faster than its task reads, most do), else when one is posted.
    func next() async -> BulkSignal {
        if let ready = state.withLock({ Self.take(from: &$0) }) { return ready }
        return await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> BulkSignal? in
                if let signal = Self.take(from: &state) { return signal }
                state.waiter = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    private static func take(from state: inout State) -> BulkSignal? {
        guard state.head < state.queue.count else { return nil }
        let signal = state.queue[state.head].take()
        state.head += 1
        if state.head == state.queue.count {
            state.queue.removeAll(keepingCapacity: true)
            state.head = 0
        } else if state.head >= 256 && state.head * 2 >= state.queue.count {
            // Under steady load the queue may never run empty: drop what was read, or
            // a list of 100,000 files kept every signal of the run (a MiB at the end).
            state.queue.removeFirst(state.head)
            state.head = 0
        }
        return signal
    }
}

/// A sequence read as an asynchronous one, with no suspension between its items.
private struct BulkItems<Items: Sequence & Sendable>: AsyncSequence, Sendable where Items.Element == BulkItem {
    let items: Items

    struct AsyncIterator: AsyncIteratorProtocol {
        var base: Items.Iterator
        mutating func next() async -> BulkItem? { base.next() }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(base: items.makeIterator()) }
}
