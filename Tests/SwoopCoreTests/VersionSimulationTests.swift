import SwoopTestSupport
import Testing

@testable import SwoopCore

/// The property of issue 37, over random schedules in virtual time (``VersionSimulation``):
/// replacements, stale and fixed validators, pools of nodes with other validators or other
/// bytes, crashes and resumes. No schedule ends without an error and with a file that is not one
/// version byte for byte; a pool that serves the same bytes always finishes. (A naive run of the
/// same schedules, which ignores differences and finishes unstitched, ends 45 of 600 schedules
/// with a mixed file.)
///
/// CPU-bound: one batch at a time, each on a thread of its own (``offThePool(_:)``), so that the
/// other tests' awaits never wait behind it on Swift's cooperative pool (two threads here).
@Suite("Version simulation", .serialized)
struct VersionSimulationTests {
    @Test("no schedule ends with success and a file that mixes versions", arguments: 0..<4)
    func neverMixed(batch: Int) async throws {
        let outcome = try await offThePool { Self.run(batch: batch) }
        for problem in outcome.problems { Issue.record(Comment(rawValue: problem)) }
        #expect(outcome.finished > outcome.failed, "\(outcome.finished) finished, \(outcome.failed) failed")
    }

    /// One batch of 100 schedules: how many finished and failed, and what went wrong (recorded by
    /// the test, on its own task: an issue is the test's only when recorded there).
    private static func run(batch: Int) -> (finished: Int, failed: Int, problems: [String]) {
        var finished = 0
        var failed = 0
        var problems: [String] = []
        for index in 0..<100 {
            let seed = UInt64(batch * 1_000 + index) &* 0x9E37_79B9_7F4A_7C15
            let simulation = VersionSimulation(seed: seed)
            let outcome = simulation.run()
            let context =
                "seed \(seed): \(simulation.size) bytes, \(simulation.connections) connections, \(simulation.server), "
                + "\(simulation.restarts) restarts, \(simulation.crashes) crashes"
            switch outcome {
            case .finished:
                finished += 1
                if simulation.heldVersion() == nil { problems.append("a mixed file: \(context)") }
            case .failed(let why):
                failed += 1
                let benign = simulation.server.replacements.isEmpty && !simulation.server.nodesDiffer
                if benign { problems.append("\(why) where every response carries the same bytes: \(context)") }
            }
        }
        return (finished, failed, problems)
    }
}
