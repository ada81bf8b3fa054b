import SwoopTestSupport

@testable import SwoopCore

/// The probe stage of ``VersionSimulation``, as the shell's `Prober` and the session perform it:
/// every request's head is the one the modelled node sends (``probeHead(on:requested:precondition:)``),
/// judged by the core's ``ProbeDecision``; its step goes into the ``ProbeMachine``, and what comes
/// out is done here: ask again on a new connection, compare the bytes held, restart or fail through
/// the ``SessionMachine``, or hand the request over to a ``TransferMachine`` (at once, or once the
/// sink has opened). Nothing here decides; only the server, the disk, the sink's delay and a
/// connection that drops while its body waits for the sink are modelled.
extension VersionSimulation {
    /// One try's probe, as a `Prober` holds it.
    struct Probe {
        /// One probe request: the node that answers it, the version it serves, and its head.
        struct Asked {
            var node: Int
            var version: Int
            var requested: RequestedRange
            var head: ResponseHead
            var answerAt: Int
            var bytesPerStep: Int64
        }

        var machine = ProbeMachine(purpose: .download)
        /// The decision's inputs (what the disk holds) and its watch of the answers under other
        /// validators, kept from one request to the next as the probe's exchange keeps them.
        var decision: ProbeDecision
        /// The failed tries so far (the exchange's retries on the policy's backoff).
        var retries = RequestRetries()
        /// The request in flight, and when the next is sent after a failure's backoff.
        var asked: Asked?
        var askAt: Int?
        /// A transfer's step and its request, while the sink opens (until `sinkOpensAt`).
        var handingOver: (step: ProbeDecision.Step, asked: Asked)?
        var sinkOpensAt: Int?
    }

    // MARK: What the disk holds and what the server answers

    /// An earlier run's partial download: a segment map under the validators of the node that
    /// served it, recording some of the chunks, of that node's version.
    func resumeEarlierRun() {
        let node = Int(random.next() % UInt64(server.nodes))
        (mapped, mapValidators) = (true, validators(on: node))
        for chunk in 0..<layout.chunkCount where random.chance(0.5) {
            recorded.insert(chunk)
            let range = layout.byteRange(ofChunks: chunk..<(chunk + 1))
            file.replaceSubrange(Int(range.lowerBound)..<Int(range.upperBound), with: bytes(version(on: node), range))
        }
    }

    /// The head node `node` sends to a probe of `requested` under `precondition`, as
    /// ``answer(on:precondition:)`` answers a segment's request: a `412` where it refuses the
    /// precondition, else a `206` for the bytes asked under the node's validators. Under the rule
    /// before issue 54 every answer is served as if under the validators asked for (that client
    /// used it whatever its validators): its head carries those.
    func probeHead(on node: Int, requested: RequestedRange, precondition: ObjectIdentity.Validators?) -> ResponseHead {
        if answer(on: node, precondition: precondition)?.refusal == .preconditionFailed {
            return ResponseHead(status: 412)
        }
        let named = rule == .overlapDecides ? precondition ?? validators(on: node) : validators(on: node)
        let first = requested.lowerBound
        let end: Int64
        switch requested {
        case .bounded(let range): end = min(range.upperBound, size)
        case .from: end = size
        }
        var fields = [("content-range", "bytes \(first)-\(end - 1)/\(size)"), ("content-length", "\(end - first)")]
        if let etag = named?.etag { fields.append(("etag", etag)) }
        if let date = named?.lastModified { fields.append(("last-modified", date)) }
        return ResponseHead(status: 206, fields: fields.map { (name: $0.0, value: $0.1) })
    }

    // MARK: The prober

    /// A try begins, as the session's `probe()` begins one: a new prober over what the disk holds
    /// (a segment map under the validators it recorded, with the chunks it records and, when it
    /// records every one, the bytes a confirmation compares; or nothing), asking at once.
    func probe() {
        let missing = recorded.missingRuns.map { layout.byteRange(ofChunks: $0) }
        var basis = ProbeBasis.fresh
        if mapped {
            let identity = ObjectIdentity(
                size: size, etag: mapValidators?.etag, lastModified: mapValidators?.lastModified)
            // Read as `PartialState` reads them: only for a map that holds every byte.
            let samples =
                missing.isEmpty
                ? ProbeDecision.confirmationSamples(size: size).map {
                    HeldBytes(range: $0, bytes: Array(file[Int($0.lowerBound)..<Int($0.upperBound)]))
                } : []
            basis = .resuming(
                LocalObject(identity: identity, missingRanges: missing, path: "object.part", samples: samples))
        }
        let url = RemoteURL(testing: "https://files.example/object.bin")
        let decision = ProbeDecision(
            url: url, originalURL: url, basis: basis, maxRedirects: 0, resolve: RemoteURL.testingResolve)
        prober = Probe(decision: decision)
        session.entered(.probing)
        ask()
    }

