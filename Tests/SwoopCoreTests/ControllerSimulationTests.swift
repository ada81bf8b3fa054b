import SwoopTestSupport
import Testing

@testable import SwoopCore

private let MiB = 1_048_576.0

/// The adaptive count against every fixed count, in virtual time, on servers with different
/// cost models: the default must never lose to a count a user would have to guess.
///
/// CPU-bound (seconds a case, a minute on a loaded machine): one case at a time, each on a thread
/// of its own (``offThePool(_:)``), so that the other tests' awaits never wait behind it on Swift's
/// cooperative pool (two threads here; eight cases in parallel there held it for 51 s in CI, and
/// tests polling a download's progress saw none).
@Suite("Connection controller simulation", .serialized)
struct ControllerSimulationTests {
    struct Case: CustomTestStringConvertible, Sendable {
        var model: ServerModel
        var size: Int64
        /// The default's time over the best fixed count's, at most.
        var allowed = 1.10
        var testDescription: String { "\(model.name), \(size >> 20) MiB" }
    }

    static let cases: [Case] = [
        // A CDN's per-connection cap on a fast link: the most connections win. The knee is reached
        // within 0.1 s; the rest of the gap is the end: segments split while the count grows are
        // uneven, and a request is cut for an idle connection only when it has over 0.25 s to go.
        Case(model: .capped(16 * MiB), size: 1 << 30, allowed: 1.22),
        // An S3 emulator: every ranged GET costs the server as much as reading the whole object.
        Case(model: ServerModel(name: "work per request (0.4 s a request)", requestWork: 0.4), size: 256 << 20),
        // A WSGI server with 4 worker threads: the rest wait for a worker.
        Case(
            model: ServerModel(name: "a pool of 4 workers", link: 250 * MiB, perConnectionCap: 70 * MiB, workers: 4),
            size: 256 << 20),
        // A WSGI server whose 4 workers share one lock (waitress on CPython) on the client's 2 cores:
        // one or two connections are as fast as it goes, each one more slows every other (as
        // measured on loopback here: -c 1 and -c 2 0.34 s, -c 4 0.55 s for 256 MiB).
        Case(
            model: ServerModel(
                name: "a lock-bound pool of 4 workers", link: 800 * MiB, perConnectionOverhead: 0.3,
                connectionsWithoutOverhead: 2, workers: 4),
            size: 256 << 20),
        // A shared narrow link: more connections add nothing (and cost nothing much).
        Case(
            model: ServerModel(name: "a shared 100 MiB/s link, 20 ms", roundTrip: 0.02, link: 100 * MiB),
            size: 256 << 20),
        // A connection limit answered with 503.
        Case(
            model: ServerModel(name: "503 above 4 connections", perConnectionCap: 16 * MiB, refusesAbove: 4),
            size: 256 << 20),
        // One thread, one request at a time, a new connection for each.
        Case(
            model: ServerModel(
                name: "a single-threaded server", link: 400 * MiB, workers: 1, closesConnections: true),
            size: 256 << 20),
        // No cap, the machine's CPU is the limit and each connection costs some of it.
        Case(
            model: ServerModel(name: "uncapped, CPU-bound", link: 900 * MiB, perConnectionOverhead: 0.01),
            size: 2 << 30),
        // A long lossy path: each connection loss-bound, the link far wider.
        Case(
            model: ServerModel(
                name: "40 ms, loss-bound connections", roundTrip: 0.04, link: 75 * MiB, perConnectionCap: 1.4 * MiB),
            size: 256 << 20),
        // 1% loss over 40 ms (S3b, as measured: 32 connections moved 38-55 MB/s in their first
        // half second, then 13-14): a new connection's slow start runs at 1.5 MiB/s until its first
        // losses, then each gets 0.45 MiB/s. A window early in the download measures the burst, and
        // judged by it 35 MB left looked like half a second's work.
        Case(
            model: ServerModel(
                name: "40 ms, 1% loss: slow start's burst, then loss-bound", roundTrip: 0.04, link: 75 * MiB,
                perConnectionCap: 0.45 * MiB, slowStart: (rate: 1.5 * MiB, seconds: 0.5)),
            size: 64 << 20),
    ]

    @Test("the default is within 10% of the best fixed count", arguments: cases)
    func defaultMatchesTheBestFixedCount(_ test: Case) async throws {
        let outcome = try await offThePool { Self.compare(test) }
        print(outcome.report)
        #expect(outcome.ratio <= test.allowed, "\(outcome.against)")
        // The count it ends at is one a user would be happy to have guessed.
        #expect(outcome.atFinal <= 1.10 * outcome.best, "\(outcome.endedAt)")
    }

    /// The default and every fixed count on `test`'s server: the default over the best, and the
    /// count it ended at, fixed, in seconds.
    private static func compare(
        _ test: Case
    ) -> (ratio: Double, best: Double, atFinal: Double, report: String, against: String, endedAt: String) {
        let simulation = ControllerSimulation(test.model, size: test.size)
        let counts = [1, 2, 4, 8, 16, 32, 64]
        let fixed = counts.map { (count: $0, seconds: simulation.run(fixed: $0).seconds) }
        let best = fixed.min { $0.seconds < $1.seconds }!
        let adaptive = simulation.run()
        let ratio = adaptive.seconds / best.seconds
        let table = fixed.map { "-c \($0.count) \(format($0.seconds))" }.joined(separator: ", ")
        let report =
            "\(test.testDescription): default \(format(adaptive.seconds)) s at \(adaptive.finalCount) "
            + "(\(adaptive.history.map(String.init).joined(separator: "→")), \(adaptive.requests) requests); "
            + "best -c \(best.count) \(format(best.seconds)) s; ratio \(format(ratio)); \(table); "
            + adaptive.decisions.joined(separator: "; ")
        let atFinal = simulation.run(fixed: adaptive.finalCount).seconds
        return (
            ratio, best.seconds, atFinal, report,
            "default \(adaptive.seconds) s against -c \(best.count)'s \(best.seconds) s",
            "it ended at \(adaptive.finalCount) (\(atFinal) s fixed) against -c \(best.count)'s \(best.seconds) s"
        )
    }

    private static func format(_ value: Double) -> String {
        let hundredths = Int((value * 100).rounded())
        return "\(hundredths / 100).\(hundredths % 100 < 10 ? "0" : "")\(hundredths % 100)"
    }
}
