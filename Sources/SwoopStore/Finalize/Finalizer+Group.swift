import SwoopCore

/// A group commit in two steps: each file written out (``write(_:)``: bytes held in memory go
/// into a new, unnamed file), then the group made durable together, named, and each directory
/// synced once (``commit(_:)``). The ``PublishQueue`` takes both in one go for most groups, and
/// writes files out ahead, while the group before them commits, once those waiting hold too many
/// bytes: they then wait as descriptors. Nothing appears at a target before its own group's sync.
extension Finalizer {
    /// A file written out and open, not yet durable or named (or its failure). It no longer holds
    /// the bytes it was given.
    struct Written: Sendable {
        fileprivate(set) var item: Item
        fileprivate var file: Opened?
        fileprivate var failure: DownloadError?
    }

    /// The first stage, for each of `items`: the file opened (a part file's pending writes
    /// waited for), written, cut to size and recorded. A failure fails only its file.
    static func write(_ items: [Item]) -> [Written] {
        items.map { item in
            var written = Written(item: item, file: nil, failure: nil)
            do throws(DownloadError) {
                let file = try item.open()
                written.file = file
                try prepare(item, file.descriptor)
            } catch {
                written.failure = error
            }
            // Written out (or failed): the bytes held in memory are not needed any more.
            if case .held = item.body { written.item.body = .held([]) }
            return written
        }
    }

    /// The second stage: the files made durable together (`syncfs` per directory's file system,
    /// or `fsync` each where that fails, so a failure is pinned on its file; a file alone in its
    /// directory is `fsync`ed), each put into place, then every directory touched `fsync`ed once.
    /// Returns each file's failure, in order; one fails only its file.
    static func commit(_ group: [Written]) -> [DownloadError?] {
        var failures = group.map(\.failure)
        var byDirectory: [ByteName: [Int]] = [:]
        for index in group.indices where failures[index] == nil {
            byDirectory[ByteName(group[index].item.paths.directory), default: []].append(index)
        }
        for indices in byDirectory.values {
            if indices.count > 1, (try? group[indices[0]].file!.descriptor.syncFileSystem()) != nil { continue }
            for index in indices {
                do { try group[index].file!.descriptor.sync() } catch {
                    failures[index] = .localIO(
                        "cannot flush", path: group[index].item.paths.part, errno: error.rawValue)
                }
            }
        }
        var directories: [ByteName: [Int]] = [:]
        for (index, written) in group.enumerated() {
            guard let file = written.file else { continue }
            let item = written.item
            guard failures[index] == nil else {
                // A file made here from bytes held in memory is of no use to anyone.
                if case .held = item.body { file.discard(item.paths) } else { try? file.descriptor.close() }
                continue
            }
            do throws(DownloadError) {
                try file.publish(item)
                directories[ByteName(item.paths.directory), default: []].append(index)
            } catch {
                failures[index] = error
            }
        }
        for (directory, indices) in directories {
            do { try syncDirectory(containing: directory.description + "/.") } catch {
                for index in indices {
                    failures[index] = .localIO(
                        "cannot flush the directory of", path: group[index].item.paths.target, errno: error.rawValue)
                }
            }
        }
        return failures
    }
}
