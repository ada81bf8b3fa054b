import ArgumentParser
import Dispatch
import SwoopTestOrigin

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

extension SwoopTestOriginCommand {
    /// Serves objects until SIGINT or SIGTERM.
    struct Serve: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Serve objects until SIGINT or SIGTERM.",
            discussion: """
                Prints `listening on http://HOST:PORT` on stdout once bound, and a summary on \
                stderr when it stops.
                """
        )

        @Option(help: "The address to bind.")
        var host = "127.0.0.1"

        @Option(help: "The port to bind (0 = any free port).")
        var port = 0

        @Option(help: "Event-loop threads.")
        var threads = 1

        @Option(
            name: .customLong("object"),
            help: "An object: /PATH=SIZE[,seed=N][,etag=strong|weak|none][,lm=yes|no]. Repeatable."
        )
        var objects: [ObjectSpec] = []

        @Option(help: "Cap every response body at RATE bytes/s (k/m/g suffixes).")
        var throttle: ByteCount?

        @Option(
            help: ArgumentHelp(
                "Cap the bytes sent to each client address at RATE bytes/s over all its connections, as a CDN "
                    + "caps a client (k/m/g suffixes)."))
        var perClientRate: ByteCount?

        @Option(help: "Make every Kth connection a straggler (with --straggler-rate).")
        var stragglerEvery: Int?

        @Option(help: "The body rate of straggler connections, bytes/s (k/m/g suffixes).")
        var stragglerRate: ByteCount?

        @Option(help: "Cut each response at a random point in its body with this probability.")
        var dropProbability: Double = 0

        @Option(help: "Fail the first K requests.")
        var failFirst = 0

        @Option(help: "The status of those failures.")
        var failStatus = 503

        @Option(help: "Send Retry-After: S on those failures.")
        var retryAfter: Int?

        @Flag(help: "Ignore Range headers (always 200 with the whole body).")
        var noRanges = false

        @Option(help: "Work MS milliseconds on every request before answering, one request at a time.")
        var workPerRequest: Int?

        @OptionGroup(title: "Lying servers")
        var lying: LyingServerOptions

        func validate() throws {
            if (stragglerEvery == nil) != (stragglerRate == nil) {
                throw ValidationError("--straggler-every and --straggler-rate go together")
            }
            if let every = stragglerEvery, every < 1 { throw ValidationError("--straggler-every must be at least 1") }
            if let rate = stragglerRate, rate.value < 1 { throw ValidationError("--straggler-rate must be positive") }
            if let rate = throttle, rate.value < 1 { throw ValidationError("--throttle must be positive") }
            if let rate = perClientRate, rate.value < 1 { throw ValidationError("--per-client-rate must be positive") }
            if !(0...1).contains(dropProbability) { throw ValidationError("--drop-probability must be in 0...1") }
            if threads < 1 { throw ValidationError("--threads must be at least 1") }
            if let work = workPerRequest, work < 1 { throw ValidationError("--work-per-request must be positive") }
        }

        func run() async throws {
            let signals = SignalWaiter(SIGINT, SIGTERM)
            let origin = try await TestOrigin.start(host: host, port: port, threads: threads)
            for spec in objects {
                origin.addObject(spec.object, at: spec.path)
            }
            var faults = FaultSwitches()
            faults.rangeSupport = !noRanges
            faults.throttleBytesPerSecond = throttle.map { Int($0.value) }
            faults.perClientBytesPerSecond = perClientRate.map { Int($0.value) }
            faults.workPerRequest = workPerRequest.map { .milliseconds($0) }
            if let every = stragglerEvery, let rate = stragglerRate {
                faults.straggler = .init(every: every, bytesPerSecond: Int(rate.value))
            }
            if dropProbability > 0 { faults.drops = .init(probability: dropProbability) }
            if failFirst > 0 {
                faults.failures = .init(firstRequests: failFirst, status: failStatus, retryAfterSeconds: retryAfter)
            }
            lying.apply(to: &faults)
            origin.setFaults(faults)

            writeLine("listening on \(origin.baseURL)", to: STDOUT_FILENO)
            let signal = await signals.next()

            let requests = origin.requests
            let bytes = requests.reduce(Int64(0)) { $0 + $1.bodyBytesSent }
            let faulted = requests.filter { $0.faultApplied != nil }.count
            try await origin.shutdown()
            writeLine(
                "swoop-test-origin: stopped by signal \(signal): \(origin.requestCount) requests "
                    + "(\(faulted) with faults), \(origin.connectionsAccepted) connections, \(bytes) body bytes sent",
                to: STDERR_FILENO
            )
        }
    }
}

/// `/PATH=SIZE[,seed=N][,etag=strong|weak|none][,lm=yes|no]`.
struct ObjectSpec: ExpressibleByArgument, Sendable {
    var path: String
    var object: TestObject

    init?(argument: String) {
        guard let equals = argument.firstIndex(of: "=") else { return nil }
        path = String(argument[..<equals])
        guard path.hasPrefix("/") else { return nil }
        let fields = argument[argument.index(after: equals)...].split(separator: ",", omittingEmptySubsequences: false)
        guard let sizeText = fields.first, let size = ByteCount(argument: String(sizeText)) else { return nil }
        object = TestObject(size: size.value)
        for field in fields.dropFirst() {
            let parts = field.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2 else { return nil }
            switch (parts[0], parts[1]) {
            case ("seed", let value):
                guard let seed = UInt64(value) else { return nil }
                object.seed = seed
            case ("etag", "strong"): object.etag = .strong
            case ("etag", "weak"): object.etag = .weak
            case ("etag", "none"): object.etag = .none
            case ("lm", "yes"): object.lastModified = true
            case ("lm", "no"): object.lastModified = false
            default: return nil
            }
        }
    }
}

/// Waits for one of some signals, delivered through Dispatch rather than a signal handler.
/// Used by one task only; it keeps the signal sources alive while it exists.
final class SignalWaiter {
    private let stream: AsyncStream<Int32>
    private let sources: [any DispatchSourceSignal]

    init(_ signals: Int32...) {
        let (stream, continuation) = AsyncStream.makeStream(of: Int32.self)
        self.stream = stream
        self.sources = signals.map { number in
            signal(number, SIG_IGN)  // let Dispatch see it instead of the default action
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { continuation.yield(number) }
            source.resume()
            return source
        }
    }

    deinit {
        for source in sources { source.cancel() }
    }

    /// The next signal to arrive.
    func next() async -> Int32 {
        var iterator = stream.makeAsyncIterator()
        return await iterator.next() ?? 0
    }
}

/// Writes `text` and a newline straight to a file descriptor (unbuffered, so a script reading
/// the pipe sees it at once).
func writeLine(_ text: String, to fd: Int32) {
    var bytes = Array((text + "\n").utf8)
    var offset = 0
    while offset < bytes.count {
        let result = bytes.withUnsafeMutableBytes { write(fd, $0.baseAddress! + offset, $0.count - offset) }
        if result < 0 {
            if errno == EINTR { continue }
            return
        }
        offset += result
    }
}
