import SwoopStore

/// A small object that arrives whole in the probe's response: its bytes are kept in memory as they
/// come, and a response that ends whole and soon is the download, finished without a transfer (no
/// store, plan, run or handler of its own: a list of small files makes one download per file, and
/// those were a tenth of its processor time). Any other end makes the transfer the probe would
/// have handed the response to, and gives it the bytes kept and the end as its first response's:
/// a retry, a confirmation, a change are the transfer's, and nothing is fetched twice.
extension DownloadSession {
    /// Whether the response whose head decided `step` is kept whole: the whole object, of at most
    /// what the part file holds in memory (``PartFileSink/holdLimit``), for a fresh file download
    /// without a check of each response's digest. Its other sources (mirrors, a name's other
    /// addresses) are not needed, as for a transfer of one response.
    func prober(_ prober: Prober, takesWhole step: ProbeDecision.Step) -> Bool {
        guard case .ranged(let found, let first) = step, let size = found.size, first.own == ByteRange(0, size),
            first.sent == first.own, case .fresh = basis, context.paths.share == nil
        else { return false }
        let sink = context.sink
        guard sink.keepsPartialState, sink.window == nil, sink.opensAtOnce(size: size, resuming: false) else {
            return false
        }
        // A response's own digest is checked by the transfer's handler, before its bytes count.
        return !(context.configuration.verifiesPublishedDigests && found.digests.preferredForResponse != nil)
    }

    /// The response kept whole ended with `outcome`: whole, of the object's size, and sooner than
    /// a single response needs a confirmation after it (the run's rule, read from the same
    /// settings: ``TransferMachine/Settings/confirmsOneResponseAfter``), it is the download,
    /// finalized as one the transfer completed; otherwise the transfer starts with it as its first
    /// response.
    func prober(
        _ prober: Prober, tookWhole step: ProbeDecision.Step, outcome: Connection.Outcome, on connection: Connection,
        since: Moment
    ) {
        guard isCurrent(prober) else { return }
        guard case .ranged(let found, _) = step, let size = found.size else {
            return stop(with: .failure(.invalidResponse("internal: a response kept whole that is not a range's")))
        }
        let bytes = connection.takeWhole()
        context.objectFound?(found, prober.lastTiming)
        let whole = if case .completed = outcome { Int64(bytes.count) == size } else { false }
        let soon = Moment.now - since < context.settings.machine.confirmsOneResponseAfter
        guard whole, soon else {
            return handOverKept(bytes, of: step, found: found, from: prober, on: connection, since: since)
        }
        do throws(DownloadError) {
            try context.sink.open(holding: bytes)
        } catch {
            return stop(with: .failure(error))
        }
        context.counters.bytesReceived += size
        prober.deliveredWhole()
        if sources.oneResponseSuffices() {
            keptWholeFrom = DownloadResult.Source(url: found.url.redacted, address: found.url.address, bytes: size)
        }
        refresher?.noteProgress()
        let next = machine.transferCompleted(size: size, url: url.redacted)
        guard case .finalize = next else { return perform(next) }
        logger.trace("the object arrived whole in the probe's response: finished without a transfer")
        let verifier = TransferSetup.verifier(for: found, store: nil, resuming: nil, context)
        finalize(SessionStage.Finishing(run: nil, store: nil, object: found, verifier: verifier, size: size))
    }

    /// The transfer the probe would have handed the response to, started now: the bytes kept go
    /// to its first response, which then hears how the exchange ended.
    private func handOverKept(
        _ bytes: [UInt8], of step: ProbeDecision.Step, found: RemoteObject, from prober: Prober,
        on connection: Connection, since: Moment
    ) {
        do throws(DownloadError) {
            try openAndStartTransfer(
                step, of: found, size: found.size, resuming: false, from: prober, on: connection, since: since)
        } catch {
            return stop(with: .failure(error))
        }
        connection.replay(bytes)
        connection.reportEndedExchange()
    }
}
