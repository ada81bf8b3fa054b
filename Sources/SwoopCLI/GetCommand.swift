import ArgumentParser
import Synchronization
import FoundationEssentials
import Logging
import Swoop

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Options shared by commands that download.
struct TransferOptions: ParsableArguments {
    @Option(name: [.short, .long], help: "Connections per download (1-1024). Default: adaptive, up to --max-connections.")
    var connections: Int?

    @Option(name: .long, help: "The most connections the adaptive mode may open (1-1024).")
    var maxConnections: Int = 64

    @Option(name: [.customShort("H"), .long], help: ArgumentHelp("Send a request header; repeat for several.", valueName: "Name: value"))
    var header: [String] = []

    @Option(name: .long, help: "Seconds allowed to connect.")
    var connectTimeout: Double = 30

    @Option(name: .long, help: "Seconds without data (or below --min-speed) before a connection is replaced.")
    var stallTimeout: Double = 30

    @Option(name: .long, help: ArgumentHelp("A connection slower than this for --stall-timeout is replaced (e.g. 100k, 1m).", valueName: "rate"))
    var minSpeed: ByteCount = ByteCount(bytes: 1)

    @Option(name: .long, help: "Tries per byte range without progress before giving up.")
    var maxTries: Int = 8

    @Flag(name: [.customShort("k"), .long], help: "Skip TLS certificate verification (insecure).")
    var insecure = false

    @Flag(name: .long, help: "Keep connections that are far slower than the others instead of replacing them.")
    var keepSlowConnections = false

    @Flag(name: [.short, .long], help: "Log more (repeat for debug output).")
    var verbose: Int

    func validate() throws {
        if let connections, !(1...1024).contains(connections) {
            throw ValidationError("--connections must be between 1 and 1024 (got \(connections))")
        }
        guard (1...1024).contains(maxConnections) else {
            throw ValidationError("--max-connections must be between 1 and 1024 (got \(maxConnections))")
        }
        guard connectTimeout > 0, connectTimeout.isFinite else { throw ValidationError("--connect-timeout must be a positive number of seconds") }
        guard stallTimeout > 0, stallTimeout.isFinite else { throw ValidationError("--stall-timeout must be a positive number of seconds") }
        guard maxTries >= 1 else { throw ValidationError("--max-tries must be at least 1 (got \(maxTries))") }
        _ = try parsedHeaders()
    }

    /// `--header` values split into name and value; a bad one is a usage error naming it.
    func parsedHeaders() throws -> [(name: String, value: String)] {
        try header.map { line in
            guard let colon = line.firstIndex(of: ":") else {
                throw ValidationError("invalid --header '\(line)': expected 'Name: value'")
            }
            let name = line[..<colon].trimmed
            let value = line[line.index(after: colon)...].trimmed
            guard !name.isEmpty, !name.contains(where: { $0.isWhitespace }) else {
                throw ValidationError("invalid --header '\(line)': the name before ':' is empty or has spaces")
            }
            return (name, value)
        }
    }

    func configuration() -> Downloader.Configuration {
        var configuration = Downloader.Configuration()
        configuration.connections = connections.map { .fixed($0) } ?? .adaptive(maximum: maxConnections)
        configuration.timeout.connect = .milliseconds(Int64(connectTimeout * 1000))
        configuration.timeout.stall = .milliseconds(Int64(stallTimeout * 1000))
        configuration.retry.maxTries = maxTries
        configuration.timeout.lowSpeedLimit = Int(minSpeed.bytes)
        configuration.verifiesTLSCertificates = !insecure
        configuration.replacesSlowConnections = !keepSlowConnections
        return configuration
    }

    func logger(quiet: Bool) -> Logger {
        CLILogHandler.startClock()
        let level: Logger.Level = quiet ? .error : (verbose >= 3 ? .trace : verbose == 2 ? .debug : verbose == 1 ? .info : .warning)
        return Logger(label: "swoop") { _ in CLILogHandler(logLevel: level) }
    }
}

extension Downloader.Configuration.ObjectChangePolicy: ExpressibleByArgument {
    public init?(argument: String) {
        switch argument {
        case "restart": self = .restart
        case "fail": self = .fail
        default: return nil
        }
    }

    public static var allValueStrings: [String] { ["restart", "fail"] }
}

