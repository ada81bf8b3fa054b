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

/// `swoop get URL`: download one object.
struct Get: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Download a URL (the default command: `swoop URL` works too).",
        discussion: """
            The file is written to a part file with a segment map in .swoop/ beside the target, \
            and renamed to FILE when complete. Interrupted downloads resume when the same \
            command is run again.

            One version, never a mix: every request carries the first response's validators \
            (If-Match), and an answer under others is asked again on a new connection; when the \
            old ones do not come back in four answers the object changed, and the download starts \
            over on the new version (up to --max-tries times; --on-change fail stops instead), \
            while a pool that serves both is proven and only its first node's bytes are used. \
            Every request also asks for up to 4 KiB of the bytes around its own, compared with \
            its neighbours', and once every byte is here one small request asks whether the \
            server still serves that version. A finished file is confirmed on a rerun by 1 KiB \
            from its middle under its validators, and fetched anew if its object changed. What \
            cannot be known is a change under validators that stay the same and away from every \
            compared window; only a digest (--checksum, or one the server publishes) covers \
            every byte.
            """
    )

    @Argument(
        help: ArgumentHelp(
            "The http or https URL to download (or use -i for a list). Several URLs are sources of the same file "
                + "(mirrors), fetched from at once; the first names it.",
            valueName: "url"))
    var urls: [String] = []

    @Option(
        name: [.customShort("i"), .customLong("input-file")],
        help: ArgumentHelp("Download every URL in FILE (aria2's input-file format; - for stdin).", valueName: "FILE"))
    var inputFile: String?

    @Option(
        name: [.customShort("j"), .customLong("jobs")],
        help: ArgumentHelp(
            "With -i or -r: files downloaded at once (default 8 with -i; 64 with -r, as an object store serves "
                + "many objects at once).",
            valueName: "N"))
    var jobsOption: Int?

    /// Files at once: `--jobs`, else 8 for a list (web servers), 64 for a prefix of an object store.
    var jobs: Int { jobsOption ?? (recursive ? 64 : 8) }

    @Flag(
        name: [.short, .long],
        help: "Download every object under an s3://BUCKET/PREFIX/ into -d DIR (DIR/<the rest of each key>).")
    var recursive = false

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Only this task's share K of N (0 <= K < N). With -i or -r: of the list's files, chosen by a hash of each "
                + "URL, or balanced by bytes when every line has size=. With one URL: of the object's bytes, "
                + "fetched into a part file every share writes; the last share to finish checks the seams and saves "
                + "the file.",
            valueName: "K/N"))
    var shard: Shard?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Verify the file's digest as it arrives (sha-256, sha-512, sha-384, sha-1, md5, crc32c, crc32, crc64nvme, "
                + "crc64xz); on a mismatch nothing is kept.",
            valueName: "ALG=HEX"))
    var checksum: String?

    @Option(
        name: [.short, .long],
        help: "Write to this file (default: the URL's file name); - streams to standard output, in order.")
    var output: String?

    @Option(
        name: .long,
        help: ArgumentHelp("With -o -: bytes fetched ahead of what was written out (at least 4M).", valueName: "SIZE"))
    var streamWindow: ByteCount = ByteCount(bytes: 64 << 20)

    @Option(name: [.short, .customLong("dir")], help: "Write into this directory (default: the current one).")
    var directory: String?

    @Flag(
        name: [.customShort("J"), .customLong("remote-header-name")],
        help: ArgumentHelp(
            "Name the file as the server's Content-Disposition header does (one extra request); without one, as the "
                + "URL does.")
    )
    var remoteHeaderName = false

    @OptionGroup var transfer: DownloadOptions

    @Flag(name: [.short, .long], help: "Print nothing but errors.")
    var quiet = false

    @Flag(name: .long, help: "Print a JSON summary on stdout when done.")
    var json = false

    @OptionGroup var existing: ExistingFileOptions

    @Option(
        name: .long,
        help: ArgumentHelp(
            "When the URL is refused (401, 403: a presigned URL expired), run CMD with the URL in SWOOP_URL and use "
                + "the URL it prints (the same object), for every connection; with -i, for each line.",
            valueName: "CMD"))
    var urlCommand: String?

    func validate() throws {
        switch (urls.isEmpty, inputFile) {
        case (true, nil): throw ValidationError("give a URL to download, or -i FILE with a list of URLs")
        case (false, _?):
            throw ValidationError(
                "give either URLs or -i FILE, not both (a list line takes mirrors as tab-separated URLs)")
        default: break
        }
        if remoteHeaderName && output != nil {
            throw ValidationError(
                "-J names the file after the server's Content-Disposition header and -o names it yourself: give one of "
                    + "them (-d chooses the directory for either)"
            )
        }
        if inputFile != nil {
            if output != nil { throw ValidationError("-o names one file; with -i use out= lines in the list") }
            if remoteHeaderName {
                throw ValidationError("-J is for one URL; with -i name files with out= lines in the list")
            }
            if checksum != nil {
                throw ValidationError("--checksum is for one file; with -i use checksum= lines in the list")
            }
        } else if recursive {
            guard urls.count == 1, urls[0].lowercased().hasPrefix("s3://") else {
                throw ValidationError(
                    "-r downloads the objects under one s3://BUCKET/PREFIX/; give exactly one s3:// URL")
            }
            if output != nil { throw ValidationError("-o names one file; with -r, -d names the directory") }
            if remoteHeaderName { throw ValidationError("-J is for one URL; with -r files are named by their keys") }
            if checksum != nil { throw ValidationError("--checksum is for one file, not for -r") }
        } else if shard != nil && output == "-" {
            throw ValidationError("--shard fetches a share of the object into a shared file: it cannot write to -o -")
        }
        guard (1...256).contains(jobs) else { throw ValidationError("--jobs must be between 1 and 256 (got \(jobs))") }
        if let checksum {
            do throws(DownloadError) {
                _ = try Checksum(parsing: checksum)
            } catch {
                throw ValidationError("invalid --checksum: \(error.reason); \(Format.checksumSyntax)")
            }
        }
        if let output, output.isEmpty { throw ValidationError("-o/--output must not be empty") }
        if output == "-" {
            if directory != nil {
                throw ValidationError("-d chooses a directory for a file; -o - writes to standard output")
            }
        }
        guard streamWindow.bytes >= Int64(DownloadBytes.minimumWindow) else {
            throw ValidationError("--stream-window must be at least 4M (got \(Wording.bytes(streamWindow.bytes)))")
        }
    }

    /// The target path: `-o` (inside `-d` when both are given), else the URL's sanitised file name
    /// in `-d`; `nil` with `-J`, whose name only the server can give.
    func targetPath(for url: String) -> String? {
        let directory = self.directory?.trimmedTrailingSlash
        if let output {
            if let directory, !output.hasPrefix("/") { return directory + "/" + output }
            return output
        }
        if remoteHeaderName { return nil }
        let name = Downloader.suggestedFileName(for: url)
        return (directory ?? ".") + "/" + name
    }

    func warnIfInsecure() {
        if transfer.insecure {
            printError(
                "warning: --insecure: TLS certificates are not verified; anyone on the path can read and alter the "
                    + "download"
            )
        }
    }

    func downloaderConfiguration() -> Downloader.Configuration {
        var configuration = transfer.configuration()
        existing.apply(to: &configuration)
        return configuration
    }

    func run() async throws {
        guard let url = urls.first else {
            try await runList()
            return
        }
        if recursive {
            try await runPrefix(url)
            return
        }
        let configuration = downloaderConfiguration()
        let logger = transfer.logger(quiet: quiet)
        warnIfInsecure()
        if output == "-" {
            try await runStream(urls: urls, configuration: configuration, logger: logger)
            return
        }
        let share = try shard.map { (shard) throws -> ObjectShare in
            guard let share = ObjectShare(index: shard.index, count: shard.count) else {
                throw CommandFailure(status: .usage, message: "--shard \(shard.index)/\(shard.count) is not a share")
            }
            return share
        }
        let expected = try checksum.map { text throws(DownloadError) in try Checksum(parsing: text) }
        var request = DownloadRequest(urls: urls, headers: try transfer.parsedHeaders(), expectedChecksum: expected)
        request.urlProvider = urlCommand.map { URLCommand(command: $0).provider }
        let fixedPath = targetPath(for: url)
        let folder = directory?.trimmedTrailingSlash ?? "."
        let renderer = ProgressRenderer(quiet: quiet || json && isatty(STDERR_FILENO) != 1)
        let downloader = Downloader(configuration: configuration, logger: logger)

        let task = Task { () async -> (path: String, outcome: Result<Outcome, DownloadError>) in
            // Until the server names the file, failures are reported against the URL's name.
            var path = fixedPath ?? folder + "/" + Downloader.suggestedFileName(for: request.url)
            do throws(DownloadError) {
                if fixedPath == nil {
                    // -J: one request for the server's name, a single path component, inside -d.
                    path = folder + "/" + (try await downloader.suggestedFileName(for: request))
                }
                guard let share else {
                    return (
                        path, .success(.whole(try await downloader.download(request, to: path) { renderer.update($0) }))
                    )
                }
                let result = try await downloader.download(request, share: share, to: path) { renderer.update($0) }
                return (path, .success(.share(result)))
            } catch {
                return (path, .failure(error))
            }
        }
        let interrupts = InterruptWatcher { task.cancel() }
        let (path, outcome) = await task.value
        interrupts.stop()
        await downloader.shutdown()
        renderer.finish()

        switch outcome {
        case .success(.whole(let result)):
            if json {
                printJSON(Summary(result, url: url))
            } else if !quiet {
                printSummary(result)
            }
        case .success(.share(let result)):
            if json {
                printJSON(Summary(result, url: url))
            } else if !quiet {
                writeStderr(Messages.shareDone(result) + "\n")
            }
        case .failure(let error):
            if json { printJSON(Summary(error: error, path: path)) }
            throw CommandFailure(status: ExitStatus(error), message: error.commandLineMessage)
        }
    }

    /// What one URL's download did: the whole object, or with `--shard` this task's share of it.
    private enum Outcome: Sendable {
        case whole(DownloadResult)
        case share(ShareResult)
    }

    private func printSummary(_ result: DownloadResult) {
        if result.alreadyComplete {
            writeStderr(Messages.alreadyComplete(path: result.path, bytes: result.bytes) + "\n")
            return
        }
        let seconds = Format.seconds(result.duration)
        var line = Messages.saved(
            path: result.path, bytes: result.bytes, seconds: seconds, bytesPerSecond: result.bytesPerSecond,
            connections: result.connectionsUsed, resumed: result.bytesResumed, retries: result.retries)
        for digest in result.verified {
            line += ", verified \(digest.checksum.algorithm.rawValue) (\(Format.source(of: digest)))"
        }
        if !result.sources.isEmpty {
            let used = result.sources.filter { $0.droppedBecause == nil && $0.bytes > 0 }
            line += Messages.sourcesUsed(used.count, of: result.sources.count)
            for source in result.sources {
                let state = source.droppedBecause.map { "not used: \($0)" } ?? "used"
                let address = source.address.map { " at \($0)" } ?? ""
                let rate = seconds > 0 ? "  \(Format.rate(Double(source.bytes) / seconds))" : ""
                line += "\n  \(source.url)\(address)  \(Format.bytes(source.bytes))\(rate)  \(state)"
            }
        }
        writeStderr(line + "\n")
    }
}
