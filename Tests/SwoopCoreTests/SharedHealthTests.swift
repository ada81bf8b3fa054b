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
    private let start = ContinuousClock.now

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
}
