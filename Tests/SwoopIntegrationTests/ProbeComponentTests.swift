import Foundation
import Logging
import Synchronization
import SwoopStore
import SwoopTestOrigin
import SwoopCurl
import Testing

@testable import Swoop

/// `Connection` and the probe (`Prober` over a `ProbeExchange`) built alone on a transfer loop of
/// their own, against the test origin: no downloader, no session, no transfer stage.
@Suite("Connection and probe, alone")
struct ProbeComponentTests {
    /// Hears one exchange of a `Connection` on the loop, and hands its end to the test.
    private final class Recorder: ConnectionDelegate, @unchecked Sendable {
        var head: (status: Int, requested: RequestedRange)?
        private let ended = Mutex<CheckedContinuation<Connection.Outcome, Never>?>(nil)

        func connection(
            _ connection: Connection, didReceiveProbeHead head: ResponseHead, requested: RequestedRange
        ) -> BodyDisposition {
            self.head = (head.status, requested)
            return .discard
        }

        func connection(_ connection: Connection, didFinish job: Connection.Job, with outcome: Connection.Outcome) {
            ended.withLock { $0.take() }?.resume(returning: outcome)
        }

        func wait(_ start: @escaping @Sendable () -> Void) async -> Connection.Outcome {
            await withCheckedContinuation { continuation in
                ended.withLock { $0 = continuation }
                start()
            }
        }
    }

    /// Hears how a head-only probe ends.
    private final class ProbeEnd: ProberDelegate, @unchecked Sendable {
        private let ended = Mutex<CheckedContinuation<ProbeDecision.Step, Never>?>(nil)

        func prober(
            _ prober: Prober, beginTransfer step: ProbeDecision.Step, on connection: Connection
        ) throws(DownloadError) -> Prober.Handover {
            throw DownloadError(.cancelled, "nothing is transferred here")
        }

        func prober(_ prober: Prober, didEndWith step: ProbeDecision.Step) {
            ended.withLock { $0.take() }?.resume(returning: step)
        }

        func wait(_ start: @escaping @Sendable () -> Void) async -> ProbeDecision.Step {
            await withCheckedContinuation { continuation in
                ended.withLock { $0 = continuation }
                start()
            }
        }
    }

    /// Keeps transfer-thread objects alive across the test's awaits (touched only on the loop).
    private final class Held: @unchecked Sendable {
        var objects: [AnyObject] = []
    }

    private func withLoop(_ body: (TransferLoop) async throws -> Void) async throws {
        let loop = try #require(TransferLoop(budget: ConnectionBudget(total: 8, perHost: 8)))
        do {
            try await body(loop)
        } catch {
            await loop.shutdown()
            throw error
        }
        await loop.shutdown()
    }

    @Test("a Connection sends a probe's request, hands its head to its delegate, and reports one outcome")
    func connectionProbe() async throws {
        try await withTestOrigin { origin in
            origin.addObject(TestObject(size: 64 << 10, seed: 5), at: "/c.bin")
            try await withLoop { loop in
                let url = try RemoteURL(origin.url("/c.bin"))
                let recorder = Recorder()
                let held = Held()
                let outcome = await recorder.wait {
                    loop.execute {
                        let connection = Connection(id: 0, loop: loop, delegate: recorder)
                        held.objects.append(connection)
                        guard connection.acquirePermit(for: url, owner: recorder, retry: {}) else { return }
                        let range = RequestedRange.bounded(ByteRange(0, 1024))
                        let request = RequestHeaders([], originalURL: url).request(
                            for: url, range: range, options: TransferOptions(Downloader.Configuration()))
                        connection.begin(.probe(range), url: url, request: request)
                    }
                }
                guard case .completed = outcome else { Issue.record("outcome: \(outcome)"); return }
                #expect(recorder.head?.status == 206)
                #expect(recorder.head?.requested == .bounded(ByteRange(0, 1024)))
                // The origin logs a request once its response has gone out, which may be after
                // the client has read it whole.
                #expect(try await eventually { !origin.requests.isEmpty }, "the origin logs the request")
                #expect(origin.requests.count == 1 && origin.requests.first?.header("Range") == "bytes=0-1023")
            }
        }
    }

    @Test("a head-only Prober decides a ranged object from the origin's first response")
    func proberAlone() async throws {
        try await withTestOrigin { origin in
            origin.addObject(TestObject(size: 3 << 20, seed: 6), at: "/p.bin")
            try await withLoop { loop in
                let url = try RemoteURL(origin.url("/p.bin"))
                let end = ProbeEnd()
                let held = Held()
                let step = await end.wait {
                    loop.execute {
                        let prober = Prober(
                            url: url, basis: .fresh, headers: RequestHeaders([], originalURL: url),
                            settings: ExchangeSettings(Downloader.Configuration()), loop: loop,
                            counters: DownloadCounters(), logger: Logger(label: "test"), purpose: .headOnly)
                        held.objects.append(prober)
                        prober.delegate = end
                        prober.start()
                    }
                }
                guard case .ranged(let object, _) = step else { Issue.record("step: \(step)"); return }
                #expect(object.size == 3 << 20)
            }
        }
    }

    @Test("a probe to a host its downloader knows is down waits for the host's trial, then goes")
    func proberWaitsForADownHost() async throws {
        try await withTestOrigin { origin in
            origin.addObject(TestObject(size: 1 << 20, seed: 7), at: "/d.bin")
            try await withLoop { loop in
                let url = try RemoteURL(origin.url("/d.bin"))
                var settings = Downloader.Configuration()
                settings.retry.baseDelay = .milliseconds(50)
                let configuration = settings
                let policy = FailurePolicy(configuration)
                let end = ProbeEnd()
                let held = Held()
                let step = await end.wait {
                    loop.execute {
                        // Another download found the host down a moment ago, and holds its trial.
                        let host = loop.hosts.entry(for: url)
                        for owner in 1...3 {
                            _ = host.updateHealth {
                                $0.failed(
                                    .server, reason: "connection refused", active: 0, refused: false, retryAfter: nil,
                                    sharesWork: false, policy: policy, at: .now, by: owner)
                            }
                        }
                        host.updateHealth { $0.willSend(by: 99) }
                        let prober = Prober(
                            url: url, basis: .fresh, headers: RequestHeaders([], originalURL: url),
                            settings: ExchangeSettings(configuration), loop: loop, counters: DownloadCounters(),
                            logger: Logger(label: "test"), purpose: .headOnly)
                        held.objects.append(prober)
                        prober.delegate = end
                        prober.start()
                        #expect(prober.idle == .outage, "held back: the host's trial is another's")
                        // That trial is answered: the host takes requests again, this probe's too.
                        _ = loop.schedule(after: .milliseconds(300)) {
                            #expect(origin.requests.isEmpty, "nothing sent while the host was down")
                            host.updateHealth { $0.answered() }
                        }
                    }
                }
                guard case .ranged = step else { Issue.record("step: \(step)"); return }
                // The origin logs a request once it has seen its end, a moment after the head.
                #expect(try await eventually { origin.requests.count == 1 }, "\(origin.requests.count) requests")
            }
        }
    }
}
