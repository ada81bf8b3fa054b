import Crypto

/// How the files of one list are split over `count` workers that never talk to each other: each
/// worker reads the same list, computes the same assignment and fetches only its own files.
///
/// Two rules, both part of Swoop's stable behaviour (workers running different releases must
/// agree, so neither may change):
///
/// - **By key** (the default): a file goes to worker `hash(key) mod count`, where `hash` is the
///   first 8 bytes of the SHA-256 of the key's UTF-8, read big-endian. Every bit of it depends on
///   every byte of the key, so keys that differ in one character spread evenly. It balances the
///   number of files, not bytes.
/// - **By size**, when every file's size is known in advance: the largest file first, each to the
///   worker with the fewest bytes so far (the lowest index among equals); files of equal size in
///   the order of their hash. A few large files then land on different workers instead of
///   wherever their hashes fall.
///
/// Files with the same key always go to the same worker (under either rule), so a key listed
/// twice is never fetched by two workers at once.
///
/// ```swift
/// var sizes = ShardAssignment.Sizes()
/// for file in list { sizes.add(key: file.url, size: file.size) }
/// let assignment = ShardAssignment(count: 4, sizes: sizes)
/// let mine = list.filter { assignment.worker(forKey: $0.url) == myIndex }
/// ```
public struct ShardAssignment: Sendable {
    /// The number of workers.
    public let count: Int
    /// Key hash → worker, when balanced by size.
    private let workers: [UInt64: Int]?
    /// Per worker: files (keys counted as often as they were added) and bytes, when balanced by size.
    private let loads: [(files: Int, bytes: Int64)]

    /// The split by key hash alone.
    public init(count: Int) {
        precondition(count >= 1, "a list is split over at least one worker")
        self.count = count
        workers = nil
        loads = []
    }

    /// The split by size of every file in `sizes`. A key that was never added falls back to the
    /// split by hash.
    public init(count: Int, sizes: Sizes) {
        precondition(count >= 1, "a list is split over at least one worker")
        self.count = count
        let order = sizes.files.sorted {
            $0.value.bytes != $1.value.bytes ? $0.value.bytes > $1.value.bytes : $0.key < $1.key
        }
        var loads = Array(repeating: (files: 0, bytes: Int64(0)), count: count)
        var workers: [UInt64: Int] = [:]
        workers.reserveCapacity(order.count)
        for (hash, file) in order {
            var lightest = 0
            for worker in 1..<count where loads[worker].bytes < loads[lightest].bytes { lightest = worker }
            workers[hash] = lightest
            loads[lightest].bytes += file.bytes
            loads[lightest].files += file.entries
        }
        self.workers = workers
        self.loads = loads
    }

    /// Whether files are assigned by size (else by key hash).
    public var isBalancedBySize: Bool { workers != nil }

    /// The worker (0 ..< ``count``) that fetches the file with this key.
    public func worker(forKey key: String) -> Int {
        let hash = Self.hash(key)
        if let workers, let worker = workers[hash] { return worker }
        return Int(hash % UInt64(count))
    }

    /// With a split by size: the files and bytes worker `index` was given.
    public func load(ofWorker index: Int) -> (files: Int, bytes: Int64)? {
        isBalancedBySize && loads.indices.contains(index) ? loads[index] : nil
    }

    /// The first 8 bytes of the SHA-256 of `key`'s UTF-8, read as a big-endian integer.
    public static func hash(_ key: String) -> UInt64 {
        SHA256.hash(data: Array(key.utf8)).withUnsafeBytes { digest in
            digest.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        }
    }

    /// The sizes of a list's files, gathered in one pass over the list before it is split: about
    /// 40 bytes per distinct key, never the keys themselves.
    public struct Sizes: Sendable {
        fileprivate var files: [UInt64: (bytes: Int64, entries: Int)] = [:]

        public init() {}

        /// Adds a file. A key added again stays one file for the split, of the largest size given.
        public mutating func add(key: String, size: Int64) {
            let hash = ShardAssignment.hash(key)
            let known = files[hash] ?? (0, 0)
            files[hash] = (max(known.bytes, size), known.entries + 1)
        }

        /// The number of distinct keys.
        public var count: Int { files.count }
    }
}
