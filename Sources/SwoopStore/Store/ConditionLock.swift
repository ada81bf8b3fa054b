#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A mutex with a condition variable (pthreads), for the two threads of ``WriteBehind``, where one
/// side must wait for the other (room in the ring, bytes written).
///
/// By hand: `Synchronization.Mutex` has no condition, and the store does not import Foundation
/// for `NSCondition`. Never used on Swift's cooperative pool: its waits block a thread.
final class ConditionLock: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>

    init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
        condition = .allocate(capacity: 1)
        condition.initialize(to: pthread_cond_t())
        pthread_cond_init(condition, nil)
    }

    deinit {
        pthread_cond_destroy(condition)
        condition.deallocate()
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` holding the lock.
    @inline(__always)
    func withLock<Value>(_ body: () throws -> Value) rethrows -> Value {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }

    /// Inside ``withLock(_:)`` only: releases the lock until ``broadcast()``, then takes it again.
    /// Callers check their condition in a loop (wake-ups may be spurious).
    @inline(__always)
    func wait() {
        pthread_cond_wait(condition, mutex)
    }

    /// Wakes every waiter (called holding the lock).
    @inline(__always)
    func broadcast() {
        pthread_cond_broadcast(condition)
    }
}
