import ArgumentParser
import FoundationEssentials
import Swoop
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension Get {
    /// `swoop get -i FILE`: every URL of a list, `--jobs` at a time, sharing one connection pool.
    /// The list is read twice and never held whole: once to check it, count its entries and (with
    /// `--shard`) decide the split, then line by line as files start.
    func runList() async throws {
        guard let inputFile else { return }
        let source = try ManifestSource(path: inputFile)
        var builder = shard.map(ShardSelection.Builder.init)
        let counts: (entries: Int, ignored: [String])
        do {
            counts = try source.check { builder?.add($0) }
        } catch let error as Manifest.ParseError {
            throw CommandFailure(status: .usage, message: "\(inputFile): \(error)")
        }
        for note in counts.ignored { printError("warning: \(inputFile) \(note): option not supported, ignored") }
        let selection = builder?.finish()
        if let warning = selection?.unbalancedWarning { printError("warning: \(inputFile): \(warning)") }
        let included = selection?.included ?? counts.entries
        let rejections = Rejections()
        var items = ListItems(
            source: source, shard: selection, defaultHeaders: try transfer.parsedHeaders(), directory: directory,
            rejections: rejections)
        items.urlProvider = urlCommand.map { URLCommand(command: $0).provider }
        items.expectedCount = included

        var configuration = downloaderConfiguration()
        configuration.progressInterval = .milliseconds(500)
        warnIfInsecure()
        let downloader = Downloader(configuration: configuration, logger: transfer.logger(quiet: quiet))
        let board = BulkBoard(
            total: included, style: ProgressRenderer(quiet: quiet || json && isatty(STDERR_FILENO) != 1).style)
        if !quiet && !json {
            writeStderr(Messages.listStarting(files: included, jobs: jobs, share: selection?.description) + "\n")
        }
        let summary = await Self.runUntilInterrupted { [items, jobs] in
            await downloader.downloadAll(
                items, maxConcurrentFiles: jobs, reportsProgress: board.isDrawn, events: Self.show(on: board))
        }
        await downloader.shutdown()
        board.clear()
        guard let summary else {
            throw CommandFailure(status: .interrupted, message: Messages.listInterrupted)
        }
        let rejected = rejections.all
        report(summary, rejected: rejected)
        if let first = firstFailure(summary, rejected: rejected) {
            throw CommandFailure(status: first, message: "")
        }
    }

    /// A list's run until it ends, or `nil` once SIGINT or SIGTERM stopped it: an interrupt cancels
    /// the run's task, which pauses the files in flight (each keeps what it can resume) and starts no
    /// more. (Shutting the downloader down instead paused only the files in flight: the list went on
    /// with the next ones, to its end.)
    static func runUntilInterrupted(_ body: @escaping @Sendable () async -> BulkSummary) async -> BulkSummary? {
        let run = Task { await body() }
        let interrupts = InterruptWatcher { run.cancel() }
        let summary = await run.value
        interrupts.stop()
        return run.isCancelled ? nil : summary
    }

    /// What shows a run's events on `board` as they happen (and lets the C library give back
    /// freed memory as files end: ``FreeMemory``).
    static func show(on board: BulkBoard) -> @Sendable (BulkEvent) -> Void {
        let freeMemory = FreeMemory()
        return { event in
            switch event {
            case .started, .completed: break
            case .progress(let index, let progress): board.progress(index, progress)
            case .finished(let index, let result):
                board.finished(index, bytes: result.bytes)
                freeMemory.fileEnded()
            case .failed(let index, _):
                board.failed(index)
                freeMemory.fileEnded()
            }
        }
    }

    func report(
        _ summary: BulkSummary, rejected: [(entry: Manifest.Entry, message: String)], skipped: [Skip] = []
    ) {
        if json {
            printJSON(ListSummary(summary, rejected: rejected, skipped: skipped))
            return
        }
        let failed = summary.failed + rejected.count
        if !quiet {
            let line = Messages.listSummary(
                files: summary.files + rejected.count + skipped.count, succeeded: summary.succeeded,
                alreadyComplete: summary.alreadyComplete, skipped: skipped.count, failed: failed,
                bytesReceived: summary.bytesReceived, seconds: Format.seconds(summary.duration))
            writeStderr(line + "\n")
        }
        if !skipped.isEmpty {
            // Names as `ls -b` shows them: a key's line break or escape sequence is the store's.
            writeStderr("skipped (exit status 6):\n")
            for skip in skipped {
                writeStderr("  \(skip.url.escapingControlCharacters())  \(skip.reason)\n")
            }
        }
        if failed > 0 {
            writeStderr("failed:\n")
            for rejection in rejected {
                writeStderr("  line \(rejection.entry.line)  \(rejection.entry.url)  \(rejection.message)\n")
            }
            for failure in summary.failures {
                let names = "\(failure.url) -> \(failure.destination)".escapingControlCharacters()
                writeStderr("  \(names)  \(failure.error.commandLineMessage)\n")
            }
        }
    }

    /// The exit status of the first failed entry in list order, if any failed.
    func firstFailure(
        _ summary: BulkSummary, rejected: [(entry: Manifest.Entry, message: String)]
    ) -> ExitStatus? {
        if !rejected.isEmpty { return .usage }
        return summary.failures.first.map { ExitStatus($0.error) }
    }
}

