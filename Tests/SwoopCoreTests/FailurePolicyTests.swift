import SwoopTestSupport
import Testing
@testable import SwoopCore

/// The one failure policy: how failures are classed, backoff, and each source's health (the
/// circuit breaker), from values alone.
@Suite("FailurePolicy")
struct FailurePolicyTests {
    private let policy = FailurePolicy(
        baseDelay: .milliseconds(250), maxDelay: .seconds(30), maxTries: 8, maxOutage: .seconds(120))
    private let start = Moment.now

    private let refused = DownloadError(.network, "network error talking to x: Couldn't connect to server", curlCode: 7)

    @Test func failuresAreClassedByWhetherTheServerAnswered() {
        #expect(FailurePolicy.scope(of: refused, answered: false) == .server)
        #expect(FailurePolicy.scope(of: refused, answered: true) == .response, "a connection that broke mid-body")
        for status in [500, 502, 503, 504, 408, 425, 429] {
            #expect(FailurePolicy.scope(of: .httpStatus(status, url: "u"), answered: true) == .server, "\(status)")
        }
        for status in [400, 401, 403, 404, 410, 451] {
            #expect(FailurePolicy.scope(of: .httpStatus(status, url: "u"), answered: true) == .permanent, "\(status)")
        }
        #expect(FailurePolicy.scope(of: .invalidResponse("wrong Content-Range"), answered: true) == .response)
        #expect(FailurePolicy.scope(of: DownloadError(.tls, "bad certificate"), answered: false) == .permanent)
        #expect(FailurePolicy.scope(of: DownloadError(.unreachable, "no such host"), answered: false) == .permanent)
        #expect(FailurePolicy.scope(of: DownloadError(.tooManyRedirects, "a loop"), answered: true) == .permanent)
    }

    @Test func backoffIsExponentialWithJitterAndHonoursRetryAfter() {
        var random = SplitMix64(seed: 7)
        for tries in 1...12 {
            let expected = min(30.0, 0.25 * Double(1 << (tries - 1)))
            let delay = policy.backoff(tries: tries, retryAfter: nil, using: &random).seconds
            #expect(delay >= expected / 2 - 0.001 && delay <= expected + 0.001, "try \(tries): \(delay)")
        }
        #expect(policy.backoff(tries: 1, retryAfter: 5, using: &random).seconds >= 5)
        #expect(policy.backoff(tries: 1, retryAfter: 3600, using: &random).seconds <= 30, "Retry-After is capped")
    }

    @Test func singleRequestsAreRetriedUpToMaxTriesUnlessPermanent() {
        #expect(policy.retryDelay(after: 1, refused, retryAfter: nil) != nil)
        #expect(policy.retryDelay(after: 7, refused, retryAfter: nil) != nil)
        #expect(policy.retryDelay(after: 8, refused, retryAfter: nil) == nil, "8 tries in all")
        #expect(policy.retryDelay(after: 1, DownloadError(.tooManyRedirects, "loop"), retryAfter: nil) == nil)
        #expect(policy.retryDelay(after: 1, .httpStatus(404, url: "u"), retryAfter: nil) == nil)
    }

    @Test func trialsBackOffToAtMostFiveSeconds() {
        var random = SplitMix64(seed: 3)
        var previousCap = 0.0
        for failed in 0...20 {
            let delay = policy.trialDelay(failedTrials: failed, retryAfter: nil, using: &random).seconds
            let cap = min(5.0, 0.5 * Double(1 << failed))
            #expect(delay >= cap / 2 - 0.001 && delay <= cap + 0.001, "after \(failed) failed trials: \(delay)")
            #expect(cap >= previousCap)
            previousCap = cap
        }
        #expect(policy.trialDelay(failedTrials: 0, retryAfter: 20, using: &random).seconds >= 20, "Retry-After wins")
    }

    @Test func longestQuietPeriodIsTimeoutsPlusEveryBackoff() {
        // 0.25 + 0.5 + 1 + 2 + 4 + 8 + 16 + 30 (capped) = 61.75 s of backoff for 8 tries.
        let quiet = policy.longestQuietPeriod(connectTimeout: .seconds(30), stallTimeout: .seconds(30))
        #expect(quiet == .milliseconds(121_750))
        var once = policy
        once.maxTries = 1
        #expect(once.longestQuietPeriod(connectTimeout: .seconds(1), stallTimeout: .seconds(2)) == .milliseconds(3250))
    }

    // MARK: SourceHealth

    private func fail(
        _ health: inout SourceHealth, _ scope: FailureScope = .server, active: Int = 0, refused: Bool = false,
        sharesWork: Bool = false, at seconds: Double, seed: UInt64 = 1
    ) -> SourceHealth.Verdict {
        var random = SplitMix64(seed: seed)
        return health.failed(
            scope, reason: "connection refused", active: active, refused: refused, retryAfter: nil,
            sharesWork: sharesWork, policy: policy, at: start + .seconds(seconds), using: &random)
    }

