import Testing

@testable import SwoopCore

/// The controller's start, step by step with virtual time: on a LAN the first connection runs
/// alone until its rate is measured, and that rate decides how wide the download opens.
struct ConnectionControllerTests {
    private static let MiB = 1_048_576.0

    /// A controller as a download over a LAN starts it (a 0.2 ms round trip).
    private static func onALAN() -> ConnectionController {
        ConnectionController(
            start: ConnectionController.start(firstByte: 0.0004, connect: 0.0002, maximum: 64), maximum: 64)
    }

    /// Feeds `controller` one connection's bytes at `rate` every 5 ms from `start`, until it moves
    /// the count or `limit` passes; returns the new count and when it came (ms after `start`).
    private static func run(
        _ controller: inout ConnectionController, rate: Double, from start: Moment,
        limit: Int = 500
    ) -> (count: Int, at: Int)? {
        for milliseconds in stride(from: 0, through: limit, by: 5) {
            let observation = ConnectionController.Observation(
                totalBytes: Int64(rate * Double(milliseconds) / 1000), remainingBytes: 1 << 40,
                now: start + .milliseconds(milliseconds), roundTrip: 0.0002, transferring: 1)
            if let count = controller.observe(observation) { return (count, milliseconds) }
        }
        return nil
    }

    @Test("on a LAN the probe's connection runs alone first; on long paths the download opens wide at once")
    func startsAloneOnALAN() {
        let lan = ConnectionController.start(firstByte: 0.0004, connect: 0.0002, maximum: 64)
        #expect(lan.count == 1 && lan.fanOut == 8)
        #expect(ConnectionController(start: lan, maximum: 64).phase == .alone(fanOut: 8, window: .milliseconds(20)))
        let far = ConnectionController.start(firstByte: 0.09, connect: 0.045, maximum: 64)
        #expect(far.count == 64 && far.fanOut == nil)
        #expect(ConnectionController(start: far, maximum: 64).phase == .measuring)
        let expensive = ConnectionController.start(firstByte: 0.2, connect: 0.0002, maximum: 64)
        #expect(expensive.count == 2 && expensive.fanOut == nil && expensive.requestCost > 0.19)
        let one = ConnectionController.start(firstByte: 0.0004, connect: 0.0002, maximum: 1)
        #expect(one.count == 1 && ConnectionController(start: one, maximum: 1).phase == .measuring)
    }

    @Test("a connection fast on its own tries 2 after the window, and goes back to 1 when 2 do not pay")
    func fastAloneTriesTwo() {
        let start = Moment.now
        var controller = Self.onALAN()
        let first = Self.run(&controller, rate: 800 * Self.MiB, from: start)
        // Decided once the window (20 ms: the probe's round trip is short) has passed, not before.
        #expect(first?.count == 2)
        #expect(first.map { $0.at >= 20 && $0.at <= 25 } == true, "\(String(describing: first))")
        #expect(controller.phase != .measuring && controller.lastReason.contains("fast on its own"))
        // Two connections together no faster than one alone: back to one, held.
        let second = Self.run(&controller, rate: 800 * Self.MiB, from: start + .milliseconds(first!.at))
        #expect(second?.count == 1)
        if case .holding(let best, _, _) = controller.phase { #expect(best.count == 1) } else {
            Issue.record("not holding: \(controller.phase)")
        }
        // 8 s on, it probes upwards again, to 4 rather than 2: a step of one connection measures
        // little beyond noise, and a limit may show only seconds in.
        let reprobe = Self.run(
            &controller, rate: 800 * Self.MiB, from: start + .milliseconds(first!.at + second!.at), limit: 9_000)
        #expect(reprobe.map { $0.count == 4 && $0.at >= 8_000 } == true, "\(String(describing: reprobe))")
    }

    @Test("a held count whose rate falls well below the one it was chosen at is re-probed at once, with long windows")
    func fallenRateReprobes() {
        let start = Moment.now
        var controller = Self.onALAN()
        let first = Self.run(&controller, rate: 800 * Self.MiB, from: start)
        let held = start + .milliseconds(first!.at)
        let second = Self.run(&controller, rate: 800 * Self.MiB, from: held)
        #expect(second?.count == 1)
        // The page cache has filled: one connection now gets 500 MiB/s, 0.63 of the 800 it was
        // chosen at. A second of it is enough to re-probe, 8 s early.
        let fell = start + .milliseconds(first!.at + second!.at)
        let reprobe = Self.run(&controller, rate: 500 * Self.MiB, from: fell, limit: 3_000)
        #expect(
            reprobe.map { $0.count == 4 && $0.at >= 1_000 && $0.at < 1_100 } == true, "\(String(describing: reprobe))")
        #expect(controller.lastReason.contains("0.63x of 1 at"), "\(controller.lastReason)")
        // The step is measured over half a second after a tenth of warm-up, not a tenth: 4 at
        // 700 MiB/s pays (1.4x) and the climb goes on.
        let climb = Self.run(&controller, rate: 700 * Self.MiB, from: fell + .milliseconds(reprobe!.at), limit: 2_000)
        #expect(climb.map { $0.count == 8 && $0.at >= 600 } == true, "\(String(describing: climb))")
    }

    @Test("a connection slow on its own opens the usual 8, knowing one connection's rate")
    func slowAloneFansOut() {
        let start = Moment.now
        var controller = Self.onALAN()
        let first = Self.run(&controller, rate: 16 * Self.MiB, from: start)
        #expect(first?.count == 8)
        #expect(controller.phase == .measuring)
        // 8 connections at 8 times one's rate: a limit per connection, so the next step is 8x.
        var bytes = Int64(16 * Self.MiB * 0.025)
        var next: Int?
        for milliseconds in stride(from: 30, through: 400, by: 5) {
            bytes += Int64(8 * 16 * Self.MiB * 0.005)
            let observation = ConnectionController.Observation(
                totalBytes: bytes, remainingBytes: 1 << 40, now: start + .milliseconds(milliseconds),
                roundTrip: 0.0002, transferring: 8)
            if let count = controller.observe(observation) {
                next = count
                break
            }
        }
        #expect(next == 64, "\(controller.lastReason)")
    }

    @Test("nothing arriving while alone opens the usual count: no measure is no verdict")
    func nothingAloneFansOut() {
        let start = Moment.now
        var controller = Self.onALAN()
        #expect(Self.run(&controller, rate: 0, from: start)?.count == 8)
        #expect(controller.lastReason == "nothing arrived alone")
    }
}