/// `swoop get -i --json`.
struct ListSummary: Encodable {
    struct Failure: Encodable {
        var url: String
        var destination: String?
        var line: Int?
        var error: String
        var errorKind: String
    }

    var ok: Bool
    var files: Int
    var succeeded: Int
    var alreadyComplete: Int
    var failed: Int
    var bytes: Int64
    var bytesReceived: Int64
    var seconds: Double
    var failures: [Failure]
    /// With -r: the listed objects not downloaded (exact keys; JSON escapes what needs it), and why.
    var skipped: [Skip]

    init(_ summary: BulkSummary, rejected: [(entry: Manifest.Entry, message: String)], skipped: [Skip] = []) {
        files = summary.files + rejected.count + skipped.count
        succeeded = summary.succeeded
        alreadyComplete = summary.alreadyComplete
        failed = summary.failed + rejected.count
        ok = failed == 0 && skipped.isEmpty
        self.skipped = skipped
        bytes = summary.bytes
        bytesReceived = summary.bytesReceived
        seconds = Format.seconds(summary.duration)
        failures =
            rejected.map {
                Failure(url: $0.entry.url, line: $0.entry.line, error: $0.message, errorKind: "invalid request")
            }
            + summary.failures.map {
                Failure(
                    url: $0.url, destination: $0.destination, error: $0.error.commandLineMessage,
                    errorKind: $0.error.kind.summary)
            }
    }
}

/// The live line of a list download: files done of total, failures, bytes, rate, active files.
final class BulkBoard: Sendable {
    private struct State {
        var done = 0
        var failed = 0
        var bytesByFile: [Int: Int64] = [:]
        var finishedBytes: Int64 = 0
        var active: Set<Int> = []
        var meter: [(ContinuousClock.Instant, Int64)] = []
        var lastLine: ContinuousClock.Instant?
    }

    /// `nil` while the files are still being listed (`-r`).
    private let total: Int?
    private let style: ProgressRenderer.Style
    private let state = Mutex(State())

    init(total: Int?, style: ProgressRenderer.Style) {
        self.total = total
        self.style = style
    }

    func progress(_ index: Int, _ progress: DownloadProgress) {
        state.withLock { state in
            state.active.insert(index)
            state.bytesByFile[index] = progress.bytesDone
        }
        draw()
    }

    func finished(_ index: Int, bytes: Int64) {
        state.withLock { state in
            state.done += 1
            state.active.remove(index)
            state.bytesByFile.removeValue(forKey: index)
            state.finishedBytes += bytes
        }
        draw()
    }

    func failed(_ index: Int) {
        state.withLock { state in
            state.failed += 1
            state.active.remove(index)
            state.bytesByFile.removeValue(forKey: index)
        }
        draw()
    }

    func clear() {
        if style == .terminal { writeStderr("", after: .clearLine) }
    }

    /// Whether it shows anything: only then does it need each file's start and progress.
    var isDrawn: Bool { style != .silent }

    private func draw() {
        guard style != .silent else { return }
        let now = ContinuousClock.now
        let line: String? = state.withLock { state in
            let bytes = state.finishedBytes + state.bytesByFile.values.reduce(0, +)
            state.meter.append((now, bytes))
            while let first = state.meter.first, now - first.0 > .seconds(3), state.meter.count > 2 {
                state.meter.removeFirst()
            }
            let interval: Duration = style == .terminal ? .milliseconds(200) : .seconds(2)
            if let last = state.lastLine, now - last < interval { return nil }
            state.lastLine = now
            var rate = 0.0
            if let first = state.meter.first, now > first.0 {
                rate = Double(bytes - first.1) / Format.seconds(now - first.0)
            }
            var text = "files \(state.done)" + (total.map { "/\($0)" } ?? "")
            if state.failed > 0 { text += " (\(state.failed) failed)" }
            text += "  \(Format.bytes(bytes))  \(Format.rate(rate))  \(state.active.count) active"
            return text
        }
        guard let line else { return }
        if style == .terminal {
            writeStderr(ProgressRenderer.fitted(line, columns: ProgressRenderer.terminalColumns()), after: .clearLine)
        } else {
            writeStderr("progress: " + line + "\n")
        }
    }
}

