import Testing

@testable import SwoopCore

/// The session's decisions as a machine (``SessionMachine``), beside the transfer machine's: events
/// in, the action out, from values alone. Restarts on a changed object and on a broken stream (the
/// stream's waits are the failure policy's backoff: virtual time), a connection lost while the part
/// file was created, a completed transfer of the wrong size, a pause and a cancel in each phase, and
/// what a stop keeps.
@Suite("Session machine")
struct SessionMachineTests {
    private let failures = FailurePolicy(
        baseDelay: .milliseconds(250), maxDelay: .seconds(30), maxTries: 3, maxOutage: .seconds(120))

    private func machine(restarts: Bool = true, inOrder: Bool = false, expected: Int64? = nil) -> SessionMachine {
        var machine = SessionMachine(
            settings: .init(failures: failures, restartsOnChange: restarts, inOrder: inOrder, expectedSize: expected))
        machine.entered(.probing)
        machine.entered(.transferring)
        return machine
    }

    private func failure(_ action: SessionAction?) -> DownloadError? {
        if case .fail(let error)? = action { error } else { nil }
    }

    @Test("a changed object starts over within maxTries, counting the bytes fetched again, then fails keeping nothing")
    func objectChanges() throws {
        var machine = machine()
        for change in 1...3 {
            guard
                case .startOver(nil, false, let log) = machine.objectChanged(
                    "ETag moved", held: 100, finishedTarget: nil)
            else {
                Issue.record("change \(change) did not start over")
                return
            }
            #expect(log.contains("fetching 100 bytes again (\(change) of 3)"), "\(log)")
            #expect(machine.phase == .starting)
            machine.entered(.probing)
        }
        #expect(machine.changes == 3 && machine.bytesRefetched == 300)
        let event1 = machine.objectChanged("ETag moved", held: 0, finishedTarget: nil)
        let error = try #require(failure(event1))
        #expect(error.kind == .objectChanged)
        #expect(error.message.contains("the partial download was discarded (started over 3 times)"), "\(error)")
        let event2 = machine.stopping(.failure(error), store: .mapped)
        let stop = try #require(event2)
        #expect(stop.discards && !stop.checkpointsFirst)
    }

    @Test(
        "with on-change fail a changed object fails at once; a finished file of the earlier version is left as it was")
    func changeFails() throws {
        var machine = machine(restarts: false)
        let event3 = machine.objectChanged("412", held: 10, finishedTarget: "/d/f")
        let error = try #require(failure(event3))
        #expect(error.message == "412; /d/f is left as it was (the earlier version)")
        #expect(machine.changes == 0 && machine.discardsOnStop)
        var replacing = self.machine()
        guard case .startOver(_, true, _) = replacing.objectChanged("412", held: 10, finishedTarget: "/d/f") else {
            Issue.record("a finished file's change did not start over replacing it")
            return
        }
    }

    @Test("a broken stream starts over after the policy's backoff, growing, until tries run out; a piped one cannot")
    func brokenStream() throws {
        var machine = machine()
        let reset = DownloadError(.network, "connection reset", curlCode: 56)
        var waits: [Duration] = []
        for _ in 1...2 {
            guard case .startOver(let delay?, false, let log) = machine.streamBrokeOff(reset) else {
                Issue.record("the stream did not start over")
                return
            }
            #expect(delay.failing.curlCode == 56 && log.contains("starting over from the first byte"))
            waits.append(delay.0)
            machine.entered(.transferring)
        }
        #expect(waits[0] >= .milliseconds(125) && waits[0] <= .milliseconds(250), "\(waits)")
        #expect(waits[1] >= .milliseconds(250) && waits[1] <= .milliseconds(500), "\(waits)")
        let event4 = machine.streamBrokeOff(reset)
        let error = try #require(failure(event4))
        #expect(error.message.contains("cannot resume (tried 3 times)"), "\(error)")
        #expect(error.remedy == .startAgain)

        var piped = self.machine(inOrder: true)
        let event5 = piped.streamBrokeOff(reset)
        let once = try #require(failure(event5))
        #expect(once.remedy == nil && piped.streamTries == 0, "a reader holds what it was handed")
    }

    @Test("the probe's connection lost while the part file was created: asked again, then a failure")
    func lostHandovers() throws {
        var machine = machine()
        machine.entered(.probing)
        guard case .probeAgain(let discarding, _) = machine.handoverLost(part: "f.part", resuming: true) else {
            Issue.record("not asked again")
            return
        }
        #expect(!discarding, "a resumed part file is kept")
        guard case .probeAgain(true, _) = machine.handoverLost(part: "f.part", resuming: false) else {
            Issue.record("not asked again")
            return
        }
        let event6 = machine.handoverLost(part: "f.part", resuming: false)
        let error = try #require(failure(event6))
        #expect(error.message == "the server's connection ended while f.part was created (3 times)")
    }

    @Test("a completed transfer finalizes, unless it is not the size the caller expected")
    func completion() throws {
        var right = machine(expected: 10)
        guard case .finalize = right.transferCompleted(size: 10, url: "http://h/f") else {
            Issue.record("the right size did not finalize")
            return
        }
        #expect(right.phase == .finalizing)
        #expect(right.pause(store: .mapped, kept: "; 10 bytes kept") == nil, "finalizing is not paused")
        var stillFinalizing = right
        let cancelled = stillFinalizing.cancel()
        #expect(cancelled == nil, "nor cancelled")
        var wrong = machine(expected: 10)
        let event7 = wrong.transferCompleted(size: 12, url: "http://h/f")
        let error = try #require(failure(event7))
        #expect(error.kind == .sizeMismatch && wrong.discardsOnStop)
    }

    @Test(
        "what a stop keeps: a map is kept with one last checkpoint; a stream or one response keeps nothing, saying so")
    func stops() throws {
        let paused = DownloadError(.interrupted, "download paused", remedy: .resume)
        var mapped = machine()
        let event8 = mapped.stopping(.failure(paused), store: .mapped)
        let keep = try #require(event8)
        #expect(!keep.discards && keep.checkpointsFirst && keep.failure?.remedy == .resume)
        let again = mapped.stopping(.failure(paused), store: .mapped)
        #expect(again == nil, "a session stops once")

        var stream = machine()
        let event9 = stream.stopping(.failure(paused), store: .stream)
        let gone = try #require(event9)
        #expect(gone.discards && !gone.checkpointsFirst && gone.failure?.remedy == .startAgain)
        #expect(gone.failure?.message.contains("does not support ranges") == true)

        var small = machine()
        let event10 = small.stopping(.failure(paused), store: .oneResponse)
        let one = try #require(event10)
        #expect(one.failure?.message.contains("arrives in one response keeps no partial state") == true)

        var probing = SessionMachine(settings: .init(failures: failures, restartsOnChange: true, inOrder: false))
        probing.entered(.probing)
        let event11 = probing.stopping(.failure(paused), store: .none(resumedMap: true))
        let resumed = try #require(event11)
        #expect(!resumed.discards && !resumed.checkpointsFirst && resumed.failure?.remedy == .resume)

        var cancelled = machine()
        let event12 = cancelled.cancel()
        let cancel = try #require(failure(event12))
        let event13 = cancelled.stopping(.failure(cancel), store: .mapped)
        let stop = try #require(event13)
        #expect(stop.discards && !stop.checkpointsFirst)

        var done = machine()
        let event14 = done.stopping(.success(()), store: .mapped)
        let success = try #require(event14)
        #expect(success.failure == nil && !success.discards)
    }
}
