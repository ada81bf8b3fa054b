import SwoopStore

/// Progress: the heartbeat's work and what a progress report says.
extension DownloadSession {
    /// Each progress interval: report, checkpoint if due, and end a download stuck with nothing
    /// in flight (see ``QuietWatch``), keeping what it has.
    func tick() {
        guard !isStopped else { return }
        progress.report(progressSnapshot())
        if case .transferring(let transfer) = stage { transfer.store.checkpointIfDue() }
        let idle: IdleWait? =
            switch stage {
            case .probing(let prober): prober.idle
            case .transferring(let transfer): transfer.run.idle
            default: nil
            }
        let others = context.loop.budget.active > 0
        guard let failure = progress.watch(idle: idle, bytes: context.counters.bytesReceived, othersActive: others)
        else {
            return
        }
        logger.error(
            "no request in flight and no progress; stopping", metadata: ["waiting for": "\(idle?.description ?? "")"])
        stop(with: .failure(failure))
    }

    var bytesDone: Int64 {
        if let store = stage.store { return store.bytesDone }
        if case .finalizing(let finishing) = stage { return totalBytes ?? finishing.size }
        if case .probing(let prober) = stage { return prober.bytesKept }
        return 0
    }

    /// Each source's bytes and state, for a download from several URLs.
    var sourceReports: [DownloadResult.Source] {
        guard sources.entries.count > 1 else { return [] }
        guard stage.run == nil else { return sources.reports }
        // As a transfer of one response reports it: the first source, with its bytes.
        if let keptWholeFrom { return [keptWholeFrom] }
        return sources.entries.map(\.current).map {
            DownloadResult.Source(url: $0.redacted, address: $0.address, bytes: 0, isChecking: true)
        }
    }

    /// The bytes this download fetches: the object's, or its share's.
    var totalBytes: Int64? {
        guard let size = stage.object?.size else { return nil }
        guard let share = context.paths.share else { return size }
        return share.ranges(of: ChunkLayout(objectSize: size)).totalBytes
    }

    func progressSnapshot() -> DownloadProgress {
        var snapshot = DownloadProgress(
            bytesDone: bytesDone, totalBytes: totalBytes, bytesPerSecond: progress.bytesPerSecond,
            activeConnections: stage.run?.activeConnections ?? 0, connectionTarget: stage.run?.controller?.target,
            elapsed: .now - context.startedAt, sources: sourceReports, waiting: waiting)
        snapshot.objectChanges = machine.changes
        snapshot.bytesRefetched = machine.bytesRefetched
        return snapshot
    }

    /// What the download waits for, if anything: a server being retried (a broken stream's next
    /// try among them: its probe waits for it).
    var waiting: DownloadProgress.Wait? {
        switch stage {
        case .probing(let prober): prober.waiting
        case .transferring(let transfer): transfer.run.waiting
        case .starting, .finalizing, .stopped: nil
        }
    }
}
