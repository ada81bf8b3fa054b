import SwoopTestSupport
import Testing
@testable import SwoopCore

/// One ``SourceHealth`` shared by every download of a host (the downloader's host table), in
/// virtual time: requests of many downloads, a host that dies and comes back, and how many
/// connection attempts the outage costs.
@Suite("Shared host health")
struct SharedHealthTests {
    private let policy = FailurePolicy(
        baseDelay: .milliseconds(250), maxDelay: .seconds(30), maxTries: 8, maxOutage: .seconds(120))
    private let start = Moment.now

    private func fail(
        _ health: inout SourceHealth, by owner: Int?, at seconds: Double, random: inout SplitMix64
    ) -> SourceHealth.Verdict {
        health.failed(
            .server, reason: "connection refused", active: 0, refused: false, retryAfter: nil, sharesWork: false,
            policy: policy, at: start + .seconds(seconds), by: owner, using: &random)
    }

    @Test func onlyTheTrialsOwnRequestEndsTheTrial() throws {
        var random = SplitMix64(seed: 1)
        var health = SourceHealth()
        for owner in 1...3 { _ = fail(&health, by: owner, at: 0, random: &random) }
        let due = try #require(health.outage?.nextTrial)
        health.willSend(by: 7)
        #expect(health.outage?.trialOwner == 7)
        // Another download's request, sent before the outage, fails now: it confirms the outage
        // and leaves the trial in flight.
        #expect(fail(&health, by: 4, at: (due - start).seconds, random: &random) == .down)
        #expect(health.outage?.trialInFlight == true)
        health.abandonTrial(by: 4)
        #expect(health.outage?.trialInFlight == true, "only the trial's owner abandons it")
        #expect(!health.mayTake(active: 0, at: due + .seconds(60)), "one trial at a time, for every download")
        #expect(fail(&health, by: 7, at: (due - start).seconds, random: &random) == .down)
        #expect(health.outage?.failedTrials == 1 && health.outage?.trialInFlight == false)
    }

    @Test func aRefusalAfterAnAnswerIsKnownToBeAnOutage() {
        var health = SourceHealth()
        #expect(!health.hasAnswered)
        health.answered()
        #expect(health.hasAnswered)
    }

    /// `downloads` downloads of one host, each sending one request whenever its view of the host
    /// lets it (every 50 ms of virtual time), through a 20 s outage: the connection attempts
    /// made while the host is down, with one health for all of them (`shared`) or one each.
    private func attemptsDuringOutage(downloads: Int, shared: Bool) -> Int {
        var random = SplitMix64(seed: 40)
        var healths = Array(repeating: SourceHealth(), count: shared ? 1 : downloads)
        var attempts = 0
        // Every download had a request in flight when the host died: each fails at once.
        for download in 0..<downloads {
            let index = shared ? 0 : download
            _ = healths[index].failed(
                .response, reason: "connection reset", active: 0, refused: false, retryAfter: nil, sharesWork: false,
                policy: policy, at: start, by: download, using: &random)
        }
        var retryAt = Array(repeating: 0.0, count: downloads)
        for download in 0..<downloads { retryAt[download] = policy.backoff(tries: 1, retryAfter: nil).seconds }
        var tries = Array(repeating: 1, count: downloads)
        var time = 0.0
        while time < 20 {
            for download in 0..<downloads where retryAt[download] <= time {
                let index = shared ? 0 : download
                let now = start + .seconds(time)
                guard healths[index].mayTake(active: 0, at: now) else { continue }
                healths[index].willSend(by: download)
                attempts += 1  // a connect() to the dead host: refused at once
                let verdict = healths[index].failed(
                    .server, reason: "connection refused", active: 0, refused: false, retryAfter: nil,
                    sharesWork: false, policy: policy, at: now, by: download, using: &random)
                if verdict == .retryRange {
                    tries[download] += 1
                    retryAt[download] = time + policy.backoff(tries: tries[download], retryAfter: nil).seconds
                }
            }
            time += 0.05
        }
        return attempts
    }

    @Test func sixtyFourDownloadsProbeADeadHostAsOneDoes() {
        let one = attemptsDuringOutage(downloads: 1, shared: true)
        let shared = attemptsDuringOutage(downloads: 64, shared: true)
        let separate = attemptsDuringOutage(downloads: 64, shared: false)
        #expect(one <= 10, "one download: \(one) attempts in 20 s")
        #expect(shared <= one + 4, "64 downloads sharing the host's health: \(shared) attempts (one alone: \(one))")
        #expect(separate >= 20 * shared, "64 downloads each on its own: \(separate) attempts")
    }

