import SwoopStore

/// Which items of a bulk download share a download, kept small: 12 bytes per distinct URL and
/// destination that succeeded; the items that repeat a running download wait beside it (a
/// handful at a time).
struct BulkLedger {
    /// 128 bits: two of Swift's seeded hashes of the text's bytes with different prefixes.
    /// The lowest bit is always clear: a finished download's entry uses it to say whether it
    /// was already complete. The set of finished downloads keeps 96 of the bits (``KeySet``):
    /// 95 bits of hash, where two of ten million keys collide with a chance near 10^-15.
    struct Key: Hashable, Sendable {
        let first: Int
        let second: Int

        /// Of the text's bytes: `Hasher.combine(String)` hashes canonically equivalent texts
        /// alike (NFC and NFD `café`), which made two keys of a bucket one download.
        init(_ text: String) {
            var text = text
            self.init { add in text.withUTF8 { add(UnsafeRawBufferPointer($0)) } }
        }

        /// The key of `url`, a newline and `target`, as ``init(_:)`` makes it of the three joined
        /// (the hashers take bytes as a stream), without a string of them made for each item of a
        /// list.
        init(_ url: Substring, _ target: String) {
            var url = url
            var target = target
            self.init { add in
                url.withUTF8 { add(UnsafeRawBufferPointer($0)) }
                withUnsafeBytes(of: UInt8(ascii: "\n")) { add($0) }
                target.withUTF8 { add(UnsafeRawBufferPointer($0)) }
            }
        }

        /// Both hashes of the bytes `feed` hands to its argument, in order.
        private init(feed: ((UnsafeRawBufferPointer) -> Void) -> Void) {
            var one = Hasher()
            one.combine(0x5357_4F4F)
            var two = Hasher()
            two.combine(0x4C45_4447)
            feed { bytes in
                one.combine(bytes: bytes)
                two.combine(bytes: bytes)
            }
            first = one.finalize()
            second = two.finalize() & ~1
        }

        init(first: Int, second: Int) {
            self.first = first
            self.second = second
        }

        /// This key, marked as a download that found its file already complete.
        var markedAlreadyComplete: Key { Key(first: first, second: second | 1) }
    }

    /// How a finished download ended, so a later repeat of it shares the outcome.
    enum Outcome {
        case succeeded(alreadyComplete: Bool)
        /// Its failure is `failures[index]` of the summary.
        case failed(failureIndex: Int)

        func result(for item: BulkItem, failures: [BulkSummary.Failure]) -> Result<DownloadResult, DownloadError> {
            switch self {
            case .failed(let index):
                return .failure(failures[index].error)
            case .succeeded(let alreadyComplete):
                // The repeat received nothing itself; it shares the leader's file.
                let size = (try? fileInfo(item.destination)).map { Int64($0.st_size) } ?? 0
                return .success(
                    DownloadResult(
                        path: item.destination, bytes: size, bytesReceived: 0, bytesResumed: alreadyComplete ? size : 0,
                        duration: .zero, connectionsUsed: 0, requests: 0, retries: 0, etag: nil,
                        alreadyComplete: alreadyComplete))
            }
        }
    }

    /// What identifies an item: the URL as the downloader keys it (no fragment, no surrounding
    /// spaces: what parsing it keeps) with the absolute destination.
    struct Keys: Sendable {
        let download: Key
    }

    private var running: [Key: (leader: Int, followers: [(Int, BulkItem)])] = [:]
    /// Downloads that succeeded (12 bytes each, in a table a quarter larger), and the few that failed.
    private var succeeded: KeySet
    private var failed: [Key: Int] = [:]

    /// The table sized for `expected` items up front: growing it copies it, and a list of 100,000
    /// would briefly hold two.
    init(expected: Int) {
        succeeded = KeySet(minimumCapacity: expected)
    }

    enum Admission {
        /// Download it.
        case leads
        /// An earlier item with the same URL and destination is downloading: it waits for that.
        case follows
        /// An earlier item with the same URL and destination has ended: share its outcome.
        case repeats(Outcome)
    }

