import SwoopStore

/// Finishing: every byte is in the sink (or there are none); its digests checked, the sink makes
/// it durable and renames it into place, and the result says what the file holds.
extension DownloadSession {
    /// Every byte is already in the sink (a resumed download the probe found complete), or there
    /// are none (an empty object): open it (on the opening queue if it must wait for the disk), then
    /// finalize.
    func finishWithoutTransfer(_ found: RemoteObject, size: Int64, resuming: Bool, after prober: Prober) {
        context.objectFound?(found, prober.lastTiming)
        // `then` runs at once when the sink needs no disk to open.
        context.sink.open(size: size, resuming: resuming) { [weak self] error in
            guard let self, isCurrent(prober) else { return }
            if let error { return stop(with: .failure(error)) }
            let verifier = TransferSetup.verifier(
                for: found, store: nil, resuming: resuming ? resumedMap : nil, context)
            finalize(SessionStage.Finishing(run: nil, store: nil, object: found, verifier: verifier, size: size))
        }
    }

    /// Every byte is in the sink: check its digests, then let it deliver the object (make it
    /// durable, rename). A mismatch deletes the part file: its bytes are wrong.
    func finalize(_ finishing: SessionStage.Finishing) {
        stage = .finalizing(finishing)
        machine.entered(.finalizing)
        finishing.run?.stop()
        transferEnded()
        let size = finishing.size
        let record = CompletedObject(
            size: size, etag: finishing.object.etag, lastModified: finishing.object.lastModified)
        guard let verifier = finishing.verifier else {
            return publish(finishing, record: record, verified: [])
        }
        finishing.store?.handOverCompletedStretches()
        let inMemory = size <= PartFileSink.holdLimit ? context.sink.read(ByteRange(0, size)) : nil
        // The bytes go to disk while the verifier checks what it has not yet: the final flush
        // and the last of the hashing overlap; only the rename waits for the verdict.
        if inMemory == nil { context.sink.makeDurable(size: size, record: record) }
        verifier.finish(size: size, inMemory: inMemory, after: context.sink.pendingWrites) { [self] outcome in
            guard case .finalizing = stage else { return }
            switch outcome {
            case .success(let verified):
                if !verified.isEmpty {
                    logger.info(
                        "verified", metadata: ["digests": "\(verified.map(\.description).joined(separator: ", "))"])
                }
                publish(finishing, record: record, verified: verified)
            case .failure(let error):
                machine.bytesAreWrong()
                stop(with: .failure(error))
            }
        }
    }

    func publish(_ finishing: SessionStage.Finishing, record: CompletedObject, verified: [VerifiedDigest]) {
        if context.paths.share != nil {
            // A share's bytes stay in the part file every share writes: its map says they are all
            // here, for the task that finishes the object (``Downloader/download(_:share:to:progress:)``).
            guard let store = finishing.store else {
                return stop(with: .failure(DownloadError(.localIO, "internal: a share finished without a store")))
            }
            return store.finalCheckpoint { [self] failure in
                if let failure { return stop(with: .failure(failure)) }
                // The run's bytes are the share's (its rate is the share's).
                let done = result(
                    size: totalBytes ?? finishing.size, object: finishing.object, store: store, alreadyComplete: false)
                stop(with: .success(done))
            }
        }
        // What the result says of the transfer is known now: the session hands the file over and
        // lets go of itself while it waits to be published (a list's small files wait in groups of
        // hundreds); the sink reports through what the handover returns.
        let outcome = result(
            size: finishing.size, object: finishing.object, store: finishing.store, alreadyComplete: false,
            verified: verified)
        // The run, the store and the verifier are done: the handover stops none of them again.
        let store = partialState
        stage = .finalizing(
            SessionStage.Finishing(run: nil, store: nil, object: finishing.object, verifier: nil, size: finishing.size))
        let report = handOver(outcome, store: store)
        context.sink.finish(size: finishing.size, record: record, then: report)
    }

    func result(
        size: Int64, object: RemoteObject?, store: DownloadStore?, alreadyComplete: Bool,
        verified: [VerifiedDigest] = []
    ) -> DownloadResult {
        // The validators every byte of the file was served under: the pinned ones.
        var etag = object?.strongETag
        var lastModified = object?.lastModified
        if object == nil, case .completed(let record, _) = basis {
            (etag, lastModified) = (record.etag, record.lastModified)
        }
        let counters = context.counters
        let resumed = alreadyComplete ? size : store?.bytesResumed ?? (store == nil && resumedMap != nil ? size : 0)
        return DownloadResult(
            path: context.paths.target, bytes: size, bytesReceived: counters.bytesReceived, bytesResumed: resumed,
            bytesCompared: counters.overlapBytes, duration: .now - context.startedAt,
            connectionsUsed: counters.peakConnections,
            connectionsSettled: counters.settledConnections > 0 ? counters.settledConnections : nil,
            requests: counters.requests, retries: counters.retries, etag: etag, lastModified: lastModified,
            objectChanges: machine.changes, bytesRefetched: machine.bytesRefetched, alreadyComplete: alreadyComplete,
            sources: sourceReports, verified: verified)
    }
}
