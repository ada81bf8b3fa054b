import SwoopStore

/// Starting over: an object that changed (from the beginning, on its new version, within
/// `maxTries`; a finished file of the earlier version replaced once the new one is whole), and a
/// single stream that broke off (after a backoff).
extension DownloadSession {
    func transfer(_ run: TransferRun, streamBrokeOff error: DownloadError) {
        guard current(run) != nil else { return }
        let noRanges = "; the server does not support ranges, so the download cannot resume"
        // Bytes an in-order sink handed out cannot be taken back: it cannot start over.
        guard context.sink.window == nil,
            let delay = restarts.streamBroke(error, policy: context.settings.failures)
        else {
            let tries = restarts.streamTries > 1 ? " (tried \(restarts.streamTries) times)" : ""
            let remedy: DownloadError.Remedy? = context.sink.window == nil ? .startAgain : nil
            return stop(with: .failure(error.adding(noRanges + tries, remedy: remedy)))
        }
        let next = "\(restarts.streamTries + 1) of \(context.configuration.retry.maxTries)"
        logger.warning("\(error.reason)\(noRanges); starting over from the first byte in \(delay) (try \(next))")
        context.counters.retries += 1
        startOver { [self] in probe(after: (delay, failing: error)) }
    }

    /// Starts over from byte 0, within `maxTries`: the object changed, or the partial state did
    /// not match it. A file this download finished, of the earlier version, is replaced once the
    /// new one is whole.
    func restartFromScratch(_ reason: String) {
        let maxTries = context.configuration.retry.maxTries
        let held = bytesHeld
        var finished: String?
        if case .completed = basis { finished = context.paths.target }
        guard context.configuration.files.onObjectChange == .restart,
            restarts.objectChanged(held: held, maxTries: maxTries)
        else {
            discardOnStop = true
            // A stream has handed its bytes out: nothing of it is discarded, it only cannot go on.
            let consequence =
                if let finished {
                    "\(finished) is left as it was (the earlier version)"
                } else if context.sink.window == nil {
                    "not mixing versions, the partial download was discarded"
                } else {
                    "not mixing versions, the stream stops here (what it delivered is of the earlier version)"
                }
            let tries = restarts.changes > 0 ? " (started over \(Wording.count(restarts.changes, "time")))" : ""
            let message = "\(reason); \(consequence)\(tries)"
            return stop(with: .failure(DownloadError(.objectChanged, message)))
        }
        if finished != nil { context.sink.replacesTarget() }
        let refetched = held > 0 ? ", fetching \(Wording.bytes(held)) again" : ""
        logger.warning(
            "\(reason); starting over on the new version\(refetched) (\(restarts.changes) of \(maxTries))")
        startOver { [self] in probe() }
    }

    /// Bytes of the object on disk now (a finished file's, a partial download's).
    var bytesHeld: Int64 {
        if let store = stage.store { return store.bytesDone }
        switch basis {
        case .completed(let record, _): return record.size
        case .resuming(let map, _): return map.completedBytes
        case .fresh: return 0
        }
    }

    /// Goes back to the start: the stage's work stops, what the sink holds is discarded, and
    /// `next` runs on the transfer thread once the sink has closed.
    func startOver(then next: @escaping () -> Void) {
        stopWork(of: stage)
        basis = .fresh
        stage = .starting
        context.sink.close(discarding: true) { [self] in
            guard case .starting = stage else { return }
            next()
        }
    }
}
