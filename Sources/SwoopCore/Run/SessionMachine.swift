/// The decisions of one download's session, as a machine: where it is (``Phase``), and what an
/// event leads to: an object that changed, a single stream that broke off, the probe's connection
/// lost while the part file was created, a transfer that completed, a pause, a cancel, and what a
/// stop keeps. Events come in as calls with what the shell knows; what to do comes out as a
/// ``SessionAction``. The session (`DownloadSession`) holds the stages' objects and performs; it
/// decides nothing. The tests drive it with virtual time.
package struct SessionMachine {
    /// What the machine reads from the configuration, once.
    package struct Settings {
        package var failures: FailurePolicy
        /// On a changed object, start over (`true`) or fail.
        package var restartsOnChange: Bool
        /// The bytes go to a reader in order (a pipe): what it was handed cannot be taken back.
        package var inOrder: Bool
        /// The size the caller expects, if it said one.
        package var expectedSize: Int64?

        package init(failures: FailurePolicy, restartsOnChange: Bool, inOrder: Bool, expectedSize: Int64? = nil) {
            self.failures = failures
            self.restartsOnChange = restartsOnChange
            self.inOrder = inOrder
            self.expectedSize = expectedSize
        }
    }

    /// Where the download is.
    package enum Phase: Equatable {
        /// Reading the disk, or waiting for the sink to close before starting over.
        case starting
        case probing
        case transferring
        case finalizing
        case stopped
    }

    /// What the download's partial state is, as a stop sees it.
    package enum Store: Equatable {
        /// No transfer yet (or none any more): a map from an earlier run is kept if there is one.
        case none(resumedMap: Bool)
        /// A transfer in ranges with a segment map: resumable.
        case mapped
        /// A transfer in ranges of an object that arrives in one response: no map is kept.
        case oneResponse
        /// A single stream (the server ignores ranges): no map is kept.
        case stream
    }

    package let settings: Settings
    package private(set) var phase = Phase.starting
    /// Times it started over because its object changed, and the bytes held then.
    package private(set) var changes = 0
    package private(set) var bytesRefetched: Int64 = 0
    /// Tries of the single stream so far.
    package private(set) var streamTries = 0
    /// Times the probe's connection ended while the sink opened.
    package private(set) var lostHandovers = 0
    /// Delete the partial state when stopping (a cancel, an object that changed, bytes found wrong).
    package private(set) var discardsOnStop = false

    package init(settings: Settings) {
        self.settings = settings
    }

    // MARK: Phases

    /// The shell began a phase (the probe, the transfer, finalizing).
    package mutating func entered(_ phase: Phase) {
        guard self.phase != .stopped else { return }
        self.phase = phase
    }

    /// The bytes are wrong (a digest mismatch) or are not the object asked for: a stop discards them.
    package mutating func bytesAreWrong() {
        discardsOnStop = true
    }

    // MARK: Events

    /// The object changed (`reason`), with `held` bytes of it on disk; `finishedTarget`: the path of
    /// a file this download finished, of the earlier version. Starts over from byte 0 on the new
    /// version within `maxTries` (a finished file is replaced once the new one is whole), or fails
    /// keeping nothing.
    package mutating func objectChanged(_ reason: String, held: Int64, finishedTarget: String?) -> SessionAction {
        let maxTries = settings.failures.maxTries
        guard settings.restartsOnChange, changes < maxTries else {
            discardsOnStop = true
            // A stream has handed its bytes out: nothing of it is discarded, it only cannot go on.
            let consequence =
                if let finishedTarget {
                    "\(finishedTarget) is left as it was (the earlier version)"
                } else if !settings.inOrder {
                    "not mixing versions, the partial download was discarded"
                } else {
                    "not mixing versions, the stream stops here (what it delivered is of the earlier version)"
                }
            let tries = changes > 0 ? " (started over \(Wording.count(changes, "time")))" : ""
            return .fail(DownloadError(.objectChanged, "\(reason); \(consequence)\(tries)"))
        }
        changes += 1
        bytesRefetched += held
        let refetched = held > 0 ? ", fetching \(Wording.bytes(held)) again" : ""
        phase = .starting
        return .startOver(
            after: nil, replacingTarget: finishedTarget != nil,
            log: "\(reason); starting over on the new version\(refetched) (\(changes) of \(maxTries))")
    }

    /// The single stream (a server without ranges) broke off with `error`: it starts over from the
    /// first byte after the policy's backoff, or fails when tries are used up, when no try can mend
    /// it, or when its bytes went to a reader in order.
    package mutating func streamBrokeOff(_ error: DownloadError) -> SessionAction {
        let noRanges = "; the server does not support ranges, so the download cannot resume"
        var delay: Duration?
        if !settings.inOrder {
            streamTries += 1
            delay = settings.failures.retryDelay(after: streamTries, error, retryAfter: nil)
        }
        guard let delay else {
            let tries = streamTries > 1 ? " (tried \(streamTries) times)" : ""
            let remedy: DownloadError.Remedy? = settings.inOrder ? nil : .startAgain
            return .fail(error.adding(noRanges + tries, remedy: remedy))
        }
        phase = .starting
        let next = "\(streamTries + 1) of \(settings.failures.maxTries)"
        return .startOver(
            after: (delay, failing: error), replacingTarget: false,
            log: "\(error.reason)\(noRanges); starting over from the first byte in \(delay) (try \(next))")
    }

    /// The probe's connection ended while the part file `part` was created: asked again (what the
    /// sink held kept only if it was resumed), within `maxTries`.
    package mutating func handoverLost(part: String, resuming: Bool) -> SessionAction {
        lostHandovers += 1
        guard lostHandovers < settings.failures.maxTries else {
            let reason = "the server's connection ended while \(part) was created (\(lostHandovers) times)"
            return .fail(DownloadError(.network, reason))
        }
        phase = .starting
        return .probeAgain(
            discarding: !resuming, log: "the server's connection ended while \(part) was created; asking again")
    }

    /// Every byte of an object of `size` bytes arrived (`url`: how messages name it): finalize, or
    /// fail when the caller expected another size (a stream of unannounced length is not the object).
    package mutating func transferCompleted(size: Int64, url: String) -> SessionAction {
        if let expected = settings.expectedSize, size != expected {
            discardsOnStop = true
            let message = "\(url) is \(Wording.bytes(size)), not the \(expected) expected"
            return .fail(DownloadError(.sizeMismatch, message, remedy: .correctExpectedSize))
        }
        phase = .finalizing
        return .finalize
    }

    /// The caller pauses, unless the download is finalizing or over; `kept` says what the part
    /// file keeps, when the partial state `store` is kept.
    package func pause(store: Store, kept: String) -> SessionAction? {
        guard phase != .finalizing, phase != .stopped else { return nil }
        let said = store == .mapped ? kept : ""
        return .fail(DownloadError(.interrupted, "download paused" + said, remedy: .resume))
    }

    /// The caller cancels, unless the download is finalizing or over: the partial state goes.
    package mutating func cancel() -> SessionAction? {
        guard phase != .finalizing, phase != .stopped else { return nil }
        discardsOnStop = true
        return .fail(DownloadError(.cancelled, "download cancelled; partial data deleted"))
    }

    /// How a stop with `result` ends, given the partial state `store`: whether it discards the
    /// partial state, keeps it with one last checkpoint first, and the error as it is true then (a
    /// fix that says "resume" when nothing is kept says "start again", with why). `nil` when the
    /// session stopped already.
    package mutating func stopping(
        _ result: Result<Void, DownloadError>, store: Store
    ) -> (failure: DownloadError?, discards: Bool, checkpointsFirst: Bool)? {
        guard phase != .stopped else { return nil }
        let wasTransferring = phase == .transferring
        phase = .stopped
        guard case .failure(let error) = result else { return (nil, discardsOnStop, false) }
        // Without a segment map (a small file, a stream) nothing can resume: keep nothing.
        if store == .oneResponse || store == .stream { discardsOnStop = true }
        let keeps: Bool =
            switch store {
            case .none(let resumedMap): !discardsOnStop && resumedMap
            case .mapped: !discardsOnStop
            case .oneResponse, .stream: false
            }
        let failure = keeps ? error : error.nothingKept(store: store, streaming: settings.inOrder)
        return (failure, discardsOnStop, wasTransferring && !discardsOnStop && store == .mapped)
    }
}

