/// The decisions of a single stream (a server that ignores ranges): its end, and the confirmation
/// after it, as a machine. The shell (`TransferRun+Stream`) reports the stream's end, the head and
/// end of each confirming request, and performs what comes out; it decides nothing.
///
/// A stream reads the object as the server sends it; a file rewritten in place while it was under
/// way would arrive mixed, and only a request sent after its last byte can see that the
/// validators moved on. When the stream lasted long enough for that to matter (`confirmsAfter`, as
/// for a ranged object in one response), its bytes were not handed out (so it can start over), and
/// the object has validators, one request asks for its first byte, the body not taken: under the
/// stream's validators the download completes; under others it is asked again on a new connection
/// until a ``ValidatorWatch`` tells a pool's other node (complete) from a change (start over). A
/// confirming request that gets no answer to judge (a failure) is asked again up to `maxTries` in
/// all; then the stream's bytes are kept, with a warning.
package struct StreamMachine {
    /// How the stream's response ended.
    package enum End {
        case completed(bytes: Int64)
        case failed(DownloadError)
        /// Stopped or cancelled by the download: nothing follows here.
        case stopped
    }

    /// What follows.
    package enum Action {
        /// Nothing more here.
        case nothing
        /// The object is whole.
        case complete
        /// The object is whole, but no confirming request was answered: the warning says so.
        case completeUnconfirmed(warning: String)
        /// The stream broke off before its end: the session decides whether it starts over.
        case brokeOff(DownloadError)
        case fail(DownloadError)
        /// Ask for the object's first byte under the stream's validators (`freshConnection`: on a
        /// new connection, where a balancer may send it to another node).
        case confirm(freshConnection: Bool)
        /// The object changed while it streamed: start over.
        case objectChanged(String)
    }

    /// What a confirming request's head said.
    private enum Answer {
        case pinned
        case other(String)
    }

    /// The validators the stream arrived under, its size if known.
    private let object: ObjectIdentity
    private let confirmsAfter: Duration
    private let maxTries: Int
    /// When the stream's response began.
    private let startedAt: Moment
    private var watch = ValidatorWatch()
    /// The confirming request in flight (its number in the watch), and its head's answer.
    private var request = 0
    private var answer: Answer?
    /// Confirming requests that ended without an answer to judge.
    private var unanswered = 0

    /// A stream of `object` whose response began at `startedAt`.
    package init(object: ObjectIdentity, startedAt: Moment, confirmsAfter: Duration, maxTries: Int) {
        self.object = object
        self.startedAt = startedAt
        self.confirmsAfter = confirmsAfter
        self.maxTries = max(1, maxTries)
    }

    /// The stream's response ended at `now`; `handedOut`: its bytes went to a reader as they came
    /// (it cannot start over).
    package mutating func streamEnded(_ end: End, handedOut: Bool, at now: Moment) -> Action {
        switch end {
        case .completed(let bytes):
            if let size = object.size, bytes != size {
                return .brokeOff(
                    .invalidResponse("the server closed the connection after \(bytes) of \(Wording.bytes(size))"))
            }
            guard !handedOut, object.etag != nil || object.lastModified != nil,
                now - startedAt >= confirmsAfter
            else { return .complete }
            return confirm(freshConnection: false)
        case .failed(let error) where error.isTransient:
            return .brokeOff(error)
        case .failed(let error):
            return .fail(error)
        case .stopped:
            return .nothing
        }
    }

    /// A confirming request's head: its validators against the stream's. Its body is not taken.
    package mutating func confirmingHead(status: Int, observed: ObjectIdentity) {
        var pinned = object
        pinned.size = nil
        var observed = observed
        observed.size = nil
        if status == 412 {
            answer = .other("the server refused \(object.precondition?.name ?? "the precondition") (412)")
        } else if case .changed(let what) = pinned.compare(observed) {
            answer = .other("\(what) after the stream")
        } else if (200..<300).contains(status) {
            answer = .pinned
        }
    }

    /// A confirming request ended: complete, ask again, or start over.
    package mutating func confirmingEnded() -> Action {
        switch answer {
        case .pinned?:
            watch.pinnedAnswer(to: request)
            return .complete
        case .other(let why)?:
            switch watch.otherAnswer(to: request) {
            case .askAgain:
                return confirm(freshConnection: true)
            case .changed(let answers):
                return .objectChanged(
                    "the object changed on the server: \(why), and \(answers) answers in a row, on new connections, "
                        + "did not carry the stream's validators again")
            }
        case nil:
            // No answer to judge (a failure): a failure is no sign of another version.
            unanswered += 1
            guard unanswered < maxTries else {
                return .completeUnconfirmed(
                    warning: "could not confirm that the server still serves the object after the stream; "
                        + "keeping its bytes")
            }
            return confirm(freshConnection: false)
        }
    }

    private mutating func confirm(freshConnection: Bool) -> Action {
        request = watch.willSend()
        answer = nil
        return .confirm(freshConnection: freshConnection)
    }
}
