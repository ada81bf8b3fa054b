import SwoopCore

/// Records a ranged download's progress in its segment map so a later run can resume: every
/// ``interval`` while bytes arrive, and on demand (at the start, and when a download stops).
///
/// The sink makes the written chunks durable before the map says so, so a crash at any instant
/// leaves a map that describes only bytes on disk. Transfer thread only.
package final class Checkpointer {
    private let sink: BodySink
    private let interval: Duration
    /// The map without its chunks: what the object is and where it came from.
    private let template: SegmentMap
    /// The chunks the last completed checkpoint recorded.
    private var recorded: ChunkSet?
    private var inFlight = false
    private var last: Moment
    /// Called when a checkpoint fails (the download cannot keep its promise of resumability).
    package var onFailure: ((DownloadError) -> Void)?
    /// The CRCs checked so far, recorded with the chunks (only stretches already complete).
    package var crcRuns: (() -> CRCRuns?)?

    /// `since`: when the download started. The interval counts from there, not from when the
    /// transfer began a few milliseconds later: progress ticks come every interval too, and the
    /// first would otherwise fall just short and put the first checkpoint a whole tick later
    /// (a run killed in between kept nothing).
    package init(sink: BodySink, interval: Duration, template: SegmentMap, since: Moment) {
        self.sink = sink
        self.interval = interval
        self.template = template
        self.recorded = template.chunks
        self.last = since
    }

    /// Checkpoints `chunks` if ``interval`` has passed since the last one and they changed.
    package func checkpointIfDue(_ chunks: ChunkSet) {
        guard Moment.now - last >= interval, !inFlight, chunks != recorded else { return }
        checkpoint(chunks, then: nil)
    }

    /// Checkpoints `chunks` now, then runs `then` (on the transfer thread) whether or not it worked.
    package func checkpoint(_ chunks: ChunkSet, then: (() -> Void)?) {
        checkpoint(chunks) { _ in then?() }
    }

    /// Checkpoints `chunks` now, then tells `then` (on the transfer thread) how it went.
    package func checkpoint(_ chunks: ChunkSet, reporting then: @escaping (DownloadError?) -> Void) {
        inFlight = true
        last = .now
        var map = template
        map.chunks = chunks
        map.crcRuns = crcRuns?()
        sink.checkpoint(map) { [self] failure in
            inFlight = false
            if let failure {
                onFailure?(failure)
            } else {
                recorded = chunks
            }
            then(failure)
        }
    }
}