    @Test func aSourceIsDownAfterThreeServerFailuresWithoutAnAnswer() {
        var health = SourceHealth()
        #expect(fail(&health, at: 0) == .retryRange)
        #expect(fail(&health, at: 0) == .retryRange)
        health.answered()
        #expect(health.failuresInARow == 0, "an answer in between: the server is up")
        #expect(fail(&health, at: 1) == .retryRange)
        #expect(fail(&health, at: 1) == .retryRange)
        #expect(fail(&health, at: 1) == .down)
        #expect(health.isDown)
        // Requests sent before the outage fail too: they confirm it, they do not move the next trial.
        let next = health.outage?.nextTrial
        #expect(fail(&health, at: 1.1) == .down)
        #expect(fail(&health, .response, at: 1.1) == .down, "a range broken by the outage is not charged")
        #expect(health.outage?.nextTrial == next)
        #expect(health.outage?.failedTrials == 0)
    }

    @Test func aDownSourceTakesOneTrialAtATime() throws {
        var health = SourceHealth()
        for _ in 0..<3 { _ = fail(&health, at: 0) }
        let outage = try #require(health.outage)
        #expect(outage.nextTrial > start && outage.nextTrial <= start + .milliseconds(500))
        #expect(!health.mayTake(active: 0, at: start + .milliseconds(1)), "not before the trial is due")
        #expect(health.nextWake == outage.nextTrial)
        let due = outage.nextTrial
        #expect(health.mayTake(active: 0, at: due))
        health.willSend()
        #expect(!health.mayTake(active: 0, at: due), "one trial at a time")
        #expect(health.nextWake == nil, "the trial's end wakes the transfer")
        #expect(fail(&health, at: due.seconds(since: start)) == .down)
        #expect(health.outage?.failedTrials == 1)
        #expect(!health.mayTake(active: 0, at: due), "the next trial backs off")
        // A cancelled trial lets another go.
        let again = try #require(health.outage?.nextTrial)
        health.willSend()
        health.abandonTrial()
        #expect(health.mayTake(active: 0, at: again))
    }

    @Test func aTenSecondOutageCostsAFewTrials() {
        // Trials at most every 5 s: whatever the number of ranges waiting, a 10 s outage sees
        // about half a dozen connection attempts after the three that made the source down.
        var health = SourceHealth()
        for _ in 0..<3 { _ = fail(&health, at: 0) }
        var random = SplitMix64(seed: 11)
        var trials = 0
        while let wake = health.nextWake, wake < start + .seconds(10) {
            #expect(health.mayTake(active: 0, at: wake))
            health.willSend()
            trials += 1
            _ = health.failed(
                .server, reason: "connection refused", active: 0, refused: false, retryAfter: nil, sharesWork: false,
                policy: policy, at: wake, using: &random)
        }
        #expect(trials >= 3 && trials <= 8, "\(trials) trials in 10 s")
    }

    @Test func anAnswerRampsARecoveringSourceBackUp() {
        var health = SourceHealth()
        _ = fail(&health, active: 3, refused: true, at: 0)
        #expect(health.cap == 3, "a 503 beside three requests in flight: a connection limit")
        for _ in 0..<3 { _ = fail(&health, at: 0) }
        health.willSend()
        health.answered()
        #expect(health.state == .recovering(allowance: 2))
        #expect(health.cap == nil, "what it refused while failing says nothing about what it takes")
        #expect(health.mayTake(active: 1, at: start) && !health.mayTake(active: 2, at: start))
        health.answered()
        #expect(health.state == .recovering(allowance: 4))
        for _ in 0..<10 { health.answered() }
        #expect(health.state == .up)
        #expect(health.mayTake(active: 500, at: start))
    }

    @Test func anOutageLongerThanTheLimitIsGivenUp() {
        var health = SourceHealth()
        for _ in 0..<3 { _ = fail(&health, at: 0) }
        health.willSend()
        #expect(fail(&health, at: 119) == .down)
        health.willSend()
        guard case .giveUp(let why) = fail(&health, at: 121) else {
            Issue.record("expected the source to be given up")
            return
        }
        #expect(why.contains("has not answered for 121 s"), "\(why)")
    }

    @Test func aRefusalBesideOtherRequestsTeachesALimitNotAFailure() {
        var health = SourceHealth()
        #expect(fail(&health, active: 4, refused: true, at: 0) == .limited)
        #expect(health.cap == 4 && health.failuresInARow == 0)
        #expect(!health.mayTake(active: 4, at: start) && health.mayTake(active: 3, at: start))
    }

    @Test func permanentFailuresGiveUpAtOnce() {
        var health = SourceHealth()
        #expect(fail(&health, .permanent, at: 0) == .giveUp("connection refused"))
    }

    @Test func withSeveralSourcesAFailingOneRestsAndIsGivenUpAfterMaxTries() {
        var health = SourceHealth()
        for attempt in 1..<8 {
            #expect(fail(&health, .response, sharesWork: true, at: Double(attempt)) == .rest)
            #expect(!health.mayTake(active: 0, at: start + .seconds(Double(attempt))), "it rests")
        }
        guard case .giveUp = fail(&health, .response, sharesWork: true, at: 9) else {
            Issue.record("expected it given up after 8 failed answers")
            return
        }
        var delivering = SourceHealth()
        _ = fail(&delivering, .response, sharesWork: true, at: 0)
        delivering.delivered()
        #expect(delivering.failedAnswers == 0, "bytes reset the count")
    }
}

private extension Moment {
    func seconds(since start: Moment) -> Double {
        (self - start).seconds
    }
}
