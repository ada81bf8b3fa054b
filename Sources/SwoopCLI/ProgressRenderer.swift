import Swoop
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Draws download progress on stderr: one redrawn line on a terminal, a plain line every few
/// seconds otherwise, nothing when quiet.
final class ProgressRenderer: Sendable {
    enum Style { case terminal, lines, silent }

    private struct State {
        var lastLineAt: ContinuousClock.Instant?
        var drewTerminalLine = false
    }

    let style: Style
    private let state = Mutex(State())
    private let lineInterval: Duration = .seconds(2)

    init(quiet: Bool) {
        if quiet {
            style = .silent
        } else {
            style = isatty(STDERR_FILENO) == 1 ? .terminal : .lines
        }
    }

    func update(_ progress: DownloadProgress) {
        switch style {
        case .silent:
            return
        case .terminal:
            let line = Self.describe(progress)
            state.withLock { $0.drewTerminalLine = true }
            writeStderr(line, after: .clearLine)
        case .lines:
            let now = ContinuousClock.now
            let due = state.withLock { state -> Bool in
                if let last = state.lastLineAt, now - last < lineInterval { return false }
                state.lastLineAt = now
                return true
            }
            if due { writeStderr("progress: " + Self.describe(progress) + "\n") }
        }
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
