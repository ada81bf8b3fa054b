import SwoopTestSupport
import Testing

@testable import SwoopCore

/// The transfer machine is closed: it only reads its environment, and what it does comes out as
/// actions. These cases run single events against a world that never changes by itself (the shell
/// performs nothing here), so whatever limits one event's sends is the machine's own count of what
/// its actions take: requests at a source, a down or doubted source's one request, permits. And
/// what an end tells its host is the machine's to say (``TransferMachine/hostReport(slot:_:)``).
@Suite("Transfer machine events")
struct TransferMachineEventTests {
    /// A world that answers the same whatever the machine does.
    final class StillWorld: TransferEnvironment {
        var samples: [SourceSample]
        var free: Int
        var connections: [ConnectionSample] = []
        var capped = false

        init(samples: [SourceSample], free: Int = 64) {
            self.samples = samples
            self.free = free
        }

        func sourceSamples(at now: Moment) -> [SourceSample] { samples }
        var sourcesNextWake: Moment? { nil }
        var whyOthersCannotHelp: String? { nil }
        func permits(for source: Int) -> PermitCount { PermitCount(free: free, freeOnHost: free, host: source) }
        func connectionSamples(at now: Moment) -> [ConnectionSample] { connections }
        func isRateCapped(at now: Moment) -> Bool { capped }
    }

    private let now = Moment.now
    private static let size: Int64 = 256 << 20

    /// A machine of `target` slots whose probe's request (slot 0, source 0) is in flight.
    private func machine(_ world: StillWorld, target: Int = 8) throws -> TransferMachine {
        let plan = SegmentScheduler(
            layout: ChunkLayout(objectSize: Self.size), missing: [ByteRange(0, Self.size)], minimumSegmentSize: 1 << 20)
        let policy = FailurePolicy(
            baseDelay: .milliseconds(250), maxDelay: .seconds(30), maxTries: 8, maxOutage: .seconds(120))
        let machine = TransferMachine(
            plan: plan, ledger: nil,
            settings: .init(
                policy: TransferPolicy(minimumSegmentSize: 1 << 20), failures: policy, hedgesSlowTail: false),
            target: target, environment: world, random: SplitMix64(seed: 3))
        _ = try #require(machine.start(first: RangeRequest(own: ByteRange(0, 1 << 20)), at: now))
        machine.planAhead(window: nil, hashesInOrder: false)
        return machine
    }

    private func sends(_ actions: [TransferAction]) -> [TransferSend] {
        actions.compactMap { if case .send(let send) = $0 { send } else { nil } }
    }

    @Test("one event's requests count at their source: a source capped at 3, with the probe's in flight, takes 2")
    func sendsCountAtTheirSource() throws {
        let world = StillWorld(samples: [SourceSample(active: 1, cap: 3, failures: 0, isUsable: true, isResting: false)]
        )
        let machine = try machine(world)
        let sent = sends(machine.dispatch(at: now))
        #expect(sent.count == 2, "\(sent.map(\.slot))")
        // The next event reads the world again: the shell performed the sends by then.
        world.samples[0].active = 3
        #expect(sends(machine.dispatch(at: now)).isEmpty)
    }

    @Test("a source whose next request is its trial or a test of a doubt gets one request in an event, not eight")
    func oneTrialPerEvent() throws {
        let world = StillWorld(samples: [
            SourceSample(active: 1, cap: 1, failures: 0, isUsable: true, isResting: false),
            SourceSample(active: 0, failures: 2, isUsable: true, isResting: false, holdsBackAfterSend: true),
        ])
        let machine = try machine(world)
        let sent = sends(machine.dispatch(at: now))
        #expect(sent.map(\.source) == [1], "\(sent.map { ($0.slot, $0.source) })")
    }

    @Test("with 3 permits free, an event sends 3 requests and asks to be woken when a permit is returned")
    func permitsCounted() throws {
        let world = StillWorld(
            samples: [SourceSample(active: 1, failures: 0, isUsable: true, isResting: false)], free: 3)
        let machine = try machine(world)
        let actions = machine.dispatch(at: now)
        #expect(sends(actions).count == 3)
        let waits = actions.filter { if case .waitForPermit = $0 { true } else { false } }
        #expect(waits.count == 1)
    }

