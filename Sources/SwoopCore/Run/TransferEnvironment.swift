/// What the ``TransferMachine`` asks of the world it runs in, synchronously, and the state it
/// shares with other downloads. Its sources' health belongs to the downloader's host table (every
/// download of a host hears the same failures), and its permits to the downloader's connection
/// budget, so the machine cannot own either: it asks here, and decides. Everything it does to the
/// world (requests, cancels, checkpoints, the end) comes out as ``TransferAction``s.
///
/// Sources are named by index (0 is the first URL's server; mirrors follow as they join), slots
/// by index (0 is the probe's connection). In the library `TransferRun` answers; in the tests a
/// model with virtual time does.
package protocol TransferEnvironment: AnyObject {
    /// What the source policy sees of every source at `now`, by index.
    func sourceSamples(at now: ContinuousClock.Instant) -> [SourceSample]
    /// A request on `slot` goes to `source` at `now`: it counts as in flight there (and may be its
    /// host's trial while the host is down).
    func source(_ source: Int, willSendFrom slot: Int, at now: ContinuousClock.Instant)
    /// `slot`'s request to `source` ended after `bytes` body bytes (a source that delivered is
    /// healthy again).
    func source(_ source: Int, endedFrom slot: Int, bytes: Int64)
    /// `slot`'s request was answered but is of no use (a refusal, an expired URL): if it was its
    /// host's trial, the host is not down for it, and another may try.
    func source(_ source: Int, abandonsTrialOf slot: Int)
    /// `slot`'s request to `source` failed at `now` (`answered`: after its response head): the
    /// source's health hears it and gives its verdict.
    func source(
        _ source: Int, failed error: DownloadError, answered: Bool, retryAfter: Int?, slot: Int,
        at now: ContinuousClock.Instant
    ) -> SourceHealth.Verdict
    /// `source` is no longer used, for `reason`.
    func drop(_ source: Int, reason: String)
    /// The earliest moment a resting or down source may be asked again.
    var sourcesNextWake: ContinuousClock.Instant? { get }
    /// Why the mirrors given are of no use now, when some were given.
    var whyOthersCannotHelp: String? { get }

    /// A permit of the downloader's budget for `slot`'s next request to `source`; `false` when
    /// none is free (the budget then wakes the machine with ``TransferMachine/dispatch(at:)``).
    func acquirePermit(slot: Int, for source: Int) -> Bool
    /// Gives back `slot`'s permit: it found nothing to ask for.
    func releasePermit(slot: Int)
    /// What each opened slot measured (rates, first-byte times), by slot; slots not yet opened are
    /// missing. The machine adds the segments itself.
    func connectionSamples(at now: ContinuousClock.Instant) -> [ConnectionSample]
    /// Whether the downloader's byte-rate cap holds bytes back at `now`: the connections' rates are
    /// then their shares of the cap, not what their paths can do.
    func isRateCapped(at now: ContinuousClock.Instant) -> Bool
}
