import Dispatch
import SwoopCore

/// Group commit for files finished without a segment map (small files that arrived in one
/// response, streams): while one group is being made durable and put into place, the files that
/// finish meanwhile wait, and go together as the next group, so many files share one sync and one
/// directory `fsync`. A file that finishes while nothing is being published goes at once:
/// grouping adds no delay when there is nothing to group.
///
/// The bytes of the files that wait stay in memory, unless they add up to ``writeOutAt``: then
/// they are written out while the group before them commits (``Finalizer/write(_:)`` on a queue of
/// its own), and wait as descriptors of unnamed files. A list of 48 KiB files held up to 12 MiB of
/// them (256 files). A list of 1 KiB files never reaches the mark, and its groups are written and
/// committed in one step: writing each file out as it came cost such a list 8% more processor
/// time (a hop to the writing queue and back for every few files) and half a MiB of memory (the
/// C library's arena for one more thread).
///
/// One per ``Downloader``, on its own queues, so a group of small files never waits behind a
/// large download's checkpoint on the ``DiskQueue``.
///
/// `@unchecked Sendable`: its state is touched only on the transfer thread.
package final class PublishQueue: @unchecked Sendable {
    private typealias Completion = (DownloadError?) -> Void

    private let committing: DiskQueue
    private let writing: DiskQueue
    /// Files handed over, their bytes not yet written out, and how many bytes they hold.
    private var waiting: [(item: Finalizer.Item, then: Completion)] = []
    private var waitingBytes = 0
    /// Files written out ahead of their group.
    private var written: [(file: Finalizer.Written, then: Completion)] = []
    private var isCommitting = false
    private var isWriting = false
    /// Files per group at most.
    package static let batchLimit = 256
    /// The bytes files waiting for their group may hold in memory before they are written out.
    package static let writeOutAt = 1 << 20

    /// Runs on the commit queue before each group (tests hold a group back with it).
    private let beforeEachGroup: (@Sendable () -> Void)?

    package init(loop: any LoopExecutor, beforeEachGroup: (@Sendable () -> Void)? = nil) {
        committing = DiskQueue(queue: DispatchQueue(label: "swoop.publish"), loop: loop)
        writing = DiskQueue(queue: DispatchQueue(label: "swoop.publish.write"), loop: loop)
        self.beforeEachGroup = beforeEachGroup
    }

    /// Files written out ahead of their group, waiting for it.
    package var writtenAhead: Int { written.count }

    /// Publishes `item` with the next group, then calls `then` on the transfer thread with its
    /// failure, if any.
    package func publish(_ item: Finalizer.Item, then: @escaping (DownloadError?) -> Void) {
        waiting.append((item, then))
        waitingBytes += item.bytesHeld
        if !isCommitting {
            commitNext()
        } else if waitingBytes >= Self.writeOutAt && !isWriting {
            writeOutWaiting()
        }
    }

    /// Commits the next group: the files written out first, then those waiting (written out in
    /// the same step), at most ``batchLimit``.
    private func commitNext() {
        guard !written.isEmpty || !waiting.isEmpty else {
            isCommitting = false
            return
        }
        isCommitting = true
        // Bounded, so a backlog becomes visible (and its memory freed) in steps.
        let ready = written.prefix(Self.batchLimit)
        written.removeFirst(ready.count)
        let fresh = waiting.prefix(Self.batchLimit - ready.count)
        waiting.removeFirst(fresh.count)
        waitingBytes -= fresh.reduce(0) { $0 + $1.item.bytesHeld }
        let files = ready.map(\.file)
        let items = fresh.map(\.item)
        let then = ready.map(\.then) + fresh.map(\.then)
        let beforeEachGroup = self.beforeEachGroup
        committing.run(
            {
                beforeEachGroup?()
                return Finalizer.commit(files + Finalizer.write(items))
            },
            then: { [self] failures in
                for (then, failure) in zip(then, failures) { then(failure) }
                commitNext()
            })
    }

    /// Writes out the files waiting, so they wait for their group as descriptors.
    private func writeOutWaiting() {
        isWriting = true
        let items = waiting.map(\.item)
        let then = waiting.map(\.then)
        waiting.removeAll()
        waitingBytes = 0
        writing.run(
            { Finalizer.write(items) },
            then: { [self] files in
                isWriting = false
                written.append(contentsOf: zip(files, then).map { ($0, $1) })
                if !isCommitting { commitNext() }
            })
    }
}