    @Test(
        "what an end tells its host: a segment's failure is heard; refusals, expired URLs, changes and answers are not")
    func hostReports() throws {
        let world = StillWorld(samples: [SourceSample(active: 1, failures: 0, isUsable: true, isResting: false)])
        let machine = try machine(world, target: 1)
        let reset = DownloadError(.network, "connection reset", curlCode: 56)
        func report(_ end: RequestEnd) -> HostReport? { machine.hostReport(slot: 0, end)?.report }
        guard
            case .failed(let error, let answered, let retryAfter)? = report(
                RequestEnd(.failed(reset, retryAfter: 7), answered: true))
        else {
            Issue.record("a reset was not told to the host")
            return
        }
        #expect(error.curlCode == 56 && answered && retryAfter == 7)
        let precondition = DownloadError(.httpStatus, "412 Precondition Failed", httpStatus: 412)
        let expired = DownloadError(.httpStatus, "403 Forbidden", httpStatus: 403)
        let changed = DownloadError(.objectChanged, "bytes differ")
        for end in [
            RequestEnd(.failed(precondition, retryAfter: nil), answered: true, refusal: .preconditionFailed),
            RequestEnd(.failed(expired, retryAfter: nil), answered: true, urlExpired: true),
            RequestEnd(.failed(changed, retryAfter: nil), answered: true),
            RequestEnd(.completed, bytes: 10, answered: true, pinned: true),
            RequestEnd(.cancelled),
        ] {
            guard case .nothing? = report(end) else {
                Issue.record("\(end.outcome) was told to the host as a failure")
                continue
            }
        }
        #expect(machine.hostReport(slot: 3, RequestEnd(.cancelled)) == nil, "nothing in flight on slot 3")
        let stop = machine.stop()
        #expect(stop.count == 1)
        guard case .abandonTrial(let source, let slot)? = stop.first else {
            Issue.record("stopping did not give the request's trial back")
            return
        }
        #expect(source == 0 && slot == 0)
        #expect(report(RequestEnd(.failed(reset, retryAfter: nil))) == nil, "a stopped machine hears no end")
    }

    @Test("the health's verdict comes in with the end: given up, the only source fails the download")
    func verdictDecides() throws {
        let world = StillWorld(samples: [SourceSample(active: 1, failures: 0, isUsable: true, isResting: false)])
        let machine = try machine(world, target: 1)
        var end = RequestEnd(.failed(DownloadError(.network, "connection refused", curlCode: 7), retryAfter: nil))
        end.verdict = .giveUp("connection refused; the server has not answered for 121 s")
        let actions = machine.requestEnded(slot: 0, end, at: now)
        let failure = actions.compactMap { if case .fail(let error) = $0 { error } else { nil } }.first
        #expect(failure?.message.contains("has not answered for 121 s") == true, "\(actions)")
    }

    /// Slots 0-4 measured: four at 10 MiB/s and slot 4 at 1 MiB/s, each for 5 s.
    private static let oneSlow = (0..<5).map { slot in
        ConnectionSample(
            id: slot, rate: Double(slot == 4 ? 1 << 20 : 10 << 20), timeToFirstByte: 0.01, isTransferring: true,
            secondsSinceFirstByte: 5, replacements: 0)
    }

    @Test("a connection far slower than the others is the machine's to replace; not while the rate cap holds")
    func slowReplaced() throws {
        let world = StillWorld(samples: [SourceSample(active: 1, failures: 0, isUsable: true, isResting: false)])
        world.connections = Self.oneSlow
        let machine = try machine(world)
        _ = machine.dispatch(at: now)
        let replaced = machine.replaceSlow(at: now).compactMap { if case .replace(let slot) = $0 { slot } else { nil } }
        #expect(replaced == [4])
        world.capped = true
        #expect(machine.replaceSlow(at: now).isEmpty, "under the cap the rates are its shares")
    }

    @Test("the adaptive count moves on what the machine observes, and holds while the cap or an outage is the limit")
    func adaptHolds() throws {
        /// Feeds a controller of 4 connections 2 s of ticks at 25 ms, 8 MiB a tick: whether it moved.
        func moves(_ world: StillWorld) throws -> Bool {
            let machine = try self.machine(world)
            _ = machine.dispatch(at: now)
            var controller = ConnectionController(initial: 4, maximum: 64)
            for tick in 1...80 {
                let at = now + .milliseconds(25 * tick)
                let count = machine.adapt(
                    &controller, totalBytes: Int64(tick) * (8 << 20), busy: 8, localWait: .zero, at: at)
                if count != nil { return true }
            }
            return false
        }
        let up = SourceSample(active: 8, failures: 0, isUsable: true, isResting: false)
        let world = StillWorld(samples: [up])
        world.connections = (0..<8).map {
            ConnectionSample(
                id: $0, rate: Double(40 << 20), timeToFirstByte: 0.01, isTransferring: true, secondsSinceFirstByte: 1,
                replacements: 0)
        }
        #expect(try moves(world), "a rate that holds at 4 connections: the controller tries more")
        world.capped = true
        #expect(try !moves(world), "under the cap the count is kept")
        world.capped = false
        var recovering = up
        recovering.isUp = false
        world.samples = [recovering]
        #expect(try !moves(world), "a source ramping back up: the count is kept")
    }
}
