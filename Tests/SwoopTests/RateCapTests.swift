import Testing
@testable import Swoop
@testable import SwoopCurl

/// What a byte-rate cap (`Configuration.connectionPool.maximumBytesPerSecond`) changes besides the bucket:
/// validation, the low-speed limit, and the adaptive connection count.
@Suite("Rate cap")
struct RateCapTests {
    @Test func aCapMustBePositive() throws {
        var configuration = Downloader.Configuration()
        try configuration.validate()
        configuration.connectionPool.maximumBytesPerSecond = 1
        try configuration.validate()
        for bad: Int64 in [0, -1] {
            configuration.connectionPool.maximumBytesPerSecond = bad
            let error = #expect(throws: DownloadError.self) { try configuration.validate() }
            #expect(error?.kind == .invalidRequest)
            #expect(error?.reason.contains("maximumBytesPerSecond") == true)
        }
    }

    /// A connection averages its share of the cap; libcurl's speed check compares that average
    /// with the low-speed limit whenever the transfer is not paused.
    @Test func aCapLowersTheLowSpeedLimitToHalfAConnectionsShare() {
        var configuration = Downloader.Configuration()
        configuration.timeout.lowSpeedLimit = 1 << 20
        #expect(TransferOptions(configuration).lowSpeedLimit == 1 << 20, "no cap: as configured")

        configuration.connectionPool.maximumBytesPerSecond = 16 << 20  // over 128 pooled connections: 128 KiB/s each
        #expect(TransferOptions(configuration).lowSpeedLimit == 64 << 10)
        configuration.connectionPool.maximumConnections = 16
        #expect(TransferOptions(configuration).lowSpeedLimit == 512 << 10)
        configuration.timeout.lowSpeedLimit = 1000
        #expect(TransferOptions(configuration).lowSpeedLimit == 1000, "a limit already below the share stays")
        configuration.timeout.lowSpeedLimit = 0
        #expect(TransferOptions(configuration).lowSpeedLimit == 0, "off stays off")
        configuration.timeout.lowSpeedLimit = 1 << 20
        configuration.connectionPool.maximumBytesPerSecond = 100  // 6 bytes/s per connection: half is 3
        #expect(TransferOptions(configuration).lowSpeedLimit == 3)
        configuration.connectionPool.maximumBytesPerSecond = 20
        #expect(TransferOptions(configuration).lowSpeedLimit == 1, "never 0, which would turn the check off")
    }

    /// While the cap holds bytes back, the transfer restarts the controller's measurement every
    /// tick instead of feeding it; once the cap lets go it measures from there.
    @Test func aHeldMeasurementKeepsTheCountUntilTheCapLetsGo() {
        let start = Moment.now
        var controller = ConnectionController(initial: 8, maximum: 64)
        var bytes: Int64 = 0
        var tick = 0
        func now() -> Moment { start + .milliseconds(100 * tick) }
        for _ in 0..<100 {  // 10 s at the cap
            tick += 1
            bytes += 1_600_000
            controller.restartMeasurement(at: now())
        }
        #expect(controller.target == 8)
        #expect(!controller.isSettled, "a capped rate is no verdict on more connections")

        var grown: Int?
        for _ in 0..<20 {  // the cap stops binding: the same rate, now measured
            tick += 1
            bytes += 1_600_000
            if let target = controller.observe(totalBytes: bytes, remainingBytes: 1 << 40, at: now(), roundTrip: 0.001)
            {
                grown = target
                break
            }
        }
        #expect(grown == 32, "a baseline after the warm-up and one window, then a first (4x) increase")
    }
}
