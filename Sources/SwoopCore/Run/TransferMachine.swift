/// The decisions of a download's transfer in ranges, as a machine: which request each idle slot
/// sends next (from the plan, the ``TransferPolicy`` and the sources), and what an ended request
/// means (``TransferMachine+Failures.swift``: the ``FailurePolicy``, refusals, an expired URL;
/// bridges over breaks: ``TransferMachine+Bridges.swift``).
///
/// Events come in as calls (``start(first:)``, ``dispatch(at:)``, ``requestEnded(slot:_:at:)``,
/// ``hedge(at:)``, ``roomFreed(consumed:at:)``), each with the time it happens; what to do comes out
/// as ``TransferAction``s, which the shell (`TransferRun`) performs in order. The machine reads no
/// clock, opens no socket and writes no byte, and calls nothing that changes the world: it reads
/// what it shares with other downloads (its sources' health, the downloader's permits, the
/// connections' measurements) through its ``TransferEnvironment``, and what a request's end did
/// to its host's health comes in with the end. The tests drive it with virtual time.
package final class TransferMachine {
    /// What the machine reads from the configuration, once.
    package struct Settings {
        package var policy: TransferPolicy
        package var failures: FailurePolicy
        /// Fetch a slow tail on an idle connection too.
        package var hedgesSlowTail: Bool
        /// Close connections far slower than the others, and reconnect them (``replaceSlow(at:)``).
        package var replacesSlowConnections: Bool
        /// A fault switch of the tests: the transfer sends nothing.
        package var sendsNothing: Bool
        /// An object that arrived in the probe's one response is confirmed by a request after it
        /// (``confirm(at:into:)``) when that response lasted this long: shorter, a rewrite in
        /// place inside it is left unasked, as curl leaves it (a request more per small file).
        /// Measured on this side, from the run's reading of the response's head: a client that was
        /// not scheduled while the server sent the body reads it in one burst, and sees it as short.
        package var confirmsOneResponseAfter: Duration
        /// ``confirmsOneResponseAfter`` unless a test says otherwise.
        package static let confirmingOneResponseAfter = Duration.milliseconds(100)

        package init(
            policy: TransferPolicy, failures: FailurePolicy, hedgesSlowTail: Bool, replacesSlowConnections: Bool = true,
            sendsNothing: Bool = false, confirmsOneResponseAfter: Duration = Settings.confirmingOneResponseAfter
        ) {
            self.policy = policy
            self.failures = failures
            self.hedgesSlowTail = hedgesSlowTail
            self.replacesSlowConnections = replacesSlowConnections
            self.sendsNothing = sendsNothing
            self.confirmsOneResponseAfter = confirmsOneResponseAfter
        }
    }

    /// One connection slot: the work of its request in flight and where it went.
    struct Slot {
        var work: TransferWork?
        var source: Int?
        /// The request's number in its source's ``ValidatorWatch``, and whether the watch heard its
        /// head already (``pinnedHead(slot:)``).
        var request = 0
        var pinnedHeard = false
    }

    /// The bytes still to fetch and who fetches them.
    package let plan: SegmentScheduler
    /// The responses' agreement, when the download compares overlaps (``AgreementLedger``).
    package let ledger: AgreementLedger?
    let settings: Settings
    unowned let environment: any TransferEnvironment
    /// The slots kept busy (the adaptive controller moves it).
    package var target: Int {
        didSet { target = max(1, target) }
    }
    /// The server's own time per request when it is large (``ConnectionController/requestCost``).
    package var requestCost: Double = 0
    /// Responses are checked against their own digest: never cut, never hedged.
    package var checksEachResponse = false
    var slots: [Slot] = []
    package private(set) var stopped = false
    /// The probe's range, near which a source's bytes are compared, and when its head arrived.
    package private(set) var firstRange = ByteRange(0, 0)
    var startedAt: Moment?
    /// An in-order sink's window and the pieces kept within it.
    var window: (size: Int64, piece: Int64)?
    /// Per source: whether its answers under other validators are a change or a pool's other node.
    package internal(set) var watches: [Int: ValidatorWatch] = [:]
    /// Sources the machine sent requests to, those confirmed after every byte arrived, and the
    /// confirmation in flight (``confirm(at:into:)``) with the failed tries so far.
    var asked: Set<Int> = []
    var confirmed: Set<Int> = []
    var confirmation = Confirmation.notYet
    var confirmationTries = 0
    /// Breaks a bridge is asking about now, and the tries of each so far.
    var bridgesInFlight: Set<Int64> = []
    var bridgeTries: [Int64: Int] = [:]
    /// Sources the machine dropped (the shell drops them as it performs the action).
    var dropped: Set<Int> = []
    /// What the current event's actions will take, until the shell performs them.
    var pending = Pending()
    /// Backoff jitter.
    var random: any RandomNumberGenerator

    /// `firstWatch`: what the probe showed of the first source's validators (a pool it proved).
    package init(
        plan: SegmentScheduler, ledger: AgreementLedger?, settings: Settings, target: Int,
        environment: any TransferEnvironment, firstWatch: ValidatorWatch = ValidatorWatch(),
        random: any RandomNumberGenerator = SystemRandomNumberGenerator()
    ) {
        self.plan = plan
        self.ledger = ledger
        self.settings = settings
        self.target = max(1, target)
        self.environment = environment
        self.random = random
        watches[0] = firstWatch
    }

    /// Whether `slot` has a request in flight.
    package func isBusy(_ slot: Int) -> Bool {
        slots.indices.contains(slot) && slots[slot].work != nil
    }

    package var isAnyBusy: Bool { slots.contains { $0.work != nil } }

    /// The source of `slot`'s request in flight.
    package func source(of slot: Int) -> Int? {
        slots.indices.contains(slot) ? slots[slot].source : nil
    }

    /// The work of `slot`'s request in flight.
    package func work(of slot: Int) -> TransferWork? {
        slots.indices.contains(slot) ? slots[slot].work : nil
    }

    // MARK: Start and stop

    /// The probe's response on slot 0 carries `first` from source 0: its segment is reserved (up to
    /// the chunk its request ends in) and counted as in flight. `nil` when its range is not missing.
    package func start(first: RangeRequest, at now: Moment) -> Segment? {
        guard slots.isEmpty, let segment = Self.reserveFirst(first, in: plan) else { return nil }
        adopt(first: first, segment: segment, startedAt: now)
        return segment
    }

    /// The probe's range `first` reserved in `plan` for slot 0 (up to the chunk its request ends
    /// in) and noted as requested; `nil` when it is not missing. A run that may need no machine
    /// (the whole object in that one response) reserves it so, and makes a machine that
    /// ``adopt(first:segment:startedAt:)``s it only if the response needs one after all.
    package static func reserveFirst(_ first: RangeRequest, in plan: SegmentScheduler) -> Segment? {
        let range = first.own
        let reserved = ByteRange(range.lowerBound, plan.layout.alignUp(range.upperBound))
        guard let segment = plan.reserve(reserved, ownerID: 0) else { return nil }
        plan.noteRequested(segment, upTo: range.upperBound)
        return segment
    }

    /// The probe's response on slot 0, started at `startedAt`, carries `first` into `segment`
    /// (``reserveFirst(_:in:)``'s) from source 0: counted as in flight, as ``start(first:at:)`` does.
    package func adopt(first: RangeRequest, segment: Segment, startedAt: Moment) {
        precondition(slots.isEmpty, "the first request is adopted before any other")
        firstRange = first.own
        self.startedAt = startedAt
        slots = [
            Slot(work: .segment(segment, first), source: 0, request: watches[0, default: ValidatorWatch()].willSend())
        ]
    }

    /// Whether what is left is worth splitting, stealing, hedging or replacing (not a small file).
    package var isWorthSplitting: Bool { plan.remainingBytes >= 2 * plan.minimumStealSize }

    /// Splits what is left among the ``target`` slots. An in-order sink of `window` bytes (a pipe)
    /// gets small pieces taken lowest first, none starting beyond the reader's position plus the
    /// window less one piece, so every byte fetched fits the window (``roomFreed(consumed:at:)``
    /// moves the limit). Pieces are half the window over the connections, 1 MiB at least: the
    /// reader waits for the lowest piece, so the pieces near it must be fetched side by side.
    /// `hashesInOrder` (a hash that follows the complete prefix) takes larger pieces in order,
    /// so that what is left to hash at the end is a few pieces.
    package func planAhead(window: Int64?, hashesInOrder: Bool) {
        plan.split(into: max(0, target - 1))
        if let window {
            let piece = plan.takeInOrder(pieces: max(1 << 20, min(window / 4, window / Int64(2 * target))))
            plan.limit = max(plan.layout.chunkSize, window - piece)
            self.window = (window, piece)
        } else if hashesInOrder {
            plan.takeInOrder(pieces: max(8 << 20, plan.remainingBytes / Int64(16 * target)))
        }
    }

    /// The in-order sink's reader has taken `consumed` bytes: the limit follows.
    package func roomFreed(consumed: Int64, at now: Moment) -> [TransferAction] {
        pending = Pending()
        guard let window else { return [] }
        plan.limit = consumed + max(plan.layout.chunkSize, window.size - window.piece)
        return dispatch(at: now)
    }

    /// Stops deciding: later events do nothing. A request in flight that was its host's trial gives
    /// that role up (the host's health is shared, and a stopped transfer hears no more ends, so a
    /// trial left in flight would hold back every other download of that host for good). The shell
    /// cancels the requests.
    package func stop() -> [TransferAction] {
        guard !stopped else { return [] }
        stopped = true
        return slots.indices.compactMap { slot in
            guard slots[slot].work != nil, let source = slots[slot].source else { return nil }
            return .abandonTrial(source: source, slot: slot)
        }
    }

    // MARK: Work

    /// Gives idle slots work; completes when nothing is left. The event of a wake, a host that may
    /// take requests again, a permit granted, a source that joined.
    package func dispatch(at now: Moment) -> [TransferAction] {
        pending = Pending()
        var actions: [TransferAction] = []
        dispatch(at: now, into: &actions)
        return actions
    }

    func dispatch(at now: Moment, into actions: inout [TransferAction]) {
        guard !stopped, !settings.sendsNothing else { return }
        if plan.isComplete {
            // Every byte is here; it is one version only once every piece was seen to agree, and
            // the server still serves it when the last of them has arrived.
            if !(ledger?.isStitched ?? true) { return bridgeBreaks(at: now, into: &actions) }
            if !isAnyBusy && confirm(at: now, into: &actions) { actions.append(.complete) }
            return
        }
        let samples = connectionSamples(at: now)
        let roundTrip = TransferPolicy.roundTrip(samples)
        for index in 0..<target {
            // Slots open as work appears: an object that arrives whole never opens a second one.
            if isBusy(index) { continue }
            guard let source = chooseSource(at: now) else { break }
            open(upTo: index)
            guard permitFree(for: source) else {
                waitForPermit(into: &actions)
                break
            }
            let cut = { [self] (victim: Segment) in cutPoint(victim, samples: samples, roundTrip: roundTrip) }
            guard let segment = plan.claim(now: now, ownerID: index, cut: cut) else { break }
            request(segment, slot: index, source: source, sample: sample(index, in: samples), at: now, into: &actions)
        }
        hedge(at: now, into: &actions)
        if !isAnyBusy, let next = [plan.nextRetryTime, environment.sourcesNextWake].compactMap({ $0 }).min() {
            actions.append(.wake(at: next))
        }
    }

    /// Opens the slots up to `index`.
    func open(upTo index: Int) {
        while slots.count <= index { slots.append(Slot()) }
    }

    /// The source the next request goes to (see ``TransferPolicy/chooseSource(_:avoiding:)``).
    func chooseSource(avoiding: Int? = nil, at now: Moment) -> Int? {
        TransferPolicy.chooseSource(sourceSamples(at: now), avoiding: avoiding)
    }

    /// The source a slot's next request in its segment goes to: `current` while it may take one
    /// (keeping its connection), else whichever the policy picks.
    func nextSource(after current: Int?, at now: Moment) -> Int? {
        let samples = sourceSamples(at: now)
        if let current, samples.indices.contains(current), TransferPolicy.canTakeRequest(samples[current]) {
            return current
        }
        return TransferPolicy.chooseSource(samples, avoiding: nil)
    }

    /// What the policy sees of every opened slot: the connections' measurements and the segments
    /// the machine gave them.
    package func connectionSamples(at now: Moment) -> [ConnectionSample] {
        let measured = environment.connectionSamples(at: now)
        return slots.indices.map { index in
            var sample = self.sample(index, in: measured)
            sample.segment = slots[index].work?.segment.map {
                SegmentSample(frontier: $0.frontier, end: $0.end, isHedged: $0.partner != nil)
            }
            return sample
        }
    }

    /// `slot`'s sample among `samples`, or an unmeasured one for a slot not opened yet.
    func sample(_ slot: Int, in samples: [ConnectionSample]) -> ConnectionSample {
        guard samples.indices.contains(slot) else {
            return ConnectionSample(id: slot, rate: 0, timeToFirstByte: 0, isTransferring: false, replacements: 0)
        }
        var sample = samples[slot]
        sample.id = slot
        return sample
    }

    /// Sends `slot`'s next request for `segment` to `source`: its own bytes, sized by what the
    /// slot's connection measured, and the overlap with the bytes around them (``RangeRequest``).
    func request(
        _ segment: Segment, slot: Int, source: Int, sample: ConnectionSample, at now: Moment,
        into actions: inout [TransferAction]
    ) {
        let policy = settings.policy
        let size = policy.requestSize(
            rate: sample.rate, timeToFirstByte: sample.timeToFirstByte, requestCost: requestCost,
            refused: watches[source]?.refusedShare ?? 0)
        let range = policy.nextRequest(
            position: segment.position, end: segment.end, hedged: segment.partner != nil, size: size)
        plan.noteRequested(segment, upTo: range.upperBound)
        let ranged =
            ledger.map { ledger in
                RangeRequest.overlapping(
                    range, size: plan.layout.objectSize, window: ledger.window,
                    heldAfter: ledger.needsTrail(at: range.upperBound), response: ledger.beginResponse())
            } ?? RangeRequest(own: range)
        send(.segment(segment, ranged), slot: slot, source: source, at: now, into: &actions)
    }

    func send(
        _ work: TransferWork, slot: Int, source: Int, at now: Moment,
        into actions: inout [TransferAction]
    ) {
        open(upTo: slot)
        let request = watches[source, default: ValidatorWatch()].willSend()
        slots[slot] = Slot(work: work, source: source, request: request)
        asked.insert(source)
        noteSend(to: source)
        actions.append(.send(TransferSend(slot: slot, source: source, work: work)))
    }

    /// Where to cut `victim`'s request in flight for an idle connection (see
    /// ``TransferPolicy/cutPoint(_:rate:others:roundTrip:minimumStealSize:layout:requestCost:)``).
    private func cutPoint(_ victim: Segment, samples: [ConnectionSample], roundTrip: Double) -> Int64? {
        // A response checked against its own digest (Content-Digest) is never cut, nor hedged.
        guard !checksEachResponse, let id = victim.ownerID, samples.indices.contains(id), samples[id].isTransferring
        else { return nil }
        return settings.policy.cutPoint(
            SegmentSample(frontier: victim.frontier, end: victim.end, isHedged: victim.partner != nil),
            rate: samples[id].rate, others: samples.filter(\.isTransferring).map(\.rate), roundTrip: roundTrip,
            minimumStealSize: plan.minimumStealSize, layout: plan.layout, requestCost: requestCost)
    }

    /// When idle slots remain and a connection far behind the others holds the last work, fetches
    /// its tail on an idle slot too, from another source if there is one (the straggler's server
    /// may be the slow part). Not for responses checked against their own digest, nor under a
    /// byte-rate cap (it would spend the cap on bytes fetched twice). The event of the
    /// housekeeping tick: rates move while connections sit idle at the end.
    package func hedge(at now: Moment) -> [TransferAction] {
        pending = Pending()
        var actions: [TransferAction] = []
        hedge(at: now, into: &actions)
        return actions
    }

    func hedge(at now: Moment, into actions: inout [TransferAction]) {
        guard !stopped, settings.hedgesSlowTail, !checksEachResponse, !environment.isRateCapped(at: now),
            plan.allAvailableWorkOwned
        else { return }
        let all = connectionSamples(at: now)
        let busy = all.filter { isBusy($0.id) && $0.segment != nil }
        let idle = target - (0..<target).count(where: isBusy)
        let victims = settings.policy.tailsToHedge(busy: busy, idle: idle, roundTrip: TransferPolicy.roundTrip(all))
        guard !victims.isEmpty else { return }
        open(upTo: target - 1)
        var helpers = (0..<target).filter { !isBusy($0) }.makeIterator()
        for id in victims {
            guard let victim = slots[id].work?.segment, let source = chooseSource(avoiding: slots[id].source, at: now),
                let helper = helpers.next()
            else { return }
            guard permitFree(for: source) else { return waitForPermit(into: &actions) }
            guard let hedge = plan.hedge(victim, ownerID: helper) else { return }
            actions.append(.note(.hedging(segment: "\(victim)", rate: Int(all[id].rate))))
            request(hedge, slot: helper, source: source, sample: sample(helper, in: all), at: now, into: &actions)
        }
    }

    // MARK: Ends

    /// `slot`'s request ended: continue on the same slot, retry, give up, or start over.
    package func requestEnded(slot: Int, _ end: RequestEnd, at now: Moment) -> [TransferAction] {
        pending = Pending()
        guard !stopped, let work = work(of: slot) else { return [] }
        let (source, request, heard) = (slots[slot].source, slots[slot].request, slots[slot].pinnedHeard)
        slots[slot] = Slot()
        var actions: [TransferAction] = [.note(.requestEnded(slot: slot, range: work.range, bytes: end.bytes))]
        if let source, end.pinned, !heard { pinnedAnswer(source: source, request: request, into: &actions) }
        if let source, end.refusal != nil {
            otherValidators(work, request: request, slot: slot, source: source, end, at: now, into: &actions)
            return actions
        }
        switch work {
        case .segment(let segment, let request):
            segmentEnded(segment, request: request, slot: slot, source: source, end, at: now, into: &actions)
        case .bridge(let request):
            bridgeEnded(request, slot: slot, source: source, end, at: now, into: &actions)
        }
        return actions
    }

    private func segmentEnded(
        _ segment: Segment, request: RangeRequest, slot: Int, source: Int?, _ end: RequestEnd,
        at now: Moment, into actions: inout [TransferAction]
    ) {
        if case .failed(let error, let retryAfter) = end.outcome {
            return requestFailed(
                segment, requested: request.sent, error: error, retryAfter: retryAfter, slot: slot, source: source,
                end, at: now, into: &actions)
        }
        if case .cancelled = end.outcome, segment.isDone || segment.partner == nil {
            // A hedge partner won, or the connection was replaced, or the download is stopping.
            if segment.isDone { plan.finish(segment) } else { plan.release(segment, failed: false) }
            return dispatch(at: now, into: &actions)
        }
        if segment.isDone {
            let partner = segment.partner
            plan.finish(segment)
            // The other half of a hedge pair has nothing left to fetch.
            if let partner, let other = slots.firstIndex(where: { $0.work?.segment === partner }) {
                actions.append(.cancel(slot: other))
            }
        } else if segment.isOwned && segment.partner == nil, slot < target,
            let next = nextSource(after: source, at: now), permitFree(for: next)
        {
            // The request ended inside the segment: the same slot asks for the next part (of the
            // same source while it may be asked, keeping its connection).
            actions.append(.checkpoint)
            let sample = sample(slot, in: connectionSamples(at: now))
            return self.request(segment, slot: slot, source: next, sample: sample, at: now, into: &actions)
        } else {
            plan.release(segment, failed: false)
        }
        actions.append(.checkpoint)
        dispatch(at: now, into: &actions)
    }
}
