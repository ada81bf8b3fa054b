import SwoopStore
import SwoopCurl

/// The single stream of a server that ignores ranges: its end, and the confirmation after it,
/// as its ``StreamMachine`` decides (what the confirmation is for: there). This reports the
/// stream's end and each confirming request's head and end, and performs what comes out.
extension TransferRun {
    /// The single stream ended.
    func streamEnded(_ outcome: Connection.Outcome) {
        guard var machine = stream else { return }
        let end: StreamMachine.End
        switch outcome {
        case .completed: end = .completed(bytes: store.streamPosition)
        case .failed(let error, _): end = .failed(error)
        case .stopped, .cancelled: end = .stopped
        }
        let action = machine.streamEnded(end, handedOut: store.sink.window != nil, at: .now)
        stream = machine
        perform(action)
    }

    /// The head of a request after the stream: the machine judges its validators. Its body is
    /// not taken.
    func connection(
        _ connection: Connection, didReceiveProbeHead head: ResponseHead, requested: RequestedRange
    ) -> BodyDisposition {
        let observed = ObjectIdentity(
            size: nil, etag: head.etag, lastModified: head.lastModified,
            contentCoding: ResponseValidator.contentCoding(head))
        stream?.confirmingHead(status: head.status, observed: observed)
        return .abort
    }

    /// The request after the stream ended.
    func streamCheckEnded() {
        guard var machine = stream else { return }
        let action = machine.confirmingEnded()
        stream = machine
        perform(action)
    }

    private func perform(_ action: StreamMachine.Action) {
        switch action {
        case .nothing:
            break
        case .complete:
            delegate?.transferDidComplete(self)
        case .completeUnconfirmed(let warning):
            logger.warning("\(warning)")
            delegate?.transferDidComplete(self)
        case .brokeOff(let error):
            delegate?.transfer(self, streamBrokeOff: error)
        case .fail(let error):
            delegate?.transfer(self, didFailWith: error)
        case .confirm(let freshConnection):
            if freshConnection { pool.connection(0)?.wantsFreshConnection = true }
            askAfterStream()
        case .objectChanged(let reason):
            delegate?.transfer(self, foundObjectChanged: reason)
        }
    }

    /// Asks the stream's server, on the stream's connection, for its first byte under the
    /// stream's validators.
    private func askAfterStream() {
        guard !stopped, let connection = pool.connection(0) else { return }
        let source = sources.sources[0]
        let request = source.headers.request(
            for: object.url, precondition: object.precondition, range: .bounded(ByteRange(0, 1)),
            options: settings.options)
        connection.begin(.probe(.bounded(ByteRange(0, 1))), url: object.url, request: request)
        counters.willSend(busy: 1)
    }
}