/// What the session does next.
package enum SessionAction {
    /// Start over from byte 0: the stage's work stops, what the sink holds is discarded, then the
    /// probe (after the delay, failing with the error meanwhile). `replacingTarget`: a finished file
    /// of the earlier version is replaced once the new one is whole.
    case startOver(after: (Duration, failing: DownloadError)?, replacingTarget: Bool, log: String)
    /// Ask the probe again, the sink closed first (`discarding` what it held).
    case probeAgain(discarding: Bool, log: String)
    /// Check the digests and publish.
    case finalize
    /// The download fails (``SessionMachine/stopping(_:store:)`` says what the stop keeps).
    case fail(DownloadError)
}

extension DownloadError {
    /// This error as it is true when a stop keeps nothing: a fix that says "resume" becomes "start
    /// again", with why nothing could be kept.
    package func nothingKept(store: SessionMachine.Store, streaming: Bool = false) -> DownloadError {
        let remedy: DownloadError.Remedy
        switch self.remedy {
        case .resume?: remedy = .startAgain
        case .freeSpaceAndResume?: remedy = .freeSpace
        default: return self
        }
        let why =
            switch store {
            case _ where streaming: " (a stream keeps nothing to resume from)"
            case .stream: " (the server does not support ranges, so a download from it cannot resume)"
            case .oneResponse: " (a file that arrives in one response keeps no partial state)"
            case .none, .mapped: ""
            }
        return replacing(reason: reason + why, remedy: remedy)
    }
}
