import SwoopTestSupport
import Testing

@testable import SwoopCore

/// The property of issues 37 and 54, over random schedules in virtual time
/// (``VersionSimulation``): whole and partial changes (a few 4 KiB blocks, mostly away from every
/// seam), in place or not, under honest, stale, fixed or no validators, pools of nodes with other
/// validators or other versions, servers that ignore preconditions, crashes and resumes (also of
/// an earlier run's partial download). No schedule ends without an error and with a file that is
/// not one version byte for byte, unless its validators lie or are absent and the change was
/// partial (what cannot be known: the README says so); a pool that serves the same bytes always
/// finishes, and its probe never starts over when its nodes answer in turn; no schedule is left
/// unfinished. The rule before issue 54 (an answer under other validators used when its overlap
/// agrees) breaks it with honest validators.
///
/// CPU-bound: one batch at a time, each on a thread of its own (``offThePool(_:)``), so that the
/// other tests' awaits never wait behind it on Swift's cooperative pool (two threads here).
@Suite("Version simulation", .serialized)
struct VersionSimulationTests {
    @Test("no schedule ends with success and a file that mixes versions", arguments: 0..<4)
    func neverMixed(batch: Int) async throws {
        let outcome = try await offThePool { Self.run(batch: batch, rule: .pinned) }
        for problem in outcome.problems { Issue.record(Comment(rawValue: problem)) }
        print("version simulation, batch \(batch), the pinned rule: \(outcome)")
        #expect(outcome.finished > outcome.failed, "\(outcome.finished) finished, \(outcome.failed) failed")
    }

    @Test("the rule before issue 54 (the overlap agrees, so the other validators are used) is caught")
    func overlapAloneIsCaught() async throws {
        let outcome = try await offThePool { Self.run(batch: 0, rule: .overlapDecides, count: 200) }
        #expect(outcome.mixedUnderHonestValidators > 0, "\(outcome)")
        print("version simulation, the rule before issue 54: \(outcome)")
    }

    struct Tally: CustomStringConvertible {
        var finished = 0
        var failed = 0
        /// Finished with a mixed file where the validators were honest: a broken promise.
        var mixedUnderHonestValidators = 0
        /// Finished with a mixed file where they lied or were absent and a change was partial.
        var cannotKnow = 0
        /// Finished with a mixed file that arrived in one response too short to be confirmed,
        /// rewritten in place while it was under way.
        var unasked = 0
        var problems: [String] = []

        var description: String {
            "\(finished) finished, \(failed) failed, \(mixedUnderHonestValidators) mixed under honest validators, "
                + "\(cannotKnow) mixed where the validators cannot tell, \(unasked) in one short response unasked"
        }
    }

    /// One batch of schedules: how they ended, and what went wrong (recorded by the test, on its
    /// own task: an issue is the test's only when recorded there).
    static func run(batch: Int, rule: VersionSimulation.Rule, count: Int = 100) -> Tally {
        var tally = Tally()
        for index in 0..<count {
            let seed = UInt64(batch * 1_000 + index) &* 0x9E37_79B9_7F4A_7C15
            let simulation = VersionSimulation(seed: seed, rule: rule)
            let outcome = simulation.run()
            let context =
                "seed \(seed): \(simulation.size) bytes, \(simulation.connections) connections, \(simulation.server), "
                + "\(simulation.restarts) restarts, \(simulation.crashes) crashes"
            let benign = simulation.server.changes.isEmpty && !simulation.server.nodesDiffer
            // Nodes taken in turn, fewer than the other answers in a row that make a change: the
            // probe's requests, one at a time, meet the pinned node before its watch could believe one.
            let inTurn = !simulation.server.randomNode && simulation.server.nodes < ValidatorWatch.changeAfter
            if benign, inTurn, simulation.restartsByProbe > 0 {
                tally.problems.append("the probe started over where nothing changed: \(context)")
            }
            switch outcome {
            case .finished:
                tally.finished += 1
                guard simulation.heldVersion() == nil else { continue }
                if simulation.server.canHideAChange {
                    tally.cannotKnow += 1
                } else if simulation.unconfirmedOneResponse && simulation.server.inPlace {
                    tally.unasked += 1
                } else {
                    if simulation.server.validators == .honest { tally.mixedUnderHonestValidators += 1 }
                    tally.problems.append("a mixed file: \(context)")
                }
            case .failed(let why):
                tally.failed += 1
                if benign { tally.problems.append("\(why) where every response carries the same bytes: \(context)") }
            case .unfinished:
                tally.failed += 1
                tally.problems.append("neither finished nor failed in 20 000 steps: \(context)")
            }
        }
        return tally
    }
}
