import Synchronization

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
    /// `items` is read lazily, as files finish fetching, so a long list (a generated sequence, a
    /// file read line by line) is never held in memory at once: the downloader keeps about 60
    /// bytes per distinct file it has seen.
    public func downloadAll<Items: Sequence & Sendable>(
        _ items: Items, maxConcurrentFiles: Int = 8
    ) -> AsyncStream<BulkEvent> where Items.Element == BulkItem {
        let (stream, continuation) = AsyncStream.makeStream(of: BulkEvent.self, bufferingPolicy: .unbounded)
        let producer = Task {
            let summary = await runAll(items, limit: max(1, maxConcurrentFiles), continuation: continuation)
            continuation.yield(.completed(summary))
            continuation.finish()
        }
        continuation.onTermination = { _ in producer.cancel() }
        return stream
    }

    private func runAll<Items: Sequence>(
        _ items: Items, limit: Int, continuation: AsyncStream<BulkEvent>.Continuation
    ) async -> BulkSummary where Items.Element == BulkItem {
        let started = ContinuousClock.now
        var summary = BulkSummary(files: 0, succeeded: 0, alreadyComplete: 0, failures: [], bytes: 0, bytesReceived: 0, duration: .zero)
        var ledger = BulkLedger(expected: items.underestimatedCount)
        var iterator = items.makeIterator()
        var input = 0
        // Downloads report to the mailbox from the transfer thread; this loop reads it until every
        // download it started has ended, even after its task is cancelled (they are paused then).
        let mailbox = BulkMailbox()
        let active = Mutex<[Int: DownloadTask]>([:])

        func report(_ index: Int, _ item: BulkItem, _ outcome: Result<DownloadResult, DownloadError>, leader keys: BulkLedger.Keys?) {
            switch outcome {
            case .success(let result):
                summary.succeeded += 1
                if result.alreadyComplete { summary.alreadyComplete += 1 }
                if keys != nil {
                    summary.bytes += result.bytes
                    summary.bytesReceived += result.bytesReceived
                }
                continuation.yield(.finished(index: index, result))
            case .failure(let error):
                let url = (try? RemoteURL(item.request.url))?.redacted ?? RemoteURL.strippingQuery(item.request.url)
                summary.failures.append(.init(index: index, url: url, destination: item.destination, error: error))
                continuation.yield(.failed(index: index, error))
            }
        }

        // A file holds one of the `limit` slots while it fetches; publishing it (a group commit of
        // small files) does not hold a slot, so the connections stay busy with the next files.
        // But no more than `backlog` files may wait to be published: where creating files is slow,
        // fetching would otherwise run ahead and hold them all in memory.
        var fetching = Set<Int>()
        var unfinished = 0
        let backlog = max(limit, 128)
        func mayStart() -> Bool { fetching.count < limit && unfinished - fetching.count < backlog }
        /// Reads items until one starts a download; repeats of earlier ones join their leader.
        func startNext() -> Bool {
            while !Task.isCancelled, let item = iterator.next() {
                let index = input
                input += 1
                summary.files += 1
                continuation.yield(.started(index: index))
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
                    let task = try start(item.request, to: item.destination, configuration: configuration, sink: .partFile, observer: observer) { progress in
                        continuation.yield(.progress(index: index, progress))
                    }
                    active.withLock { $0[index] = task }
                } catch {
                    mailbox.post(.ended(index, item, keys, .failure(error)))
                }
                return true
            }
            return false
        }

        await withTaskCancellationHandler {
            while mayStart(), startNext() {}
            while unfinished > 0 {
                switch await mailbox.next() {
                case .fetched(let index):
                    fetching.remove(index)
                case .ended(let leader, let item, let keys, let outcome):
                    fetching.remove(leader)
                    unfinished -= 1
                    active.withLock { _ = $0.removeValue(forKey: leader) }
                    report(leader, item, outcome, leader: keys)
                    for (index, follower) in ledger.finish(keys, index: leader, outcome: outcome, failureIndex: summary.failures.count - 1) {
                        report(index, follower, outcome, leader: nil)
                    }
                }
                while mayStart(), startNext() {}
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
        var queue: [BulkSignal] = []
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

    func next() async -> BulkSignal {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> BulkSignal? in
                guard state.head < state.queue.count else {
                    state.waiter = continuation
                    return nil
                }
                let signal = state.queue[state.head]
                state.head += 1
                if state.head == state.queue.count {
                    state.queue.removeAll(keepingCapacity: true)
                    state.head = 0
                }
                return signal
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}

/// Which items of a bulk download share a download, kept small: a 16-byte key per distinct URL
/// and destination that succeeded; the items that repeat a running download wait beside it (a
/// handful at a time).
struct BulkLedger {
    /// 128 bits: two of Swift's seeded hashes of the text with different prefixes. A collision
    /// among a few million keys is astronomically unlikely.
    /// The lowest bit is always clear: a finished download's entry uses it to say whether it
    /// was already complete (127 bits of hash are as unlikely to collide).
    struct Key: Hashable, Sendable {
        let first: Int
        let second: Int

        init(_ text: String) {
            var one = Hasher()
            one.combine(0x5357_4F4F)
            one.combine(text)
            var two = Hasher()
            two.combine(0x4C45_4447)
            two.combine(text)
            first = one.finalize()
            second = two.finalize() & ~1
        }

        private init(first: Int, second: Int) {
            self.first = first
            self.second = second
        }

        /// This key, marked as a download that found its file already complete.
        var markedAlreadyComplete: Key { Key(first: first, second: second | 1) }
    }

    /// How a finished download ended, so a later repeat of it shares the outcome.
    enum Outcome {
        case succeeded(alreadyComplete: Bool)
        /// Its failure is `failures[index]` of the summary.
        case failed(failureIndex: Int)

        func result(for item: BulkItem, failures: [BulkSummary.Failure]) -> Result<DownloadResult, DownloadError> {
            switch self {
            case .failed(let index):
                return .failure(failures[index].error)
            case .succeeded(let alreadyComplete):
                // The repeat received nothing itself; it shares the leader's file.
                let size = (try? fileInfo(item.destination)).map { Int64($0.st_size) } ?? 0
                return .success(DownloadResult(
                    path: item.destination, bytes: size, bytesReceived: 0, bytesResumed: alreadyComplete ? size : 0,
                    duration: .zero, connectionsUsed: 0, requests: 0, retries: 0, etag: nil, alreadyComplete: alreadyComplete))
            }
        }
    }

    /// What identifies an item: the URL as the downloader keys it (no fragment, no surrounding
    /// spaces: what parsing it keeps) with the absolute destination.
    struct Keys: Sendable {
        let download: Key
    }

    private var running: [Key: (leader: Int, followers: [(Int, BulkItem)])] = [:]
    /// Downloads that succeeded (16 bytes each), and the few that failed.
    private var succeeded: Set<Key> = []
    private var failed: [Key: Int] = [:]

    /// Tables sized for `expected` items up front: growing one copies it, and a list of 100,000
    /// would briefly hold two.
    init(expected: Int) {
        succeeded.reserveCapacity(expected)
    }

    enum Admission {
        /// Download it.
        case leads
        /// An earlier item with the same URL and destination is downloading: it waits for that.
        case follows
        /// An earlier item with the same URL and destination has ended: share its outcome.
        case repeats(Outcome)
    }

    /// Admits `item` (the `index`th): its keys, and whether it leads a download or shares one.
    mutating func admit(_ item: BulkItem, index: Int) -> (Keys, Admission) {
        var url = Substring(item.request.url.trimmingWhitespace)
        if let hash = url.firstIndex(of: "#") { url = url[..<hash] }
        let keys = Keys(download: Key(String(url) + "\n" + FileName.absolute(item.destination)))
        if succeeded.contains(keys.download) { return (keys, .repeats(.succeeded(alreadyComplete: false))) }
        if succeeded.contains(keys.download.markedAlreadyComplete) { return (keys, .repeats(.succeeded(alreadyComplete: true))) }
        if let failure = failed[keys.download] { return (keys, .repeats(.failed(failureIndex: failure))) }
        if running[keys.download] != nil {
            running[keys.download]!.followers.append((index, item))
            return (keys, .follows)
        }
        running[keys.download] = (index, [])
        return (keys, .leads)
    }

    /// Records how the download led by `index` ended; returns the items that waited for it.
    mutating func finish(_ keys: Keys, index: Int, outcome: Result<DownloadResult, DownloadError>, failureIndex: Int) -> [(Int, BulkItem)] {
        guard let entry = running.removeValue(forKey: keys.download) else { return [] }
        switch outcome {
        case .success(let result): succeeded.insert(result.alreadyComplete ? keys.download.markedAlreadyComplete : keys.download)
        case .failure: failed[keys.download] = failureIndex
        }
        return entry.followers
    }

}
