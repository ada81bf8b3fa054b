import SwoopStore
import SwoopTransfer

/// What an ended request means: an expired URL refreshed, a changed object, the failure
/// policy's verdict (retry the range, wait for its source, another source, or fail), a single
/// stream that broke off.
extension TransferRun {
    /// A segment request failed: the URL expired, the object changed, or the failure policy
    /// decides between retrying the range, waiting for its source, another source, or failing.
    func requestFailed(
        _ segment: Segment, requested: ByteRange, error: DownloadError, retryAfter: Int?, on connection: Connection,
        from source: Source?
    ) {
        guard let plan = store.plan else { return }
        if let refresher, let checks = sources.checks, source === sources.primary, let sent = connection.url,
            URLExpiry.isRefusal(error, url: sent, now: URLExpiry.now), let range = sources.sampleRange(near: firstRange)
        {
            // The URL expired: the range waits for a fresh one, which every refused request shares.
            source?.health.abandonTrial(by: connection.token)  // an answer, though not a usable one: no outage
            plan.release(segment, failed: false)
            checks.refresh(sources.primary, refused: sent, refresher: refresher, range: range) {
                [weak self] error in
                guard let self, !stopped else { return }
                if let error { delegate?.transfer(self, didFailWith: error) } else { dispatchWork() }
            }
            dispatchWork()
            return
        }
        if handleRefusal(segment, on: connection, error: error) {
            source?.health.abandonTrial(by: connection.token)  // an answer, though not a usable one: no outage
            return
        }
        let finding: FailedRequest.Finding
        if error.kind == .objectChanged {
            source?.health.abandonTrial(by: connection.token)
            finding = .objectChanged(error.reason)
        } else {
            finding = .source(
                source.map {
                    sources.failed(
                        $0, error, answered: connection.wasAnswered, retryAfter: retryAfter,
                        policy: settings.failures, by: connection.token, at: .now)
                } ?? .retryRange)
        }
        let failure = FailedRequest(
            finding, fromFirstSource: source.map { $0 === sources.primary } ?? true,
            othersUsable: sources.usable.contains { $0 !== source },
            failuresWithoutProgress: segment.failuresWithoutProgress, retryAfter: retryAfter)
        switch settings.failures.action(for: failure) {
        case .release(let countsAsRetry):
            // Another source takes the range over, or it waits for its source; it is not to blame.
            if countsAsRetry { counters.retries += 1 }
            plan.release(segment, failed: false)
        case .dropSource(let reason):
            if let source { sources.drop(source, reason) }
            plan.release(segment, failed: false)
        case .startOver:
            delegate?.transfer(self, foundObjectChanged: error.message, versions: store.versionsInDisagreement)
            return
        case .giveUp(let reason):
            plan.release(segment, failed: false)
            delegate?.transfer(self, didFailWith: givingUp(error, reason: reason))
            return
        case .failAfterTries(let delay):
            plan.release(segment, failed: true, retryAt: .now + delay)
            // The segment map keeps everything else; downloading again resumes.
            var detail = " (gave up after \(Wording.tries(settings.failures.maxTries)))"
            if let others = sources.whyOthersCannotHelp { detail += "; no other source can take over: " + others }
            delegate?.transfer(self, didFailWith: error.adding(detail, remedy: .resume))
            return
        case .retry(let delay):
            plan.release(segment, failed: true, retryAt: .now + delay)
            counters.retries += 1
            logger.info(
                "request failed; retrying",
                metadata: ["range": "\(requested)", "error": "\(error)", "delay": "\(delay)"])
        }
        store.checkpointIfDue()
        dispatchWork()
    }

    /// The download's failure when the only source is given up: a permanent failure as it is, an
    /// outage with how long it lasted; either way what the other sources could not do.
    private func givingUp(_ error: DownloadError, reason: String) -> DownloadError {
        let others = sources.whyOthersCannotHelp.map { "; no other source can take over: " + $0 } ?? ""
        guard error.isTransient else { return error.adding(others) }
        return error.replacing(reason: reason + others, remedy: .resume)
    }

    /// The single stream ended.
    func streamEnded(_ outcome: Connection.Outcome) {
        switch outcome {
        case .completed:
            if let size = object.size, store.streamPosition != size {
                let message = "the server closed the connection after \(store.streamPosition) of \(Wording.bytes(size))"
                delegate?.transfer(self, streamBrokeOff: .invalidResponse(message))
                return
            }
            delegate?.transferDidComplete(self)
        case .failed(let error, _) where error.isTransient:
            delegate?.transfer(self, streamBrokeOff: error)
        case .failed(let error, _):
            delegate?.transfer(self, didFailWith: error)
        case .stopped, .cancelled:
            break
        }
    }
}
