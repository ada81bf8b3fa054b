import ArgumentParser
import Swoop
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension Get {
    /// `swoop get -r s3://BUCKET/PREFIX/ -d DIR`: every object under the prefix to
    /// `DIR/<the rest of its key>`, `--jobs` at a time, downloads starting with the listing's
    /// first page. The listing's sizes become each download's expected size; with `--shard` the
    /// listing is read once more first, to balance the shards by bytes.
    func runPrefix(_ prefix: String) async throws {
        var configuration = downloaderConfiguration()
        configuration.progressInterval = .milliseconds(500)
        warnIfInsecure()
        let downloader = Downloader(configuration: configuration, logger: transfer.logger(quiet: quiet))
        let interrupts = InterruptWatcher { Task { await downloader.shutdown() } }
        defer { interrupts.stop() }
        var selection: ShardSelection?
        if let shard {
            var builder = ShardSelection.Builder(shard: shard)
            do {
                for try await object in downloader.objects(under: prefix) {
                    builder.add(key: object.url, size: object.size)
                }
            } catch {
                await downloader.shutdown()
                throw CommandFailure(status: ExitStatus(error), message: error.commandLineMessage)
            }
            selection = builder.finish()
        }
        let folder = (directory ?? ".").trimmedTrailingSlash
        let selected = selection
        let skips = Skips()
        let warns = !quiet && !json
        let items = downloader.objects(under: prefix).compactMap { @Sendable object -> BulkItem? in
            guard selected?.contains(key: object.url) ?? true else { return nil }
            switch object.placement(under: prefix) {
            case .directoryMarker:
                return nil
            case .skipped(let reason):
                skips.add(Skip(url: object.url, key: object.key, reason: reason))
                if warns { printError("warning: skipping \(object.url.escapingControlCharacters()): \(reason)") }
                return nil
            case .file(let relative):
                var request = DownloadRequest(url: object.url)
                request.expectedSize = object.size
                request.expectedETag = object.etag
                return BulkItem(request, to: folder + "/" + relative)
            }
        }
        if !quiet && !json {
            let line = Messages.prefixStarting(
                prefix: prefix, folder: folder, jobs: jobs, share: selection?.description)
            writeStderr(line + "\n")
        }
        let style = ProgressRenderer(quiet: quiet || json && isatty(STDERR_FILENO) != 1).style
        let board = BulkBoard(total: selection?.included, style: style)
        // From here an interrupt stops the run (the listing's watcher shut the downloader down).
        interrupts.stop()
        let summary = await Self.runUntilInterrupted {
            await downloader.downloadAll(
                items, maxConcurrentFiles: jobs, reportsProgress: board.isDrawn, events: Self.show(on: board))
        }
        await downloader.shutdown()
        board.clear()
        guard let summary else {
            throw CommandFailure(status: .interrupted, message: Messages.listInterrupted)
        }
        let skipped = skips.all
        report(summary, rejected: [], skipped: skipped)
        if let first = firstFailure(summary, rejected: []) {
            throw CommandFailure(status: first, message: "")
        }
        if !skipped.isEmpty {
            throw CommandFailure(status: .skipped, message: "")
        }
    }
}

/// A listed object not downloaded, and why (its key cannot be a safe file name here).
struct Skip: Sendable, Encodable {
    var url: String
    var key: String
    var reason: String
}

/// The objects a prefix run skipped, collected while the listing streams by.
final class Skips: Sendable {
    private let entries = Mutex<[Skip]>([])

    func add(_ skip: Skip) {
        entries.withLock { $0.append(skip) }
    }

    /// In listing order.
    var all: [Skip] { entries.withLock { $0 } }
}
