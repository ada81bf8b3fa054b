import SwoopCore

/// Runs work at once on the caller's thread, for a store's sink in tests that never close it: a
/// sink uses its loop only to close.
final class InlineExecutor: LoopExecutor {
    func execute(_ work: @escaping @Sendable () -> Void) -> Bool {
        work()
        return true
    }
    func afterCallbacks(_ work: @escaping () -> Void) { work() }
}