    /// The probe's turn in a step: its next request after a backoff, the sink's opening, or the
    /// head of its request in flight.
    func probeTurn() {
        guard let prober, outcome == nil else { return }
        if let at = prober.askAt, at <= step {
            self.prober?.askAt = nil
            ask()
        } else if let at = prober.sinkOpensAt, at <= step {
            sinkOpened()
        } else if let asked = prober.asked, asked.answerAt <= step {
            answered(asked)
        }
    }

    /// The probe's next request (its exchange's `start()`), as `Prober.nextRequest` names it: the
    /// range and precondition the decision asks for what is held. The balancer picks its node: a
    /// new connection each time, as the prober asks for after an answer under other validators.
    private func ask() {
        guard var prober else { return }
        let (range, precondition) = ProbeDecision.request(
            for: prober.decision.basis, probeSize: Self.minimumSegmentSize)
        // Without Range, a 200's bytes start at 0 (the modelled server answers no 416: never here).
        let requested = prober.machine.withoutRange ? .from(0) : range
        let validators = precondition == nil ? nil : prober.decision.basis.identity?.validators
        let node = nextNode()
        prober.asked = Probe.Asked(
            node: node, version: version(on: node), requested: requested,
            head: probeHead(on: node, requested: requested, precondition: validators), answerAt: step + 1,
            bytesPerStep: random.logUniform(2_000...200_000))
        self.prober = prober
    }

    /// The head of the probe's request arrived: the decision judges it, the probe machine says
    /// what becomes of the response, and the exchange ends (its body dropped, or collected to
    /// compare) unless the transfer takes its connection over.
    private func answered(_ asked: Probe.Asked) {
        guard var prober else { return }
        prober.asked = nil
        let step = prober.decision.decide(asked.head, requested: asked.requested).step
        var collected: [UInt8] = []
        switch prober.machine.head(decided: step) {
        case .handOver:
            prober.handingOver = (step, asked)
            self.prober = prober
            return handOver()
        case .collect(let range):
            // The body's first bytes, up to the range's count: they arrive within this step.
            let first = asked.requested.lowerBound
            let version = server.inPlace ? version(on: asked.node) : asked.version
            collected = bytes(version, ByteRange(first, min(size, first + range.count)))
        case .asDecided, .discard, .abort:
            break
        case .takeWhole:
            // Never asked for here (`takesWhole` is false): a response kept whole ends as the
            // single response the transfer models (`DownloadSession+Whole`, by the integration tests).
            return perform(.fail(.invalidResponse("internal: a response kept whole in the simulation")))
        }
        // As the probe's exchange ends it: a head's own failure is the exchange's, with its Retry-After.
        var failure: (error: DownloadError, retryAfter: Int?)?
        if case .fail(let error) = step { failure = (error, asked.head.retryAfterSeconds) }
        let next = prober.machine.ended(step: step, failure: failure, url: "\(prober.decision.url)")
        self.prober = prober
        switch next {
        case .nothing:
            return
        case .end(let step):
            probeEnded(with: step)
        case .compare(let found, let range):
            probeEnded(with: prober.decision.confirmed(collected, at: range, found: found))
        case .askWithoutRange, .askAgain:
            ask()
        case .failed(let error, let retryAfter):
            probeFailed(error, retryAfter: retryAfter)
        case .tookWhole:
            perform(.fail(.invalidResponse("internal: a response kept whole in the simulation")))
        }
    }

    /// The probe ended without a transfer, and the session hears it (`prober(_:didEndWith:)`).
    private func probeEnded(with step: ProbeDecision.Step) {
        switch step {
        case .alreadyComplete, .finishResumed, .empty:
            prober = nil
            finish()
        case .restart(let reason):
            changed(reason, byProbe: true)
        case .fail(let error):
            perform(.fail(error))
        case .redirect, .ranged, .stream, .compareHeld, .withoutRange, .askAgain:
            break  // the prober acts on these itself
        }
    }

    /// A failed probe, as the prober performs what its machine makes of it: a restart when the
    /// object changed, else another try after the policy's backoff, or the end.
    private func probeFailed(_ error: DownloadError, retryAfter: Int?) {
        guard var prober else { return }
        // No presigned URL here: none expires.
        switch prober.machine.failed(error, urlExpired: false) {
        case .restart(let message):
            probeEnded(with: .restart(message))
        case .refreshURL:
            perform(.fail(.invalidResponse("internal: a URL refreshed where none expires")))
        case .retryOrGiveUp:
            switch prober.retries.failed(error, retryAfter: retryAfter, policy: policy, at: now) {
            case .again(let delay):
                prober.askAt = step + Int(delay.seconds * 100) + 1
                self.prober = prober
            case .giveUp(let final):
                probeEnded(with: .fail(final))
            }
        }
    }

