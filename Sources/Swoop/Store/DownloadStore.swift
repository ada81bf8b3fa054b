/// The store of one object being downloaded: the write path from connections to the sink, the
/// record of what is written (the plan's chunks), and checkpoints.
///
/// Connections call ``write(_:for:requestEnd:)`` (or ``writeStream(_:)``) with each piece of a
/// response: the plan says which bytes are new and where they go, the sink takes them, the plan
/// advances. Nothing on the way passes through the session. Transfer thread only.
final class DownloadStore {
    let sink: BodySink
    /// What is written and what is left; `nil` for a single stream (a server without ranges).
    let plan: SegmentScheduler?
    /// Bytes an earlier run had already written.
    let bytesResumed: Int64
    private let checkpointer: Checkpointer?
    private let counters: DownloadCounters
    /// Where a single stream's next byte goes.
    private(set) var streamPosition: Int64 = 0
    /// Computes the object's digests from the stretches that become complete.
    private(set) var verifier: ObjectVerifier?
    /// Complete stretches not yet handed to the verifier, oldest first, with when each completed.
    private var completed: [(range: ByteRange, at: ContinuousClock.Instant)] = []
    /// How long a complete stretch waits before the verifier reads it back (see ``verify(with:)``).
    static let verificationLag: Duration = .seconds(1)
    /// Each response's bytes are checked against its own digest (`Content-Digest`) before they
    /// count; hedging and cutting requests short are off then (a cut response cannot be checked).
    var checksEachResponse = false

    /// A store for a ranged download planned by `plan`; checkpoints every `checkpointInterval`
    /// when the sink keeps partial state.
    init(sink: BodySink, plan: SegmentScheduler, bytesResumed: Int64, checkpoint template: SegmentMap?,
         checkpointInterval: Duration?, counters: DownloadCounters, startedAt: ContinuousClock.Instant) {
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
    func readBack(_ range: ByteRange) -> [UInt8]? {
        sink.read(range)
    }

    /// Whether a single stream's next `count` bytes fit in the sink now (an in-order sink's
    /// window may be full; the connection then pauses).
    func hasRoom(for count: Int) -> Bool {
        sink.hasRoom(for: count, at: streamPosition)
    }

    /// A store for a single stream: bytes arrive in order, nothing can resume.
    init(streamingTo sink: BodySink, counters: DownloadCounters) {
        self.sink = sink
        self.plan = nil
        self.bytesResumed = 0
        self.counters = counters
        self.checkpointer = nil
    }

    /// Has `verifier` follow the bytes: the plan's complete chunks, or a stream's prefix.
    ///
    /// The verifier reads a stretch back about ``verificationLag`` after it completed (handed over
    /// each progress tick, ``handOverDueStretches()``), not at once, and what is left at the end
    /// is checked while the final flush runs (``BodySink/makeDurable(size:record:)``). A download
    /// that fills the processor (loopback, a fast LAN) then does not share it with the hash while
    /// it lasts: on a machine of two cores a hash beside such a transfer slowed it by a third, even
    /// at idle priority, and so did an idle-priority `sha256sum` of another file; the final flush
    /// leaves the processor waiting. On a slower link the hash keeps a second behind.
    func verify(with verifier: ObjectVerifier) {
        self.verifier = verifier
        checkpointer?.crcRuns = { [weak verifier] in verifier?.crcRuns }
        guard let plan else { return }
        let layout = plan.layout
        plan.onChunksCompleted = { [unowned self] chunks in note(layout.byteRange(ofChunks: chunks)) }
    }

    private func note(_ range: ByteRange) {
        let now = ContinuousClock.now
        // Contiguous with the last stretch and completed within its tenth of a second: one
        // stretch (it goes with the older time).
        if let last = completed.last, last.range.upperBound == range.lowerBound, now - last.at < .milliseconds(100) {
            completed[completed.count - 1].range.upperBound = range.upperBound
        } else {
            completed.append((range, now))
        }
    }

    /// Hands the verifier the stretches that completed at least ``verificationLag`` ago.
    func handOverDueStretches() {
        let cutoff = ContinuousClock.now - Self.verificationLag
        guard let verifier, let first = completed.first, first.at <= cutoff else { return }
        let due = completed.prefix { $0.at <= cutoff }
        verifier.add(due.map(\.range))
        completed.removeFirst(due.count)
    }

    /// Hands every complete stretch not yet handed over to the verifier (at the end).
    func flushVerification() {
        guard let verifier, !completed.isEmpty else { return }
        verifier.add(completed.map(\.range))
        completed.removeAll(keepingCapacity: true)
    }

    /// Whether what this store wrote can be resumed by a later run (it has a segment map).
    var keepsPartialState: Bool { checkpointer != nil }

    /// Bytes of the object present, resumed ones included.
    var bytesDone: Int64 {
        guard let plan else { return streamPosition }
        return bytesResumed + plan.bytesWritten
    }

    /// What a connection should do after a piece of its response was stored.
    enum WriteVerdict {
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
    func write(_ body: UnsafeRawBufferPointer, for segment: Segment, requestEnd: Int64) -> WriteVerdict {
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
    func writeStream(_ body: UnsafeRawBufferPointer) -> WriteVerdict {
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
    var onCheckpointFailure: ((DownloadError) -> Void)? {
        get { checkpointer?.onFailure }
        set { checkpointer?.onFailure = newValue }
    }

    /// Checkpoints if the interval has passed and something new was written.
    func checkpointIfDue() {
        handOverDueStretches()
        guard let checkpointer, let plan else { return }
        checkpointer.checkpointIfDue(plan.written)
    }

    /// Checkpoints now (if this store checkpoints at all), then runs `then`.
    func checkpoint(then: (() -> Void)? = nil) {
        guard let checkpointer, let plan else {
            then?()
            return
        }
        checkpointer.checkpoint(plan.written, then: then)
    }
}

/// What a download counted, across restarts: for ``DownloadResult`` and progress.
final class DownloadCounters {
    /// Body bytes received (retries and hedged duplicates included).
    var bytesReceived: Int64 = 0
    /// HTTP requests sent, the probe and redirects included.
    var requests = 0
    /// Requests retried after a failure.
    var retries = 0
    /// The most connections busy at once.
    var peakConnections = 0

    /// Counts a request about to be sent while `busy` connections (this one included) are busy.
    func willSend(busy: Int) {
        requests += 1
        peakConnections = max(peakConnections, busy)
    }
}
