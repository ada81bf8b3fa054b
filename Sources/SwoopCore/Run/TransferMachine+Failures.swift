/// What a failed segment request means: an expired URL waits for a fresh one, a changed object
/// starts over, and otherwise the failure policy's verdict: retry the range, wait for its source,
/// another source, or fail. (Answers under other validators are ``TransferMachine+Versions.swift``'s.)
extension TransferMachine {
    func requestFailed(
        _ segment: Segment, requested: ByteRange, error: DownloadError, retryAfter: Int?, slot: Int, source: Int?,
        _ end: RequestEnd, at now: Moment, into actions: inout [TransferAction]
    ) {
        if end.urlExpired, source == 0 {
            // The URL expired: the range waits for a fresh one, which every refused request shares
            // (an answer, though not a usable one: its host heard nothing, ``hostReport(slot:_:)``).
            plan.release(segment, failed: false)
            // The shell holds the source back while the fresh URL is checked, then dispatches.
            actions.append(.refresh(refusedOn: slot))
            return
        }
        // What the source's health made of the failure came in with the end.
        let finding: FailedRequest.Finding =
            error.kind == .objectChanged ? .objectChanged(error.reason) : .source(end.verdict ?? .retryRange)
        let samples = sourceSamples(at: now)
        let othersUsable = samples.indices.contains { $0 != source && samples[$0].isUsable }
        let failure = FailedRequest(
            finding, fromFirstSource: (source ?? 0) == 0, othersUsable: othersUsable,
            failuresWithoutProgress: segment.failuresWithoutProgress, retryAfter: retryAfter)
        switch settings.failures.action(for: failure, using: &random) {
        case .release(let countsAsRetry):
            // Another source takes the range over, or it waits for its source; it is not to blame.
            if countsAsRetry { actions.append(.retried) }
            plan.release(segment, failed: false)
        case .dropSource(let reason):
            if let source { drop(source, reason: reason, into: &actions) }
            plan.release(segment, failed: false)
        case .startOver:
            actions.append(.objectChanged(error.message))
            return
        case .giveUp(let reason):
            plan.release(segment, failed: false)
            actions.append(.fail(givingUp(error, reason: reason)))
            return
        case .failAfterTries(let delay):
            plan.release(segment, failed: true, retryAt: now + delay)
            // The segment map keeps everything else; downloading again resumes.
            var failure = error.gaveUp(after: settings.failures.maxTries, remedy: .resume)
            if let others = environment.whyOthersCannotHelp {
                failure = failure.adding("; no other source can take over: " + others)
            }
            actions.append(.fail(failure))
            return
        case .retry(let delay):
            plan.release(segment, failed: true, retryAt: now + delay)
            actions.append(.retried)
            actions.append(.note(.retrying(range: requested, error: error, delay: delay)))
        }
        actions.append(.checkpoint)
        dispatch(at: now, into: &actions)
    }

    /// The download's failure when the only source is given up: a permanent failure as it is, an
    /// outage with how long it lasted; either way what the other sources could not do.
    private func givingUp(_ error: DownloadError, reason: String) -> DownloadError {
        let others = environment.whyOthersCannotHelp.map { "; no other source can take over: " + $0 } ?? ""
        guard error.isTransient else { return error.adding(others) }
        return error.replacing(reason: reason + others, remedy: .resume)
    }
}
