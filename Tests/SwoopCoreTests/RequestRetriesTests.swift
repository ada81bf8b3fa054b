import Testing

@testable import SwoopCore

/// The one retry value of a single request (a probe, a mirror's check, a document): it counts
/// failed tries, waits the policy's backoff between them, keeps since when the request has been
/// failing, and gives up with the one wording of how many tries it took.
@Suite("RequestRetries")
struct RequestRetriesTests {
    private let policy = FailurePolicy(
        baseDelay: .milliseconds(200), maxDelay: .seconds(5), maxTries: 4, maxOutage: .seconds(60))
    private let start = Moment.now

    @Test("a transient failure is asked again after the backoff until the tries run out, then given up, saying so")
    func transientUntilTriesRunOut() throws {
        var retries = RequestRetries()
        let error = DownloadError.httpStatus(503, url: "http://h/x")
        for tries in 1...3 {
            let now = start + .seconds(tries)
            guard case .again(let delay) = retries.failed(error, retryAfter: nil, policy: policy, at: now) else {
                Issue.record("try \(tries) was given up")
                return
            }
            let longest = min(5.0, 0.2 * Double(1 << (tries - 1)))
            #expect(delay.seconds >= longest / 2 - 0.001 && delay.seconds <= longest + 0.001, "try \(tries)")
            let failing = try #require(retries.failing)
            #expect(failing.since == start + .seconds(1), "failing since the first failure")
            #expect(failing.nextTry == now + delay)
            #expect(retries.tries == tries)
        }
        guard case .giveUp(let final) = retries.failed(error, retryAfter: nil, policy: policy, at: start + .seconds(9))
        else {
            Issue.record("the fourth failure was asked again with maxTries 4")
            return
        }
        #expect(final.message.contains("(gave up after 4 tries)"), "\(final.message)")
        #expect(final.httpStatus == 503 && final.kind == error.kind)
        #expect(retries.failing == nil)
    }

    @Test("a permanent failure is given up at once, without a count of tries")
    func permanentAtOnce() {
        var retries = RequestRetries()
        let error = DownloadError.httpStatus(404, url: "http://h/x")
        guard case .giveUp(let final) = retries.failed(error, retryAfter: nil, policy: policy, at: start) else {
            Issue.record("a 404 was asked again")
            return
        }
        #expect(final.message == error.message)
        #expect(retries.tries == 1)
    }

    @Test("Retry-After lengthens the wait, within the policy's longest")
    func retryAfter() {
        var retries = RequestRetries()
        let error = DownloadError.httpStatus(429, url: "http://h/x")
        guard case .again(let delay) = retries.failed(error, retryAfter: 3, policy: policy, at: start) else {
            Issue.record("a 429 was given up")
            return
        }
        #expect(delay >= .seconds(3) && delay <= .seconds(5))
    }

    @Test("a wait named from outside (a download starting over) keeps since when the request has been failing")
    func waitsKeepTheStart() throws {
        var retries = RequestRetries()
        let error = DownloadError(.network, "the stream broke off")
        retries.waits(.seconds(1), failing: error, at: start)
        retries.waits(.seconds(2), failing: error, at: start + .seconds(5))
        let failing = try #require(retries.failing)
        #expect(failing.since == start && failing.nextTry == start + .seconds(7))
        #expect(retries.tries == 0, "a wait is not a failed try")
    }

    @Test("one wording of giving up: nothing after a single try, the count after more")
    func wording() {
        #expect(Wording.gaveUp(after: 1) == "")
        #expect(Wording.gaveUp(after: 2) == " (gave up after 2 tries)")
        #expect(DownloadError(.network, "reset").gaveUp(after: 3).reason == "reset (gave up after 3 tries)")
    }
}
