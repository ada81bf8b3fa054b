import SwoopTestSupport
import Testing
@testable import SwoopCore

/// The transfer machine in virtual time (``TransferSimulation``): what it sends, and how it meets
/// an outage, an expired URL, a changed object, a stalled connection, a mirror that goes away, a
/// pool's other nodes, validators that go, a small budget and a connection limit. Each case runs in milliseconds.
@Suite("Transfer machine")
struct TransferMachineTests {
    private static let mebibyte: Int64 = 1 << 20

    @Test("a plain download: every byte, complete once, within the target, near the link's time")
    func plainDownload() {
        let simulation = TransferSimulation(size: 256 * Self.mebibyte, servers: [.init()], target: 8)
        #expect(simulation.run())
        #expect(simulation.completed && simulation.failure == nil)
        #expect(simulation.machine.plan.isComplete && !simulation.machine.isAnyBusy)
        #expect(simulation.mostInFlight <= 8)
        // 256 MiB over 8 connections of 16 MiB/s is 2 s; requests and the probe's start cost a little.
        #expect(simulation.seconds < 2.6, "took \(simulation.seconds) s")
        #expect(simulation.bytesReceived >= 256 * Self.mebibyte)
    }

    @Test("a 20 s outage: at most 20 attempts while the host is down, then every byte")
    func outage() {
        var server = TransferSimulation.Server()
        server.outages = [1..<21]
        let simulation = TransferSimulation(size: 512 * Self.mebibyte, servers: [server], target: 4)
        #expect(simulation.run())
        #expect(simulation.completed, "failed: \(String(describing: simulation.failure))")
        let attempts = simulation.servers[0].attemptsWhileDown
        #expect(attempts >= 3 && attempts <= 20, "\(attempts) attempts during the outage")
        #expect(simulation.seconds > 21)
    }

    @Test("an outage longer than the policy allows fails, saying how long, and can be resumed")
    func outageTooLong() throws {
        var server = TransferSimulation.Server()
        server.outages = [1..<10_000]
        let simulation = TransferSimulation(size: 512 * Self.mebibyte, servers: [server], target: 4)
        #expect(simulation.run(limit: 1_000))
        let failure = try #require(simulation.failure)
        #expect(failure.message.contains("has not answered for"), "\(failure.message)")
        #expect(failure.remedy == .resume)
        #expect(simulation.seconds >= 120 && simulation.seconds < 200)
        #expect(simulation.servers[0].attemptsWhileDown < 60)
    }

    @Test("an expired URL: the first source waits for a fresh URL, nothing is sent to it meanwhile")
    func expiredURL() {
        var fresh = false
        var server = TransferSimulation.Server()
        server.answer = { seconds, _ in
            guard seconds >= 0.5, !fresh else { return nil }
            let refused = DownloadError(.httpStatus, "403 Forbidden", httpStatus: 403)
            return RequestEnd(.failed(refused, retryAfter: nil), answered: true, urlExpired: true)
        }
        let simulation = TransferSimulation(size: 256 * Self.mebibyte, servers: [server], target: 4)
        simulation.onRefresh = { _ in
            fresh = true
            return 0.3
        }
        #expect(simulation.run())
        #expect(simulation.completed, "failed: \(String(describing: simulation.failure))")
        #expect(simulation.refreshes >= 1)
        #expect(simulation.sendsAwaitingFreshURL == 0, "\(simulation.sendsAwaitingFreshURL) sent to the expired URL")
        #expect(simulation.retries == 0, "a refusal of an expired URL is not the range's failure")
    }

    @Test("the object changes: the download starts over, and nothing more is sent")
    func objectChanges() {
        var server = TransferSimulation.Server()
        server.answer = { seconds, _ in
            guard seconds >= 0.4 else { return nil }
            let changed = DownloadError(.objectChanged, "the object changed on the server: its validators became x")
            return RequestEnd(.failed(changed, retryAfter: nil), answered: true)
        }
        let simulation = TransferSimulation(size: 256 * Self.mebibyte, servers: [server], target: 4)
        #expect(simulation.run())
        #expect(simulation.changed?.contains("validators became") == true)
        #expect(simulation.failure == nil && !simulation.completed)
    }

