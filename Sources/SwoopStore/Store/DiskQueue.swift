import Dispatch
import SwoopCore

/// The downloader's serial queue for blocking file work (fsync, the segment map, rename, close),
/// and the way back to the transfer thread.
///
/// Serial, so one download's file operations happen in the order they were queued: a close or a
/// delete queued after a checkpoint runs after it. The transfer thread never blocks on the disk.
package struct DiskQueue: Sendable {
    package let queue: DispatchQueue
    package let loop: any LoopExecutor

    package init(queue: DispatchQueue, loop: any LoopExecutor) {
        self.queue = queue
        self.loop = loop
    }

    /// Runs `work` on the disk queue, then `then` with its result on the transfer thread. If the
    /// loop is shutting down by then, `then` is dropped (nothing can run on the loop any more).
    package func run<Value: Sendable>(_ work: @escaping @Sendable () -> Value, then: @escaping (Value) -> Void) {
        let back = LoopBound(then)
        let loop = self.loop
        queue.async {
            let value = work()
            loop.execute { back.value(value) }
        }
    }

    /// Runs `work` on the disk queue; nothing comes back.
    package func run(_ work: @escaping @Sendable () -> Void) {
        queue.async(execute: work)
    }
}

/// Carries a transfer-thread object through a `@Sendable` closure that runs on the transfer thread.
///
/// `@unchecked Sendable`: `value` is only read inside closures passed to ``LoopExecutor/execute(_:)``.
package struct LoopBound<Value>: @unchecked Sendable {
    package let value: Value
    package init(_ value: Value) { self.value = value }
}
