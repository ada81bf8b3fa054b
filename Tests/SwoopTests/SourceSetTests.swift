import Logging
import Testing

@testable import Swoop
@testable import SwoopStore
@testable import SwoopCurl

/// A download's sources with virtual time: what the failure policy makes of each failure, and
/// what two downloads from one host share through the downloader's host table.
@Suite("Source set")
struct SourceSetTests {
    private let policy = FailurePolicy(
        baseDelay: .milliseconds(250), maxDelay: .seconds(30), maxTries: 8, maxOutage: .seconds(120))
    private let refused = DownloadError(.network, "network error talking to x: Couldn't connect to server", curlCode: 7)

    /// The sources of a download of `path` from example.com, sharing `hosts`.
    /// The source the transfer machine's policy picks from `set` at `now`.
    private func chosen(_ set: SourceSet, at now: Moment) -> Source? {
        TransferPolicy.chooseSource(set.samples(at: now)).map { set.sources[$0] }
    }

    private func download(_ path: String, hosts: HostTable) throws -> SourceSet {
        let url = try RemoteURL("http://example.com" + path)
        let size: Int64 = 8 << 20
        let store = DownloadStore(
            sink: DiscardSink(loop: InlineExecutor()),
            plan: SegmentScheduler(objectSize: size, resuming: nil, minimumSegmentSize: 1 << 20), bytesResumed: 0,
            checkpoint: nil, checkpointInterval: nil, counters: DownloadCounters(), startedAt: .now)
        let sources = SourceSet(
            first: url, mirrors: [], hosts: hosts, logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() })
        sources.begin(
            first: RemoteObject(url: url, size: size, acceptsRanges: true),
            headers: RequestHeaders([], originalURL: url), store: store, checking: nil)
        return sources
    }

    @Test("a host that one download finds down holds another download's requests until its trial is due")
    func downHostIsShared() throws {
        let hosts = HostTable { $0() }
        let a = try download("/a.bin", hosts: hosts)
        let b = try download("/b.bin", hosts: hosts)
        let start = Moment.now
        // Three refused connections in a row, no answer between: down (FailurePolicy.downAfter).
        var verdicts: [SourceHealth.Verdict] = []
        for owner in 1...3 {
            verdicts.append(
                a.failed(
                    a.primary, refused, answered: false, retryAfter: nil, policy: policy, by: owner,
                    at: start + .milliseconds(owner)))
        }
        #expect(verdicts == [.retryRange, .retryRange, .down])
        let due = try #require(b.primary.health.outage?.nextTrial)
        #expect(due > start)

        // The other download waits for the same host, and says for which and until when.
        #expect(b.waitingFor === b.primary)
        #expect(b.nextWake == due)
        #expect(chosen(b, at: due - .milliseconds(1)) == nil)
        // Once due, one download may send the trial; while it is out, nobody else sends.
        let trial = try #require(chosen(b, at: due))
        trial.updateHealth { $0.willSend(by: 9, at: due) }
        #expect(chosen(a, at: due) == nil && chosen(b, at: due + .seconds(60)) == nil)
        #expect(a.nextWake == nil, "no wake-up while the trial is out: its end decides")

        // A head read now for a request sent before the failures says nothing of the host since.
        #expect(!a.answered(a.primary, sentAt: start, at: due + .milliseconds(10)))
        #expect(b.waitingFor === b.primary && b.primary.health.outage?.trialInFlight == true)
        // The trial is answered: the host recovers for both, and the outage is logged as over.
        #expect(b.answered(trial, sentAt: due, at: due + .milliseconds(20)))
        #expect(a.waitingFor == nil && b.waitingFor == nil)
        #expect(chosen(a, at: due + .milliseconds(20)) === a.primary)
    }

    @Test("a 503 with requests in flight is a limit learned, and a dropped source rests, charged nothing")
    func limitAndDrop() throws {
        let hosts = HostTable { $0() }
        let set = try download("/c.bin", hosts: hosts)
        let now = Moment.now
        set.primary.active = 4
        let busy = DownloadError(.httpStatus, "HTTP 503 from example.com", httpStatus: 503)
        #expect(
            set.failed(set.primary, busy, answered: true, retryAfter: nil, policy: policy, by: 1, at: now) == .limited)
        set.primary.active = 4
        #expect(chosen(set, at: now) == nil, "at its cap of 4")
        set.primary.active = 3
        #expect(chosen(set, at: now) === set.primary)

        set.drop(set.primary, "not the same object")
        set.drop(set.primary, "dropped twice")
        #expect(set.primary.dropped == "not the same object")
        let before = set.primary.health
        #expect(
            set.failed(set.primary, refused, answered: false, retryAfter: nil, policy: policy, by: 2, at: now) == .rest)
        #expect(set.primary.health == before, "a dropped source's failures change nothing")
        #expect(chosen(set, at: now) == nil && set.usable.isEmpty)
    }
}
