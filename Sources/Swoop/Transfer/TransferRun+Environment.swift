import SwoopStore
import SwoopCurl

/// What the machine reads of the run (its sources, whose health is their hosts', shared with every
/// download of the downloader; the budget's permits; the connections' measurements), and what the
/// machine's sends and a request's end do to the sources' hosts.
extension TransferRun: TransferEnvironment {
    func sourceSamples(at now: Moment) -> [SourceSample] {
        sources.samples(at: now)
    }

    var sourcesNextWake: Moment? { sources.nextWake }

    var whyOthersCannotHelp: String? { sources.whyOthersCannotHelp }

    func permits(for index: Int) -> PermitCount {
        let key = sources.sources[index].permitHost
        let budget = loop.budget
        return PermitCount(free: budget.free, freeOnHost: budget.free(onHost: key), host: key.hashValue)
    }

    func connectionSamples(at now: Moment) -> [ConnectionSample] {
        pool.samples(at: now)
    }

    /// The machine then leaves slow-connection replacement, tail hedging and connection adaptation
    /// alone (hedging would also spend the cap on bytes fetched twice).
    func isRateCapped(at now: Moment) -> Bool {
        loop.rateLimiter?.isHoldingBack(at: now) ?? false
    }

    /// A request on `slot` goes to source `index`: it counts as in flight at its host (and may be
    /// the host's trial while the host is down).
    func willSend(to index: Int, from slot: Int) {
        let source = sources.sources[index]
        source.active += 1
        source.updateHealth { $0.willSend(by: token(slot), at: .now) }
    }

    /// `slot`'s request ended with `end`: the machine's end, with what it told its source's host
    /// (``TransferMachine/hostReport(slot:_:)``) and the health's verdict on a failure.
    func hostHeard(_ end: RequestEnd, on slot: Int, machine: TransferMachine) -> RequestEnd {
        guard let (index, report) = machine.hostReport(slot: slot, end) else { return end }
        return hostHeard(end, from: index, report: report, on: slot)
    }

    /// `slot`'s request to source `index` ended with `end`, which told its host `report`.
    func hostHeard(_ end: RequestEnd, from index: Int, report: HostReport, on slot: Int) -> RequestEnd {
        let source = sources.sources[index]
        source.active -= 1
        source.bytes += end.bytes
        if end.bytes > 0 {
            source.updateHealth { $0.delivered() }
            if index == 0 { refresher?.noteProgress() }
        }
        var end = end
        switch report {
        case .failed(let error, let answered, let retryAfter):
            end.verdict = sources.failed(
                source, error, answered: answered, retryAfter: retryAfter, policy: settings.failures, by: token(slot),
                at: .now)
        case .nothing:
            source.updateHealth { $0.abandonTrial(by: token(slot)) }
        }
        return end
    }

    /// The request on `slot` to source `index` will not be heard of again (the run stops).
    func abandonTrial(of index: Int, on slot: Int) {
        sources.sources[index].updateHealth { $0.abandonTrial(by: token(slot)) }
    }

    /// The slot's connection among every download's (whose request a down host's trial is).
    private func token(_ slot: Int) -> Int {
        pool.connection(slot)?.token ?? -1
    }
}
