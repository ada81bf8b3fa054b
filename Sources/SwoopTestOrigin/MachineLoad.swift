#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// How much slower than quiet this machine runs now, for the tests' wall-clock bounds.
///
/// A bound a test puts on wall time is written for a quiet machine (at least three times what
/// the work takes there). On a shared 2-core machine the same work can take ten times as long
/// (a load of 15 to 50 was seen beside the suite), and on such a machine no fixed bound is both
/// tight enough to catch a hang and loose enough not to fail: the bound is stretched by the run
/// queue per core instead — the 1-minute load average over the cores, at least 1, the highest
/// seen while the test waited.
public enum MachineLoad {
    /// The 1-minute load average per core now, at least 1 (1 where it cannot be read).
    public static var stretch: Double {
        var averages = [Double](repeating: 0, count: 1)
        let cores = max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
        guard getloadavg(&averages, 1) == 1 else { return 1 }
        return max(1, averages[0] / Double(cores))
    }

    /// `quietBound` (a wall-clock bound written for a quiet machine) stretched by the load now.
    public static func bound(_ quietBound: Duration) -> Duration {
        quietBound * stretch
    }

    /// A wait of `quietBound` that stretches with the load while it lasts: `exceeded` says whether
    /// the time since it began is past the bound, stretched by the highest load seen so far.
    public struct Deadline: Sendable {
        public let quietBound: Duration
        public let started: ContinuousClock.Instant
        private var highest: Double

        public init(_ quietBound: Duration) {
            self.quietBound = quietBound
            started = .now
            highest = MachineLoad.stretch
        }

        /// The bound as it stands, after reading the load again.
        public mutating func bound() -> Duration {
            highest = max(highest, MachineLoad.stretch)
            return quietBound * highest
        }

        /// Whether the time since the start is past the (stretched) bound.
        public mutating func exceeded() -> Bool {
            ContinuousClock.now - started >= bound()
        }

        /// Sleeps until the (stretched) bound has passed, reading the load again every second.
        public mutating func sleep() async throws {
            while true {
                let left = started + bound() - ContinuousClock.now
                guard left > .zero else { return }
                try await Task.sleep(for: min(left, .seconds(1)))
            }
        }
    }
}
