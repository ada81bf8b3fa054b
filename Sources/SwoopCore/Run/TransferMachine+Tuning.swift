/// The machine's part in tuning the connections, on the shell's housekeeping tick: which
/// connections are too slow to keep, and what the adaptive ``ConnectionController`` observes. The
/// shell measures (bytes, connections in flight, the time it held bytes back) and applies a new
/// count; the rules are here.
extension TransferMachine {
    /// Connections far slower than the others (``TransferPolicy/connectionsToReplace(_:minimumStealSize:)``),
    /// each to be closed and reconnected: none while the downloader's rate cap holds bytes back
    /// (the rates are then the cap's shares, not the paths'), or when the settings say not to.
    package func replaceSlow(at now: Moment) -> [TransferAction] {
        guard settings.replacesSlowConnections, !stopped, !environment.isRateCapped(at: now) else { return [] }
        return settings.policy.connectionsToReplace(connectionSamples(at: now), minimumStealSize: plan.minimumStealSize)
            .map { .replace(slot: $0) }
    }

    /// Feeds `controller` at `now`: `totalBytes` body bytes received so far, `busy` slots with a
    /// request out, `localWait` the time the client held bytes back for its own side. Returns the
    /// count it moves to, if it moves. While the rate cap is the limit, or a source is down or
    /// ramping back up, more connections cannot add throughput and the rate says nothing about
    /// the path: the count is kept, and measured afresh once that ends.
    package func adapt(
        _ controller: inout ConnectionController, totalBytes: Int64, busy: Int, localWait: Duration,
        at now: Moment
    ) -> Int? {
        guard !controller.isSettled else { return nil }
        if environment.isRateCapped(at: now) || environment.sourceSamples(at: now).contains(where: { !$0.isUp }) {
            controller.restartMeasurement(at: now)
            return nil
        }
        let samples = connectionSamples(at: now)
        let transferring = samples.count(where: { $0.isTransferring && $0.secondsSinceFirstByte != nil })
        // The first connection alone measured: its probe request, running while the others
        // start, shows what one connection gets.
        let alone = samples.dropFirst().allSatisfy { $0.rate == 0 }
        return controller.observe(
            ConnectionController.Observation(
                totalBytes: totalBytes, remainingBytes: plan.remainingBytes, now: now,
                roundTrip: TransferPolicy.roundTrip(samples), transferring: transferring,
                waiting: max(0, busy - transferring), firstConnectionRate: alone ? samples.first?.rate ?? 0 : 0,
                localWait: localWait))
    }
}
