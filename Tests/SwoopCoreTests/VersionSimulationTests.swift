import Testing
@testable import SwoopCore

/// The property of issue 37, over random schedules in virtual time (``VersionSimulation``):
/// replacements, stale and fixed validators, pools of nodes with other validators or other
/// bytes, crashes and resumes. No schedule ends without an error and with a file that is not one
/// version byte for byte; a pool that serves the same bytes always finishes. (A naive run of the
/// same schedules, which ignores differences and finishes unstitched, ends 45 of 600 schedules
/// with a mixed file.)
@Suite("Version simulation", .serialized)  // CPU-bound: one batch at a time
struct VersionSimulationTests {
    @Test("no schedule ends with success and a file that mixes versions", arguments: 0..<4)
    func neverMixed(batch: Int) {
        var finished = 0
        var failed = 0
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
                #expect(simulation.heldVersion() != nil, "a mixed file: \(context)")
            case .failed(let why):
                failed += 1
                let benign = simulation.server.replacements.isEmpty && !simulation.server.nodesDiffer
                #expect(!benign, "\(why) where every response carries the same bytes: \(context)")
            }
        }
        #expect(finished > failed, "\(finished) finished, \(failed) failed")
    }
}
