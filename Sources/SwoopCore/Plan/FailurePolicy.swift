/// What a failed request says, as the failure policy sees it.
package enum FailureScope: Equatable {
    /// Asking again cannot help: a 4xx other than 408, 425 and 429, a certificate problem, an
    /// unknown host or a refused connection at first contact, a redirect loop.
    case permanent
    /// The server did not answer, or answered that it cannot now: no connection, a reset or a
    /// timeout before a response head, 5xx, 408, 425, 429. Failures of this kind, together and
    /// without an answer between them, mean the server is down.
    case server
    /// The server answered, but this response could not be used to the end: a connection that
    /// broke or stalled mid-body, a wrong `Content-Range`, a digest mismatch. The request is
    /// retried; the server is up.
    case response
}

/// The one failure policy of a download, as pure functions: how a failure is classed, how long
/// to wait before trying again, when a source counts as down and how often a down source is
/// tried. The probe, mirror checks and segment requests all take their retry decisions here;
/// each source's state lives in its ``SourceHealth``.
package struct FailurePolicy: Equatable {
    /// Delay before the first retry; doubles each time, with jitter.
    package var baseDelay: Duration
    /// Longest delay between tries (also caps `Retry-After`).
    package var maxDelay: Duration
    /// Tries per request (the probe, a mirror's check) or per byte range without progress while
    /// its server answers.
    package var maxTries: Int
    /// How long a source may stay down (not answering) before it is given up.
    package var maxOutage: Duration
    /// Server failures in a row, with no answer between them, that make a source down.
    package var downAfter = 3
    /// The longest wait between two trials of a down source: a server that comes back is used
    /// again within about this long, and a dead one sees at most one connection per this long.
    package var maxTrialInterval: Duration = .seconds(5)

    package init(baseDelay: Duration, maxDelay: Duration, maxTries: Int, maxOutage: Duration) {
        self.baseDelay = baseDelay
        self.maxDelay = maxDelay
        self.maxTries = max(1, maxTries)
        self.maxOutage = maxOutage
    }

    /// The scope of `error`; `answered`: a response head of the failed exchange had arrived.
    package static func scope(of error: DownloadError, answered: Bool) -> FailureScope {
        guard error.isTransient else { return .permanent }
        if let status = error.httpStatus, status == 408 || status == 425 || status == 429 || status >= 500 {
            return .server
        }
        switch error.kind {
        case .network, .unreachable: return answered ? .response : .server
        default: return .response
        }
    }

    /// Whether a single request (a probe, a mirror's check) that has failed `tries` times, the
    /// last with `error`, is sent again, and after how long; `nil`: give up.
    package func retryDelay(after tries: Int, _ error: DownloadError, retryAfter: Int?) -> Duration? {
        guard error.isTransient, tries < maxTries else { return nil }
        return backoff(tries: tries, retryAfter: retryAfter)
    }

    /// The delay before try `tries + 1`: exponential from ``baseDelay`` with full jitter (half to
    /// all of it), at least `Retry-After`, never over ``maxDelay``.
    package func backoff(tries: Int, retryAfter: Int?, using random: inout some RandomNumberGenerator) -> Duration {
        jittered(exponential(tries: tries, cap: maxDelay), retryAfter: retryAfter, using: &random)
    }

    package func backoff(tries: Int, retryAfter: Int?) -> Duration {
        var random = SystemRandomNumberGenerator()
        return backoff(tries: tries, retryAfter: retryAfter, using: &random)
    }

    /// The wait before the trial after `failedTrials` failed ones of a down source: from twice
    /// ``baseDelay`` up to ``maxTrialInterval`` (or ``maxDelay`` if lower), with jitter, at least
    /// `Retry-After` (capped by ``maxDelay``).
    package func trialDelay(
        failedTrials: Int, retryAfter: Int?, using random: inout some RandomNumberGenerator
    ) -> Duration {
        let cap = min(maxTrialInterval, maxDelay)
        return jittered(exponential(tries: failedTrials + 2, cap: cap), retryAfter: retryAfter, using: &random)
    }

    package func trialDelay(failedTrials: Int, retryAfter: Int?) -> Duration {
        var random = SystemRandomNumberGenerator()
        return trialDelay(failedTrials: failedTrials, retryAfter: retryAfter, using: &random)
    }

    /// The longest a download can legitimately go without a request in flight and without a
    /// byte while its server answers: a connect timeout, a stall timeout, and every retry's
    /// longest backoff (an outage adds ``maxOutage``). Past it, the session's watchdog ends the
    /// download rather than let it wait forever.
    package func longestQuietPeriod(connectTimeout: Duration, stallTimeout: Duration) -> Duration {
        var backoffs = Duration.zero
        for tries in 1...maxTries {
            backoffs += exponential(tries: tries, cap: maxDelay)
        }
        return connectTimeout + stallTimeout + backoffs
    }

    private func exponential(tries: Int, cap: Duration) -> Duration {
        min(cap, baseDelay * Double(1 << min(max(tries - 1, 0), 20)))
    }

    private func jittered(
        _ delay: Duration, retryAfter: Int?, using random: inout some RandomNumberGenerator
    ) -> Duration {
        let seconds = delay.seconds
        var chosen = Double.random(in: (seconds / 2)...max(seconds / 2, seconds), using: &random)
        if let retryAfter { chosen = max(chosen, min(Double(retryAfter), maxDelay.seconds)) }
        return .milliseconds(Int64(chosen * 1000))
    }
}
