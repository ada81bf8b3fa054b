import SwoopStore
import SwoopCurl

/// What a download needs once the probe's head has arrived, before its transfer starts: the
/// store its bytes go to (for ranges, the plan of what is missing and the segment map), and the
/// verifier of the digests it is checked against.
enum TransferSetup {
    /// The probe's 206 arrived and the sink is open: plans the missing bytes of `found`, resuming
    /// `map` if there is one. `url` is the source the map names.
    static func ranged(
        _ found: RemoteObject, firstRange: ByteRange, resuming map: SegmentMap?, url: RemoteURL,
        _ context: SessionContext
    ) throws(DownloadError) -> DownloadStore {
        let configuration = context.configuration
        let size = found.size ?? firstRange.upperBound
        let plan = SegmentScheduler(
            objectSize: size, resuming: map, minimumSegmentSize: configuration.tuning.minimumSegmentSize)
        // An object that arrives whole in this first response needs no segment map: a crash
        // loses at most this one response, and the file is published with others in a group.
        let arrivesWhole = map == nil && firstRange == ByteRange(0, size)
        let template =
            arrivesWhole
            ? nil
            : SegmentMap(
                objectSize: size, chunkSize: plan.layout.chunkSize, etag: found.etag, lastModified: found.lastModified,
                url: url.redacted, chunks: map?.chunks ?? ChunkSet(count: plan.layout.chunkCount))
        // One share of the object: the other shares' bytes are other tasks' (the map counts them done).
        let foreign = context.paths.share?.foreignRanges(of: plan.layout) ?? []
        let store = DownloadStore(
            sink: context.sink, plan: plan, bytesResumed: map.map { $0.completedBytes - foreign.totalBytes } ?? 0,
            checkpoint: template, checkpointInterval: configuration.files.checkpointInterval,
            counters: context.counters, startedAt: context.startedAt, foreign: foreign)
        if let map { context.logger.info("resuming", metadata: ["done": "\(map.completedBytes)", "size": "\(size)"]) }
        if configuration.verifiesPublishedDigests, let digest = found.digests.preferredForResponse {
            store.checksEachResponse = true
            context.logger.info(
                "the server sends a digest of each response (\(digest.header)); checking each before it counts")
        }
        return store
    }

    /// The probe's 200 arrived and the sink is open: the server ignores ranges, so this one
    /// response is the download.
    static func stream(_ context: SessionContext) -> DownloadStore {
        DownloadStore(streamingTo: context.sink, counters: context.counters)
    }

    /// Checks `found` against the expected checksum and the server's digest as it arrives: an
    /// ``ObjectVerifier`` for a file (following `store`, or the bytes `map` already holds), the
    /// sink itself for an in-order sink (a pipe), nothing for a measurement.
    static func verifier(
        for found: RemoteObject, store: DownloadStore?, resuming map: SegmentMap?, _ context: SessionContext
    ) -> ObjectVerifier? {
        let sink = context.sink
        guard sink.keepsPartialState || sink.window != nil else { return nil }
        // A share holds part of the object: the task that finishes it checks the digests.
        guard context.paths.share == nil else { return nil }
        let checks = DigestCheck.checks(
            expected: context.request.expectedChecksum, published: found.digests,
            verifyingPublished: context.configuration.verifiesPublishedDigests, logger: context.logger)
        guard !checks.isEmpty else { return nil }
        guard sink.keepsPartialState else {
            sink.verifyInOrder(checks)
            return nil
        }
        return ObjectVerifier.start(
            checks, for: found, paths: context.paths, store: store, resumed: map, loop: context.loop)
    }
}