    @Test("a stalled connection's tail is hedged on an idle one, and the hedge pair's loser is cancelled")
    func stalledConnection() {
        var server = TransferSimulation.Server()
        server.slotRates = [1: 64 * 1024]
        let simulation = TransferSimulation(size: 64 * Self.mebibyte, servers: [server], target: 4)
        #expect(simulation.run())
        #expect(simulation.completed)
        // The slow connection alone would need its quarter (16 MiB) at 64 KiB/s: 256 s.
        #expect(simulation.seconds < 10, "took \(simulation.seconds) s")
        #expect(simulation.sends.contains { $0.work.segment?.isHedge == true } || simulation.cancels > 0)
    }

    @Test("without hedging the stalled connection's tail is still cut for idle connections")
    func stalledConnectionWithoutHedging() {
        var server = TransferSimulation.Server()
        server.slotRates = [1: 64 * 1024]
        let simulation = TransferSimulation(size: 64 * Self.mebibyte, servers: [server], target: 4, hedges: false)
        #expect(simulation.run())
        #expect(simulation.completed)
        #expect(!simulation.sends.contains { $0.work.segment?.isHedge == true })
        #expect(simulation.seconds < 60, "took \(simulation.seconds) s")
    }

    @Test("a mirror that goes away for good is dropped; the first source finishes")
    func mirrorLost() {
        var mirror = TransferSimulation.Server()
        mirror.answer = { seconds, _ in
            guard seconds >= 0.3 else { return nil }
            return RequestEnd(.failed(.httpStatus(404, url: "m"), retryAfter: nil), answered: true)
        }
        let simulation = TransferSimulation(size: 256 * Self.mebibyte, servers: [.init(), mirror], target: 8)
        #expect(simulation.run())
        #expect(simulation.completed, "failed: \(String(describing: simulation.failure))")
        #expect(simulation.servers[1].dropped != nil)
        #expect(simulation.servers[1].bytes > 0, "the mirror served until it went away")
        let dropped = simulation.sends.lastIndex { $0.source == 1 } ?? 0
        #expect(simulation.sends[(dropped + 1)...].allSatisfy { $0.source == 0 })
    }

    /// A `412` to the pinned validators, as the shell reports it.
    private static func preconditionFailed() -> RequestEnd {
        let failed = DownloadError(
            .objectChanged, "the server refused If-Match (412 Precondition Failed)", httpStatus: 412)
        return RequestEnd(.failed(failed, retryAfter: nil), answered: true, refusal: .preconditionFailed)
    }

    @Test("a pool's other node answers 412 to every other request: asked again, a pool proven, every byte")
    func poolOfTwoNodes() {
        var server = TransferSimulation.Server()
        var served = 0
        server.answer = { _, _ in
            served += 1
            return served.isMultiple(of: 2) ? Self.preconditionFailed() : nil
        }
        let simulation = TransferSimulation(size: 256 * Self.mebibyte, servers: [server], target: 4)
        #expect(simulation.run())
        #expect(simulation.completed, "\(String(describing: simulation.failure ?? nil)) \(simulation.changed ?? "")")
        #expect(simulation.machine.watches[0]?.isPool == true)
        let refused = simulation.machine.watches[0]?.otherAnswers ?? 0
        #expect(refused > 0 && simulation.renewals == refused, "each 412 asked again on a new connection")
        #expect(simulation.retries == 0, "a refusal is not the range's failure")
    }

