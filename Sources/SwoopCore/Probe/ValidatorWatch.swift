/// Whether a server's answers under other validators are a change of the object or another node
/// of a pool: a change is believed, a pool is proven.
///
/// A download pins one set of validators per source (the probe's, or the segment map's): every
/// request carries them as its precondition (``ObjectIdentity/precondition``), and only responses
/// under them are used. An answer under other validators — a `412` to the precondition, or a head
/// that carries others — means the object changed (its old validators are gone for good) or that
/// another node of a pool answered (a pool keeps serving both). One answer cannot tell them apart;
/// answers over time can. The request is asked again, on a new connection, and:
/// - an answer under the pinned validators to a request *sent after* the first other answer proves
///   a pool: the server serves both at once. Other answers are another node's from then on, refused
///   and asked again; their bytes are never used (a pool's nodes may hold different bytes);
/// - ``changeAfter`` other answers in a row, the later ones to requests sent after the first, and
///   none under the pinned validators, is a change: the download starts over on the new version
///   (or fails, if asked to). In a proven pool the pinned validators can go too (a deploy that
///   finishes): ``poolChangeAfter`` in a row is a change there.
///
/// Answers to requests sent before a doubt began prove nothing either way: they were on their way
/// when it began. Requests are numbered by ``willSend()``. Pure: the caller keeps the count per
/// source and acts on the verdicts. A caller with several requests in flight believes a change only
/// once every request sent since the run began (``runStart``) and before the one that answered last
/// has answered: a pool's pinned node may answer more slowly than the others refuse (the transfer
/// machine's rule).
package struct ValidatorWatch: Sendable, Equatable {
    /// What the answers so far have shown.
    package enum State: Sendable, Equatable {
        /// Every answer carried the pinned validators.
        case trusted
        /// An answer carried others: the requests sent from here on decide.
        case doubting
        /// The server was seen serving the pinned validators and others at once: a pool.
        case pool
    }

    /// What to do with an answer under other validators.
    package enum Verdict: Sendable, Equatable {
        /// Refuse it and ask again on a new connection.
        case askAgain
        /// The pinned validators are gone: the object changed, after `answers` other answers in a row.
        case changed(answers: Int)
    }

    /// Other answers in a row, with none under the pinned validators, that make a change: the
    /// first raises the doubt, and the others answer requests sent after it.
    package static let changeAfter = 4
    /// The same in a proven pool, where runs of another node's answers are expected.
    package static let poolChangeAfter = 16

    package private(set) var state = State.trusted
    /// The number the next request gets.
    package private(set) var nextRequest = 0
    /// Other answers in the current run (to requests numbered `runStart` or later, and the one
    /// that began it).
    package private(set) var otherInARow = 0
    /// Other answers in all, and answers under the pinned validators.
    package private(set) var otherAnswers = 0
    package private(set) var pinnedAnswers = 0
    /// Requests numbered from here on were sent after the current run began.
    package private(set) var runStart = 0

    package init() {}

    /// A watch that starts in a proven pool (the probe proved it).
    package static var provenPool: ValidatorWatch {
        var watch = ValidatorWatch()
        watch.state = .pool
        return watch
    }

    /// A request is about to be sent: its number.
    package mutating func willSend() -> Int {
        defer { nextRequest += 1 }
        return nextRequest
    }

    /// Request `request` was answered under the pinned validators.
    package mutating func pinnedAnswer(to request: Int) {
        pinnedAnswers += 1
        guard request >= runStart else { return }
        if state == .doubting { state = .pool }
        otherInARow = 0
        runStart = nextRequest
    }

    /// Request `request` was answered under other validators, or refused with `412`.
    package mutating func otherAnswer(to request: Int) -> Verdict {
        otherAnswers += 1
        if state == .trusted {
            state = .doubting
            runStart = nextRequest
            otherInARow = 1
            return .askAgain
        }
        if otherInARow == 0 {
            // A pool's first other answer since a pinned one: a run begins.
            runStart = nextRequest
            otherInARow = 1
            return .askAgain
        }
        guard request >= runStart else { return .askAgain }
        otherInARow += 1
        let limit = state == .pool ? Self.poolChangeAfter : Self.changeAfter
        return otherInARow >= limit ? .changed(answers: otherInARow) : .askAgain
    }

    /// Whether a pool was proven.
    package var isPool: Bool { state == .pool }

    /// In a proven pool, the share of its answers that were another node's (each asked again):
    /// the requests' cost grows by as much. 0 otherwise.
    package var refusedShare: Double {
        guard isPool, otherAnswers + pinnedAnswers > 0 else { return 0 }
        return Double(otherAnswers) / Double(otherAnswers + pinnedAnswers)
    }
}