/// `swoop get URL`: download one object.
struct Get: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Download a URL (the default command: `swoop URL` works too).",
        discussion: """
            The file is written to FILE.part beside the target with a segment map FILE.swoop, \
            and renamed to FILE when complete. Interrupted downloads resume when the same \
            command is run again.
            """
    )

    @Argument(help: "The http or https URL to download (or use -i for a list).")
    var url: String?

    @Option(name: [.customShort("i"), .customLong("input-file")], help: ArgumentHelp("Download every URL in FILE (aria2's input-file format; - for stdin).", valueName: "FILE"))
    var inputFile: String?

    @Option(name: [.short, .long], help: "With -i: files downloaded at once.")
    var jobs: Int = 8

    @Option(name: .long, help: ArgumentHelp("With -i: only this machine's share K of N (0 <= K < N), chosen by a hash of each URL.", valueName: "K/N"))
    var shard: Shard?

    @Option(name: .long, help: ArgumentHelp("Verify the finished file's digest; on a mismatch nothing is kept.", valueName: "sha256=HEX"))
    var checksum: String?

    @Option(name: [.short, .long], help: "Write to this file (default: the URL's file name).")
    var output: String?

    @Option(name: [.short, .customLong("dir")], help: "Write into this directory (default: the current one).")
    var directory: String?

    @OptionGroup var transfer: TransferOptions

    @Flag(name: [.short, .long], help: "Print nothing but errors.")
    var quiet = false

    @Flag(name: .long, help: "Print a JSON summary on stdout when done.")
    var json = false

    @Flag(name: [.short, .long], help: "Replace the target file if it exists.")
    var force = false

    @Flag(name: .long, help: "Discard any partial download and start over.")
    var noResume = false

    @Option(name: .long, help: "When the object changes mid-download: restart or fail.")
    var onChange: Downloader.Configuration.ObjectChangePolicy = .restart

    @Option(name: .long, help: "Seconds between segment-map checkpoints (0 turns them off).")
    var checkpointInterval: Double = 1

    func validate() throws {
        switch (url, inputFile) {
        case (nil, nil): throw ValidationError("give a URL to download, or -i FILE with a list of URLs")
        case (_?, _?): throw ValidationError("give either a URL or -i FILE, not both")
        default: break
        }
        if inputFile != nil {
            if output != nil { throw ValidationError("-o names one file; with -i use out= lines in the list") }
            if checksum != nil { throw ValidationError("--checksum is for one file; with -i use checksum= lines in the list") }
        } else if shard != nil {
            throw ValidationError("--shard splits a list: use it with -i")
        }
        guard (1...256).contains(jobs) else { throw ValidationError("--jobs must be between 1 and 256 (got \(jobs))") }
        if let checksum, Checksum(checksum) == nil {
            throw ValidationError("invalid --checksum '\(checksum)': expected sha256=<64 hex digits>")
        }
        if let output, output.isEmpty { throw ValidationError("-o/--output must not be empty") }
        guard checkpointInterval >= 0, checkpointInterval.isFinite else {
            throw ValidationError("--checkpoint-interval must be 0 or a positive number of seconds")
        }
    }

    /// The target path: `-o` (inside `-d` when both are given), else the URL's sanitised file name in `-d`.
    func targetPath(for url: String) -> String {
        let directory = self.directory?.trimmedTrailingSlash
        if let output {
            if let directory, !output.hasPrefix("/") { return directory + "/" + output }
            return output
        }
        let name = Downloader.suggestedFileName(for: url)
        return (directory ?? ".") + "/" + name
    }

    func warnIfInsecure() {
        if transfer.insecure {
            printError("warning: --insecure: TLS certificates are not verified; anyone on the path can read and alter the download")
        }
    }

    func downloaderConfiguration() -> Downloader.Configuration {
        var configuration = transfer.configuration()
        configuration.overwritesExistingFile = force
        configuration.resumes = !noResume
        configuration.onObjectChange = onChange
        configuration.checkpointInterval = checkpointInterval > 0 ? .milliseconds(Int64(checkpointInterval * 1000)) : nil
        return configuration
    }

    func run() async throws {
        guard let url else {
            try await runList()
            return
        }
        let configuration = downloaderConfiguration()
        let logger = transfer.logger(quiet: quiet)
        warnIfInsecure()
        let request = DownloadRequest(url: url, headers: try transfer.parsedHeaders(), expectedChecksum: checksum.flatMap(Checksum.init))
        let path = targetPath(for: url)
        let renderer = ProgressRenderer(quiet: quiet || json && isatty(STDERR_FILENO) != 1)
        let downloader = Downloader(configuration: configuration, logger: logger)

        let task = Task {
            try await downloader.download(request, to: path) { renderer.update($0) }
        }
        let interrupts = InterruptWatcher { task.cancel() }
        let outcome = await task.result
        interrupts.stop()
        await downloader.shutdown()
        renderer.finish()

        switch outcome {
        case .success(let result):
            if json {
                printJSON(Summary(result, url: url))
            } else if !quiet {
                printSummary(result)
            }
        case .failure(let error as DownloadError):
            if json { printJSON(Summary(error: error, path: path)) }
            throw CommandFailure(status: ExitStatus(error), message: error.message)
        case .failure(let error):
            throw CommandFailure(status: .network, message: "\(error)")
        }
    }

    private func printSummary(_ result: DownloadResult) {
        if result.alreadyComplete {
            writeStderr("\(result.path) is already complete (\(Format.bytes(result.bytes))); nothing to download\n")
            return
        }
        let seconds = Format.seconds(result.duration)
        var line = "saved \(result.path) (\(Format.bytes(result.bytes))) in \(Format.fixed(seconds, digits: 2)) s"
        line += ", \(Format.rate(result.bytesPerSecond)), \(result.connectionsUsed) connection\(result.connectionsUsed == 1 ? "" : "s")"
        if result.bytesResumed > 0 { line += ", \(Format.bytes(result.bytesResumed)) resumed" }
        if result.retries > 0 { line += ", \(result.retries) retr\(result.retries == 1 ? "y" : "ies")" }
        writeStderr(line + "\n")
    }
}

