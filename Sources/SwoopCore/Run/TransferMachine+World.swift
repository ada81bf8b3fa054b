/// What the machine reads of the world, with what the current event's own actions will do to it
/// (the shell performs them only once the event's decisions are made), and what a request's end
/// tells its host. Within one event nothing else acts (the shell is single-threaded), so the
/// reading is exact.
extension TransferMachine {
    /// What the current event's actions take that the world does not show yet: requests sent, by
    /// source, and the permits they hold, in all and by host. Cleared as each event begins.
    struct Pending {
        var sent: [Int: Int] = [:]
        var permits = 0
        var permitsByHost: [Int: Int] = [:]
        var waitsForPermit = false
    }

    /// What the source policy sees of every source at `now`: the world's samples, with this
    /// event's requests counted in flight (a down source's trial or a doubted source's test holds
    /// the others back) and the sources the machine dropped unusable.
    func sourceSamples(at now: Moment) -> [SourceSample] {
        var samples = environment.sourceSamples(at: now)
        for index in samples.indices {
            samples[index] = samples[index].sending(pending.sent[index, default: 0])
            if dropped.contains(index) { samples[index].isUsable = false }
        }
        return samples
    }

    /// Whether a permit for a request to `source` is free, counting those this event's sends hold.
    func permitFree(for source: Int) -> Bool {
        let permits = environment.permits(for: source)
        return permits.free > pending.permits && permits.freeOnHost > pending.permitsByHost[permits.host, default: 0]
    }

    /// No permit is free for the work left: the shell wakes the machine when one is returned.
    func waitForPermit(into actions: inout [TransferAction]) {
        guard !pending.waitsForPermit else { return }
        pending.waitsForPermit = true
        actions.append(.waitForPermit)
    }

    /// A request this event sends to `source`: it holds a permit and is in flight there.
    func noteSend(to source: Int) {
        let host = environment.permits(for: source).host
        pending.permits += 1
        pending.permitsByHost[host, default: 0] += 1
        pending.sent[source, default: 0] += 1
    }

    /// `source` is no longer used, for `reason`.
    func drop(_ source: Int, reason: String, into actions: inout [TransferAction]) {
        dropped.insert(source)
        actions.append(.dropSource(source, reason: reason))
    }

    /// What `slot`'s request ending with `end` tells its source's host, for the shell to tell the
    /// host's health (and hand its verdict back in ``RequestEnd/verdict``) before it delivers the
    /// end (``requestEnded(slot:_:at:)``). Only a failure of a segment's request that says
    /// something of the server counts: a refusal under other validators, an expired URL of the
    /// first source and a changed object are answers; a bridge's failure is the bridge's own.
    /// `nil` when the machine will ignore the end (stopped, or nothing in flight on the slot).
    package func hostReport(slot: Int, _ end: RequestEnd) -> (source: Int, report: HostReport)? {
        guard !stopped, let work = work(of: slot), let source = slots[slot].source else { return nil }
        guard case .failed(let error, let retryAfter) = end.outcome, case .segment = work, end.refusal == nil,
            !(end.urlExpired && source == 0), error.kind != .objectChanged
        else { return (source, .nothing) }
        return (source, .failed(error, answered: end.answered, retryAfter: retryAfter))
    }
}
