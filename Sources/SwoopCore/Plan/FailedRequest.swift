/// A segment request that failed, as the transfer knows it then: what it says about the object or
/// its source, where it went, and how its range has fared. ``FailurePolicy/action(for:using:)``
/// decides what follows; the transfer performs it.
package struct FailedRequest: Equatable {
    /// What the failure says.
    package enum Finding: Equatable {
        /// The source serves another object now (its validators changed, or its bytes did): why.
        case objectChanged(String)
        /// The source's health heard the failure: its verdict (``SourceHealth/Verdict``).
        case source(SourceHealth.Verdict)
    }

    package var finding: Finding
    /// The request went to the download's first source (whose object is the reference).
    package var fromFirstSource: Bool
    /// Another source is usable: it can take this one's ranges.
    package var othersUsable: Bool
    /// The range's failures without progress before this one.
    package var failuresWithoutProgress: Int
    /// The response's `Retry-After`, in seconds.
    package var retryAfter: Int?

    package init(
        _ finding: Finding, fromFirstSource: Bool, othersUsable: Bool, failuresWithoutProgress: Int,
        retryAfter: Int? = nil
    ) {
        self.finding = finding
        self.fromFirstSource = fromFirstSource
        self.othersUsable = othersUsable
        self.failuresWithoutProgress = failuresWithoutProgress
        self.retryAfter = retryAfter
    }
}

/// What a failed segment request leads to. In every case but ``retry(after:)`` the range goes
/// back to the plan uncharged.
package enum FailedRequestAction: Equatable {
    /// Another source takes the range, or it waits for its source, which is not to blame;
    /// `countsAsRetry` unless the source only refused a connection over its cap.
    case release(countsAsRetry: Bool)
    /// The source is dropped (why); the others take its ranges.
    case dropSource(String)
    /// The first source's object changed (or no other source is left to serve the old one): the
    /// download starts over.
    case startOver
    /// The range is asked again after the delay; it is charged a failure without progress.
    case retry(after: Duration)
    /// The range failed ``FailurePolicy/maxTries`` times without progress while its source
    /// answered: the download fails, and downloading again resumes (the delay is the range's
    /// next try, kept in the plan).
    case failAfterTries(retryAt: Duration)
    /// The only source is given up (why): the download fails.
    case giveUp(String)
}

extension FailurePolicy {
    /// What `failure` leads to: a changed object restarts the download unless a mirror changed
    /// while another source is left; a source given up is dropped while another is left; a range
    /// whose source is up is retried with backoff until ``maxTries`` failures without progress.
    package func action(
        for failure: FailedRequest, using random: inout some RandomNumberGenerator
    ) -> FailedRequestAction {
        switch failure.finding {
        case .objectChanged(let why):
            guard !failure.fromFirstSource, failure.othersUsable else { return .startOver }
            return .dropSource("its object changed (\(why))")
        case .source(.limited):
            return .release(countsAsRetry: false)
        case .source(.rest), .source(.down):
            return .release(countsAsRetry: true)
        case .source(.giveUp(let reason)):
            return failure.othersUsable ? .dropSource(reason) : .giveUp(reason)
        case .source(.retryRange):
            let tries = failure.failuresWithoutProgress + 1
            let delay = backoff(tries: tries, retryAfter: failure.retryAfter, using: &random)
            return tries >= maxTries ? .failAfterTries(retryAt: delay) : .retry(after: delay)
        }
    }

    package func action(for failure: FailedRequest) -> FailedRequestAction {
        var random = SystemRandomNumberGenerator()
        return action(for: failure, using: &random)
    }
}