/// The `--json` summary.
struct Summary: Encodable {
    var ok: Bool
    var path: String
    var bytes: Int64?
    var seconds: Double?
    var bytesPerSecond: Double?
    var connections: Int?
    var requests: Int?
    var retries: Int?
    var resumedBytes: Int64?
    var alreadyComplete: Bool?
    var etag: String?
    var error: String?
    var errorKind: String?
    var exitCode: Int32?

    init(_ result: DownloadResult, url: String) {
        ok = true
        path = result.path
        bytes = result.bytes
        seconds = Format.seconds(result.duration)
        bytesPerSecond = result.bytesPerSecond
        connections = result.connectionsUsed
        requests = result.requests
        retries = result.retries
        resumedBytes = result.bytesResumed
        alreadyComplete = result.alreadyComplete
        etag = result.etag
    }

    init(error: DownloadError, path: String) {
        ok = false
        self.path = path
        self.error = error.message
        errorKind = error.kind.description
        exitCode = ExitStatus(error).rawValue
    }
}

func printJSON(_ value: some Encodable) {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys]
    if let data = try? encoder.encode(value) {
        print(String(decoding: data, as: UTF8.self))
    }
}

/// SIGINT/SIGTERM deliveries so far. The handler only increments it, which is async-signal-safe
/// whichever thread the kernel picks (unlike a dispatch signal source, whose signalfd misses a
/// signal delivered to a thread that does not block it).
private let interruptSignals = Atomic<Int>(0)

/// Turns the first SIGINT or SIGTERM into `onInterrupt` (a graceful pause); a second one exits at once.
final class InterruptWatcher {
    private let watcher: Task<Void, Never>

    init(onInterrupt: @escaping @Sendable () -> Void) {
        for number in [SIGINT, SIGTERM] {
            signal(number) { _ in
                if interruptSignals.add(1, ordering: .relaxed).newValue > 1 {
                    _exit(ExitStatus.interrupted.rawValue)
                }
            }
        }
        watcher = Task {
            while !Task.isCancelled {
                if interruptSignals.load(ordering: .relaxed) > 0 {
                    writeStderr("\nswoop: interrupted; saving state (press Ctrl-C again to quit at once)\n")
                    onInterrupt()
                    return
                }
                try? await Task.sleep(for: .milliseconds(25))
            }
        }
    }

    func stop() {
        watcher.cancel()
    }
}
