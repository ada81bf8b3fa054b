import SwoopStore

/// Starting over: an object that changed (from the beginning, on its new version, within
/// `maxTries`; a finished file of the earlier version replaced once the new one is whole), and a
/// single stream that broke off (after a backoff). The ``SessionMachine`` decides; the session
/// performs (``perform(_:)``).
extension DownloadSession {
    func transfer(_ run: TransferRun, streamBrokeOff error: DownloadError) {
        guard current(run) != nil else { return }
        perform(machine.streamBrokeOff(error))
    }

    /// Starts over from byte 0, within `maxTries`: the object changed, or the partial state did
    /// not match it. A file this download finished, of the earlier version, is replaced once the
    /// new one is whole.
    func restartFromScratch(_ reason: String) {
        var finished: String?
        if case .completed = basis { finished = context.paths.target }
        perform(machine.objectChanged(reason, held: bytesHeld, finishedTarget: finished))
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
        basis = .fresh
        restartStage(discarding: true, then: next)
    }

    /// The stage's work stops and the sink closes (`discarding` what it holds, or keeping a resumed
    /// part file); `next` runs on the transfer thread once it has, unless the session moved on.
    func restartStage(discarding: Bool, then next: @escaping () -> Void) {
        stopWork(of: stage)
        stage = .starting
        context.sink.close(discarding: discarding) { [self] in
            guard case .starting = stage else { return }
            next()
        }
    }
}
