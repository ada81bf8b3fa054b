import Testing

@testable import SwoopCore

/// The single stream's decisions as a machine (``StreamMachine``), from values alone and in virtual
/// time: an end short of the size, when a finished stream is confirmed and when not, a confirming
/// answer under the stream's validators, under others until a change is believed, a pool's other
/// node, and confirming requests that fail.
@Suite("Stream machine")
struct StreamMachineTests {
    private let start = Moment.now
    private let strong = ObjectIdentity(size: 1000, etag: "\"v1\"", lastModified: nil)

    private func machine(_ object: ObjectIdentity? = nil, maxTries: Int = 3) -> StreamMachine {
        StreamMachine(object: object ?? strong, startedAt: start, confirmsAfter: .milliseconds(100), maxTries: maxTries)
    }

    /// The stream ended whole after `seconds`.
    private func ended(_ machine: inout StreamMachine, after seconds: Double = 1) -> StreamMachine.Action {
        machine.streamEnded(.completed(bytes: 1000), handedOut: false, at: start + .seconds(seconds))
    }

    private func isConfirm(_ action: StreamMachine.Action, fresh: Bool) -> Bool {
        if case .confirm(let freshConnection) = action { return freshConnection == fresh }
        return false
    }

    private func isComplete(_ action: StreamMachine.Action) -> Bool {
        if case .complete = action { return true }
        return false
    }

    @Test("an end short of the size broke off, saying where; a failure broke off if a retry may pass, else fails")
    func endsShortOrFailed() {
        var short = machine()
        guard case .brokeOff(let error) = short.streamEnded(.completed(bytes: 600), handedOut: false, at: start)
        else { Issue.record("a short end is a break-off"); return }
        #expect(error.message.contains("after 600 of 1000 bytes"), "\(error.message)")

        var transient = machine()
        let reset = DownloadError(.network, "connection reset")
        guard case .brokeOff = transient.streamEnded(.failed(reset), handedOut: false, at: start) else {
            Issue.record("a network failure is a break-off")
            return
        }
        var final = machine()
        guard case .fail = final.streamEnded(.failed(.invalidRequest("bad")), handedOut: false, at: start) else {
            Issue.record("a failure a retry cannot pass ends the download")
            return
        }
        var stopped = machine()
        guard case .nothing = stopped.streamEnded(.stopped, handedOut: false, at: start) else {
            Issue.record("a stopped stream leads nowhere")
            return
        }
    }

    @Test("a finished stream is confirmed only when it lasted, can start over, and has validators to ask under")
    func whenConfirmed() {
        var quick = machine()
        #expect(isComplete(ended(&quick, after: 0.05)), "shorter than confirmsAfter: nothing to doubt")
        var handedOut = machine()
        #expect(isComplete(handedOut.streamEnded(.completed(bytes: 1000), handedOut: true, at: start + .seconds(1))))
        var bare = machine(ObjectIdentity(size: 1000, etag: nil, lastModified: nil))
        #expect(isComplete(ended(&bare)), "no validators: nothing to ask under")
        var dated = machine(ObjectIdentity(size: nil, etag: nil, lastModified: "Sat, 05 Dec 2026 09:00:00 GMT"))
        let datedEnd = dated.streamEnded(.completed(bytes: 77), handedOut: false, at: start + .seconds(1))
        #expect(isConfirm(datedEnd, fresh: false), "a size unknown, a date: asked on the stream's connection")
        var long = machine()
        #expect(isConfirm(ended(&long), fresh: false))
    }

    @Test("an answer under the stream's validators completes; a 206 without them (a weak or absent ETag) does too")
    func pinnedAnswer() {
        var machine = machine()
        _ = ended(&machine)
        machine.confirmingHead(status: 206, observed: ObjectIdentity(size: nil, etag: "\"v1\"", lastModified: nil))
        #expect(isComplete(machine.confirmingEnded()))
    }

    @Test("answers under other validators are asked again on new connections until the change is believed")
    func changeBelieved() {
        var machine = machine()
        _ = ended(&machine)
        var asked = 1
        while true {
            if asked % 2 == 0 {
                machine.confirmingHead(status: 412, observed: ObjectIdentity(size: nil, etag: nil, lastModified: nil))
            } else {
                machine.confirmingHead(
                    status: 206, observed: ObjectIdentity(size: nil, etag: "\"v2\"", lastModified: nil))
            }
            let action = machine.confirmingEnded()
            if case .objectChanged(let reason) = action {
                #expect(reason.contains("answers in a row"), "\(reason)")
                break
            }
            #expect(isConfirm(action, fresh: true), "asked again on a new connection: \(action)")
            asked += 1
            guard asked <= 20 else {
                Issue.record("a change was never believed")
                return
            }
        }
        #expect(asked == ValidatorWatch.changeAfter, "believed after \(asked) answers")
    }

    @Test("a pool's other node: an answer under the stream's validators after another's completes")
    func poolCompletes() {
        var machine = machine()
        _ = ended(&machine)
        machine.confirmingHead(status: 412, observed: ObjectIdentity(size: nil, etag: nil, lastModified: nil))
        #expect(isConfirm(machine.confirmingEnded(), fresh: true))
        machine.confirmingHead(status: 206, observed: ObjectIdentity(size: nil, etag: "\"v1\"", lastModified: nil))
        #expect(isComplete(machine.confirmingEnded()))
    }

    @Test(
        "confirming requests without an answer are asked again up to maxTries, then the bytes are kept with a warning")
    func unanswered() {
        var machine = machine(maxTries: 3)
        _ = ended(&machine)
        #expect(isConfirm(machine.confirmingEnded(), fresh: false))
        #expect(isConfirm(machine.confirmingEnded(), fresh: false))
        guard case .completeUnconfirmed(let warning) = machine.confirmingEnded() else {
            Issue.record("the third unanswered request keeps the bytes")
            return
        }
        #expect(warning.contains("could not confirm"))
        // A head that was neither 2xx nor 412 under the same validators is no answer either.
        var other = self.machine(maxTries: 1)
        _ = ended(&other)
        other.confirmingHead(status: 503, observed: ObjectIdentity(size: nil, etag: "\"v1\"", lastModified: nil))
        guard case .completeUnconfirmed = other.confirmingEnded() else {
            Issue.record("a 503 is no answer")
            return
        }
    }
}
