import ArgumentParser
import Swoop

/// How many connections, how long to wait, how hard to try: `--connections`, the timeouts,
/// `--limit-rate`, `--max-tries`, `--max-outage`.
struct ConnectionOptions: ParsableArguments {
    @Option(
        name: [.short, .long], help: "Connections per download (1-1024). Default: adaptive, up to --max-connections.")
    var connections: Int?

    @Option(name: .long, help: "The most connections the adaptive mode may open (1-1024).")
    var maxConnections: Int = 64

    @Option(name: .long, help: "Seconds allowed to connect.")
    var connectTimeout: Double = 30

    @Option(name: .long, help: "Seconds without data (or below --min-speed) before a connection is replaced.")
    var stallTimeout: Double = 30

    @Option(
        name: .long,
        help: ArgumentHelp(
            "A connection slower than this for --stall-timeout is replaced (e.g. 100k, 1m).", valueName: "rate"))
    var minSpeed: ByteCount = ByteCount(bytes: 1)

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Receive at most RATE bytes per second, all connections together (with -i, the whole run), e.g. 500k, 20m.",
            valueName: "rate"))
    var limitRate: ByteCount?

    @Option(name: .long, help: "Tries per request or byte range without progress, while its server answers.")
    var maxTries: Int = 8

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Seconds a server that stops answering mid-download is waited for (one connection at a time, "
                + "at most every 5 s) before giving up; the partial download is kept.",
            valueName: "seconds"))
    var maxOutage: Double = 120

    @Flag(name: .long, help: "Keep connections that are far slower than the others instead of replacing them.")
    var keepSlowConnections = false

    func validate() throws {
        if let connections, !(1...1024).contains(connections) {
            throw ValidationError("--connections must be between 1 and 1024 (got \(connections))")
        }
        guard (1...1024).contains(maxConnections) else {
            throw ValidationError("--max-connections must be between 1 and 1024 (got \(maxConnections))")
        }
        guard connectTimeout > 0, connectTimeout.isFinite else {
            throw ValidationError("--connect-timeout must be a positive number of seconds")
        }
        guard stallTimeout > 0, stallTimeout.isFinite else {
            throw ValidationError("--stall-timeout must be a positive number of seconds")
        }
        guard maxTries >= 1 else { throw ValidationError("--max-tries must be at least 1 (got \(maxTries))") }
        guard maxOutage >= 0, maxOutage.isFinite else {
            throw ValidationError("--max-outage must be 0 or more seconds")
        }
        if let limitRate, limitRate.bytes <= 0 {
            throw ValidationError("--limit-rate must be more than 0 bytes per second, e.g. 500k or 20m")
        }
    }

    /// These settings, in `configuration`.
    func apply(to configuration: inout Downloader.Configuration) {
        configuration.connections = connections.map { .fixed($0) } ?? .adaptive(maximum: maxConnections)
        configuration.timeout.connect = .milliseconds(Int64(connectTimeout * 1000))
        configuration.timeout.stall = .milliseconds(Int64(stallTimeout * 1000))
        configuration.retry.maxTries = maxTries
        configuration.retry.maxOutage = .milliseconds(Int64(maxOutage * 1000))
        configuration.timeout.lowSpeedLimit = Int(minSpeed.bytes)
        configuration.tuning.replacesSlowConnections = !keepSlowConnections
        configuration.connectionPool.maximumBytesPerSecond = limitRate?.bytes
    }
}
