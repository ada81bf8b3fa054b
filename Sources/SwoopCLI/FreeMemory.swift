import CSwoopSystem
import Dispatch
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The C library's freed memory, given back to the system while a list runs: glibc keeps memory
/// freed by a long list's many short-lived objects mapped, spread over one heap per thread that
/// allocates, and the process's resident size grows with the list. The command's choice for its
/// own process: the library leaves its host's allocator alone.
final class FreeMemory: Sendable {
    /// Files a list ends between two releases: a list of small files ends thousands a second, and a
    /// release costs about 50 `madvise` calls (a quarter of a millisecond). 100,000 files of 1 KiB,
    /// 64 at a time, peaked 0.7-0.9 MB lower so.
    static let filesBetweenReleases = 1_000

    /// The heaps the C library keeps, unless the environment says (`MALLOC_ARENA_MAX`, or glibc's
    /// tunables).
    static let heaps: Int32 = 2

    /// Lets the C library keep at most ``heaps`` heaps, shared by the threads that allocate (glibc
    /// makes one for each, up to eight per core, and each keeps its own freed memory: a list's
    /// transfer thread, its task, and the preparation, disk and publication queues each had one).
    /// First thing in the process, before those threads allocate; where the environment chooses,
    /// its choice stands.
    static func limitHeaps() {
        if getenv("MALLOC_ARENA_MAX") != nil { return }
        if let tunables = getenv("GLIBC_TUNABLES"), String(cString: tunables).contains("arena_max") { return }
        _ = swoop_limit_heaps(heaps)
    }

    /// Files the list has ended so far.
    private let ended = Atomic<Int>(0)

    /// A file ended: every ``filesBetweenReleases``th gives the free pages inside the C library's
    /// heaps back (glibc's `malloc_trim`; nothing elsewhere), on a queue of its own, since the walk
    /// over the heaps blocks.
    func fileEnded() {
        guard ended.add(1, ordering: .relaxed).newValue % Self.filesBetweenReleases == 0 else { return }
        DispatchQueue.global(qos: .utility).async { _ = swoop_release_free_memory() }
    }
}
