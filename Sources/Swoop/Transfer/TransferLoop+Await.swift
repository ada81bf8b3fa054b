import SwoopCurl

/// A job that runs on the transfer thread (a listing page's fetch, the seams of a shared object)
/// and reports once: it can be cancelled from the thread.
protocol LoopJob: AnyObject {
    /// Starts it; it reports through the completion it was made with.
    func start()
    /// Stops it; it reports that it was cancelled.
    func cancel()
}

extension TransferLoop {
    /// Makes a job on the transfer thread with the completion it reports through once, starts it,
    /// and waits for its result from any task: cancelling the task cancels the job, and a loop that
    /// was shut down gives `shutDown`.
    func result<T: Sendable>(
        of make: @escaping @Sendable (_ completion: @escaping (T) -> Void) -> any LoopJob, shutDown: T
    ) async -> T {
        let slot = JobSlot()
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<T, Never>) in
                let accepted = execute {
                    let job = make { result in
                        slot.job = nil
                        continuation.resume(returning: result)
                    }
                    slot.job = job
                    job.start()
                }
                if !accepted { continuation.resume(returning: shutDown) }
            }
        } onCancel: {
            _ = execute { slot.job?.cancel() }
        }
    }
}

/// The job in flight, for a cancellation to reach. `@unchecked Sendable`: `job` is touched only on
/// the transfer thread.
private final class JobSlot: @unchecked Sendable {
    var job: (any LoopJob)?
}
