import Logging

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Prints library log messages to stderr as `swoop: warning: ...`.
struct CLILogHandler: LogHandler {
    var logLevel: Logger.Level
    var metadata: Logger.Metadata = [:]

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    private static let stderrIsTerminal = isatty(STDERR_FILENO) == 1
    private static let started = ContinuousClock.now

    /// Starts the clock debug lines show (it starts on first use otherwise).
    static func startClock() {
        _ = started
    }

    func log(event: LogEvent) {
        var line = "swoop: \(event.level): \(event.message)"
        if logLevel <= .debug {
            let elapsed = Format.seconds(ContinuousClock.now - Self.started)
            line = "swoop: [\(Format.fixed(elapsed, digits: 3))] \(event.level): \(event.message)"
            let merged = metadata.merging(event.metadata ?? [:]) { $1 }
            if !merged.isEmpty {
                line += " " + merged.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
            }
        }
        writeStderr(line.escapingControlCharacters() + "\n", after: Self.stderrIsTerminal ? .clearLine : nil)
    }
}
