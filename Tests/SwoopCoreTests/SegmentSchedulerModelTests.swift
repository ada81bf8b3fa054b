import SwoopTestSupport
import Testing
@testable import SwoopCore

/// Drives a ``SegmentScheduler`` the way a download session does — several simulated connections
/// claiming, stealing, hedging, delivering bytes in random amounts, failing and finishing, in a
/// random order — and after every step checks it against an independent record of which bytes were
/// actually written.
///
/// The simulations are CPU-bound and synchronous: the suite runs one case at a time and yields
/// between simulations, so it never holds the shared test thread pool (two threads on a 2-core
/// machine) for seconds while timed download tests wait for it.
@Suite("SegmentScheduler model", .serialized)
struct SegmentSchedulerModelTests {
    @Test("random interleavings keep every invariant", arguments: 0..<6)
    func randomInterleavings(batch: Int) async {
        var strictViolations: [String] = []
        for run in 0..<14 {
            await Task.yield()
            let seed = UInt64(batch) << 32 | UInt64(run) | 0x5EED_0000_0000_0000
            let simulation = SchedulerSimulation(seed: seed, reHedgeSurvivors: true)
            simulation.run()
            strictViolations += simulation.strictClaimViolations
            if simulation.failed { break }
        }
        // `claim` never returns nil while an unrequested tail somewhere could still be split.
        #expect(
            strictViolations.isEmpty, "claim returned nil while work could be stolen: \(strictViolations.prefix(3))")
    }

    @Test("re-hedging the survivor of a broken hedge pair writes no byte twice")
    func reHedgingSurvivors() async {
        // Same simulation, but hedges may also target a segment that survived a broken pair whose
        // other half had got ahead of it. See SegmentSchedulerTests.reHedgeAfterBrokenPair.
        for run in 0..<32 {
            await Task.yield()
            let simulation = SchedulerSimulation(seed: 0xBAD5_EED0_0000 | UInt64(run), reHedgeSurvivors: true)
            simulation.run()
            if simulation.failed { break }
        }
    }
}
