import ArgumentParser
import Swoop

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// `swoop`: a parallel segmented downloader.
@main
struct SwoopCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "swoop",
        abstract: "Download large files fast over many connections, resumably.",
        discussion: """
            Exit status: 0 success; 1 network or HTTP failure (the partial download is kept); \
            2 usage error; 3 local file error (disk full, permissions); 4 the object changed on \
            the server (--on-change fail, or it kept changing); 5 the target exists, or another process is downloading \
            it; 130 interrupted (resume with the same command).
            """,
        version: BuildInfo.versionLine,
        subcommands: [Get.self, Bench.self, Status.self],
        defaultSubcommand: Get.self
    )

    /// Parses, runs, and exits with Swoop's exit codes rather than argument-parser's defaults.
    static func main() async {
        FreeMemory.limitHeaps()
        signal(SIGPIPE, SIG_IGN)
        do {
            var command = try parseAsRoot()
            if var asyncCommand = command as? AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch let failure as CommandFailure {
            if !failure.message.isEmpty { printError(failure.message) }
            Glibc.exit(failure.status.rawValue)
        } catch {
            let code = exitCode(for: error)
            if code == .success || code == .validationFailure || error is ValidationError {
                if code == .success {
                    print(fullMessage(for: error))
                    Glibc.exit(0)
                }
                printError(fullMessage(for: error))
                Glibc.exit(ExitStatus.usage.rawValue)
            }
            if let exit = error as? ExitCode { Glibc.exit(exit.rawValue) }
            printError(fullMessage(for: error))
            Glibc.exit(ExitStatus.usage.rawValue)
        }
    }
}

/// Swoop's documented exit codes.
enum ExitStatus: Int32 {
    case success = 0
    case network = 1
    case usage = 2
    case localIO = 3
    case objectChanged = 4
    case targetExists = 5
    /// With -r: every object was downloaded but some listed ones were skipped (unsafe keys).
    case skipped = 6
    case interrupted = 130

    init(_ error: DownloadError) {
        switch error.kind {
        case .invalidRequest: self = .usage
        case .localIO, .diskFull: self = .localIO
        case .objectChanged: self = .objectChanged
        case .targetExists, .targetInUse: self = .targetExists
        case .interrupted, .cancelled: self = .interrupted
        default: self = .network
        }
    }
}

/// A failure already explained; `main` prints the message and exits with the status.
struct CommandFailure: Error {
    var status: ExitStatus
    var message: String
}

func printError(_ message: String) {
    var line = "swoop: " + message
    if !line.hasSuffix("\n") { line += "\n" }
    writeStderr(line)
}

/// The command line's own terminal sequences, the only control characters it writes.
enum TerminalControl: String {
    /// Back to the start of the line and clear it (the live progress line).
    case clearLine = "\r\u{1B}[2K"
}

/// Writes to standard error, unbuffered: the one way text reaches it. Every control character in
/// `text` but its line breaks is escaped (`\x1b`, as `ls -b` shows them), so a key, a header or
/// an error body a server sent can never retitle or clear the terminal; `control`, the command's
/// own sequence, goes first as it is.
func writeStderr(_ text: String, after control: TerminalControl? = nil) {
    writeAll(STDERR_FILENO, (control?.rawValue ?? "") + text.escapingControlCharacters(keeping: ["\n"]))
}

/// Writes to standard output, unbuffered, escaped as ``writeStderr(_:after:)`` does.
func writeStdout(_ text: String) {
    writeAll(STDOUT_FILENO, text.escapingControlCharacters(keeping: ["\n"]))
}

private func writeAll(_ descriptor: Int32, _ text: String) {
    var text = text
    text.withUTF8 { buffer in
        var offset = 0
        while offset < buffer.count {
            let written = write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
            if written <= 0 {
                if written < 0 && errno == EINTR { continue }
                return
            }
            offset += written
        }
    }
}
