/// What a slot's request asks for: its own bytes of a segment (with the overlap around them), or
/// a bridge over a break between two pieces that never met (overlap only).
package enum TransferWork: Equatable {
    case segment(Segment, RangeRequest)
    case bridge(RangeRequest)

    /// The range sent in the `Range` header.
    package var range: ByteRange {
        switch self {
        case .segment(_, let request), .bridge(let request): request.sent
        }
    }

    package var segment: Segment? {
        if case .segment(let segment, _) = self { segment } else { nil }
    }

    package static func == (lhs: TransferWork, rhs: TransferWork) -> Bool {
        switch (lhs, rhs) {
        case (.segment(let a, let r), .segment(let b, let s)): a === b && r == s
        case (.bridge(let r), .bridge(let s)): r == s
        default: false
        }
    }
}

/// One request the machine sends: on `slot`, to `source`, for `work`, with the source's
/// precondition (its pinned validators).
package struct TransferSend: Equatable {
    package var slot: Int
    package var source: Int
    package var work: TransferWork
}

/// How a slot's request ended, as the machine needs to know it.
package struct RequestEnd {
    package enum Outcome {
        /// The response ended on its own or was stopped on purpose (every byte asked for that
        /// the store wanted is stored).
        case completed
        /// Cancelled: a replacement, a hedge partner that won, a stopping download.
        case cancelled
        /// It failed: the transport, a response that does not match, storing its bytes.
        case failed(DownloadError, retryAfter: Int?)
    }

    /// Why a response was refused at its head: it was not under its source's pinned validators
    /// (``ValidatorWatch`` decides what follows).
    package enum Refusal: Equatable {
        /// `412`: the server's copy does not have the pinned validators.
        case preconditionFailed
        /// Its head carried other validators.
        case otherValidators
    }

    package var outcome: Outcome
    /// Body bytes this request delivered.
    package var bytes: Int64
    /// Its response head arrived (a failure after it is the response's, not the server's).
    package var answered: Bool
    package var refusal: Refusal?
    /// Its head carried its source's pinned validators (its bytes are the object's).
    package var pinned: Bool
    /// The failure is the first source refusing an expired URL, and a fresh one can be fetched.
    package var urlExpired: Bool
    /// What the source's health made of the failure, when the end told its host one
    /// (``TransferMachine/hostReport(slot:_:)``): the shell tells the health and hands the verdict
    /// back here.
    package var verdict: SourceHealth.Verdict?

    package init(
        _ outcome: Outcome, bytes: Int64 = 0, answered: Bool = false, refusal: Refusal? = nil, pinned: Bool = false,
        urlExpired: Bool = false
    ) {
        self.outcome = outcome
        self.bytes = bytes
        self.answered = answered
        self.refusal = refusal
        self.pinned = pinned
        self.urlExpired = urlExpired
    }
}

/// What a request's end tells its source's host, whose health every download of the host shares:
/// the shell tells the health before it hands the end to the machine.
package enum HostReport {
    /// A failure the health hears; its verdict goes back with the end (``RequestEnd/verdict``).
    case failed(DownloadError, answered: Bool, retryAfter: Int?)
    /// Nothing of the host (an answer, a refusal, a cancel): if the request was its trial while it
    /// is down, another may be sent.
    case nothing
}

/// The downloader's connection permits as one decision sees them: free in all, free for the
/// source's host, and which host that is (sources may share one).
package struct PermitCount: Equatable {
    package var free: Int
    package var freeOnHost: Int
    package var host: Int

    package init(free: Int, freeOnHost: Int, host: Int) {
        self.free = free
        self.freeOnHost = freeOnHost
        self.host = host
    }
}

/// What the machine tells its shell to do, in order.
package enum TransferAction {
    /// Send this request (the slot's connection opens if it is new): it takes a permit of the
    /// downloader's budget (the machine counted it free) and counts as in flight at its source's
    /// host (maybe as its trial).
    case send(TransferSend)
    /// No permit was free for the work left: dispatch again (``TransferMachine/dispatch(at:)``)
    /// when one is returned.
    case waitForPermit
    /// The source is no longer used, for this reason.
    case dropSource(Int, reason: String)
    /// `slot`'s request to `source` will not be heard of again (the transfer stops): if it was the
    /// host's trial while it is down, another download may send one.
    case abandonTrial(source: Int, slot: Int)
    /// Cancel the request in flight on `slot` (its end arrives later, as `cancelled`).
    case cancel(slot: Int)
    /// `slot`'s next request goes on a new connection (a balancer may pick another node).
    case renew(slot: Int)
    /// `slot`'s connection is far slower than the others: close it and reconnect. Its request is
    /// cancelled (its end arrives later, as `cancelled`); the bytes it wrote are kept and the rest
    /// of its segment goes back to the plan.
    case replace(slot: Int)
    /// Write the segment map if its interval has passed.
    case checkpoint
    /// A range is tried again (for the counters).
    case retried
    /// Fetch a fresh URL for the first source, whose URL `slot`'s request found expired, holding
    /// the source back meanwhile; then ``TransferMachine/dispatch(at:)`` (the other sources go on),
    /// and again once the fresh URL is checked. If none can be had, the download fails.
    case refresh(refusedOn: Int)
    /// Wake the machine at this instant (``TransferMachine/dispatch(at:)``): the next retry or
    /// a source's next trial, while nothing is in flight. Replaces any earlier wake.
    case wake(at: Moment)
    /// Every byte is stored, one version, and nothing is in flight.
    case complete
    /// The object changed: the download starts over.
    case objectChanged(String)
    /// The download fails.
    case fail(DownloadError)
    /// Something worth a log line.
    case note(TransferNote)
}

/// What the machine did that a log should say.
package enum TransferNote {
    case retrying(range: ByteRange, error: DownloadError, delay: Duration)
    case hedging(segment: String, rate: Int)
    case bridging(offset: Int64, range: ByteRange)
    /// `source` answered under other validators (`error` says how): asked again on a new connection.
    case askingAgain(source: Int, error: DownloadError)
    /// `source` was seen serving its pinned validators and others at once: a pool.
    case poolProven(source: Int)
    /// Every byte is here: `source` is asked whether it still serves the pinned validators.
    case confirming(source: Int)
    /// `source` did not answer the confirmation in `tries` tries: left unasked.
    case unconfirmed(source: Int, tries: Int)
    case requestEnded(slot: Int, range: ByteRange, bytes: Int64)
}
