/// How one source (a server) of a download is doing, and how many requests it may be sent now:
/// the failure policy's memory of that source. Pure: the caller passes the time.
///
/// It works like a circuit breaker. A source whose requests fail at the server level
/// (``FailureScope/server``) ``FailurePolicy/downAfter`` times in a row, with no answer between,
/// is *down*: nothing is sent to it but one trial request at a time, on an exponential backoff of
/// at most ``FailurePolicy/maxTrialInterval``, however many byte ranges wait for it. Failures while
/// it is down are not charged to the ranges. The first answer makes it *recovering*: two requests
/// at once, twice as many with each further answer, until it is up again. A source down for longer
/// than ``FailurePolicy/maxOutage`` is given up.
///
/// Before it is down, a source in *doubt* — a connection to it broke off or was refused, and
/// nothing has answered since — is sent one new request at a time until one is answered (or for
/// at most ``doubtPatience`` each): requests in flight go on, but a dead host is not asked by every
/// download of a list at once while the failures that make it down arrive.
///
/// With several sources, a source whose answers keep failing rests between tries (another source
/// takes its ranges) and is given up after ``FailurePolicy/maxTries`` in a row; with one source
/// those failures are the range's (``Verdict/retryRange``).
package struct SourceHealth: Equatable {
    /// Where the source stands.
    package enum State: Equatable {
        /// Answering: requests go to it, up to its learned connection cap.
        case up
        /// Not answering (see ``Outage``).
        case down(Outage)
        /// A trial was answered: at most `allowance` requests at once, doubling with each answer.
        case recovering(allowance: Int)
    }

    /// A source that stopped answering.
    package struct Outage: Equatable {
        /// When it went down: the first server failure of the run that made it down.
        package var since: Moment
        /// When the next trial may be sent.
        package var nextTrial: Moment
        /// Trials sent since, all failed.
        package var failedTrials = 0
        /// A trial is in flight: nothing else is sent.
        package var trialInFlight = false
        /// Who sent the trial (a request's own number), when the health is shared by several
        /// downloads: only that request's end ends the trial.
        package var trialOwner: Int?
        /// The last failure, in a few words, for progress and messages.
        package var lastFailure: String
    }

    /// What became of the source after a failed request, and what the caller does with the range.
    package enum Verdict: Equatable {
        /// It refused one connection more than it takes (a per-client limit): its cap is learned,
        /// nothing failed; the range goes back to the plan.
        case limited
        /// The source is up as far as is known: the range's own tries and backoff apply.
        case retryRange
        /// Several sources: this one rests a while, another takes the range, which is not charged.
        case rest
        /// The source is down: the range waits for it (or another source), not charged.
        case down
        /// The source is given up: why. With other sources it is dropped; alone, the download fails.
        case giveUp(String)
    }

    package private(set) var state = State.up
    /// Server failures since it last answered.
    package private(set) var failuresInARow = 0
    /// Failed answers in a row while several sources share the work (reset by delivered bytes).
    package private(set) var failedAnswers = 0
    /// When a source that rests may be asked again.
    package private(set) var restingUntil: Moment?
    /// The most requests it took at once, learned when it refused one more (`503`, `429`) while
    /// others were in flight; `nil` until then, and again after an outage.
    package private(set) var cap: Int?
    /// It answered at least once: a connection it refuses later is an outage, not a wrong address.
    package private(set) var hasAnswered = false
    /// A connection to it broke off or was refused since it last answered (while it is not down).
    package private(set) var doubt: Doubt?
    /// When the latest failure that says it may be gone was heard (a server failure, a response
    /// broken off), until it answers a request sent after that and is up.
    package private(set) var lastFailureAt: Moment?

    /// A source that may have gone away: one request at a time finds out.
    package struct Doubt: Equatable {
        /// The request finding out, by its owner's number (`nil` with ``isTesting``: anyone's).
        package var owner: Int?
        /// A request is finding out: no other new request goes until it ends or ``until``.
        package var isTesting = false
        /// When another request may go even though the first has not ended (it hangs).
        package var until: Moment?
    }

    /// How long one request in doubt holds the others back at most.
    package static let doubtPatience: Duration = .seconds(2)
    /// A source that answers, as every source is until it fails.
    package init() {}

    /// The recovering allowance at which a source counts as fully up again.
    package static let fullAllowance = 1024

    package var isDown: Bool {
        if case .down = state { return true }
        return false
    }

    /// The outage under way, if the source is down.
    package var outage: Outage? {
        if case .down(let outage) = state { return outage }
        return nil
    }

    /// How many requests it may have in flight at `now` (`nil`: as many as are sent), and
    /// whether it is held back for now (resting, or down between trials).
    package func limit(at now: Moment) -> (count: Int?, isHeldBack: Bool) {
        let resting = (restingUntil.map { $0 > now } ?? false) || isTestingDoubt(at: now)
        switch state {
        case .up:
            return (cap, resting)
        case .down(let outage):
            return (1, resting || outage.trialInFlight || outage.nextTrial > now)
        case .recovering(let allowance):
            return (min(allowance, cap ?? allowance), resting)
        }
    }

    /// Whether one more request may be sent at `now`, with `active` in flight.
    package func mayTake(active: Int, at now: Moment) -> Bool {
        let (count, heldBack) = limit(at: now)
        return !heldBack && count.map { active < $0 } ?? true
    }

    /// Whether a request finds out whether the source went away, holding the others back, at `now`.
    private func isTestingDoubt(at now: Moment) -> Bool {
        guard let doubt, doubt.isTesting else { return false }
        return doubt.until.map { $0 > now } ?? true
    }

    /// When a source held back may be asked again (`nil`: it is not waited for).
    package var nextWake: Moment? {
        guard case .down(let outage) = state else {
            let testing = doubt.flatMap { $0.isTesting ? $0.until : nil }
            return [restingUntil, testing].compactMap { $0 }.min()
        }
        guard !outage.trialInFlight else { return nil }
        return max(outage.nextTrial, restingUntil ?? outage.nextTrial)
    }

    /// A request is being sent (by `owner`, a number of the request's own): while the source is
    /// down, it is the trial; while it is in doubt, it finds out.
    package mutating func willSend(by owner: Int? = nil, at now: Moment = .now) {
        if doubt != nil, !isTestingDoubt(at: now) {
            doubt = Doubt(owner: owner, isTesting: true, until: now + Self.doubtPatience)
        }
        if case .down(var outage) = state, !outage.trialInFlight {
            outage.trialInFlight = true
            outage.trialOwner = owner
            state = .down(outage)
        }
    }

    /// A request ended with neither an answer nor a failure (cancelled), or with an answer that
    /// says nothing of the server: if it was the trial (`owner`'s, or any when `nil`), another
    /// may be sent.
    package mutating func abandonTrial(by owner: Int? = nil) {
        endDoubtTest(by: owner)
        if case .down(var outage) = state, outage.trialInFlight, owner == nil || owner == outage.trialOwner {
            outage.trialInFlight = false
            outage.trialOwner = nil
            state = .down(outage)
        }
    }

    /// A usable response head arrived for a request sent at `sentAt` (`nil`: not known): the source
    /// answers. Ends an outage (recovering) and widens a recovery.
    ///
    /// An answer to a request sent before the latest failure says nothing of the source since: its
    /// head may have left the server before the failure, and be read after it (the heads and resets
    /// of a server that died are read in any order, and a busy client reads them late). It does not
    /// end an outage, clear a doubt or reset the failures; a request sent later finds out.
    package mutating func answered(sentAt: Moment? = nil) {
        hasAnswered = true
        if let sentAt, let lastFailureAt, sentAt < lastFailureAt { return }
        failuresInARow = 0
        doubt = nil
        switch state {
        case .up:
            break
        case .down:
            cap = nil  // what it refused while failing says nothing about what it takes
            state = .recovering(allowance: 2)
        case .recovering(let allowance):
            state = allowance * 2 >= Self.fullAllowance ? .up : .recovering(allowance: allowance * 2)
        }
        if state == .up { lastFailureAt = nil }
    }

    /// Body bytes arrived: its answers are usable again.
    package mutating func delivered() {
        failedAnswers = 0
    }

    /// A request failed. `scope` classes the failure (``FailurePolicy/scope(of:answered:)``);
    /// `active`: the source's other requests in flight; `refused`: a `503` or `429`;
    /// `sharesWork`: other usable sources can take the range; `reason`: the failure in a few words;
    /// `owner`: the request's number, as given to ``willSend(by:)`` (`nil`: any).
    package mutating func failed(
        _ scope: FailureScope, reason: String, active: Int, refused: Bool, retryAfter: Int?, sharesWork: Bool,
        policy: FailurePolicy, at now: Moment, by owner: Int? = nil,
        brokeOff: Bool = false, using random: inout some RandomNumberGenerator
    ) -> Verdict {
        endDoubtTest(by: owner)
        if case .down(var outage) = state {
            // Only the trial's failure moves the next trial; older requests only confirm the outage.
            if scope == .permanent { return .giveUp(reason) }
            guard outage.trialInFlight, owner == nil || owner == outage.trialOwner else { return .down }
            heardFailure(at: now)
            outage.trialInFlight = false
            outage.trialOwner = nil
            outage.failedTrials += 1
            outage.lastFailure = reason
            if now - outage.since >= policy.maxOutage {
                let seconds = Int((now - outage.since).seconds.rounded())
                state = .down(outage)
                return .giveUp(
                    "\(reason); the server has not answered for \(seconds) s, "
                        + "gave up after \(Wording.tries(outage.failedTrials)) while it was down"
                )
            }
            let wait = policy.trialDelay(failedTrials: outage.failedTrials, retryAfter: retryAfter, using: &random)
            outage.nextTrial = now + wait
            state = .down(outage)
            return .down
        }
        switch scope {
        case .permanent:
            return .giveUp(reason)
        case .server:
            if refused && active > 0 && state == .up {
                // "No more connections here" (a per-client limit), not a failure: stay below what it took.
                cap = active
                return .limited
            }
            failuresInARow += 1
            heardFailure(at: now)
            guard failuresInARow >= policy.downAfter else {
                if doubt == nil { doubt = Doubt() }
                return sharesWork ? rest(policy, retryAfter, now, &random) : .retryRange
            }
            let wait = policy.trialDelay(failedTrials: 0, retryAfter: retryAfter, using: &random)
            state = .down(Outage(since: now, nextTrial: now + wait, lastFailure: reason))
            doubt = nil
            return .down
        case .response:
            if brokeOff {
                if doubt == nil { doubt = Doubt() }
                heardFailure(at: now)
            }
            guard sharesWork else { return .retryRange }
            failedAnswers += 1
            guard failedAnswers < policy.maxTries else {
                return .giveUp(reason + Wording.gaveUp(after: failedAnswers))
            }
            return rest(policy, retryAfter, now, &random)
        }
    }

    package mutating func failed(
        _ scope: FailureScope, reason: String, active: Int, refused: Bool, retryAfter: Int?, sharesWork: Bool,
        policy: FailurePolicy, at now: Moment, by owner: Int? = nil, brokeOff: Bool = false
    ) -> Verdict {
        var random = SystemRandomNumberGenerator()
        return failed(
            scope, reason: reason, active: active, refused: refused, retryAfter: retryAfter, sharesWork: sharesWork,
            policy: policy, at: now, by: owner, brokeOff: brokeOff, using: &random)
    }

    /// A failure that says the source may be gone was heard at `now`: answers to requests sent
    /// before it no longer count (``answered(sentAt:)``).
    private mutating func heardFailure(at now: Moment) {
        lastFailureAt = max(lastFailureAt ?? now, now)
    }

    /// `owner`'s request ended: if it was finding out whether the source went away, another may.
    private mutating func endDoubtTest(by owner: Int?) {
        guard var doubt, doubt.isTesting, owner == nil || doubt.owner == nil || owner == doubt.owner else { return }
        doubt.isTesting = false
        doubt.owner = nil
        doubt.until = nil
        self.doubt = doubt
    }

    /// Holds the source back until `until` whatever its state (a fresh URL being checked), or
    /// lets it go again (`nil`).
    package mutating func hold(until: Moment?) {
        restingUntil = until
    }

    private mutating func rest(
        _ policy: FailurePolicy, _ retryAfter: Int?, _ now: Moment,
        _ random: inout some RandomNumberGenerator
    ) -> Verdict {
        let tries = max(failedAnswers, failuresInARow)
        restingUntil = now + policy.backoff(tries: tries, retryAfter: retryAfter, using: &random)
        return .rest
    }
}

