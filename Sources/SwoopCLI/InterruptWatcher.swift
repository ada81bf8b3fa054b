import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// SIGINT/SIGTERM deliveries so far. The handler only increments it, which is async-signal-safe
/// whichever thread the kernel picks (unlike a dispatch signal source, whose signalfd misses a
/// signal delivered to a thread that does not block it).
private let interruptSignals = Atomic<Int>(0)

/// Turns the first SIGINT or SIGTERM into `onInterrupt` (a graceful pause); a second one exits at once.
final class InterruptWatcher {
    private let watcher: Task<Void, Never>

    init(onInterrupt: @escaping @Sendable () -> Void) {
        for number in [SIGINT, SIGTERM] {
            signal(number) { _ in
                if interruptSignals.add(1, ordering: .relaxed).newValue > 1 {
                    _exit(ExitStatus.interrupted.rawValue)
                }
            }
        }
        watcher = Task {
            while !Task.isCancelled {
                if interruptSignals.load(ordering: .relaxed) > 0 {
                    let message = "interrupted; stopping, keeping what can resume (press Ctrl-C again to quit at once)"
                    writeStderr("\nswoop: \(message)\n")
                    onInterrupt()
                    return
                }
                try? await Task.sleep(for: .milliseconds(25))
            }
        }
    }

    func stop() {
        watcher.cancel()
    }
}
