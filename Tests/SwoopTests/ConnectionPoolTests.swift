import Testing

@testable import Swoop
@testable import SwoopTransfer

/// A transfer's connection slots and the host health they share with the downloader's other
/// downloads.
@Suite("Connection pool")
struct ConnectionPoolTests {
    private final class Silent: ConnectionDelegate {
        func connection(_ connection: Connection, didFinish job: Connection.Job, with outcome: Connection.Outcome) {}
    }

    @Test("a stopped transfer gives up its request's trial of a down host, for the host's other downloads")
    func stoppingGivesUpTheTrial() async throws {
        let loop = try #require(TransferLoop(budget: ConnectionBudget(total: 8, perHost: 8)))
        let url = try RemoteURL("http://example.com/a.bin")
        let policy = FailurePolicy(
            baseDelay: .milliseconds(250), maxDelay: .seconds(30), maxTries: 8, maxOutage: .seconds(120))
        let hosts = HostTable { $0() }
        let object = RemoteObject(url: url, size: 1 << 20, acceptsRanges: true)
        let source = Source(index: 0, object: object, headers: RequestHeaders([], originalURL: url), hosts: hosts)
        let start = ContinuousClock.now
        for owner in 1...3 {
            _ = source.health.failed(
                .server, reason: "connection refused", active: 0, refused: false, retryAfter: nil, sharesWork: false,
                policy: policy, at: start, by: owner)
        }
        let due = try #require(source.health.outage?.nextTrial)
        let delegate = Silent()
        let pool = ConnectionPool(loop: loop, target: 1)
        let connection = Connection(id: 0, loop: loop, delegate: delegate)
        pool.adoptProbe(connection, delegate: delegate)
        pool.send(connection, to: source)
        #expect(source.health.outage?.trialInFlight == true, "this transfer's request is the host's trial")
        #expect(!hosts.entry(for: url).health.mayTake(active: 0, at: due), "another download waits for it")
        // The transfer stops (its download was cancelled or paused): no end of that request is heard.
        pool.cancelAll()
        #expect(source.health.outage?.trialInFlight == false)
        #expect(hosts.entry(for: url).health.mayTake(active: 0, at: due), "another download may send the next")
        await loop.shutdown()
    }
}
