/// The decisions of a download's probe stage (its first request, and the requests a head sends it
/// back for), as a machine: what a head's step does with the response and its connection, whether
/// the transfer took the connection over, and what an ended exchange or a failure leads to.
/// ``ProbeDecision`` judges each head; this decides what follows. Events come in as calls; the
/// shell (`Prober`) performs what comes out and decides nothing. The tests drive it from values.
package struct ProbeMachine {
    /// What the probe is for.
    package enum Purpose: Equatable {
        /// A download's first request: its response becomes the transfer's first segment or stream.
        case download
        /// Only the final response head (a name lookup): it ends with the step that head decided.
        case headOnly
    }

    /// Where the probe is.
    package enum Phase: Equatable {
        /// A request in flight, or the next one waited for.
        case asking
        /// A head decided a transfer, which takes the connection over once the head's callback
        /// has returned; its body waits.
        case handingOver
        /// The transfer takes the connection over once its sink has opened; the body waits.
        case awaitingSink
        /// The head decided a transfer of the whole object in this one response, small enough to
        /// keep in memory: its body is kept, and its end is the session's to judge
        /// (``Next/tookWhole``). No transfer is made unless that end is troubled.
        case takingWhole
        /// The transfer has the connection: the probe is done.
        case handedOver
    }

    /// What a head's step does with its response.
    package enum HeadAction: Equatable {
        /// As the decision says (its own disposition of the body).
        case asDecided
        /// Read the one byte asked for and keep the connection (a name lookup's ranged answer).
        case discard
        /// Stop the response (a name lookup's `200`: the whole object would follow).
        case abort
        /// Keep the first bytes, up to the range's count, to compare with those held.
        case collect(ByteRange)
        /// Hold the body: the transfer takes the connection over after this callback.
        case handOver
        /// Keep the whole body in memory (the object is small and arrives whole in this response).
        case takeWhole
    }

    /// What the transfer's start made of the handover.
    package enum Handover {
        case now
        case whenSinkOpens
        case refused(DownloadError)
    }

    /// What follows the start of the transfer.
    package enum HandoverAction {
        /// Nothing yet: the sink opens first.
        case wait
        /// The body goes on (or an exchange that ended is reported as ended) to whoever has the
        /// connection now: the transfer, or the probe's own response, which then ends refused.
        case letGo
        /// The probe fails with this (its exchange had ended: nothing will report it).
        case fail(DownloadError)
    }

    /// How a handover the sink's opening waited for went.
    package enum DelayedHandover: Equatable {
        /// The exchange goes on: its held body goes to the transfer.
        case live
        /// It had ended whole (a response without a body): the transfer hears that as its own.
        case endedWhole
        /// It ended otherwise (cancelled, or failed while its body waited): ask again.
        case lost
    }

    /// What an ended exchange leads to.
    package enum Next {
        /// Nothing here: the transfer has the connection, or the session finds out at the sink.
        case nothing
        /// The probe ends with this step.
        case end(ProbeDecision.Step)
        /// Compare the bytes collected with those held at `range` (``ProbeDecision/confirmed``).
        case compare(RemoteObject, range: ByteRange)
        /// Ask again without `Range` (a `416` to a range).
        case askWithoutRange
        /// Ask again on a new connection: a change, or a pool's other node (why).
        case askAgain(String)
        /// The request failed (``failed(_:urlExpired:)`` says what follows).
        case failed(DownloadError, retryAfter: Int?)
        /// The response kept whole ended, however it went: the session finishes the object, or
        /// starts the transfer with the bytes kept as its first response's.
        case tookWhole
    }

    /// What a failed probe leads to.
    package enum FailureAction: Equatable {
        /// The object changed: the download starts over.
        case restart(String)
        /// A presigned URL that expired: probe a fresh one.
        case refreshURL
        /// Another try after the policy's backoff, or the end (the exchange's retries say).
        case retryOrGiveUp
    }

    package let purpose: Purpose
    package private(set) var phase = Phase.asking
    /// The next request goes without `Range`.
    package private(set) var withoutRange = false
    /// Starting the transfer failed: the probe fails with it when its exchange ends.
    private var refused: DownloadError?

    package init(purpose: Purpose) {
        self.purpose = purpose
    }

    /// A head decided `step`; `takesWhole`: the session keeps a ranged response of the whole object
    /// in memory rather than starting a transfer (``Phase/takingWhole``).
    package mutating func head(decided step: ProbeDecision.Step, takesWhole: Bool = false) -> HeadAction {
        switch (step, purpose) {
        case (.ranged, .headOnly): return .discard
        case (.stream, .headOnly): return .abort
        case (.compareHeld(_, let range), _): return .collect(range)
        case (.ranged, .download) where takesWhole:
            phase = .takingWhole
            return .takeWhole
        case (.ranged, .download), (.stream, .download):
            phase = .handingOver
            return .handOver
        default: return .asDecided
        }
    }

    /// The transfer was asked to take the connection over and answered `handover`; `exchangeEnded`:
    /// the probe's exchange had ended already (a response without a body).
    package mutating func handoverBegan(_ handover: Handover, exchangeEnded: Bool) -> HandoverAction {
        switch handover {
        case .whenSinkOpens:
            phase = .awaitingSink
            return .wait
        case .now:
            phase = .handedOver
            return .letGo
        case .refused(let error):
            phase = .asking
            guard !exchangeEnded else { return .fail(error) }
            refused = error
            return .letGo
        }
    }

    /// The sink has opened: the transfer takes the connection over now, unless its exchange ended
    /// meanwhile other than whole (`exchangeBusy`: still in flight; `endedWhole`: ended whole).
    package mutating func sinkOpened(exchangeBusy: Bool, endedWhole: Bool) -> DelayedHandover {
        guard phase == .awaitingSink else { return .lost }
        let handover: DelayedHandover = exchangeBusy ? .live : endedWhole ? .endedWhole : .lost
        guard handover != .lost else { return .lost }
        phase = .handedOver
        return handover
    }

    /// The exchange ended: `step` is what its head decided (`nil`: no head arrived), `failure` how
    /// it failed, if it did; `url` names the request in messages.
    package mutating func ended(
        step: ProbeDecision.Step?, failure: (error: DownloadError, retryAfter: Int?)?, url: String
    ) -> Next {
        // The session judges the end of a response it keeps whole (a failure too: its transfer
        // hears it as its first response's).
        if phase == .takingWhole {
            phase = .handedOver
            return .tookWhole
        }
        // While the sink opens, the session finds out when it has (``sinkOpened``).
        guard phase == .asking else { return .nothing }
        if let error = refused {
            refused = nil
            return .failed(error, retryAfter: nil)
        }
        if let failure { return .failed(failure.error, retryAfter: failure.retryAfter) }
        switch step {
        case .compareHeld(let found, let range)?:
            return .compare(found, range: range)
        case .withoutRange?:
            guard !withoutRange else {
                let error = DownloadError.invalidResponse("the server answered 416 to a request without Range (\(url))")
                return .failed(error, retryAfter: nil)
            }
            withoutRange = true
            return .askWithoutRange
        case .askAgain(let why)?:
            return .askAgain(why)
        case let step?:
            return .end(step)
        case nil:
            return .failed(
                .invalidResponse("the server's response ended without a complete header (\(url))"), retryAfter: nil)
        }
    }

    /// A probe failed with `error` (`urlExpired`: a presigned URL that expired, and fresh ones can
    /// be had): a changed object restarts the download, an expired URL is refreshed, anything else
    /// is tried again or ends.
    package func failed(_ error: DownloadError, urlExpired: Bool) -> FailureAction {
        if error.kind == .objectChanged { return .restart(error.message) }
        return urlExpired ? .refreshURL : .retryOrGiveUp
    }
}
