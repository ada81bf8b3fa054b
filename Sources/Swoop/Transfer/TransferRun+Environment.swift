import SwoopStore
import SwoopCurl

/// What the machine asks of the run: its sources (whose health is their hosts', shared with
/// every download of the downloader), the budget's permits, the connections' measurements.
extension TransferRun: TransferEnvironment {
    func sourceSamples(at now: ContinuousClock.Instant) -> [SourceSample] {
        sources.samples(at: now)
    }

    func source(_ index: Int, willSendFrom slot: Int, at now: ContinuousClock.Instant) {
        let source = sources.sources[index]
        source.active += 1
        source.health.willSend(by: token(slot), at: now)
    }

    func source(_ index: Int, endedFrom slot: Int, bytes: Int64) {
        let source = sources.sources[index]
        source.active -= 1
        source.bytes += bytes
        guard bytes > 0 else { return }
        source.health.delivered()
        if index == 0 { refresher?.noteProgress() }
    }

    func source(_ index: Int, abandonsTrialOf slot: Int) {
        sources.sources[index].health.abandonTrial(by: token(slot))
    }

    func source(
        _ index: Int, failed error: DownloadError, answered: Bool, retryAfter: Int?, slot: Int,
        at now: ContinuousClock.Instant
    ) -> SourceHealth.Verdict {
        sources.failed(
            sources.sources[index], error, answered: answered, retryAfter: retryAfter, policy: settings.failures,
            by: token(slot), at: now)
    }

    func drop(_ index: Int, reason: String) {
        sources.drop(sources.sources[index], reason)
    }

    var sourcesNextWake: ContinuousClock.Instant? { sources.nextWake }

    var whyOthersCannotHelp: String? { sources.whyOthersCannotHelp }

    func acquirePermit(slot: Int, for index: Int) -> Bool {
        let connection = pool.slot(slot, store: store, object: object, delegate: self)
        return connection.acquirePermit(for: sources.sources[index].object.url, owner: self) { [weak self] in
            self?.dispatchWork()
        }
    }

    func releasePermit(slot: Int) {
        pool.connection(slot)?.releasePermit()
    }

    func connectionSamples(at now: ContinuousClock.Instant) -> [ConnectionSample] {
        pool.samples(at: now)
    }

    func isRateCapped(at now: ContinuousClock.Instant) -> Bool {
        isCapped(at: now)
    }

    /// The slot's connection among every download's (whose request a down host's trial is).
    private func token(_ slot: Int) -> Int {
        pool.connection(slot)?.token ?? -1
    }
}
