import Logging

/// The library's log lines, made safe before they reach the caller's handler: a message often
/// names a key, a path or a header a server sent, which could carry terminal control sequences.
/// ``Downloader`` wraps the logger it is given in this, so no log line of its holds a raw one.
struct EscapingLogHandler: LogHandler {
    var base: any LogHandler

    var logLevel: Logger.Level {
        get { base.logLevel }
        set { base.logLevel = newValue }
    }

    var metadata: Logger.Metadata {
        get { base.metadata }
        set { base.metadata = newValue }
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { base[metadataKey: key] }
        set { base[metadataKey: key] = newValue }
    }

    func log(event: LogEvent) {
        let text = event.message.description
        guard text.containsControlCharacters else { return base.log(event: event) }
        var escaped = event
        escaped.message = "\(text.escapingControlCharacters())"
        base.log(event: escaped)
    }

    /// `logger` with its handler wrapped (the same label and level).
    static func wrapping(_ logger: Logger) -> Logger {
        let base = logger.handler
        var wrapped = Logger(label: logger.label) { _ in EscapingLogHandler(base: base) }
        wrapped.logLevel = logger.logLevel
        return wrapped
    }
}
