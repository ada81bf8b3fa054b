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
    /// Complete bytes handed to the verifier without waiting for the tick.
    package static let verificationBatch: Int64 = 8 << 20
    /// Each response's bytes are checked against its own digest (`Content-Digest`) before they
    /// count; hedging and cutting requests short are off then (a cut response cannot be checked).
    package var checksEachResponse = false

    /// A store for a ranged download planned by `plan`; checkpoints every `checkpointInterval`
    /// when the sink keeps partial state.
    package init(
        sink: BodySink, plan: SegmentScheduler, bytesResumed: Int64, checkpoint template: SegmentMap?,
        checkpointInterval: Duration?, counters: DownloadCounters, startedAt: ContinuousClock.Instant
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
        verifier.add(completed)
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

    /// Stores bytes arriving for `segment` at its position; the connection's request reaches
    /// `requestEnd`. Bytes a hedge partner already wrote are skipped.
    @inline(__always)
    package func write(_ body: UnsafeRawBufferPointer, for segment: Segment, requestEnd: Int64) -> WriteVerdict {
        guard let plan else { return .enough }
        let step = plan.plannedWrite(segment, count: body.count)
        if !step.write.isEmpty {
            do {
                try sink.write(UnsafeRawBufferPointer(rebasing: body[step.write]), at: step.offset)
            } catch {
                return .failed(error)
            }
        }
        plan.advance(segment, by: step.accepted)
        counters.bytesReceived += Int64(body.count)
        if step.accepted < body.count { return .enough }
        if segment.isDone { return requestEnd <= segment.end ? .more : .enough }
        return .more
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
        checkpointer.checkpointIfDue(plan.written)
    }

    /// Checkpoints now (if this store checkpoints at all), then runs `then`.
    package func checkpoint(then: (() -> Void)? = nil) {
        guard let checkpointer, let plan else {
            then?()
            return
        }
        checkpointer.checkpoint(plan.written, then: then)
    }
}

/// What a download counted, across restarts: for ``DownloadResult`` and progress.
package final class DownloadCounters {
    /// Body bytes received (retries and hedged duplicates included).
    package var bytesReceived: Int64 = 0
    /// HTTP requests sent, the probe and redirects included.
    package var requests = 0
    /// Requests retried after a failure.
    package var retries = 0
    /// The most connections busy at once.
    package var peakConnections = 0

    package init() {}

    /// Counts a request about to be sent while `busy` connections (this one included) are busy.
    package func willSend(busy: Int) {
        requests += 1
        peakConnections = max(peakConnections, busy)
    }
}
