import SwoopStore

/// The probe's response when it carries the whole object (a small file, or any object of at most
/// the probe's size): one request, nothing to split, steal, hedge or replace, so the run makes no
/// ``TransferMachine`` for it, unless the response turns out to need one. That is a response that
/// fails, ends short, is refused, or lasts ``TransferMachine/Settings/confirmsOneResponseAfter``
/// or longer (the object is then confirmed by a request sent after it: a file rewritten in place
/// while it was read). The machine then adopts the request as its first and hears its end as if it
/// had been there from the start, so nothing is fetched twice. A list of small files makes one
/// download for each file: the machine was a tenth of the transfer thread's work for them.
struct SingleResponse {
    let first: RangeRequest
    let segment: Segment
    let plan: SegmentScheduler
    /// What the probe showed of the first source's validators, for a machine made later.
    let watch: ValidatorWatch
    let startedAt: Moment
}

extension TransferRun {
    /// Goes on without a machine when `first`, reserved as `segment`, is the whole object and no
    /// reader takes it in order (a pipe's window, which the machine follows); `false`: the run
    /// needs its machine from the start. `since`: when the response's head arrived.
    func startSingle(
        first: RangeRequest, segment: Segment, plan: SegmentScheduler, watch: ValidatorWatch,
        since: Moment
    ) -> Bool {
        guard let size = object.size, first.own == ByteRange(0, size), store.sink.window == nil else { return false }
        single = SingleResponse(first: first, segment: segment, plan: plan, watch: watch, startedAt: since)
        return true
    }

    /// The single response ended with `outcome`: `true` when it completed the object (and the run
    /// with it). Otherwise the machine adopts the request, and `false`: its end goes to the machine.
    func singleEnded(_ connection: Connection, _ outcome: Connection.Outcome) -> Bool {
        guard let single else { return false }
        self.single = nil
        if case .completed = outcome, connection.refusal == nil, single.segment.isDone,
            store.ledger?.isStitched ?? true, !settings.machine.sendsNothing,
            Moment.now - single.startedAt < settings.machine.confirmsOneResponseAfter
        {
            // What the machine does with a completed request that leaves nothing to fetch and
            // nothing to confirm: its host hears, its segment is finished, the run completes.
            let end = hostHeard(end(of: connection, outcome), from: 0, report: .nothing, on: connection.id)
            log(.requestEnded(slot: connection.id, range: single.first.sent, bytes: end.bytes))
            single.plan.finish(single.segment)
            store.checkpointIfDue()
            delegate?.transferDidComplete(self)
            return true
        }
        makeMachine(plan: single.plan, watch: single.watch)
            .adopt(first: single.first, segment: single.segment, startedAt: single.startedAt)
        return false
    }
}
