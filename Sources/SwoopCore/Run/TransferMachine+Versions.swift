/// One version, by the validators: every request carries its source's pinned validators, an answer
/// under others is asked again on a new connection until the source's ``ValidatorWatch`` tells a
/// change (start over) from a pool's other node (keep asking); and the download completes only
/// once each source it asked still serves the pinned validators after every byte has arrived.
extension TransferMachine {
    /// Whether the pinned validators were confirmed after the last byte arrived.
    enum Confirmation: Equatable {
        /// Not asked yet (or asked again after an answer that did not settle it).
        case notYet
        /// A confirmation is in flight to this source.
        case asking(Int)
    }

    /// `slot`'s request (numbered `request` by its source's watch) was answered under other
    /// validators than its source's pinned ones, or refused with `412`: asked again on a new
    /// connection (a balancer may send it to another node), or, once the watch finds the pinned
    /// validators gone, the object changed: the download starts over, or a mirror is dropped.
    func otherValidators(
        _ work: TransferWork, request: Int, slot: Int, source: Int, _ end: RequestEnd,
        at now: Moment, into actions: inout [TransferAction]
    ) {
        let error: DownloadError
        if case .failed(let failure, _) = end.outcome {
            error = failure
        } else {
            error = DownloadError(.objectChanged, "the server answered under other validators")
        }
        // The work goes back; a bridge or a confirmation is asked again on the next dispatch.
        switch work {
        case .segment(let segment, _):
            plan.release(segment, failed: false)
        case .bridge(let bridge):
            bridgesInFlight.remove(bridge.own.lowerBound)
            bridgeTries[bridge.own.lowerBound, default: 1] -= 1
            if confirmation == .asking(source) { confirmation = .notYet }
        }
        var verdict = watches[source, default: ValidatorWatch()].otherAnswer(to: request)
        if case .changed = verdict, awaitsAnswer(from: source, sentBefore: request) {
            // A request sent since the run began, and before this one, has not answered yet: it
            // may carry the pinned validators (a pool's node that answers more slowly than the
            // others refuse). Requests sent after this one do not hold the verdict back.
            verdict = .askAgain
        }
        switch verdict {
        case .askAgain:
            actions.append(.renew(slot: slot))
            actions.append(.note(.askingAgain(source: source, error: error)))
            dispatch(at: now, into: &actions)
        case .changed(let answers):
            let reason =
                "\(error.reason); \(answers) answers in a row, on new connections, did not carry the "
                + "download's validators again: the object changed"
            let samples = sourceSamples(at: now)
            let othersUsable = samples.indices.contains { $0 != source && samples[$0].isUsable }
            let failure = FailedRequest(
                .objectChanged(reason), fromFirstSource: source == 0, othersUsable: othersUsable,
                failuresWithoutProgress: 0)
            switch settings.failures.action(for: failure, using: &random) {
            case .dropSource(let why):
                drop(source, reason: why, into: &actions)
                dispatch(at: now, into: &actions)
            default:
                actions.append(.objectChanged(DownloadError(.objectChanged, reason).message))
            }
        }
    }

    /// Whether a request to `source` sent since its watch's current run of other answers began, and
    /// before request number `request`, is in flight without its head heard.
    private func awaitsAnswer(from source: Int, sentBefore request: Int) -> Bool {
        guard let runStart = watches[source]?.runStart else { return false }
        return slots.contains { slot in
            slot.work != nil && slot.source == source && !slot.pinnedHeard
                && (runStart..<request).contains(slot.request)
        }
    }

    /// `slot`'s response head arrived under its source's pinned validators: its watch hears it at
    /// once (a long response proves a pool long before it ends, while its source's other node
    /// answers `412`s quickly). The event of a response head.
    package func pinnedHead(slot: Int) -> [TransferAction] {
        guard !stopped, isBusy(slot), !slots[slot].pinnedHeard, let source = slots[slot].source else { return [] }
        slots[slot].pinnedHeard = true
        var actions: [TransferAction] = []
        pinnedAnswer(source: source, request: slots[slot].request, into: &actions)
        return actions
    }

    /// A request answered under the pinned validators: the watch hears it (it may prove a pool).
    func pinnedAnswer(source: Int, request: Int, into actions: inout [TransferAction]) {
        let wasPool = watches[source]?.isPool ?? false
        watches[source, default: ValidatorWatch()].pinnedAnswer(to: request)
        if !wasPool, watches[source]?.isPool == true { actions.append(.note(.poolProven(source: source))) }
    }

    /// Whether the download may complete: every source the machine asked (and may still ask)
    /// answered a request sent after the last byte arrived under its pinned validators. A change
    /// made while the last responses were under way (a file rewritten in place, read by a server
    /// mid-response) shows only to a request sent after them: one small bridge per source asks,
    /// its few bytes compared with those held. An object that came in the probe's one response is
    /// asked about when that response lasted ``Settings/confirmsOneResponseAfter`` or more. Not
    /// where bytes cannot be read back (a measurement) or were handed out (in order), nor of a
    /// source failing now (a mirror gone: it cannot tell, and every byte is here).
    func confirm(at now: Moment, into actions: inout [TransferAction]) -> Bool {
        if case .asking = confirmation { return false }
        guard let ledger, window == nil else { return true }
        if asked.isEmpty, let startedAt, now - startedAt >= settings.confirmsOneResponseAfter { asked.insert(0) }
        let samples = sourceSamples(at: now)
        let unconfirmed = asked.subtracting(confirmed).filter {
            samples.indices.contains($0) && samples[$0].isUsable && samples[$0].failures == 0
        }
        guard let source = unconfirmed.min() else { return true }
        guard TransferPolicy.canTakeRequest(samples[source]) else {
            if let wake = environment.sourcesNextWake { actions.append(.wake(at: wake)) }
            return false
        }
        guard permitFree(for: source) else {
            waitForPermit(into: &actions)
            return false
        }
        let size = plan.layout.objectSize
        let request = RangeRequest.bridge(
            at: max(1, size / 2), size: size, window: RangeRequest.minimumWindow, response: ledger.beginResponse())
        confirmation = .asking(source)
        actions.append(.note(.confirming(source: source)))
        send(.bridge(request), slot: 0, source: source, at: now, into: &actions)
        return false
    }

    /// The confirmation of `source` ended: confirmed when answered whole under the pinned
    /// validators; else asked again, at most ``FailurePolicy/maxTries`` times, after which the
    /// source is left unasked (it cannot tell: a failure is no sign of another version).
    func confirmationEnded(
        _ end: RequestEnd, source: Int, at now: Moment, into actions: inout [TransferAction]
    ) {
        confirmation = .notYet
        if end.pinned, case .completed = end.outcome {
            confirmed.insert(source)
        } else {
            confirmationTries += 1
            if confirmationTries >= settings.failures.maxTries {
                confirmed.insert(source)
                actions.append(.note(.unconfirmed(source: source, tries: confirmationTries)))
            }
        }
        dispatch(at: now, into: &actions)
    }
}