    @Test(
        "a pool whose refusals come before the pinned node's answers (two requests in three 412): a pool, not a change",
        arguments: [4, 8, 16])
    func poolOfThreeNodes(target: Int) {
        var server = TransferSimulation.Server()
        server.firstByte = .milliseconds(60)
        var served = 0
        server.answer = { _, _ in
            served += 1
            return served.isMultiple(of: 3) ? nil : Self.preconditionFailed()
        }
        let simulation = TransferSimulation(size: 256 * Self.mebibyte, servers: [server], target: target)
        #expect(simulation.run())
        #expect(simulation.changed == nil, "\(simulation.changed ?? "")")
        #expect(simulation.completed, "\(String(describing: simulation.failure ?? nil))")
        #expect(simulation.machine.watches[0]?.isPool == true)
    }

    @Test("the pinned validators gone (every request 412 from 0.4 s on): it starts over after 4 answers")
    func validatorsGone() throws {
        var server = TransferSimulation.Server()
        server.answer = { seconds, _ in seconds >= 0.4 ? Self.preconditionFailed() : nil }
        let simulation = TransferSimulation(size: 256 * Self.mebibyte, servers: [server], target: 4)
        #expect(simulation.run())
        let changed = try #require(simulation.changed)
        #expect(changed.contains("4 answers in a row") && changed.contains("412"), "\(changed)")
        #expect(simulation.failure == nil && !simulation.completed)
        // At most the requests in flight when it began, and as many again on new connections.
        let after = simulation.sends.count - (simulation.sendsBefore(seconds: 0.4) ?? 0)
        #expect(after <= 2 * 4, "\(after) requests sent after the change")
    }

    @Test("a mirror whose validators go is dropped; the first source finishes")
    func mirrorChanged() {
        var mirror = TransferSimulation.Server()
        mirror.answer = { seconds, _ in seconds >= 0.3 ? Self.preconditionFailed() : nil }
        let simulation = TransferSimulation(size: 256 * Self.mebibyte, servers: [.init(), mirror], target: 8)
        #expect(simulation.run())
        #expect(simulation.completed, "failed: \(String(describing: simulation.failure)) \(simulation.changed ?? "")")
        #expect(simulation.servers[1].dropped?.contains("changed") == true)
    }

    @Test("every byte here: one request sent after the last one asks whether the object is still the same")
    func confirmation() throws {
        let plain = TransferSimulation(size: 64 * Self.mebibyte, servers: [.init()], target: 4, comparing: true)
        #expect(plain.run())
        #expect(plain.completed)
        let last = try #require(plain.sends.last)
        guard case .bridge(let request) = last.work else { Issue.record("\(last.work)"); return }
        #expect(request.sent.count <= 2 * RangeRequest.minimumWindow)
        #expect(plain.sends.count(where: { if case .bridge = $0.work { true } else { false } }) == 1)
        // The object rewritten while the last responses were under way: only that request can see it.
        var server = TransferSimulation.Server()
        server.answer = { _, send in
            guard case .bridge = send.work else { return nil }
            return Self.preconditionFailed()
        }
        let rewritten = TransferSimulation(size: 64 * Self.mebibyte, servers: [server], target: 4, comparing: true)
        #expect(rewritten.run())
        #expect(!rewritten.completed && rewritten.changed?.contains("4 answers in a row") == true)
        // Nothing to ask when the probe's response brought every byte.
        let small = TransferSimulation(size: 1 * Self.mebibyte, servers: [.init()], target: 4, comparing: true)
        #expect(small.run())
        #expect(small.completed && small.sends.isEmpty)
    }

    @Test("a resumed stretch whose neighbour's trail broke off is bridged before the download completes")
    func bridge() {
        var server = TransferSimulation.Server()
        server.cutsTrails = 1_000
        let simulation = TransferSimulation(
            size: 16 * Self.mebibyte, servers: [server], target: 4, held: [ByteRange(8 << 20, 16 << 20)],
            comparing: true)
        #expect(simulation.run())
        #expect(simulation.completed, "failed: \(String(describing: simulation.failure))")
        let bridges = simulation.sends.filter { if case .bridge = $0.work { true } else { false } }
        let start = bridges.first?.work.range.lowerBound ?? 0
        // The bridge, then the confirmation once every byte is here.
        #expect(bridges.count == 2 && start < 8 << 20, "\(bridges.count) bridges")
        #expect(simulation.machine.ledger?.isStitched == true)
    }

