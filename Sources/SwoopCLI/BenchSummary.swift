import Swoop

/// `swoop bench --json` (the fields of earlier releases kept, new ones added).
struct BenchSummary: Encodable {
    struct Row: Encodable {
        var connections: Int
        /// The steady rate: the bytes after the ramp-up over the time since.
        var bytesPerSecond: Double
        var bytes: Int64
        var seconds: Double
        var completed: Bool
        var timeline: [[Double]]
        var bytesPerSecondPerConnection: Double
        /// The 10th and 90th percentiles of the steady intervals' rates.
        var spread: [Double]
        var rampUpSeconds: Double
        var intervalSeconds: Double
        /// Times the object was fetched in the window (more than once when it arrived early).
        var passes: Int
        /// The most requests in flight at once in a pass that ended (absent when none did).
        var peakConnections: Int?
    }

    var url: String
    var results: [Row]
    var recommendedConnections: Int?
    /// What limits the rate at the recommended count.
    var recommendationReason: String?
    /// Each address of a name with several, measured alone; absent for one address.
    var addresses: [Bench.AddressRate]?
    /// The first request's new connection: its TCP handshake (one round trip) and TLS handshake,
    /// in seconds; absent when not measured (TLS: without TLS).
    var roundTripSeconds: Double?
    var tlsHandshakeSeconds: Double?
    /// Seconds from sending the first request to its response's first byte.
    var firstResponseSeconds: Double?
    /// The adaptive default, measured last: the count it settled on, and its rate.
    var defaultConnections: Int?
    var defaultBytesPerSecond: Double?
    /// The disk's durable write rate where `get` would write (absent with --no-disk).
    var diskBytesPerSecond: Double?
    /// The whole machine's busy share, and Swoop's CPU seconds per GiB, at the recommended count.
    var machineBusy: Double?
    var cpuSecondsPerGiB: Double?
    /// The share of the time Swoop's transfer thread was busy at the recommended count.
    var transferThreadBusy: Double?
    /// What limits the whole path: "network", "server", "disk" or "cpu", and why.
    var limit: String?
    var limitReason: String?

    init(
        url: String, results: [ThroughputMeasurement], knee: BenchKnee?, addresses: [Bench.AddressRate],
        firstResponse: ResponseTiming?, adaptive: ThroughputMeasurement? = nil, path: Bench.PathFigures? = nil
    ) {
        diskBytesPerSecond = path?.disk
        machineBusy = path?.busy
        cpuSecondsPerGiB = path?.cpuPerGiB
        transferThreadBusy = path?.transferThreadBusy
        limit = path?.limit?.part.rawValue
        limitReason = path?.limit?.reason
        defaultConnections = adaptive?.connections
        defaultBytesPerSecond = adaptive?.bytesPerSecond
        roundTripSeconds = firstResponse?.connect.map(Format.seconds)
        tlsHandshakeSeconds = firstResponse?.tlsHandshake.map(Format.seconds)
        firstResponseSeconds = firstResponse.map { Format.seconds($0.firstByte) }
        self.addresses = addresses.isEmpty ? nil : addresses
        self.url = url
        self.results = results.map {
            Row(
                connections: $0.connections, bytesPerSecond: $0.bytesPerSecond, bytes: $0.bytes,
                seconds: Format.seconds($0.duration), completed: $0.completed,
                timeline: $0.timeline.map { [$0.seconds, $0.bytesPerSecond] },
                bytesPerSecondPerConnection: $0.bytesPerSecondPerConnection,
                spread: [$0.spread.lowerBound, $0.spread.upperBound], rampUpSeconds: Format.seconds($0.rampUp),
                intervalSeconds: Format.seconds($0.interval), passes: $0.passes, peakConnections: $0.peakConnections)
        }
        recommendedConnections = knee?.recommended.connections
        recommendationReason = knee?.reason
    }
}
