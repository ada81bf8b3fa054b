import SwoopStore
import SwoopTransfer

/// What the bytes showed about a pool's variants during one transfer: validators heard that wait
/// for their response's overlap to agree with the probe's (``AgreementLedger``). Refusals,
/// `412`s and bridges are the ``TransferMachine``'s.
struct VersionWatch {
    /// The probe's response: the bytes every other response must agree with.
    var anchor: AgreementLedger.ResponseID = -1
    /// New validators, and the response that carried them, until it is seen to agree.
    private(set) var pending: [(validators: ObjectIdentity.Validators, source: Source, response: Int)] = []

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
}
