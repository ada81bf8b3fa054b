import SwoopCore

/// Group commit for files finished without a segment map (small files that arrived in one
/// response, streams): while one batch is being made durable and renamed into place, the files
/// that finish meanwhile wait, and go together as the next batch, so many files share one sync
/// and one directory `fsync`. A file that finishes while nothing is being published goes at once:
/// batching adds no delay when there is nothing to batch.
///
/// One per ``Downloader``, on its own serial queue, so a batch of small files never waits behind a
/// large download's checkpoint on the ``DiskQueue``.
///
/// `@unchecked Sendable`: `waiting` and `busy` are touched only on the transfer thread.
package final class PublishQueue: @unchecked Sendable {
    private let disk: DiskQueue
    private var waiting: [(item: Finalizer.Item, then: (DownloadError?) -> Void)] = []
    private var busy = false
    /// Files per batch at most.
    package static let batchLimit = 256

    package init(disk: DiskQueue) {
        self.disk = disk
    }

    /// Publishes `item` with the next batch, then calls `then` on the transfer thread with its
    /// failure, if any.
    package func publish(_ item: Finalizer.Item, then: @escaping (DownloadError?) -> Void) {
        waiting.append((item, then))
        if !busy { publishWaiting() }
    }

    private func publishWaiting() {
        guard !waiting.isEmpty else {
            busy = false
            return
        }
        busy = true
        // Bounded, so a backlog becomes visible (and its memory freed) in steps.
        let batch = Array(waiting.prefix(Self.batchLimit))
        waiting.removeFirst(batch.count)
        let items = batch.map(\.item)
        disk.run(
            { Finalizer.finalize(batch: items) },
            then: { [self] failures in
                for (entry, failure) in zip(batch, failures) { entry.then(failure) }
                publishWaiting()
            })
    }
}