    // MARK: The handover

    /// The head decided a transfer (`Prober.handOver`): the session opens the sink, at once or
    /// (creating the part file on the disk queue) a few steps later, and the transfer takes the
    /// request over; its body waits meanwhile. The probe machine hears how the handover began.
    private func handOver() {
        guard var prober, prober.machine.phase == .handingOver, let (decided, asked) = prober.handingOver,
            case .ranged(let found, let first) = decided
        else { return }
        let opensAtOnce = random.chance(0.7)
        if opensAtOnce { startTransfer(found, first: first, asked: asked, watch: transferWatch(prober)) }
        // Its body waits: the exchange has not ended.
        switch prober.machine.handoverBegan(opensAtOnce ? .now : .whenSinkOpens, exchangeEnded: false) {
        case .wait:
            prober.sinkOpensAt = step + 1 + Int(random.next() % 5)
            self.prober = prober
        case .letGo:
            // The body goes on to the transfer, which has the request on slot 0: the probe is done
            // (a handover is never refused here).
            self.prober = nil
        case .fail(let error):
            self.prober = prober
            probeFailed(error, retryAfter: nil)
        }
    }

    /// The sink has opened (`Prober.completeHandover`): the transfer takes the request over,
    /// unless its connection dropped while its body waited, when the session asks again.
    private func sinkOpened() {
        guard var prober, let (decided, asked) = prober.handingOver, case .ranged(let found, let first) = decided
        else { return }
        prober.sinkOpensAt = nil
        let dropped = random.chance(0.1)
        let handover = prober.machine.sinkOpened(exchangeBusy: !dropped, endedWhole: false)
        self.prober = nil
        switch handover {
        case .live, .endedWhole:  // never ended whole here: a 206 has a body
            startTransfer(found, first: first, asked: asked, watch: transferWatch(prober))
        case .lost:
            var resuming = false
            if case .resuming = prober.decision.basis { resuming = true }
            perform(session.handoverLost(part: "object.part", resuming: resuming))
        }
    }

    /// The watch the transfer starts from (`Prober.validatorWatch`): a pool the probe proved, or
    /// nothing yet.
    private func transferWatch(_ prober: Probe) -> ValidatorWatch {
        prober.decision.watch.isPool ? .provenPool : ValidatorWatch()
    }

    /// The session starts the transfer (``ProbeDecision/Step/ranged(_:first:)``): the plan of
    /// what is missing (a segment map from here, unless the object arrives whole in this response),
    /// and the machine, pinned to the validators `found` was served under and starting from the
    /// probe's `watch`, with the probe's request (`first`, as `asked`) in flight on slot 0.
    private func startTransfer(_ found: RemoteObject, first: RangeRequest, asked: Probe.Asked, watch: ValidatorWatch) {
        let validators = found.identity.validators
        pinned = validators.etag == nil && validators.lastModified == nil ? nil : validators
        let missing = recorded.missingRuns.map { layout.byteRange(ofChunks: $0) }
        let ledger = AgreementLedger(size: size, held: completeRanges())
        var first = first
        first.response = ledger.beginResponse()
        mapped = mapped || first.own != ByteRange(0, size)
        (tryStart, machineSent) = (step, false)
        let plan = SegmentScheduler(layout: layout, missing: missing, minimumSegmentSize: Self.minimumSegmentSize)
        let machine = TransferMachine(
            plan: plan, ledger: ledger,
            settings: .init(
                policy: TransferPolicy(minimumSegmentSize: Self.minimumSegmentSize), failures: policy,
                hedgesSlowTail: true),
            target: connections, environment: self, firstWatch: watch, random: SplitMix64(seed: random.next()))
        self.machine = machine
        session.entered(.transferring)
        guard let segment = machine.start(first: first, at: now) else {
            return perform(.fail(.invalidResponse("internal: the probe's range \(first.own) is not missing")))
        }
        willSend(from: 0)
        flights[0] = Flight(
            send: TransferSend(slot: 0, source: 0, work: .segment(segment, first)), node: asked.node,
            version: asked.version, answerAt: step, bytesPerStep: asked.bytesPerStep)
        machine.planAhead(window: nil, hashesInOrder: false)
        perform(machine.dispatch(at: now))
    }
}
