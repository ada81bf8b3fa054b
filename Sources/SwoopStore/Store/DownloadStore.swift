import SwoopCore

/// The store of one object being downloaded: the write path from connections to the sink, the
/// record of what is written (the plan's chunks), and checkpoints.
///
/// Connections call ``write(_:for:requestEnd:)`` (or ``writeStream(_:)``) with each piece of a
/// response: the plan says which bytes are new and where they go, the sink takes them, the plan
/// advances. Nothing on the way passes through the session. Transfer thread only.
package final class DownloadStore {
    package let sink: BodySink
    /// What is written and what is left; `nil` for a single stream (a server without ranges).
    package let plan: SegmentScheduler?
    /// Bytes an earlier run had already written.
    package let bytesResumed: Int64
    private let checkpointer: Checkpointer?
    private let counters: DownloadCounters
    /// Where a single stream's next byte goes.
    package private(set) var streamPosition: Int64 = 0
    /// Computes the object's digests from the stretches that become complete.
    package private(set) var verifier: ObjectVerifier?
    /// Complete stretches not yet handed to the verifier, in the order they completed.
    private var completed: [ByteRange] = []
    /// Bytes in `completed`.
    private var pendingVerification: Int64 = 0
    /// The validators of each response's head, by ledger identity.
    private var responseValidators: [AgreementLedger.ResponseID: ObjectIdentity.Validators] = [:]
    /// Complete bytes handed to the verifier without waiting for the tick.
    package static let verificationBatch: Int64 = 8 << 20
    /// Each response's bytes are checked against its own digest (`Content-Digest`) before they
    /// count; hedging and cutting requests short are off then (a cut response cannot be checked).
    package var checksEachResponse = false
    /// The proof that the bytes are one version: which response wrote what, and which agree
    /// (``AgreementLedger``). `nil` when the sink cannot read its bytes back (a measurement, a
    /// pipe): nothing can be compared there, and requests carry no overlap.
    package private(set) var ledger: AgreementLedger?

    /// A store for a ranged download planned by `plan`; checkpoints every `checkpointInterval`
    /// when the sink keeps partial state. `foreign`: the bytes other tasks fetch (the object's
    /// other shares), which the plan counts as done and the ledger leaves alone.
    package init(
        sink: BodySink, plan: SegmentScheduler, bytesResumed: Int64, checkpoint template: SegmentMap?,
        checkpointInterval: Duration?, counters: DownloadCounters, startedAt: Moment,
        foreign: [ByteRange] = []
    ) {
        self.sink = sink
        self.plan = plan
        self.bytesResumed = bytesResumed
        self.counters = counters
        if let template, let checkpointInterval, sink.keepsPartialState {
            checkpointer = Checkpointer(sink: sink, interval: checkpointInterval, template: template, since: startedAt)
        } else {
            checkpointer = nil
        }
        if sink.canReadBack {
            var held = template.map { map in map.completeRanges } ?? []
            if !foreign.isEmpty { held = held.flatMap { $0.subtracting(foreign) } }
            ledger = AgreementLedger(size: plan.layout.objectSize, held: held, foreign: foreign)
        }
    }

    /// The bytes written at `range`, if the sink can read them back.
    package func readBack(_ range: ByteRange) -> [UInt8]? {
        sink.read(range)
    }

    /// Whether a single stream's next `count` bytes fit in the sink now (an in-order sink's
    /// window may be full; the connection then pauses).
    package func hasRoom(for count: Int) -> Bool {
        sink.hasRoom(for: count, at: streamPosition)
    }

    /// A store for a single stream: bytes arrive in order, nothing can resume.
    package init(streamingTo sink: BodySink, counters: DownloadCounters) {
        self.sink = sink
        self.plan = nil
        self.bytesResumed = 0
        self.counters = counters
        self.checkpointer = nil
    }

    /// Has `verifier` follow the bytes: the plan's complete chunks, or a stream's prefix.
    ///
    /// The stretches that completed are handed over, merged where they meet, once
    /// ``verificationBatch`` bytes wait or at the progress tick (``handOverCompletedStretches()``),
    /// so the verifier's queue is woken every few MiB rather than per chunk and the hash keeps
    /// close behind the bytes; what is left at the end is checked while the final flush runs
    /// (``BodySink/makeDurable(size:record:)``). Held back longer, the hash of a short download
    /// would come after its last byte rather than beside the transfer.
    package func verify(with verifier: ObjectVerifier) {
        self.verifier = verifier
        checkpointer?.crcRuns = { [weak verifier] in verifier?.crcRuns }
        guard let plan else { return }
        let layout = plan.layout
        plan.onChunksCompleted = { [unowned self] chunks in note(layout.byteRange(ofChunks: chunks)) }
    }

    private func note(_ range: ByteRange) {
        if let last = completed.last, last.upperBound == range.lowerBound {
            completed[completed.count - 1].upperBound = range.upperBound
        } else {
            completed.append(range)
        }
        pendingVerification += range.count
        if pendingVerification >= Self.verificationBatch { handOverCompletedStretches() }
    }

    /// Hands the verifier every complete stretch not yet handed over (each tick, and at the end).
    package func handOverCompletedStretches() {
        guard let verifier, !completed.isEmpty else { return }
        verifier.add(completed, after: sink.pendingWrites)
        completed.removeAll(keepingCapacity: true)
        pendingVerification = 0
    }

    /// Whether what this store wrote can be resumed by a later run (it has a segment map).
    package var keepsPartialState: Bool { checkpointer != nil }

    /// Bytes of the object present, resumed ones included.
    package var bytesDone: Int64 {
        guard let plan else { return streamPosition }
        return bytesResumed + plan.bytesWritten
    }

    /// What a connection should do after a piece of its response was stored.
    package enum WriteVerdict {
        /// Keep the bytes coming.
        case more
        /// This request's remaining bytes are not wanted (its segment's end moved below them).
        case enough
        /// Storing failed.
        case failed(DownloadError)
    }

    /// Stores bytes `response` brings for `segment` at its position; its request's own bytes
    /// reach `requestEnd`. Bytes a hedge partner already wrote are compared with them instead;
    /// new bytes are compared with overlap bytes other responses left waiting there first.
    @inline(__always)
    package func write(
        _ body: UnsafeRawBufferPointer, for segment: Segment, requestEnd: Int64,
        response: AgreementLedger.ResponseID
    ) -> WriteVerdict {
        guard let plan else { return .enough }
        let step = plan.plannedWrite(segment, count: body.count)
        counters.bytesReceived += Int64(body.count)
        if step.write.lowerBound > 0, let ledger {
            // A hedge partner wrote these already: the same bytes from two responses.
            let skipped = UnsafeRawBufferPointer(rebasing: body[0..<step.write.lowerBound])
            if let disagreement = ledger.compare(skipped, at: segment.position, from: response, read: sink.read) {
                return .failed(changed(disagreement))
            }
        }
        if !step.write.isEmpty {
            let bytes = UnsafeRawBufferPointer(rebasing: body[step.write])
            if let ledger, let disagreement = ledger.write(bytes, at: step.offset, by: response) {
                return .failed(changed(disagreement))
            }
            do {
                try sink.write(bytes, at: step.offset)
            } catch {
                return .failed(error)
            }
        }
        plan.advance(segment, by: step.accepted)
        if step.accepted < body.count { return .enough }
        if segment.isDone { return requestEnd <= segment.end ? .more : .enough }
        return .more
    }

    // MARK: Agreement

    /// A new response of this download, whose head carried `validators` (for messages).
    package func beginResponse(validators: ObjectIdentity.Validators?) -> AgreementLedger.ResponseID {
        guard let ledger else { return -1 }
        let id = ledger.beginResponse()
        if let validators { responseValidators[id] = validators }
        return id
    }

    /// Notes the validators of a response whose head arrived after it began.
    package func note(_ validators: ObjectIdentity.Validators, of response: AgreementLedger.ResponseID) {
        guard response >= 0 else { return }
        responseValidators[response] = validators
    }

    /// Overlap bytes `response` carries at `offset`: compared with the bytes held there, or left
    /// waiting for the response that writes them. Returns the failure when they differ.
    package func compareOverlap(
        _ bytes: UnsafeRawBufferPointer, at offset: Int64, response: AgreementLedger.ResponseID
    ) -> DownloadError? {
        counters.bytesReceived += Int64(bytes.count)
        guard let ledger else { return nil }
        counters.overlapBytes += Int64(bytes.count)
        return ledger.compare(bytes, at: offset, from: response, read: sink.read).map(changed)
    }

    /// The response's bytes taken back by the plan (they failed their own digest) are
    /// forgotten by the ledger too: another response writes them again.
    package func rewind(_ segment: Segment) {
        guard let taken = plan?.rewind(segment) else { return }
        ledger?.forget(taken)
    }

    /// Whether every byte written so far comes from responses seen to agree.
    package var isStitched: Bool { ledger?.isStitched ?? true }

    /// The failure a disagreement is: two versions, whatever the validators said.
    private func changed(_ disagreement: AgreementLedger.Disagreement) -> DownloadError {
        let earlier = responseValidators[disagreement.earlier]
        let later = responseValidators[disagreement.later]
        var message =
            "the object changed on the server: bytes \(disagreement.range) differ between two of its responses"
        switch (earlier, later) {
        case (let earlier?, let later?) where earlier != later:
            message += " (\(earlier), then \(later); or its servers hold different versions)"
        case (let earlier?, _):
            message += " (both with \(earlier): its validators did not change)"
        default:
            break
        }
        return DownloadError(.objectChanged, message)
    }

    /// Stores a single stream's next bytes.
    @inline(__always)
    package func writeStream(_ body: UnsafeRawBufferPointer) -> WriteVerdict {
        do {
            try sink.write(body, at: streamPosition)
        } catch {
            return .failed(error)
        }
        if verifier != nil { note(ByteRange(streamPosition, streamPosition + Int64(body.count))) }
        streamPosition += Int64(body.count)
        counters.bytesReceived += Int64(body.count)
        return .more
    }

    // MARK: Checkpoints

    /// Called when a checkpoint fails.
    package var onCheckpointFailure: ((DownloadError) -> Void)? {
        get { checkpointer?.onFailure }
        set { checkpointer?.onFailure = newValue }
    }

    /// Checkpoints if the interval has passed and something new was written.
    package func checkpointIfDue() {
        handOverCompletedStretches()
        guard let checkpointer, let plan else { return }
        checkpointer.checkpointIfDue(recordableChunks(plan))
    }

    /// Checkpoints now (if this store checkpoints at all), then runs `then`.
    package func checkpoint(then: (() -> Void)? = nil) {
        guard let checkpointer, let plan else {
            then?()
            return
        }
        checkpointer.checkpoint(recordableChunks(plan), then: then)
    }

    /// Checkpoints now, and tells `then` whether the map was written (a share's last checkpoint:
    /// its map is what the task finishing the object reads).
    package func finalCheckpoint(then: @escaping (DownloadError?) -> Void) {
        guard let checkpointer, let plan else {
            return then(DownloadError(.localIO, "internal: no segment map to record a share in"))
        }
        checkpointer.checkpoint(recordableChunks(plan), reporting: then)
    }

    /// The chunks a checkpoint may record: the written ones, less the chunk before each break
    /// (where two pieces meet that were never seen to agree), so a later run fetches that chunk
    /// again with overlap on both sides, and the break is checked then.
    private func recordableChunks(_ plan: SegmentScheduler) -> ChunkSet {
        guard let ledger else { return plan.written }
        let breaks = ledger.breaks
        guard !breaks.isEmpty else { return plan.written }
        var chunks = plan.written
        for point in breaks where point > 0 {
            chunks.remove(Int((point - 1) / plan.layout.chunkSize))
        }
        return chunks
    }
}

/// What a download counted, across restarts: for ``DownloadResult`` and progress.
package final class DownloadCounters {
    /// Body bytes received (retries, hedged duplicates and overlap included).
    package var bytesReceived: Int64 = 0
    /// Overlap bytes: received to compare with the bytes of other responses, not written.
    package var overlapBytes: Int64 = 0
    /// HTTP requests sent, the probe and redirects included.
    package var requests = 0
    /// Requests retried after a failure.
    package var retries = 0
    /// The most connections busy at once.
    package var peakConnections = 0
    /// The adaptive count's current target: where it settled, once the download ends (0 with a
    /// fixed count).
    package var settledConnections = 0

    package init() {}

    /// Counts a request about to be sent while `busy` connections (this one included) are busy.
    package func willSend(busy: Int) {
        requests += 1
        peakConnections = max(peakConnections, busy)
    }
}
