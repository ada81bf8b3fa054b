import Testing

@testable import SwoopTestOrigin

/// The per-client-address rate (``FaultSwitches/perClientBytesPerSecond``) in virtual time: one
/// address's connections share its allowance, another address has its own, and over a span the
/// bytes granted follow the rate.
@Suite("A client address's allowance")
struct ClientAllowanceTests {
    static let rate = 4 << 20  // 4 MiB/s: a bucket of 419,430 bytes (100 ms)

    @Test("full at first; then a request waits for its bytes (or a full bucket), never takes a dribble")
    func grantsAndWaits() {
        let start = ContinuousClock.now
        var allowance = ClientAllowance(rate: Self.rate, at: start)
        let slice: Int64 = 256 << 10
        #expect(allowance.take(slice, rate: Self.rate, at: start).granted == slice)
        // 157,286 bytes left: a slice waits for the 104,858 it lacks (25 ms at 4 MiB/s).
        let short = allowance.take(slice, rate: Self.rate, at: start)
        #expect(short.granted == 0)
        #expect(short.wait > .milliseconds(24) && short.wait < .milliseconds(26), "\(short.wait)")
        // A smaller request is granted from what is there.
        #expect(allowance.take(64 << 10, rate: Self.rate, at: start + .milliseconds(1)).granted == 64 << 10)
        let later = allowance.take(slice, rate: Self.rate, at: start + .milliseconds(1))
        #expect(later.granted == 0)
        #expect(allowance.take(slice, rate: Self.rate, at: start + .milliseconds(1) + later.wait).granted == slice)
    }

    @Test("the origin keeps one allowance per client address: one's grants leave the other's whole")
    func addressesApart() {
        let core = OriginCore()
        // 1 KiB/s: the 16 KiB bucket takes 16 s to fill again, whatever the machine's load.
        let rate = 1024
        let capacity = Int64(ClientAllowance.capacity(rate))
        #expect(core.takeClientAllowance("127.0.0.2", rate: rate, wants: capacity).granted == capacity)
        #expect(core.takeClientAllowance("127.0.0.2", rate: rate, wants: capacity).granted == 0)
        #expect(core.takeClientAllowance("127.0.0.3", rate: rate, wants: capacity).granted == capacity)
        #expect(core.takeClientAllowance("127.0.0.3", rate: rate, wants: capacity).granted == 0)
    }

    @Test("over a second of back-to-back requests, the bytes granted are the rate's, plus one bucket")
    func followsTheRate() {
        let start = ContinuousClock.now
        var allowance = ClientAllowance(rate: Self.rate, at: start)
        var now = start
        var granted: Int64 = 0
        while now < start + .seconds(1) {
            let (bytes, wait) = allowance.take(256 << 10, rate: Self.rate, at: now)
            granted += bytes
            now += bytes > 0 ? .microseconds(100) : wait
        }
        let expected = Int64(Self.rate) + Int64(ClientAllowance.capacity(Self.rate))
        #expect(granted <= expected && granted >= expected - (256 << 10), "\(granted) of \(expected)")
    }

    @Test("a client address's body limit: granted up to it, then nothing; a new limit counts afresh; others unheld")
    func bodyLimit() {
        let core = OriginCore()
        core.updateFaults { $0.clientBodyLimits = ["127.0.0.3": 100_000] }
        #expect(core.takeClientBody("127.0.0.3", wants: 65_536) == 65_536)
        #expect(core.takeClientBody("127.0.0.3", wants: 65_536) == 34_464)
        #expect(core.takeClientBody("127.0.0.3", wants: 65_536) == 0)
        #expect(core.takeClientBody("127.0.0.2", wants: 65_536) == 65_536)
        core.updateFaults { $0.clientBodyLimits["127.0.0.3"] = 200_000 }
        #expect(core.takeClientBody("127.0.0.3", wants: 262_144) == 200_000)
        core.updateFaults { $0.clientBodyLimits = [:] }
        #expect(core.takeClientBody("127.0.0.3", wants: 262_144) == 262_144)
    }
}
