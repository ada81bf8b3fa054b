import Testing

@testable import SwoopCore

/// The probe stage's decisions as a machine (``ProbeMachine``), beside the transfer's and the
/// session's: a head's step and what it does with the response, the handover to the transfer (now,
/// once the sink opens, refused), and what an ended exchange or a failure leads to.
@Suite("Probe machine")
struct ProbeMachineTests {
    private let object = RemoteObject(
        url: RemoteURL(testing: "http://h/f"), size: 100, etag: "\"a\"", lastModified: nil, acceptsRanges: true)

    private var ranged: ProbeDecision.Step { .ranged(object, first: RangeRequest(own: ByteRange(0, 100))) }

    @Test("a download's ranged or streamed head hands its connection over; a name lookup reads one byte or stops")
    func heads() {
        var download = ProbeMachine(purpose: .download)
        #expect(download.head(decided: ranged) == .handOver)
        #expect(download.phase == .handingOver)
        var lookup = ProbeMachine(purpose: .headOnly)
        #expect(lookup.head(decided: ranged) == .discard)
        #expect(lookup.head(decided: .stream(object, discardsPartial: false)) == .abort)
        #expect(lookup.head(decided: .compareHeld(object, range: ByteRange(0, 10))) == .collect(ByteRange(0, 10)))
        #expect(lookup.head(decided: .alreadyComplete) == .asDecided)
        #expect(lookup.phase == .asking)
    }

    @Test("a ranged head the session keeps whole goes on in memory, and its end is the session's, failed or not")
    func keptWhole() {
        for failure in [nil, (error: DownloadError.invalidResponse("cut"), retryAfter: Int?.none)] {
            var machine = ProbeMachine(purpose: .download)
            #expect(machine.head(decided: ranged, takesWhole: true) == .takeWhole)
            #expect(machine.phase == .takingWhole)
            guard case .tookWhole = machine.ended(step: ranged, failure: failure, url: "u") else {
                Issue.record("the end of a response kept whole was not the session's (failure: \(failure != nil))")
                return
            }
            #expect(machine.phase == .handedOver)
            // Nothing after it is the probe's: the session finished, or its transfer has the connection.
            guard case .nothing = machine.ended(step: ranged, failure: nil, url: "u") else {
                Issue.record("an end after the response kept whole was acted on")
                return
            }
        }
        // Only a download's ranged head is kept whole: a stream is handed over, a lookup reads its byte.
        var stream = ProbeMachine(purpose: .download)
        #expect(stream.head(decided: .stream(object, discardsPartial: false), takesWhole: true) == .handOver)
        var lookup = ProbeMachine(purpose: .headOnly)
        #expect(lookup.head(decided: ranged, takesWhole: true) == .discard)
        #expect(lookup.phase == .asking)
    }

    @Test("while the connection is handed over, an ended exchange is the session's to find out at the sink")
    func handover() {
        var machine = ProbeMachine(purpose: .download)
        _ = machine.head(decided: ranged)
        guard case .nothing = machine.ended(step: ranged, failure: nil, url: "u") else {
            Issue.record("an end during the handover was acted on")
            return
        }
        guard case .wait = machine.handoverBegan(.whenSinkOpens, exchangeEnded: false) else {
            Issue.record("the sink's opening was not waited for")
            return
        }
        #expect(machine.sinkOpened(exchangeBusy: false, endedWhole: false) == .lost)
        #expect(machine.phase == .awaitingSink, "lost: the session asks again with a new probe")
        #expect(machine.sinkOpened(exchangeBusy: false, endedWhole: true) == .endedWhole)
        #expect(machine.phase == .handedOver)
        #expect(machine.sinkOpened(exchangeBusy: true, endedWhole: false) == .lost, "handed over once")
    }

    @Test("a refused handover fails the probe: at once if its exchange had ended, else when it ends")
    func refusedHandover() throws {
        let full = DownloadError(.diskFull, "no space")
        var ended = ProbeMachine(purpose: .download)
        _ = ended.head(decided: ranged)
        guard case .fail(let error) = ended.handoverBegan(.refused(full), exchangeEnded: true) else {
            Issue.record("an ended exchange's refusal did not fail at once")
            return
        }
        #expect(error.kind == .diskFull)

        var running = ProbeMachine(purpose: .download)
        _ = running.head(decided: ranged)
        guard case .letGo = running.handoverBegan(.refused(full), exchangeEnded: false) else {
            Issue.record("the body was not let go to the probe's own response")
            return
        }
        guard case .failed(let later, nil) = running.ended(step: ranged, failure: nil, url: "u") else {
            Issue.record("the refusal was not the probe's failure when its exchange ended")
            return
        }
        #expect(later.kind == .diskFull)
    }

    @Test("an ended exchange: a failure first; a 416 asked again without Range once; another answer asked again")
    func ends() {
        var machine = ProbeMachine(purpose: .download)
        let reset = DownloadError(.network, "reset", curlCode: 56)
        guard case .failed(_, 3) = machine.ended(step: .alreadyComplete, failure: (reset, 3), url: "u") else {
            Issue.record("a failure was not the end's")
            return
        }
        guard case .askWithoutRange = machine.ended(step: .withoutRange, failure: nil, url: "u") else {
            Issue.record("a 416 was not asked again without Range")
            return
        }
        #expect(machine.withoutRange)
        guard case .failed(let twice, _) = machine.ended(step: .withoutRange, failure: nil, url: "http://h/f") else {
            Issue.record("a 416 without Range was asked again")
            return
        }
        #expect(twice.message.contains("416 to a request without Range (http://h/f)"))
        guard
            case .askAgain("other validators") = machine.ended(
                step: .askAgain("other validators"), failure: nil, url: "u")
        else {
            Issue.record("another node's answer was not asked again")
            return
        }
        guard
            case .compare(_, let range) = machine.ended(
                step: .compareHeld(object, range: ByteRange(5, 9)), failure: nil, url: "u")
        else {
            Issue.record("held bytes were not compared")
            return
        }
        #expect(range == ByteRange(5, 9))
        guard case .failed(let headless, _) = machine.ended(step: nil, failure: nil, url: "u") else {
            Issue.record("a response without a head ended quietly")
            return
        }
        #expect(headless.message.contains("without a complete header"))
        guard case .end(.alreadyComplete) = machine.ended(step: .alreadyComplete, failure: nil, url: "u") else {
            Issue.record("a final step did not end the probe")
            return
        }
    }

    @Test("a failed probe: a changed object restarts, an expired URL is refreshed, the rest is retried or ends")
    func failures() {
        let machine = ProbeMachine(purpose: .download)
        let changed = DownloadError(.objectChanged, "the validators moved")
        #expect(machine.failed(changed, urlExpired: true) == .restart(changed.message))
        let forbidden = DownloadError.httpStatus(403, url: "u")
        #expect(machine.failed(forbidden, urlExpired: true) == .refreshURL)
        #expect(machine.failed(forbidden, urlExpired: false) == .retryOrGiveUp)
    }
}
