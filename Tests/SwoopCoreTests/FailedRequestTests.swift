import SwoopTestSupport
import Testing
@testable import SwoopCore

/// What a failed segment request leads to (``FailurePolicy/action(for:using:)``), alone and
/// driven with a source's health through outages in virtual time.
@Suite("Failed requests")
struct FailedRequestTests {
    private let policy = FailurePolicy(
        baseDelay: .milliseconds(250), maxDelay: .seconds(30), maxTries: 5, maxOutage: .seconds(60))

    private func action(
        _ finding: FailedRequest.Finding, first: Bool = true, others: Bool = false, failures: Int = 0,
        retryAfter: Int? = nil
    ) -> FailedRequestAction {
        var random = SplitMix64(seed: 1)
        return policy.action(
            for: FailedRequest(
                finding, fromFirstSource: first, othersUsable: others, failuresWithoutProgress: failures,
                retryAfter: retryAfter),
            using: &random)
    }

    @Test func aChangedObjectStartsOverUnlessAMirrorChangedBesideAnotherSource() {
        let changed = FailedRequest.Finding.objectChanged("its ETag changed")
        #expect(action(changed, first: true, others: true) == .startOver, "the first source is the reference")
        #expect(action(changed, first: true, others: false) == .startOver)
        #expect(action(changed, first: false, others: false) == .startOver, "no other source serves the old one")
        #expect(action(changed, first: false, others: true) == .dropSource("its object changed (its ETag changed)"))
    }

    @Test func aSourceGivenUpIsDroppedWhileAnotherIsLeftElseTheDownloadFails() {
        #expect(action(.source(.giveUp("404")), first: false, others: true) == .dropSource("404"))
        #expect(action(.source(.giveUp("404")), first: true, others: true) == .dropSource("404"))
        #expect(action(.source(.giveUp("404")), others: false) == .giveUp("404"))
    }

    @Test func aRangeWaitingForItsSourceIsNotCharged() {
        #expect(action(.source(.down)) == .release(countsAsRetry: true))
        #expect(action(.source(.rest), others: true) == .release(countsAsRetry: true))
        #expect(action(.source(.limited)) == .release(countsAsRetry: false), "a refused extra connection")
    }

    @Test func aRangeIsRetriedWithBackoffUntilMaxTriesFailuresWithoutProgress() {
        var delays: [Double] = []
        for failures in 0..<(policy.maxTries - 1) {
            guard case .retry(let delay) = action(.source(.retryRange), failures: failures) else {
                Issue.record("failure \(failures + 1) was not retried")
                return
            }
            delays.append(delay.seconds)
        }
        // Exponential with jitter: each at least half and at most all of 0.25 s × 2^(tries-1).
        for (index, delay) in delays.enumerated() {
            let full = 0.25 * Double(1 << index)
            #expect(delay >= full / 2 - 0.001 && delay <= full + 0.001, "try \(index + 1): \(delay)")
        }
        guard case .failAfterTries(let retryAt) = action(.source(.retryRange), failures: policy.maxTries - 1) else {
            Issue.record("the range was not given up after \(policy.maxTries) failures")
            return
        }
        #expect(retryAt > .zero, "the map keeps the range's next try")
        guard case .retry(let late) = action(.source(.retryRange), retryAfter: 7) else {
            Issue.record("a failure with Retry-After was not retried")
            return
        }
        #expect(late >= .seconds(7), "Retry-After is honoured")
    }

    /// One source, down for good: in virtual time, every request that fails is released to wait,
    /// a trial at a time, until the outage passes the limit; then the download gives up, after a
    /// handful of trials (never a connection per waiting range).
    @Test func aSourceDownForGoodIsWaitedOutThenGivenUp() throws {
        let outcome = try Self.outage(policy: policy, others: false, answersAfter: nil)
        guard case .giveUp(let reason) = outcome.last else {
            Issue.record("ended with \(String(describing: outcome.last))")
            return
        }
        #expect(reason.contains("has not answered for"), "\(reason)")
        #expect(outcome.elapsed >= policy.maxOutage && outcome.elapsed < policy.maxOutage + .seconds(6))
        // Trials at most every 5 s after the first few: about a dozen in a minute, not one per range.
        #expect(outcome.trials <= 20, "\(outcome.trials) trials")
    }

    /// The same outage with a mirror beside it: the source is dropped and the mirror takes its ranges.
    @Test func aSourceDownForGoodBesideAMirrorIsDropped() throws {
        let outcome = try Self.outage(policy: policy, others: true, answersAfter: nil)
        guard case .dropSource(let reason) = outcome.last else {
            Issue.record("ended with \(String(describing: outcome.last))")
            return
        }
        #expect(reason.contains("has not answered for"), "\(reason)")
    }

    /// An outage shorter than the limit: the ranges wait, and the source is up again at its next trial.
    @Test func aShortOutageIsWaitedOut() throws {
        let outcome = try Self.outage(policy: policy, others: false, answersAfter: .seconds(20))
        #expect(outcome.last == nil, "nothing given up: \(String(describing: outcome.last))")
        #expect(outcome.elapsed >= .seconds(20) && outcome.elapsed < .seconds(26))
    }

    /// Drives one source through an outage in virtual time: `ranges` requests fail at once (no
    /// answer), then the source's single trials fail until `answersAfter` (never, when `nil`).
    /// Returns the action that ended it (`nil`: the source answered again), the virtual time it
    /// took, and the trials sent.
    private static func outage(
        policy: FailurePolicy, others: Bool, answersAfter: Duration?, ranges: Int = 8
    ) throws -> (last: FailedRequestAction?, elapsed: Duration, trials: Int) {
        var random = SplitMix64(seed: 42)
        var health = SourceHealth()
        let start = Moment.now
        var now = start
        let refused = "connection refused"
        func fail(_ owner: Int) -> FailedRequestAction {
            let verdict = health.failed(
                .server, reason: refused, active: 0, refused: false, retryAfter: nil, sharesWork: others,
                policy: policy, at: now, by: owner, using: &random)
            return policy.action(
                for: FailedRequest(
                    .source(verdict), fromFirstSource: !others, othersUsable: others, failuresWithoutProgress: 0),
                using: &random)
        }
        for owner in 0..<ranges { health.willSend(by: owner, at: now) }
        var last: FailedRequestAction?
        for owner in 0..<ranges {
            last = fail(owner)
            if case .retry = last { continue }
            try #require(last == .release(countsAsRetry: true), "range \(owner): \(String(describing: last))")
        }
        try #require(health.isDown, "the source is down after \(ranges) failures without an answer")
        var trials = 0
        while case .down(let outage) = health.state, trials < 1000 {
            now = max(now, outage.nextTrial)
            try #require(health.mayTake(active: 0, at: now), "the trial is due")
            health.willSend(by: 1000 + trials, at: now)
            try #require(!health.mayTake(active: 1, at: now), "one trial at a time")
            trials += 1
            if let answersAfter, now - start >= answersAfter {
                health.answered()
                return (nil, now - start, trials)
            }
            last = fail(1000 + trials - 1)
            switch last {
            case .release(countsAsRetry: true): continue
            default: return (last, now - start, trials)
            }
        }
        return (last, now - start, trials)
    }
}