    @Test("a break no bridge can cross fails after maxTries bridges, and can be resumed")
    func bridgeFails() throws {
        var server = TransferSimulation.Server()
        server.cutsTrails = 1_000
        server.answer = { _, send in
            guard case .bridge = send.work else { return nil }
            return RequestEnd(.failed(DownloadError(.network, "connection reset"), retryAfter: nil), answered: true)
        }
        let simulation = TransferSimulation(
            size: 16 * Self.mebibyte, servers: [server], target: 4, held: [ByteRange(8 << 20, 16 << 20)],
            comparing: true)
        #expect(simulation.run())
        let failure = try #require(simulation.failure)
        #expect(failure.message.contains("could not compare the bytes on both sides of offset 8388608"))
        #expect(failure.remedy == .resume)
        let bridges = simulation.sends.filter { if case .bridge = $0.work { true } else { false } }
        #expect(bridges.count == simulation.policy.maxTries)
    }

    @Test("a budget of 2 permits: never more than 2 requests in flight, and every byte")
    func smallBudget() {
        let simulation = TransferSimulation(size: 128 * Self.mebibyte, servers: [.init()], target: 8, permits: 2)
        #expect(simulation.run())
        #expect(simulation.completed)
        #expect(simulation.mostInFlight <= 2)
    }

    @Test("503 above 4 connections: the cap is learned, and the refusals are not counted as retries")
    func connectionLimit() {
        var server = TransferSimulation.Server()
        server.connectionLimit = 4
        let simulation = TransferSimulation(size: 256 * Self.mebibyte, servers: [server], target: 8)
        #expect(simulation.run())
        #expect(simulation.completed, "failed: \(String(describing: simulation.failure))")
        #expect(simulation.retries == 0)
        #expect(simulation.sourceSamples(at: simulation.start).first?.cap == 4)
        // 256 MiB over 4 connections of 16 MiB/s is 4 s.
        #expect(simulation.seconds < 6, "took \(simulation.seconds) s")
    }

    @Test("a stopped transfer gives up its request's trial of a down host, for the host's other downloads")
    func stoppingGivesUpTheTrial() throws {
        var server = TransferSimulation.Server()
        let start = Moment.now
        let policy = FailurePolicy(
            baseDelay: .milliseconds(250), maxDelay: .seconds(30), maxTries: 8, maxOutage: .seconds(120))
        for owner in 1...3 {
            _ = server.health.failed(
                .server, reason: "connection refused", active: 0, refused: false, retryAfter: nil, sharesWork: false,
                policy: policy, at: start, by: owner)
        }
        let due = try #require(server.health.outage?.nextTrial)
        let simulation = TransferSimulation(size: 64 * Self.mebibyte, servers: [server], target: 4)
        _ = simulation.startTransfer(first: RangeRequest(own: ByteRange(0, 1 << 20)), at: due)
        #expect(simulation.servers[0].health.outage?.trialInFlight == true, "the probe's request is the host's trial")
        #expect(!simulation.servers[0].health.mayTake(active: 0, at: due), "another download waits for it")
        // The transfer stops (its download was cancelled or paused): no end of that request is heard.
        simulation.stopTransfer()
        #expect(simulation.servers[0].health.outage?.trialInFlight == false)
        #expect(simulation.servers[0].health.mayTake(active: 0, at: due), "another download may send the next")
        #expect(simulation.machine.dispatch(at: due).isEmpty, "a stopped machine decides nothing")
    }
}
