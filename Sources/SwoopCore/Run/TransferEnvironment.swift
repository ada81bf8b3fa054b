/// What the ``TransferMachine`` reads of the world it runs in, synchronously: the state it shares
/// with other downloads and cannot own. Its sources' health belongs to the downloader's host table
/// (every download of a host hears the same failures), its permits to the downloader's connection
/// budget, its connections' measurements to the connections. The machine only reads here; what it
/// does to the world (requests and the permits and host counts they take, cancels, sources
/// dropped, checkpoints, the end) comes out as ``TransferAction``s, and what a request's end tells
/// its host goes in with the end (``TransferMachine/hostReport(slot:_:)``, ``RequestEnd/verdict``).
/// Within one event the machine counts what its own actions will take (``TransferMachine/Pending``).
///
/// Sources are named by index (0 is the first URL's server; mirrors follow as they join), slots
/// by index (0 is the probe's connection). In the library `TransferRun` answers; in the tests a
/// model with virtual time does.
package protocol TransferEnvironment: AnyObject {
    /// What the source policy sees of every source at `now`, by index.
    func sourceSamples(at now: Moment) -> [SourceSample]
    /// The earliest moment a resting or down source may be asked again.
    var sourcesNextWake: Moment? { get }
    /// Why the mirrors given are of no use now, when some were given.
    var whyOthersCannotHelp: String? { get }
    /// The downloader's permits free for a request to `source` now.
    func permits(for source: Int) -> PermitCount
    /// What each opened slot measured (rates, first-byte times), by slot; slots not yet opened are
    /// missing. The machine adds the segments itself.
    func connectionSamples(at now: Moment) -> [ConnectionSample]
    /// Whether the downloader's byte-rate cap holds bytes back at `now`: the connections' rates are
    /// then their shares of the cap, not what their paths can do.
    func isRateCapped(at now: Moment) -> Bool
}
