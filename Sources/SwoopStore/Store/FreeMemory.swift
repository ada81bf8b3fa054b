import CSwoopSystem

/// The C library's freed memory, given back to the system.
package enum FreeMemory {
    /// Hands the free pages inside the C library's heaps back to the system (glibc's `malloc_trim`;
    /// nothing elsewhere): glibc keeps memory freed by a long run's many short-lived objects
    /// mapped, spread over one heap per thread that allocates, and its resident size grows.
    /// Blocks for the walk over the heaps: call it off the transfer thread and the cooperative pool.
    package static func release() {
        _ = swoop_release_free_memory()
    }
}