extension SourceHealth {
    /// A request failed with `error` (`answered`: after its response head): its scope
    /// (``FailurePolicy/scope(of:answered:)``), whether it was a refusal (`503`, `429`) and whether
    /// a response broke off, as ``failed(_:reason:active:refused:retryAfter:sharesWork:policy:at:by:brokeOff:using:)``
    /// takes them.
    package mutating func failed(
        _ error: DownloadError, answered: Bool, active: Int, retryAfter: Int?, sharesWork: Bool,
        policy: FailurePolicy, at now: Moment, by owner: Int? = nil,
        using random: inout some RandomNumberGenerator
    ) -> Verdict {
        failed(
            FailurePolicy.scope(of: error, answered: answered), reason: error.reason, active: active,
            refused: error.httpStatus == 503 || error.httpStatus == 429, retryAfter: retryAfter,
            sharesWork: sharesWork, policy: policy, at: now, by: owner, brokeOff: answered && error.kind == .network,
            using: &random)
    }

    package mutating func failed(
        _ error: DownloadError, answered: Bool, active: Int, retryAfter: Int?, sharesWork: Bool,
        policy: FailurePolicy, at now: Moment, by owner: Int? = nil
    ) -> Verdict {
        var random = SystemRandomNumberGenerator()
        return failed(
            error, answered: answered, active: active, retryAfter: retryAfter, sharesWork: sharesWork, policy: policy,
            at: now, by: owner, using: &random)
    }

    /// What the source policy sees of a source with this health at `now`: `active` requests in
    /// flight, `isUsable` (not dropped), `isHeld` (held back by its download alone).
    package func sample(active: Int, isUsable: Bool, isHeld: Bool, at now: Moment) -> SourceSample {
        let limit = limit(at: now)
        return SourceSample(
            active: active, cap: limit.count, failures: failuresInARow + failedAnswers, isUsable: isUsable,
            isResting: limit.isHeldBack || isHeld, holdsBackAfterSend: isDown || doubt != nil, isUp: state == .up)
    }
}
