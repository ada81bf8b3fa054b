/// Bridges: every byte is written but some pieces were never seen to agree (a resumed run's
/// stretch whose neighbour's overlap was lost, a trail that broke off), so the machine asks for the
/// bytes on both sides of each break (``AgreementLedger/breaks``) before the download completes.
extension TransferMachine {
    func bridgeBreaks(at now: Moment, into actions: inout [TransferAction]) {
        guard let ledger else { return }
        for point in ledger.breaks where !bridgesInFlight.contains(point) {
            guard let index = (0..<target).first(where: { !isBusy($0) }), let source = chooseSource(at: now)
            else { break }
            open(upTo: index)
            guard permitFree(for: source) else {
                waitForPermit(into: &actions)
                break
            }
            let request = RangeRequest.bridge(
                at: point, size: plan.layout.objectSize, window: ledger.window, response: ledger.beginResponse())
            bridgesInFlight.insert(point)
            bridgeTries[point, default: 0] += 1
            actions.append(.note(.bridging(offset: point, range: request.sent)))
            send(.bridge(request), slot: index, source: source, at: now, into: &actions)
        }
    }

    /// A bridge ended: the break is mended (or the object changed); tries again while allowed.
    func bridgeEnded(
        _ request: RangeRequest, slot: Int, source: Int?, _ end: RequestEnd, at now: Moment,
        into actions: inout [TransferAction]
    ) {
        let point = request.own.lowerBound
        bridgesInFlight.remove(point)
        if case .failed(let error, _) = end.outcome {
            if error.kind == .objectChanged {
                actions.append(.objectChanged(error.message))
                return
            }
        }
        if case .asking(let asked) = confirmation, asked == source {
            return confirmationEnded(end, source: asked, at: now, into: &actions)
        }
        let maxTries = settings.failures.maxTries
        if let ledger, ledger.breaks.contains(point), bridgeTries[point, default: 0] >= maxTries {
            let message =
                "could not compare the bytes on both sides of offset \(point) after \(Wording.tries(maxTries)), "
                + "so the file is not known to be one version"
            actions.append(.fail(DownloadError(.invalidResponse, message, remedy: .resume)))
            return
        }
        dispatch(at: now, into: &actions)
    }
}