    private func brokeOff(_ health: inout SourceHealth, by owner: Int, at seconds: Double) -> SourceHealth.Verdict {
        health.failed(
            .response, reason: "transfer closed with 287 bytes remaining", active: 0, refused: false,
            retryAfter: nil, sharesWork: false, policy: policy, at: start + .seconds(seconds), by: owner,
            brokeOff: true)
    }

    /// Sixteen downloads of a list want to send at the moment a response broke off (the host was
    /// killed): before, all sixteen went out before the first refusal came back.
    @Test func aConnectionThatBrokeOffLetsOneNewRequestFindOut() throws {
        var random = SplitMix64(seed: 2)
        var health = SourceHealth()
        health.answered()
        #expect(brokeOff(&health, by: 1, at: 0) == .retryRange, "a broken-off response is the range's own failure")
        let now = start + .milliseconds(10)
        var sent: [Int] = []
        for owner in 10..<26 where health.mayTake(active: 0, at: now) {
            health.willSend(by: owner, at: now)
            sent.append(owner)
        }
        #expect(sent == [10], "one request finds out while the host is in doubt: \(sent)")
        // Its connection is refused: the next one may go, and the third refusal makes the host down.
        #expect(fail(&health, by: 10, at: 0.01, random: &random) == .retryRange)
        #expect(health.mayTake(active: 0, at: now))
        health.willSend(by: 11, at: now)
        #expect(!health.mayTake(active: 0, at: now))
        #expect(fail(&health, by: 11, at: 0.02, random: &random) == .retryRange)
        health.willSend(by: 12, at: now)
        #expect(fail(&health, by: 12, at: 0.03, random: &random) == .down)
        #expect(health.doubt == nil && health.isDown)
    }

    @Test func anAnswerEndsTheDoubtAndAHangingRequestHoldsTheOthersBackForAWhileOnly() {
        var health = SourceHealth()
        _ = brokeOff(&health, by: 1, at: 0)
        health.willSend(by: 2, at: start)
        #expect(!health.mayTake(active: 0, at: start + .seconds(1)))
        #expect(health.nextWake == start + SourceHealth.doubtPatience, "the others wake when the patience ends")
        #expect(health.mayTake(active: 0, at: start + SourceHealth.doubtPatience + .milliseconds(1)))
        health.abandonTrial(by: 3)
        #expect(health.doubt?.isTesting == true, "only the request finding out ends the finding out")
        health.answered()
        #expect(health.doubt == nil && health.mayTake(active: 0, at: start))
    }

    /// A host killed while a list's new probes were out: some were reset before their heads, and
    /// the heads of others, sent just before, are read after those resets (a busy client reads
    /// sockets late, in any order). Before, one such head ended the outage, and a recovering host
    /// let every waiting download's probe go at once.
    @Test func aHeadReadAfterTheFailuresOfARequestSentBeforeThemEndsNothing() throws {
        var random = SplitMix64(seed: 3)
        var health = SourceHealth()
        health.answered(sentAt: start)
        for owner in 1...3 { _ = fail(&health, by: owner, at: 0.5, random: &random) }
        #expect(health.isDown)
        health.answered(sentAt: start + .milliseconds(400))
        #expect(health.isDown, "a request sent before the failures says nothing of the host since")
        #expect(health.failuresInARow == 3)
        // Up before the outage: a head of a request sent before a refusal leaves the doubt.
        var doubted = SourceHealth()
        _ = brokeOff(&doubted, by: 1, at: 1)
        doubted.answered(sentAt: start + .milliseconds(900))
        #expect(doubted.doubt != nil)
        // The trial, sent after, is believed: the host recovers.
        let due = try #require(health.outage?.nextTrial)
        health.willSend(by: 9, at: due)
        health.answered(sentAt: due)
        #expect(health.state == .recovering(allowance: 2) && health.failuresInARow == 0)
        doubted.answered(sentAt: start + .seconds(1))
        #expect(doubted.doubt == nil && doubted.lastFailureAt == nil, "up again: nothing older to weigh")
    }

    @Test func aRangeThatFailsWithAnAnswerRaisesNoDoubt() {
        var health = SourceHealth()
        _ = health.failed(
            .response, reason: "HTTP 416", active: 0, refused: false, retryAfter: nil, sharesWork: false,
            policy: policy, at: start, by: 1)
        #expect(health.doubt == nil)
        health.willSend(by: 2, at: start)
        #expect(health.mayTake(active: 1, at: start))
    }
}
