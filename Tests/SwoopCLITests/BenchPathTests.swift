import Testing

@testable import SwoopCLI

/// `swoop bench`'s verdict on the whole path: the network's knee, unless the server slows down
/// with more connections, the disk takes durable writes more slowly, or the processors are busy.
@Suite("The path's limit")
struct BenchPathTests {
    private let mebibyte = 1_048_576.0

    /// 16 MiB/s a connection up to 64 (a CDN's cap).
    private var capped: [(connections: Int, rate: Double)] {
        [1, 2, 4, 8, 16, 32, 64].map { ($0, Double($0) * 16 * mebibyte) }
    }

    @Test("a per-connection cap: the network, whatever a faster disk and the processors say")
    func network() {
        let limit = BenchPath.limit(
            recommended: (64, 1024 * mebibyte), knee: "each connection capped near 16.0 MiB/s", rates: capped,
            disk: 2048 * mebibyte, busy: 0.4, cpuPerGiB: 0.9)
        #expect(limit.part == .network && limit.reason.contains("capped"))
        // The rate still grows with the count: more connections add, however busy the machine is
        // (other work beside the measurement).
        let busy = BenchPath.limit(
            recommended: (64, 1024 * mebibyte), knee: "each connection capped", growsWithCount: true, rates: capped,
            disk: 2048 * mebibyte, busy: 0.97, cpuPerGiB: 0.9)
        #expect(busy.part == .network)
        #expect(
            BenchPath.limit(
                recommended: (64, 1024 * mebibyte), knee: "x", rates: capped, disk: nil, busy: nil, cpuPerGiB: nil
            ).part == .network, "nothing measured beside the network")
    }

    @Test("a disk slower than the network is the limit, with both figures")
    func disk() {
        let limit = BenchPath.limit(
            recommended: (64, 1024 * mebibyte), knee: "x", rates: capped, disk: 360 * mebibyte, busy: 0.5,
            cpuPerGiB: 0.9)
        #expect(limit.part == .disk)
        #expect(limit.reason.contains("360.0 MiB/s") && limit.reason.contains("1.00 GiB/s"), "\(limit.reason)")
    }

    @Test("processors 85% busy or more at the knee are the limit, unless the disk is slower still")
    func cpu() {
        let rates: [(connections: Int, rate: Double)] = [(1, 450 * mebibyte), (4, 900 * mebibyte)]
        let limit = BenchPath.limit(
            recommended: (4, 900 * mebibyte), knee: "x", rates: rates, disk: 2048 * mebibyte, busy: 0.97,
            cpuPerGiB: 1.2)
        #expect(limit.part == .cpu && limit.reason.contains("97% busy") && limit.reason.contains("1.20 s"))
        // A disk slower than the network binds a download first: it never reaches the rate the
        // processors were busy at.
        let slowDisk = BenchPath.limit(
            recommended: (4, 900 * mebibyte), knee: "x", rates: rates, disk: 360 * mebibyte, busy: 0.97,
            cpuPerGiB: 1.2)
        #expect(slowDisk.part == .disk)
    }

    @Test("the transfer thread busy 90% of the time or more is the limit on a machine with idle processors")
    func transferThread() {
        // 16 processors, one of them the transfer thread's: the whole machine is 12% busy.
        let rates: [(connections: Int, rate: Double)] = [
            (1, 700 * mebibyte), (4, 1100 * mebibyte), (16, 1150 * mebibyte),
        ]
        let limit = BenchPath.limit(
            recommended: (4, 1100 * mebibyte), knee: "x", rates: rates, disk: 4096 * mebibyte, busy: 0.12,
            cpuPerGiB: 0.9, transferThread: 0.96)
        #expect(limit.part == .cpu && limit.reason.contains("transfer thread was busy 96%"), "\(limit.reason)")
        // Busy less than that, the thread is not the limit: the network's reason stands.
        let idle = BenchPath.limit(
            recommended: (4, 1100 * mebibyte), knee: "x", rates: rates, disk: 4096 * mebibyte, busy: 0.12,
            cpuPerGiB: 0.9, transferThread: 0.6)
        #expect(idle.part == .network)
        // Every connection capped and the rate growing with the count: the network, however busy.
        let capped = BenchPath.limit(
            recommended: (16, 1100 * mebibyte), knee: "x", growsWithCount: true, rates: rates, disk: nil, busy: 0.3,
            cpuPerGiB: 0.9, transferThread: 0.95)
        #expect(capped.part == .network)
    }

    @Test("more connections slower than the knee: the server")
    func server() {
        // Every request costs the server a read of the whole object (an S3 emulator's checksum).
        let rates: [(connections: Int, rate: Double)] = [
            (1, 300 * mebibyte), (2, 310 * mebibyte), (4, 200 * mebibyte), (8, 110 * mebibyte), (16, 60 * mebibyte),
        ]
        let limit = BenchPath.limit(
            recommended: (1, 300 * mebibyte), knee: "x", rates: rates, disk: 2048 * mebibyte, busy: 0.6,
            cpuPerGiB: 0.5)
        #expect(limit.part == .server && limit.reason.contains("60.0 MiB/s at 16"), "\(limit.reason)")
    }
}
