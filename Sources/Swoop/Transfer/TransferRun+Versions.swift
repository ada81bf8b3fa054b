import SwoopStore
import SwoopTransfer

/// What the bytes showed about validators and versions during one transfer: validators heard
/// that wait for their response's overlap to agree, segments to ask once without the
/// precondition (after a `412`), responses refused as another version, and the bridges over
/// breaks between pieces that never met (``AgreementLedger``).
struct VersionWatch {
    /// The probe's response: the bytes every other response must agree with.
    var anchor: AgreementLedger.ResponseID = -1
    /// Segments whose next request goes without the precondition.
    var unconditional: Set<ObjectIdentifier> = []
    /// New validators, and the response that carried them, until it is seen to agree.
    private(set) var pending: [(validators: ObjectIdentity.Validators, source: Source, response: Int)] = []
    /// Responses refused in a row for carrying another version's validators.
    var refusedInARow = 0
    /// Breaks a bridge is asking about now, and the tries of each so far.
    var bridgesInFlight: Set<Int64> = []
    var bridgeTries: [Int64: Int] = [:]

    /// The most responses of another version refused in a row before the download gives up on a
    /// server that serves two versions (each refusal is retried on a new connection, which a
    /// balancer may send to another node).
    static let refusalLimit = 16

    mutating func heard(_ validators: ObjectIdentity.Validators, from source: Source, in response: Int) {
        guard response >= 0, !source.object.identity.isKnown(validators) else { return }
        pending.append((validators, source, response))
    }

    /// Takes the pending validators whose response agrees with the anchor (per `agrees`).
    mutating func takeAgreeing(_ agrees: (Int) -> Bool) -> [(ObjectIdentity.Validators, Source)] {
        var taken: [(ObjectIdentity.Validators, Source)] = []
        pending.removeAll { entry in
            guard agrees(entry.response) else { return false }
            taken.append((entry.validators, entry.source))
            return true
        }
        return taken
    }
}

extension TransferRun {
    /// Validators whose response's overlap agreed with the bytes held join their source's
    /// (``ObjectIdentity/learn(_:)``): later requests list them in `If-Match`, and checkpoints
    /// record them.
    func learnVariants() {
        guard let ledger = store.ledger, versions.anchor >= 0 else { return }
        let anchor = versions.anchor
        for (validators, source) in versions.takeAgreeing({ ledger.agree($0, anchor) })
        where source.object.identity.learn(validators) {
            logger.info(
                "the server also serves the object's bytes as \(validators) (their overlap agrees)",
                metadata: ["source": "\(source.hostAndPort)"])
        }
    }

    /// A segment's response refused at its head: a `412` is asked again at once without the
    /// precondition (the bytes decide); another version's is asked again on a new connection,
    /// until too many in a row. Returns whether the refusal was handled.
    func handleRefusal(_ segment: Segment, on connection: Connection, error: DownloadError) -> Bool {
        guard let plan = store.plan, let refusal = connection.refusal else { return false }
        switch refusal {
        case .preconditionFailed:
            versions.unconditional.insert(ObjectIdentifier(segment))
            logger.info("the server's copy has other validators (412); asking again without them, the bytes decide")
        case .otherVersion:
            versions.refusedInARow += 1
            if versions.refusedInARow > VersionWatch.refusalLimit {
                let message =
                    "the server serves different versions of the object: \(versions.refusedInARow) responses in a "
                    + "row were another version (\(error.reason))"
                delegate?.transfer(self, didFailWith: DownloadError(.objectChanged, message))
                return true
            }
            connection.wantsFreshConnection = true
        }
        plan.release(segment, failed: false)
        dispatchWork()
        return true
    }

    // MARK: Bridges

    /// Every byte is written but some pieces were never seen to agree (a resumed run's stretch
    /// whose neighbour's overlap was lost, a trail that broke off): asks for the bytes on both
    /// sides of each break.
    func bridgeBreaks() {
        guard let ledger = store.ledger, let plan = store.plan else { return }
        let now = ContinuousClock.now
        for point in ledger.breaks where !versions.bridgesInFlight.contains(point) {
            let idle = (0..<pool.target).first { $0 >= pool.connections.count || !pool.connections[$0].isBusy }
            guard let index = idle, let source = sources.choose(now: now)
            else { break }
            let connection = pool.slot(index, store: store, object: object, delegate: self)
            guard acquirePermit(connection, for: source) else { break }
            let request = RangeRequest.bridge(
                at: point, size: plan.layout.objectSize, window: ledger.window,
                response: store.beginResponse(validators: nil))
            versions.bridgesInFlight.insert(point)
            versions.bridgeTries[point, default: 0] += 1
            logger.debug("bridging a break", metadata: ["offset": "\(point)", "range": "\(request.sent)"])
            send(.bridge(request), range: request.sent, on: connection, to: source, unconditional: true)
        }
    }

    /// A bridge ended: the break is mended (or the object changed); tries again while allowed.
    func bridgeEnded(_ request: RangeRequest, on connection: Connection, outcome: Connection.Outcome) {
        let source = pool.requestEnded(connection)
        let point = request.own.lowerBound
        versions.bridgesInFlight.remove(point)
        if case .failed(let error, _) = outcome {
            source?.health.abandonTrial(by: connection.token)
            if error.kind == .objectChanged, connection.refusal == nil {
                delegate?.transfer(self, foundObjectChanged: error.message, versions: store.versionsInDisagreement)
                return
            }
        }
        if let ledger = store.ledger, ledger.breaks.contains(point),
            versions.bridgeTries[point, default: 0] >= settings.configuration.retry.maxTries
        {
            let message =
                "could not compare the bytes on both sides of offset \(point) after "
                + "\(settings.configuration.retry.maxTries) tries, so the file is not known to be one version"
            delegate?.transfer(self, didFailWith: DownloadError(.invalidResponse, message, remedy: .resume))
            return
        }
        dispatchWork()
    }
}