extension String {
    /// Without a trailing `/` (but `/` stays `/`).
    var trimmedTrailingSlash: String {
        count > 1 && hasSuffix("/") ? String(dropLast()) : self
    }
}

/// Why a list entry cannot be downloaded as written.
struct ListEntryError: Error {
    var message: String
    init(_ message: String) { self.message = message }
}

/// The entries of a list that a run fetches, as ``BulkItem``s, made one at a time as the
/// downloader asks for the next: this shard's entries, with their headers, checksum and
/// destination. An entry that cannot be fetched as written is set aside in ``Rejections``.
struct ListItems: Sequence, Sendable {
    let source: ManifestSource
    let shard: ShardSelection?
    let defaultHeaders: [(name: String, value: String)]
    let directory: String?
    let rejections: Rejections
    /// `--url-command`, for every line (each with its own URL).
    var urlProvider: (@Sendable (String) async throws -> String)?
    /// The entries the check counted (in this shard): the downloader sizes its record of the
    /// files that succeeded for them up front, where growing it held two copies (a list of
    /// 100,000 files). More than the items only when some entries are rejected.
    var expectedCount = 0

    var underestimatedCount: Int { expectedCount }

    func makeIterator() -> Iterator {
        Iterator(list: self, entries: source.makeIterator())
    }

    struct Iterator: IteratorProtocol {
        let list: ListItems
        let entries: ManifestSource.Iterator

        mutating func next() -> BulkItem? {
            while let entry = entries.next() {
                guard list.shard?.contains(entry) ?? true else { continue }
                switch list.item(for: entry) {
                case .success(let item): return item
                case .failure(let error): list.rejections.add(entry, error.message)
                }
            }
            return nil
        }
    }

    /// The request and destination for one entry: `dir=` (else `-d`, else here) plus `out=`
    /// (else the URL's file name). `out=` may name subdirectories but never leave the directory.
    func item(for entry: Manifest.Entry) -> Result<BulkItem, ListEntryError> {
        var headers = defaultHeaders
        for line in entry.headers {
            guard let colon = line.firstIndex(of: ":"), !line[..<colon].trimmed.isEmpty else {
                return .failure(ListEntryError("invalid header= '\(line)': expected 'Name: value'"))
            }
            headers.append((line[..<colon].trimmed, line[line.index(after: colon)...].trimmed))
        }
        var expected: Checksum?
        if let text = entry.checksum {
            do throws(DownloadError) {
                expected = try Checksum(parsing: text)
            } catch {
                return .failure(ListEntryError("invalid checksum=: \(error.reason); \(Format.checksumSyntax)"))
            }
        }
        let base = (entry.dir ?? directory ?? ".").trimmedTrailingSlash
        var request = DownloadRequest(
            urls: [entry.url] + entry.mirrors, headers: headers, expectedChecksum: expected, expectedSize: entry.size)
        request.urlProvider = urlProvider
        var name = entry.out == nil ? Downloader.suggestedFileName(parsing: &request) : ""
        if let out = entry.out {
            let parts = out.split(separator: "/", omittingEmptySubsequences: true)
            guard !out.hasPrefix("/"), !parts.isEmpty, !parts.contains(where: { $0 == ".." || $0 == "." }),
                !out.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F })
            else {
                return .failure(ListEntryError("unsafe out= '\(out)': it must be a relative path inside the directory"))
            }
            // Subdirectories are created by the download (Configuration.files.createsMissingDirectories).
            name = parts.joined(separator: "/")
        }
        return .success(BulkItem(request, to: base + "/" + name))
    }
}

/// List entries that could not be fetched as written, collected while the list streams by.
final class Rejections: Sendable {
    private let entries = Mutex<[(entry: Manifest.Entry, message: String)]>([])

    func add(_ entry: Manifest.Entry, _ message: String) {
        entries.withLock { $0.append((entry, message)) }
    }

    /// In list order.
    var all: [(entry: Manifest.Entry, message: String)] {
        entries.withLock { $0 }.sorted { $0.entry.line < $1.entry.line }
    }
}
