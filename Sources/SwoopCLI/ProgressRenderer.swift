import Swoop
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Draws download progress on stderr: one redrawn line on a terminal, a plain line every few
/// seconds otherwise, nothing when quiet. A download that ends at once (a rerun of a finished
/// one) leaves no progress behind: the terminal line starts after a moment, the plain lines after
/// their first interval, and neither starts before there is something to show (see
/// ``worthStarting(_:)``), however long the probe takes on a busy machine.
final class ProgressRenderer: Sendable {
    enum Style { case terminal, lines, silent }

    private struct State {
        var lastLineAt: ContinuousClock.Instant
        var drewTerminalLine = false
    }

    let style: Style
    private let state: Mutex<State>
    private let lineInterval: Duration = .seconds(2)
    private let startedAt = ContinuousClock.now
    /// How long a download runs before its terminal line is drawn.
    private let terminalDelay: Duration = .milliseconds(250)

    init(quiet: Bool) {
        if quiet {
            style = .silent
        } else {
            style = isatty(STDERR_FILENO) == 1 ? .terminal : .lines
        }
        state = Mutex(State(lastLineAt: startedAt))
    }

    func update(_ progress: DownloadProgress) {
        switch style {
        case .silent:
            return
        case .terminal:
            guard ContinuousClock.now - startedAt >= terminalDelay else { return }
            guard state.withLock({ $0.drewTerminalLine }) || Self.worthStarting(progress) else { return }
            // Wider than the terminal, the line would wrap, and "\r" with erase-line would clear
            // only its last row: cut it to the width.
            let line = Self.fitted(Self.describe(progress), columns: Self.terminalColumns())
            state.withLock { $0.drewTerminalLine = true }
            writeStderr(line, after: .clearLine)
        case .lines:
            guard Self.worthStarting(progress) else { return }
            let now = ContinuousClock.now
            let due = state.withLock { state -> Bool in
                if now - state.lastLineAt < lineInterval { return false }
                state.lastLineAt = now
                return true
            }
            if due { writeStderr("progress: " + Self.describe(progress) + "\n") }
        }
    }

    /// Whether a report is worth a first line: a wait, or a transfer under way. Before the probe
    /// has decided, a report holds nothing (no byte, no connection); a report already complete
    /// ends a download that has nothing left to fetch (a rerun of a finished one), and the final
    /// message says so. A plain line never repeats a complete report: the saved line follows.
    static func worthStarting(_ progress: DownloadProgress) -> Bool {
        if progress.waiting != nil { return true }
        if progress.fractionCompleted == 1 { return false }
        return progress.bytesDone > 0 || progress.activeConnections > 0
    }

    /// The width of the terminal on standard error, or 80 when it does not say.
    static func terminalColumns() -> Int {
        var size = winsize()
        guard ioctl(STDERR_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 else { return 80 }
        return Int(size.ws_col)
    }

    /// `line` cut to fewer characters than `columns` (the last column stays free, so the cursor
    /// never wraps), ending in "..." when cut.
    static func fitted(_ line: String, columns: Int) -> String {
        let room = max(columns - 1, 4)
        guard line.count > room else { return line }
        return String(line.prefix(room - 3)) + "..."
    }

    /// Ends the progress line so the next message starts on a fresh line.
    func finish() {
        if style == .terminal, state.withLock({ $0.drewTerminalLine }) {
            writeStderr("", after: .clearLine)
        }
    }

    static func describe(_ progress: DownloadProgress) -> String {
        var parts: [String] = []
        if let fraction = progress.fractionCompleted {
            parts.append(Format.fixed(fraction * 100, digits: 1) + "%")
            parts.append("\(Format.bytes(progress.bytesDone)) / \(Format.bytes(progress.totalBytes ?? 0))")
        } else {
            parts.append(Format.bytes(progress.bytesDone))
        }
        if progress.objectChanges > 0 {
            // "object changed: started over, 12.0 MiB fetched again"
            let times = progress.objectChanges > 1 ? " \(progress.objectChanges) times" : ""
            parts.append(
                "object changed: started over\(times), \(Format.bytes(progress.bytesRefetched)) fetched again")
        }
        if let waiting = progress.waiting {
            // Nothing can arrive: say what is waited for, not "0 B/s".
            parts.append(describe(waiting))
            return parts.joined(separator: "  ")
        }
        parts.append(Format.rate(progress.bytesPerSecond))
        if let remaining = progress.estimatedTimeRemaining {
            parts.append("ETA " + Format.duration(Format.seconds(remaining)))
        }
        parts.append("\(progress.activeConnections) conn")
        if !progress.sources.isEmpty {
            // Sources in use out of those given, and how much each delivered: "2/3 src 60%+40%".
            let used = progress.sources.filter { $0.droppedBecause == nil && !$0.isChecking }
            let total = max(1, used.reduce(0) { $0 + $1.bytes })
            parts.append(
                "\(used.count)/\(progress.sources.count) src "
                    + used.map { "\($0.bytes * 100 / total)%" }.joined(separator: "+"))
        }
        return parts.joined(separator: "  ")
    }

    /// "waiting for 127.0.0.1:8080 (connection refused) for 0:12 of at most 2:00, next try in 3 s".
    static func describe(_ waiting: DownloadProgress.Wait) -> String {
        let duration = Format.duration(Format.seconds(waiting.duration))
        var line = "waiting for \(waiting.server) (\(waiting.cause)) for \(duration)"
        if let limit = waiting.limit { line += " of at most \(Format.duration(Format.seconds(limit)))" }
        if let next = waiting.nextTry {
            line += ", next try in \(Int(Format.seconds(next).rounded(.up))) s"
        } else {
            line += ", trying now"
        }
        return line
    }
}
