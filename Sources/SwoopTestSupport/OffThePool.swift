import Foundation

/// Runs `body`, which blocks (waits for a child process, polls a port, hashes a large file), on a
/// thread of its own and waits for it without holding one of the two threads of Swift's
/// cooperative pool: a test that blocks there stalls every other test's awaits meanwhile. A
/// CPU-bound test (a simulation over hundreds of schedules) blocks it as surely as a wait does.
public func offThePool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread { continuation.resume(with: Result { try body() }) }
        thread.stackSize = 1 << 20
        thread.start()
    }
}
