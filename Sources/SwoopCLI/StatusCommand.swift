import ArgumentParser
import Swoop

/// `swoop status FILE`: what a partial or finished download holds, and whether it can resume.
struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show a download's segment map: identity, progress, chunk layout, resumability.",
        discussion: "Exits 0 when FILE is complete or can resume, 1 otherwise."
    )

    @Argument(help: "The download's target file.")
    var file: String

    @Option(
        name: .long,
        help: ArgumentHelp(
            "The URL the next download will fetch, if not the one the segment map records.", valueName: "URL"))
    var url: String?

    @Flag(name: .long, help: "Print the status as one JSON object.")
    var json = false

    func run() throws {
        // FILE.part is a target like any other: working files live in .swoop/ beside it.
        let status = Downloader.status(of: file, url: url)
        if json {
            printJSON(StatusSummary(status))
        } else {
            // The URL and validators are a server's text.
            writeStdout(Self.describe(status).escapingControlCharacters(keeping: ["\n"]) + "\n")
        }
        switch status.state {
        case .complete, .partial: return
        case .absent, .untrusted: throw ExitCode(ExitStatus.network.rawValue)
        }
    }

    static func describe(_ status: DownloadStatus) -> String {
        var lines: [String] = []
        switch status.state {
        case .absent:
            return "\(status.path): no download here (no file and no partial download)"
        case .complete:
            lines.append("\(status.path): complete (\(Format.bytes(status.bytesDone)))")
        case .partial where !status.shares.isEmpty:
            let percent = Format.fixed((status.fractionCompleted ?? 0) * 100, digits: 1)
            let complete = status.shares.filter(\.isComplete).count
            lines.append(
                "\(status.path): fetched in \(status.shares.count) shares, \(percent)% (\(complete) of "
                    + "\(status.shares.count) shares complete): each share's command resumes it, and the last to "
                    + "finish saves the file")
        case .partial:
            let percent = Format.fixed((status.fractionCompleted ?? 0) * 100, digits: 1)
            lines.append(
                "\(status.path): partial, \(percent)% (\(Format.bytes(status.bytesDone)) of "
                    + "\(Format.bytes(status.size ?? 0))), can resume: run the same swoop command again"
            )
        case .untrusted(let reason):
            lines.append("\(status.path): cannot resume: \(reason); the next run starts over")
        }
        if status.isInUse { lines.append("  in use         another swoop process is downloading it now") }
        if let url = status.url { lines.append("  source         \(url)") }
        if let size = status.size { lines.append(Messages.statusSize(size)) }
        if let etag = status.etag { lines.append("  ETag           \(etag)") }
        if let modified = status.lastModified { lines.append("  Last-Modified  \(modified)") }
        for share in status.shares {
            let label = "  share \(share.share)"
            var line =
                label + String(repeating: " ", count: max(1, 17 - label.count))
                + "\(Format.bytes(share.bytesDone)) of \(Format.bytes(share.bytes))"
            if let problem = share.problem {
                line += ", cannot be used: \(problem)"
            } else if share.isComplete {
                line += ", complete"
            } else if share.bytesDone == 0 && !share.isInUse {
                line += ", not started"
            }
            if share.isInUse { line += ", downloading now" }
            lines.append(line)
        }
        if let chunkSize = status.chunkSize, status.chunkCount > 0 {
            let done = status.completedChunks.reduce(0) { $0 + $1.count }
            lines.append("  chunks         \(status.chunkCount) x \(Format.bytes(chunkSize)), \(done) complete")
            lines.append("  map            [\(bar(status, width: 64))]")
        }
        return lines.joined(separator: "\n")
    }

    /// One cell per slice of chunks: `#` all complete, `+` some, `.` none.
    static func bar(_ status: DownloadStatus, width: Int) -> String {
        let count = status.chunkCount
        let cells = min(width, count)
        var complete = [Bool](repeating: false, count: count)
        for run in status.completedChunks { for chunk in run { complete[chunk] = true } }
        return String(
            (0..<cells).map { cell -> Character in
                let range = (cell * count / cells)..<max(cell * count / cells + 1, (cell + 1) * count / cells)
                let done = range.filter { complete[$0] }.count
                return done == range.count ? "#" : done == 0 ? "." : "+"
            })
    }
}

/// `swoop status --json`.
struct StatusSummary: Encodable {
    var path: String
    var state: String
    var reason: String?
    var canResume: Bool
    var inUse: Bool
    var url: String?
    var size: Int64?
    var etag: String?
    var lastModified: String?
    var bytesDone: Int64
    var chunkSize: Int64?
    var chunkCount: Int
    /// Complete byte ranges, half-open `[start, end)`.
    var completeRanges: [[Int64]]
    /// An object fetched in shares: each share ("K/N"), its bytes held and all its bytes.
    var shares: [ShareSummary]?

    struct ShareSummary: Encodable {
        var share: String
        var bytesDone: Int64
        var bytes: Int64
        var complete: Bool
        var inUse: Bool
        var problem: String?
    }

    init(_ status: DownloadStatus) {
        path = status.path
        switch status.state {
        case .complete: state = "complete"
        case .partial: state = "partial"
        case .absent: state = "absent"
        case .untrusted(let why):
            state = "untrusted"
            reason = why
        }
        canResume = status.canResume
        inUse = status.isInUse
        url = status.url
        size = status.size
        etag = status.etag
        lastModified = status.lastModified
        bytesDone = status.bytesDone
        chunkSize = status.chunkSize
        chunkCount = status.chunkCount
        if !status.shares.isEmpty {
            shares = status.shares.map {
                ShareSummary(
                    share: $0.share.description, bytesDone: $0.bytesDone, bytes: $0.bytes, complete: $0.isComplete,
                    inUse: $0.isInUse, problem: $0.problem)
            }
        }
        completeRanges = status.completedChunks.map { run in
            let chunk = status.chunkSize ?? 0
            return [Int64(run.lowerBound) * chunk, min(Int64(run.upperBound) * chunk, status.size ?? 0)]
        }
    }
}