    /// Admits `item` (the `index`th): its keys, and whether it leads a download or shares one.
    mutating func admit(_ item: BulkItem, index: Int) -> (Keys, Admission) {
        var url = Substring(item.request.url.trimmingWhitespace)
        // Scanned in place first: a search of the substring's `UTF8View` cost 1k instructions a file.
        if ASCIIBytes.contains(url, where: { $0 == UInt8(ascii: "#") }),
            let hash = url.utf8.firstIndex(of: UInt8(ascii: "#"))
        {
            url = url[..<hash]
        }
        let keys = Keys(download: Key(url, FileName.absolute(item.destination)))
        if succeeded.contains(keys.download) { return (keys, .repeats(.succeeded(alreadyComplete: false))) }
        if succeeded.contains(keys.download.markedAlreadyComplete) {
            return (keys, .repeats(.succeeded(alreadyComplete: true)))
        }
        if let failure = failed[keys.download] { return (keys, .repeats(.failed(failureIndex: failure))) }
        if running[keys.download] != nil {
            running[keys.download]!.followers.append((index, item))
            return (keys, .follows)
        }
        running[keys.download] = (index, [])
        return (keys, .leads)
    }

    /// Records how the download led by `index` ended; returns the items that waited for it.
    mutating func finish(
        _ keys: Keys, index: Int, outcome: Result<DownloadResult, DownloadError>, failureIndex: Int
    ) -> [(Int, BulkItem)] {
        guard let entry = running.removeValue(forKey: keys.download) else { return [] }
        switch outcome {
        case .success(let result):
            succeeded.insert(result.alreadyComplete ? keys.download.markedAlreadyComplete : keys.download)
        case .failure: failed[keys.download] = failureIndex
        }
        return entry.followers
    }

}

extension BulkLedger {
    /// A set of keys in one flat table, for the downloads that succeeded: at most 4/5 full, and
    /// sized to that and no more. A slot keeps 12 of a key's 16 bytes, its first word and the low
    /// half of its second (the already-complete mark among them): a list of 100,000 files held
    /// 2.0 MB of keys at 16 bytes, 1.5 MB now, of a peak RSS near 32 MiB.
    ///
    /// Written here rather than using `Set<Key>` for memory alone: `Set` keeps its buckets a power
    /// of two and at most 3/4 full, so it holds up to 2.7 times the keys' size, and more while it
    /// grows; this table holds 1.25 times. Open addressing with linear probing; a key's first word is a
    /// hash already, so it picks the slot (scaled to the table's size, which need not be a power
    /// of two); a bitmap says which slots hold a key, since any 96 bits can be one.
    struct KeySet {
        /// Each slot's first word, and the low half of its second, in two arrays: one array of
        /// pairs would pad each to 16 bytes.
        private var firsts: [Int]
        private var seconds: [UInt32]
        private var occupied: [UInt64]
        private(set) var count = 0

        /// A set that holds `minimumCapacity` keys without growing.
        init(minimumCapacity: Int) {
            self.init(slotCount: Self.slotCount(for: max(0, minimumCapacity)))
        }

        private init(slotCount: Int) {
            firsts = Array(repeating: 0, count: slotCount)
            seconds = Array(repeating: 0, count: slotCount)
            occupied = Array(repeating: 0, count: (slotCount + 63) / 64)
        }

        /// Slots for `keys` keys at most 4/5 full.
        private static func slotCount(for keys: Int) -> Int {
            max(16, keys + keys / 4 + 1)
        }

        /// The keys it holds without growing.
        var capacity: Int { firsts.count * 4 / 5 }

        func contains(_ key: Key) -> Bool {
            probe(for: key).found
        }

        /// Adds `key`; returns whether it was new.
        @discardableResult
        mutating func insert(_ key: Key) -> Bool {
            let (slot, found) = probe(for: key)
            if found { return false }
            if count + 1 > capacity {
                grow()
                return insert(key)
            }
            firsts[slot] = key.first
            seconds[slot] = UInt32(truncatingIfNeeded: key.second)
            occupied[slot >> 6] |= 1 << UInt64(slot & 63)
            count += 1
            return true
        }

        /// The slot holding `key`, or the free slot where it would go.
        private func probe(for key: Key) -> (slot: Int, found: Bool) {
            // The key's first word, scaled to the table, is where it starts; then the next free slot.
            let count = firsts.count
            var slot = Int(UInt64(bitPattern: Int64(key.first)).multipliedFullWidth(by: UInt64(count)).high)
            let second = UInt32(truncatingIfNeeded: key.second)
            while isOccupied(slot) {
                if firsts[slot] == key.first && seconds[slot] == second { return (slot, true) }
                slot = slot + 1 == count ? 0 : slot + 1
            }
            return (slot, false)
        }

        private func isOccupied(_ slot: Int) -> Bool {
            occupied[slot >> 6] & (1 << UInt64(slot & 63)) != 0
        }

        /// Twice the slots, the keys placed again.
        private mutating func grow() {
            var larger = KeySet(slotCount: firsts.count * 2)
            for slot in firsts.indices where isOccupied(slot) {
                larger.insert(Key(first: firsts[slot], second: Int(seconds[slot])))
            }
            self = larger
        }
    }
}
