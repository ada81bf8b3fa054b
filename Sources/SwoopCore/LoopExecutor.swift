/// The thread that owns a download's state, as the code that works beside it (the disk queue,
/// the sinks, the verifier) reaches it: work handed over from any thread, and work put off until
/// the current callbacks have returned.
package protocol LoopExecutor: AnyObject, Sendable {
    /// Runs `work` on the thread; `false` (and `work` dropped) once the thread is stopping.
    @discardableResult
    func execute(_ work: @escaping @Sendable () -> Void) -> Bool

    /// On the thread: runs `work` at the next safe point, outside any callback.
    func afterCallbacks(_ work: @escaping () -> Void)
}
