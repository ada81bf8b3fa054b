import SwoopTestSupport
import Testing
@testable import SwoopCore

/// Drives a ``SegmentScheduler`` the way a download session does — several simulated connections
/// claiming, stealing, hedging, delivering bytes in random amounts, failing and finishing, in a
/// random order — and after every step checks it against an independent record of which bytes were
/// actually written.
///
/// The simulations are CPU-bound and synchronous (seconds a case in a debug build): the suite runs
/// one case at a time, on a thread of its own (``offThePool(_:)``), so it never holds one of the two
/// cooperative threads every test shares while timed download tests wait for it (a full suite's
/// thread dump found it there), and records what the simulations found once they are done.
@Suite("SegmentScheduler model", .serialized)
struct SegmentSchedulerModelTests {
    @Test("random interleavings keep every invariant", arguments: 0..<6)
    func randomInterleavings(batch: Int) async throws {
        let seeds = (0..<14).map { UInt64(batch) << 32 | UInt64($0) | 0x5EED_0000_0000_0000 }
        let outcome = try await offThePool { Self.simulate(seeds: seeds) }
        Self.record(outcome.problems)
        // `claim` never returns nil while an unrequested tail somewhere could still be split.
        #expect(
            outcome.violations.isEmpty,
            "claim returned nil while work could be stolen: \(outcome.violations.prefix(3))")
    }

    @Test("re-hedging the survivor of a broken hedge pair writes no byte twice")
    func reHedgingSurvivors() async throws {
        // Same simulation, but hedges may also target a segment that survived a broken pair whose
        // other half had got ahead of it. See SegmentSchedulerTests.reHedgeAfterBrokenPair.
        let seeds = (0..<32).map { 0xBAD5_EED0_0000 | UInt64($0) }
        Self.record(try await offThePool { Self.simulate(seeds: seeds) }.problems)
    }

    /// Runs a simulation per seed, in order, until one fails.
    private static func simulate(
        seeds: [UInt64]
    ) -> (violations: [String], problems: [SchedulerSimulation.Problem]) {
        var violations: [String] = []
        var problems: [SchedulerSimulation.Problem] = []
        for seed in seeds {
            let simulation = SchedulerSimulation(seed: seed, reHedgeSurvivors: true)
            simulation.run()
            violations += simulation.strictClaimViolations
            problems += simulation.problems
            if simulation.failed { break }
        }
        return (violations, problems)
    }

    private static func record(_ problems: [SchedulerSimulation.Problem]) {
        for problem in problems { Issue.record("\(problem.message)", sourceLocation: problem.sourceLocation) }
    }
}
