import Logging
import Swoop

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension Get {
    /// `swoop get URL --shard K/N`: this task's share of one object (``Downloader/download(_:share:to:progress:)``);
    /// the task that finds every share complete saves the file.
    func runShare(url: String, shard: Shard, configuration: Downloader.Configuration, logger: Logger) async throws {
        guard let share = ObjectShare(index: shard.index, count: shard.count) else {
            throw CommandFailure(status: .usage, message: "--shard \(shard.index)/\(shard.count) is not a share")
        }
        let expected = try checksum.map { text throws(DownloadError) in try Checksum(parsing: text) }
        var request = DownloadRequest(urls: urls, headers: try transfer.parsedHeaders(), expectedChecksum: expected)
        request.urlProvider = urlCommand.map { URLCommand(command: $0).provider }
        let folder = directory?.trimmedTrailingSlash ?? "."
        let renderer = ProgressRenderer(quiet: quiet || json && isatty(STDERR_FILENO) != 1)
        let downloader = Downloader(configuration: configuration, logger: logger)
        let fixedPath = targetPath(for: url)
        let task = Task { () async -> (path: String, outcome: Result<ShareResult, DownloadError>) in
            var path = fixedPath ?? folder + "/" + Downloader.suggestedFileName(for: request.url)
            do throws(DownloadError) {
                if fixedPath == nil { path = folder + "/" + (try await downloader.suggestedFileName(for: request)) }
                let result = try await downloader.download(request, share: share, to: path) { renderer.update($0) }
                return (path, .success(result))
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
        case .success(let result):
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
}
