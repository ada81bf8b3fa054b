import CSwoopSystem
import Dispatch

/// The C library's freed memory, given back to the system while a list runs: glibc keeps memory
/// freed by a long list's many short-lived objects mapped, spread over one heap per thread that
/// allocates, and the process's resident size grows with the list. The command's choice for its
/// own process: the library leaves its host's allocator alone.
struct FreeMemory {
    /// Files a list ends between two releases: a list of small files ends thousands a second, and a
    /// release costs about 50 `madvise` calls (a quarter of a millisecond). 100,000 files of 1 KiB,
    /// 64 at a time, peaked 0.7-0.9 MB lower so.
    static let filesBetweenReleases = 1_000

    /// Files the list has ended so far.
    private var ended = 0

    /// A file ended: every ``filesBetweenReleases``th gives the free pages inside the C library's
    /// heaps back (glibc's `malloc_trim`; nothing elsewhere), on a queue of its own, since the walk
    /// over the heaps blocks.
    mutating func fileEnded() {
        ended += 1
        guard ended % Self.filesBetweenReleases == 0 else { return }
        DispatchQueue.global(qos: .utility).async { _ = swoop_release_free_memory() }
    }
}
