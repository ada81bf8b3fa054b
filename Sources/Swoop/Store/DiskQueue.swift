import Dispatch
import SwoopTransfer

/// The downloader's serial queue for blocking file work (fsync, the segment map, rename, close),
/// and the way back to the transfer thread.
///
/// Serial, so one download's file operations happen in the order they were queued: a close or a
/// delete queued after a checkpoint runs after it. The transfer thread never blocks on the disk.
struct DiskQueue: Sendable {
    let queue: DispatchQueue
    let loop: TransferLoop

    /// Runs `work` on the disk queue, then `then` with its result on the transfer thread. If the
    /// loop is shutting down by then, `then` is dropped (nothing can run on the loop any more).
    func run<Value: Sendable>(_ work: @escaping @Sendable () -> Value, then: @escaping (Value) -> Void) {
        let back = LoopBound(then)
        let loop = self.loop
        queue.async {
            let value = work()
            loop.execute { back.value(value) }
        }
    }

    /// Runs `work` on the disk queue; nothing comes back.
    func run(_ work: @escaping @Sendable () -> Void) {
        queue.async(execute: work)
    }
}

/// Carries a transfer-thread object through a `@Sendable` closure that runs on the transfer thread.
///
/// `@unchecked Sendable`: `value` is only read inside closures passed to ``TransferLoop/execute(_:)``.
struct LoopBound<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
