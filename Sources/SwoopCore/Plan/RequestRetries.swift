/// One request's failed tries, as every exchange that asks again keeps them (the probe, a mirror's
/// check, a name lookup, a document such as an S3 listing page): how many, since when the request
/// has been failing and when its next try is due, the wait before it (the ``FailurePolicy``'s
/// backoff) and the one wording of giving up. A byte range's tries are its segment's in the plan
/// (``FailedRequest``), decided by the same policy. The shell only runs the timer the answer names.
package struct RequestRetries {
    /// Since when the request has been failing, with what, and when its next try is due.
    package struct Failing {
        package var error: DownloadError
        package var since: Moment
        package var nextTry: Moment
    }

    /// What follows a failed try.
    package enum Next {
        /// Send the request again after this long.
        case again(after: Duration)
        /// Stop asking: the error to end with, saying how many tries it took.
        case giveUp(DownloadError)
    }

    /// Tries that failed so far.
    package private(set) var tries = 0
    /// Set while a next try is waited for.
    package private(set) var failing: Failing?

    package init() {}

    /// Try number `tries + 1` failed with `error` at `now`: asked again after the policy's backoff
    /// while the error is transient and tries remain, else given up with the count said.
    package mutating func failed(
        _ error: DownloadError, retryAfter: Int?, policy: FailurePolicy, at now: Moment
    ) -> Next {
        tries += 1
        guard let delay = policy.retryDelay(after: tries, error, retryAfter: retryAfter) else {
            failing = nil
            return .giveUp(error.gaveUp(after: tries))
        }
        waits(delay, failing: error, at: now)
        return .again(after: delay)
    }

    /// The next try is due after `delay`, following `error` (a failed try, or a download that
    /// starts over); a request that was failing already keeps the moment it began to.
    package mutating func waits(_ delay: Duration, failing error: DownloadError, at now: Moment) {
        failing = Failing(error: error, since: failing?.since ?? now, nextTry: now + delay)
    }
}

extension Wording {
    /// `" (gave up after 3 tries)"`, the one wording of a request given up; empty after a single
    /// try (nothing was asked again).
    package static func gaveUp(after tries: Int) -> String {
        tries > 1 ? " (gave up after \(Self.tries(tries)))" : ""
    }
}

extension DownloadError {
    /// The failure of a request given up after `tries` tries, saying so (``Wording/gaveUp(after:)``).
    package func gaveUp(after tries: Int, remedy: Remedy? = nil) -> DownloadError {
        adding(Wording.gaveUp(after: tries), remedy: remedy)
    }
}
