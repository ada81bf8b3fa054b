/// A point in time on the continuous clock (`ContinuousClock`'s, which keeps counting while the
/// machine sleeps): what the engine stamps its requests, meters, timers and hosts' health with.
///
/// Written here rather than using `ContinuousClock.Instant`, whose layout the standard library
/// keeps private (it is resilient): every value that held one — `SourceHealth` and its outages,
/// the meters, an exchange's timings, a timer — was copied, compared and destroyed through the
/// runtime's value witnesses, and its `Optional` looked up as generic metadata, a few hundred
/// instructions each time, many times for every file of a list of small files (this type took
/// about 5k instructions a file off such a list, callgrind). This one is two words of plain data:
/// its time since the first moment the process asked for.
///
/// The core decides with the moments it is given and reads no clock itself; the layers around it
/// read ``now``.
package struct Moment: Comparable, Hashable, Sendable, CustomStringConvertible {
    /// The time since ``origin``.
    private var offset: Duration

    private init(offset: Duration) {
        self.offset = offset
    }

    /// The clock's reading when the process first asked for a moment.
    private static let origin = ContinuousClock.now

    /// Now.
    package static var now: Moment {
        Moment(offset: ContinuousClock.now - origin)
    }

    package var description: String {
        "Moment(\(offset) after the first)"
    }

    package static func < (lhs: Moment, rhs: Moment) -> Bool {
        lhs.offset < rhs.offset
    }

    package static func + (lhs: Moment, rhs: Duration) -> Moment {
        Moment(offset: lhs.offset + rhs)
    }

    package static func - (lhs: Moment, rhs: Duration) -> Moment {
        Moment(offset: lhs.offset - rhs)
    }

    package static func - (lhs: Moment, rhs: Moment) -> Duration {
        lhs.offset - rhs.offset
    }

    package static func += (lhs: inout Moment, rhs: Duration) {
        lhs.offset += rhs
    }
}
