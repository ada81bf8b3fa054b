/// Holding a count, and re-probing it: once settled, the controller keeps the count while its rate
/// holds, and tries a step up again on a cadence (``reprobeAfter``, doubling after each probe that
/// did not pay, and at least every ``reprobeShare``th of what is left), or at once when the rate
/// falls well below the one the count was chosen at (``fallen``). A span in which the machine held
/// the bytes back (``localLimit``) judges nothing.
extension ConnectionController {
    /// Holds at `best`, re-probing after ``reprobeAfter`` (doubling after each that did not pay),
    /// or sooner as what is left asks (``reprobeShare``).
    mutating func settle(on best: Step, at now: Moment) -> Int? {
        lastReason += "; holding \(best.count)"
        var wait = reprobeBackoff ?? Self.reprobeAfter
        if best.rate > 0, remaining < .max {
            let left = Double(remaining) / best.rate
            wait = min(wait, max(Self.reprobeFloor, .seconds(left / Self.reprobeShare)))
        }
        reprobeBackoff = nil
        phase = .holding(best: best, reprobeAt: now + wait, backoff: wait)
        return best.count == target ? nil : move(to: best.count, at: now)
    }

    /// While holding: once the re-probe is due, or as soon as the rate has fallen well below the
    /// one the count was chosen at (``fallen``), measures the current count afresh and tries a step
    /// up from it; a timed step that does not pay comes back here with the wait doubled.
    mutating func hold(
        best: Step, reprobeAt: Moment, backoff: Duration, _ observation: Observation
    ) -> Int? {
        let now = observation.now
        let span = Self.holdSpan(timing(roundTrip: observation.roundTrip).window)
        // Keep a short history only: a few spans.
        if let first = samples.first, now - first.time > span * 4 { samples.removeFirst(samples.count / 2) }
        guard target < maximum, let first = samples.last(where: { now - $0.time >= span }), let last = samples.last,
            last.time > first.time
        else { return nil }
        let rate = Double(last.bytes - first.bytes) / (last.time - first.time).seconds
        if (last.localWait - first.localWait).seconds > Self.localLimit * (last.time - first.time).seconds {
            // The machine holds the bytes back (its disk): neither more nor fewer connections help.
            return nil
        }
        let fell = rate < Self.fallen * best.rate
        guard now >= reprobeAt || fell else { return nil }
        samples.removeAll(keepingCapacity: true)
        guard rate > 0, Double(observation.remainingBytes) > rate * 4 * span.seconds else { return nil }
        let here = Step(count: target, rate: rate)
        lastReason =
            fell ? "re-probing from \(here): \(Self.format(rate / best.rate)) of \(best)" : "re-probing from \(here)"
        // A re-probe that does not pay settles back here; a timed one waits twice as long for the
        // next (a fall is news, not a failed guess: its wait stays). From one or two it tries 4: a
        // disk's or a server's limit may show only seconds in (once write-back binds), and a step
        // of one connection measures little beyond noise.
        phase = .trying(from: here, best: here)
        reprobeBackoff = fell && now < reprobeAt ? backoff : backoff * 2
        return move(to: max(target * 2, 4), at: now)
    }

    /// How long a held count's rate is measured over: a second at least, since 100 ms of a
    /// transfer bound by a disk's write-back or a server's reads is noise.
    static func holdSpan(_ window: Duration) -> Duration { max(window, .seconds(1)) }
}
