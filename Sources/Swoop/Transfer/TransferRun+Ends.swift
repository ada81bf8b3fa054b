import SwoopStore
import SwoopCurl

/// How an ended exchange reaches the machine, and a fresh URL for an expired one.
extension TransferRun {
    /// What the machine needs to know of `connection`'s ended request.
    func end(of connection: Connection, _ outcome: Connection.Outcome) -> RequestEnd {
        let ended: RequestEnd.Outcome
        var urlExpired = false
        switch outcome {
        case .completed, .stopped:
            ended = .completed
        case .cancelled:
            ended = .cancelled
        case .failed(let error, let retryAfter):
            ended = .failed(error, retryAfter: retryAfter)
            // A fresh URL can replace the first source's when its URL expired and a provider gives fresh ones.
            if let sent = connection.url, URLExpiry.isRefusal(error, url: sent, now: URLExpiry.now) {
                urlExpired = freshURLCheck != nil
            }
        }
        return RequestEnd(
            ended, bytes: connection.bytesThisRequest, answered: connection.wasAnswered, refusal: connection.refusal,
            pinned: connection.servedPinned, urlExpired: urlExpired)
    }

    /// The first source's URL expired (`slot`'s request was refused): a fresh one is fetched and
    /// checked, which every refused request shares; the other work goes on meanwhile.
    func refresh(refusedOn slot: Int) {
        guard let (refresher, checks, range) = freshURLCheck, let sent = pool.connection(slot)?.url else { return }
        checks.refresh(sources.primary, refused: sent, refresher: refresher, range: range) { [weak self] error in
            guard let self, !stopped else { return }
            if let error { delegate?.transfer(self, didFailWith: error) } else { dispatchWork() }
        }
        dispatchWork()
    }

    /// What checking a fresh URL for the first source takes, when this download can: its provider,
    /// the checks, and the range compared (one the first source wrote, near the probe's).
    private var freshURLCheck: (URLRefresher, SourceChecks, ByteRange)? {
        guard let refresher, let checks = sources.checks, let machine,
            let range = sources.sampleRange(near: machine.firstRange)
        else { return nil }
        return (refresher, checks, range)
    }
}
