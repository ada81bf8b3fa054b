import ArgumentParser
import Swoop

/// `--shard K/N`: this machine's share K of a list split over N machines.
struct Shard: ExpressibleByArgument, Equatable {
    var index: Int
    var count: Int

    init?(argument: String) {
        let parts = argument.split(separator: "/")
        guard parts.count == 2, let index = Int(parts[0].trimmed), let count = Int(parts[1].trimmed),
            count >= 1, index >= 0, index < count
        else { return nil }
        self.index = index
        self.count = count
    }
}

/// Which entries of a list this shard fetches, decided in the checking pass so that every machine
/// decides the same from the same list: by size when every entry has `size=`, else by a hash of
/// the entry's (first) URL. See ``ShardAssignment`` for both rules.
struct ShardSelection: Sendable {
    let shard: Shard
    let assignment: ShardAssignment
    /// Entries of the list in this shard.
    let included: Int
    /// Entries with `size=`, and all entries.
    let sized: Int
    let entries: Int

    func contains(_ entry: Manifest.Entry) -> Bool {
        contains(key: entry.url)
    }

    func contains(key: String) -> Bool {
        assignment.worker(forKey: key) == shard.index
    }

    /// The line that describes this shard, for the start of a run.
    var description: String {
        var text = Messages.shardShare(index: shard.index, count: shard.count, included: included, entries: entries)
        if let load = assignment.load(ofWorker: shard.index) {
            text += ", \(Format.bytes(load.bytes)), balanced by size="
        }
        return text
    }

    /// Why the split is by hash although some entries give a size, if that is the case.
    var unbalancedWarning: String? {
        guard sized > 0, sized < entries else { return nil }
        return
            "size= is given for \(sized) of \(Wording.count(entries, "entry", plural: "entries")), so --shard splits "
            + "the list by URL hash; give every "
            + "entry a size= to balance the shards by bytes"
    }

    /// Gathers what the split needs while the list is checked: the sizes (until an entry without
    /// one shows they cannot all be known) and the count of entries whose hash falls here.
    struct Builder {
        let shard: Shard
        private var sizes: ShardAssignment.Sizes? = ShardAssignment.Sizes()
        private let byHash: ShardAssignment
        private var includedByHash = 0
        private var sized = 0
        private var entries = 0

        init(shard: Shard) {
            self.shard = shard
            byHash = ShardAssignment(count: shard.count)
        }

        mutating func add(_ entry: Manifest.Entry) {
            add(key: entry.url, size: entry.size)
        }

        /// Adds a file by its key (a list entry's first URL, a listed object's `s3://` URL).
        mutating func add(key: String, size: Int64?) {
            entries += 1
            if byHash.worker(forKey: key) == shard.index { includedByHash += 1 }
            guard let size else {
                sizes = nil
                return
            }
            sized += 1
            sizes?.add(key: key, size: size)
        }

        func finish() -> ShardSelection {
            guard let sizes, sized == entries, entries > 0 else {
                return ShardSelection(
                    shard: shard, assignment: byHash, included: includedByHash, sized: sized, entries: entries)
            }
            let assignment = ShardAssignment(count: shard.count, sizes: sizes)
            let included = assignment.load(ofWorker: shard.index)?.files ?? 0
            return ShardSelection(
                shard: shard, assignment: assignment, included: included, sized: sized, entries: entries)
        }
    }
}
