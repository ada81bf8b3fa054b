import SwoopStore
import SwoopCurl

/// The single stream of a server that ignores ranges: its end, and the confirmation after it.
///
/// A stream reads the object as the server sends it; a file rewritten in place while it was under
/// way would arrive mixed, and only a request sent after its last byte can see that the
/// validators moved on. When the stream lasted long enough for that to matter
/// (``TransferMachine/Settings/confirmsOneResponseAfter``, as for a ranged object in one
/// response) and the object has validators, one request asks, its body not taken: under the
/// stream's validators the download completes; under others it is asked again on a new
/// connection until a ``ValidatorWatch`` tells a pool's other node (complete) from a change
/// (start over).
extension TransferRun {
    /// The confirmation after a stream: the watch of the stream's validators, the request in
    /// flight, and what its head said.
    struct StreamCheck {
        var watch = ValidatorWatch()
        var request = 0
        var answer: Answer?
        var tries = 0

        enum Answer {
            case pinned
            case other(String)
        }
    }

    /// The single stream ended.
    func streamEnded(_ outcome: Connection.Outcome) {
        switch outcome {
        case .completed:
            if let size = object.size, store.streamPosition != size {
                let message = "the server closed the connection after \(store.streamPosition) of \(Wording.bytes(size))"
                delegate?.transfer(self, streamBrokeOff: .invalidResponse(message))
                return
            }
            guard needsStreamCheck else { return delegate?.transferDidComplete(self) ?? () }
            askAfterStream()
        case .failed(let error, _) where error.isTransient:
            delegate?.transfer(self, streamBrokeOff: error)
        case .failed(let error, _):
            delegate?.transfer(self, didFailWith: error)
        case .stopped, .cancelled:
            break
        }
    }

    /// Whether the finished stream is asked about: it lasted long enough, it can be started over
    /// (its bytes were not handed out), and there are validators to ask under.
    private var needsStreamCheck: Bool {
        guard let started = streamStartedAt, store.sink.window == nil else { return false }
        guard object.etag != nil || object.lastModified != nil else { return false }
        return ContinuousClock.now - started >= settings.machine.confirmsOneResponseAfter
    }

    /// Asks the stream's server, on the stream's connection, for its first byte under the
    /// stream's validators; the head decides (``connection(_:didReceiveProbeHead:requested:)``).
    func askAfterStream() {
        guard !stopped, let connection = pool.connection(0) else { return }
        let source = sources.sources[0]
        let range = RequestedRange.bounded(ByteRange(0, 1))
        streamCheck.request = streamCheck.watch.willSend()
        streamCheck.answer = nil
        let request = source.headers.request(
            for: object.url, precondition: object.precondition, range: range, options: settings.options)
        connection.begin(.probe(range), url: object.url, request: request)
        counters.willSend(busy: 1)
    }

    /// The head of the request after the stream: its validators against the stream's. Its body
    /// is not taken.
    func connection(
        _ connection: Connection, didReceiveProbeHead head: ResponseHead, requested: RequestedRange
    ) -> BodyDisposition {
        guard machine == nil else { return .abort }
        var pinned = object.identity
        pinned.size = nil
        let observed = ObjectIdentity(
            size: nil, etag: head.etag, lastModified: head.lastModified,
            contentCoding: ResponseValidator.contentCoding(head))
        if head.status == 412 {
            streamCheck.answer = .other("the server refused \(object.precondition?.name ?? "the precondition") (412)")
        } else if case .changed(let what) = pinned.compare(observed) {
            streamCheck.answer = .other("\(what) after the stream")
        } else if (200..<300).contains(head.status) {
            streamCheck.answer = .pinned
        }
        return .abort
    }

    /// The request after the stream ended: complete, ask again, or start over.
    func streamCheckEnded() {
        let answer = streamCheck.answer
        switch answer {
        case .pinned?:
            streamCheck.watch.pinnedAnswer(to: streamCheck.request)
            delegate?.transferDidComplete(self)
        case .other(let why)?:
            switch streamCheck.watch.otherAnswer(to: streamCheck.request) {
            case .askAgain:
                pool.connection(0)?.wantsFreshConnection = true
                askAfterStream()
            case .changed(let answers):
                let reason =
                    "the object changed on the server: \(why), and \(answers) answers in a row, on new connections, "
                    + "did not carry the stream's validators again"
                delegate?.transfer(self, foundObjectChanged: reason)
            }
        case nil:
            // No answer to judge (a failure): a failure is no sign of another version.
            streamCheck.tries += 1
            guard streamCheck.tries < settings.failures.maxTries else {
                logger.warning(
                    "could not confirm that the server still serves the object after the stream; keeping its bytes")
                return delegate?.transferDidComplete(self) ?? ()
            }
            askAfterStream()
        }
    }
}
