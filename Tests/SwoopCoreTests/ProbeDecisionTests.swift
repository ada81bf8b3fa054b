import Testing
@testable import SwoopCore

/// The probe's decisions, without a server: a head and the local state in, the next step out.
@Suite("ProbeDecision")
struct ProbeDecisionTests {
    private let url: RemoteURL
    private let date = "Tue, 15 Nov 1994 12:45:26 GMT"

    init() {
        url = RemoteURL(testing: "https://example.com/files/big.iso")
    }

    private func decision(_ basis: ProbeBasis = .fresh, redirects: Int = 0) -> ProbeDecision {
        ProbeDecision(
            url: url, originalURL: url, basis: basis, redirects: redirects, maxRedirects: 3,
            resolve: RemoteURL.testingResolve)
    }

    private func head(_ status: Int, _ fields: [(String, String)]) -> ResponseHead {
        ResponseHead(status: status, fields: fields.map { (name: $0.0, value: $0.1) })
    }

    /// A partial download of an object of `size` bytes, its first half on disk (or all of it).
    private func map(
        size: Int64 = 4 << 20, etag: String? = "\"v1\"", lastModified: String? = nil, complete: Bool = false
    ) -> LocalObject {
        let identity = ObjectIdentity(size: size, etag: etag, lastModified: lastModified)
        return LocalObject(
            identity: identity, missingRanges: complete ? [] : [ByteRange(size / 2, size)], path: "/data/big.iso")
    }

    /// A completed file of `size` bytes (the payload of ``bytes(_:)``), whose edges were read.
    private func record(size: Int64 = 1000, etag: String? = "\"v1\"") -> LocalObject {
        LocalObject(identity: ObjectIdentity(size: size, etag: etag), path: "/data/big.iso", samples: edges(size))
    }

    /// The bytes of an object of `size` bytes of ``bytes(_:)`` that a confirmation compares.
    private func edges(_ size: Int64) -> [HeldBytes] {
        ProbeDecision.confirmationSamples(size: size).map { HeldBytes(range: $0, bytes: bytes($0)) }
    }

    /// Test bytes: a function of the offset.
    private func bytes(_ range: ByteRange) -> [UInt8] {
        (range.lowerBound..<range.upperBound).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 8) }
    }

    private let first = RequestedRange.bounded(ByteRange(0, 1 << 20))

    // MARK: Requests

    @Test func requestsFollowTheLocalState() {
        let fresh = ProbeDecision.request(for: .fresh, probeSize: 1 << 20)
        #expect(fresh.range == .bounded(ByteRange(0, 1 << 20)) && fresh.precondition == nil)
        // A completed file: 1 KiB from its middle (all of it, when smaller), to compare with the file's.
        let done = ProbeDecision.request(for: .completed(record()), probeSize: 1 << 20)
        #expect(done.range == .bounded(ByteRange(0, 1000)) && done.precondition! == ("If-Match", "\"v1\""))
        let large = ProbeDecision.request(for: .completed(record(size: 1 << 20)), probeSize: 1 << 20)
        #expect(large.range == .bounded(ByteRange((1 << 19) - 512, (1 << 19) + 512)))
        #expect(ProbeDecision.request(for: .completed(record(size: 0)), probeSize: 1 << 20).range == .from(0))
        // A partial download: its first missing bytes, with a lead into the bytes held before them.
        let partial = ProbeDecision.request(for: .resuming(map(lastModified: date)), probeSize: 1 << 20)
        #expect(
            partial.range == .bounded(ByteRange((2 << 20) - ProbeDecision.window, 3 << 20))
                && partial.precondition! == ("If-Match", "\"v1\""))
        // ... and a trail into those after them, when it reaches them.
        let gap = LocalObject(
            identity: ObjectIdentity(size: 4 << 20, etag: "\"v1\""), missingRanges: [ByteRange(1 << 20, 3 << 20)],
            path: "/data/big.iso")
        let bridged = ProbeDecision.request(for: .resuming(gap), probeSize: 4 << 20)
        #expect(bridged.range == .bounded(ByteRange((1 << 20) - 4096, (3 << 20) + 4096)))
        let dated = ProbeDecision.request(
            for: .resuming(map(etag: "W/\"v1\"", lastModified: date, complete: true)), probeSize: 1 << 20)
        #expect(
            dated.range == .bounded(ProbeDecision.confirmationRange(size: 4 << 20))
                && dated.precondition! == ("If-Unmodified-Since", date))
        #expect(ProbeDecision.probeSize(minimumSegmentSize: 4 << 20) == 4 << 20)
        #expect(ProbeDecision.probeSize(minimumSegmentSize: 1) == 1 << 20)
    }

    // MARK: Fresh downloads

    @Test func a206StartsARangedDownload() {
        let (step, body) = decision().deciding(
            head(206, [("Content-Range", "bytes 0-1048575/5000000"), ("ETag", "\"v1\"")]), requested: first)
        guard case .ranged(let object, let range) = step else { Issue.record("\(step)"); return }
        #expect(object.size == 5_000_000 && object.strongETag == "\"v1\"" && range.own == ByteRange(0, 1 << 20))
        #expect(range.lead == 0 && range.trail == 0 && body == .deliver)
    }

    @Test func a200WithAContentRangeHoldsWhatItSays() {
        // Some S3 implementations answer a range with 200 and the range's bytes.
        let (step, _) = decision().deciding(
            head(200, [("Content-Range", "bytes 0-1048575/5000000"), ("Content-Length", "1048576")]), requested: first)
        guard case .ranged(let object, let range) = step else { Issue.record("\(step)"); return }
        #expect(object.size == 5_000_000 && range.own == ByteRange(0, 1 << 20))
        // Fewer bytes than asked (a store that caps them): what it holds.
        let (capped, _) = decision().deciding(
            head(200, [("Content-Range", "bytes 0-65535/5000000"), ("Content-Length", "65536")]), requested: first)
        guard case .ranged(_, let held) = capped else { Issue.record("\(capped)"); return }
        #expect(held.own == ByteRange(0, 65536))
        // Another range than asked is never written as the one asked.
        let (other, _) = decision().deciding(
            head(200, [("Content-Range", "bytes 5-65535/5000000"), ("Content-Length", "65531")]), requested: first)
        guard case .fail(let error) = other else { Issue.record("\(other)"); return }
        #expect(error.kind == .invalidResponse)
    }

    @Test func a200IsASingleStream() {
        let (step, body) = decision().deciding(head(200, [("Content-Length", "123")]), requested: first)
        guard case .stream(let object, let discards) = step else { Issue.record("\(step)"); return }
        #expect(object.size == 123 && !object.acceptsRanges && !discards && body == .deliver)
    }

    @Test func anHTMLPageForAFileIsAnErrorPage() {
        let (step, body) = decision().deciding(
            head(200, [("Content-Type", "text/html"), ("Content-Length", "300")]), requested: first)
        guard case .fail(let error) = step else { Issue.record("\(step)"); return }
        #expect(error.kind == .invalidResponse && error.isTransient && body == .abort)
        #expect(error.message.contains("HTML page"))
        #expect(
            ProbeDecision.looksLikeErrorPage(
                head(200, [("Content-Type", "text/html")]), url: try! RemoteURL(testing: "https://h/a.tar.gz")))
        #expect(
            !ProbeDecision.looksLikeErrorPage(
                head(200, [("Content-Type", "text/html")]), url: try! RemoteURL(testing: "https://h/index.php")))
        #expect(
            !ProbeDecision.looksLikeErrorPage(
                head(200, [("Content-Type", "text/html")]), url: try! RemoteURL(testing: "https://h/download")))
        #expect(!ProbeDecision.looksLikeErrorPage(head(200, [("Content-Type", "application/octet-stream")]), url: url))
    }

    @Test func anEmptyObjectIsA416AtZero() {
        let (step, body) = decision().deciding(head(416, [("Content-Range", "bytes */0")]), requested: first)
        guard case .empty(let object) = step else { Issue.record("\(step)"); return }
        #expect(object.size == 0 && body == .discard)
        // Any other 416 to byte 0 (a server that refuses every range of a small object): asked
        // again without Range at once, not retried.
        for refusal in [head(416, [("Content-Range", "bytes */7")]), head(416, [])] {
            let (other, _) = decision().deciding(refusal, requested: first)
            guard case .withoutRange = other else { Issue.record("\(other)"); return }
        }
    }

    @Test func redirectsAreFollowedUpToTheLimit() {
        let (step, body) = decision().deciding(
            head(302, [("Location", "https://cdn.example.net/x.iso")]), requested: first)
        guard case .redirect(let next) = step else { Issue.record("\(step)"); return }
        #expect(next.host == "cdn.example.net" && body == .discard)
        let (tooMany, _) = decision(redirects: 3).deciding(head(302, [("Location", "/y")]), requested: first)
        guard case .fail(let error) = tooMany else { Issue.record("\(tooMany)"); return }
        #expect(error.message.contains("too many redirects"))
        // A location the parser refuses (another scheme: RemoteURLTests) fails the probe with its reason.
        let refusing = ProbeDecision(
            url: url, originalURL: url, basis: .fresh, maxRedirects: 3,
            resolve: { _, _ throws(DownloadError) in
                throw .invalidResponse("only http and https redirects are followed")
            })
        let (ftp, _) = refusing.deciding(head(301, [("Location", "ftp://example.com/x")]), requested: first)
        guard case .fail(let refused) = ftp else { Issue.record("\(ftp)"); return }
        #expect(refused.message.contains("only http and https"))
    }

    @Test func errorsAndBadHeadsFail() {
        let (notFound, _) = decision().deciding(head(404, []), requested: first)
        guard case .fail(let error) = notFound else { Issue.record("\(notFound)"); return }
        #expect(error.kind == .httpStatus && error.httpStatus == 404)
        let (precondition, _) = decision().deciding(head(412, []), requested: first)
        guard case .fail(let failed) = precondition else { Issue.record("\(precondition)"); return }
        #expect(failed.httpStatus == 412)
    }

    @Test func aStoredContentCodingIsKeptAsIs() {
        let (gzip, body) = decision().deciding(
            head(206, [("Content-Range", "bytes 0-9/10"), ("Content-Encoding", "gzip")]), requested: first)
        guard case .ranged(let object, _) = gzip else { Issue.record("\(gzip)"); return }
        #expect(object.contentCoding == "gzip" && body == .deliver)
    }

    // MARK: Completed targets

    @Test func aCompletedFileIsConfirmedByItsBytes() {
        let done = decision(.completed(record(size: 100_000)))
        let tail = ProbeDecision.confirmationRange(size: 100_000)
        let asked = RequestedRange.bounded(tail)
        let answer = "bytes \(tail.lowerBound)-\(tail.upperBound - 1)"
        let response = head(206, [("Content-Range", "\(answer)/100000"), ("ETag", "\"v1\"")])
        let (step, body) = done.deciding(response, requested: asked)
        guard case .compareHeld(let found, let range) = step else { Issue.record("\(step)"); return }
        #expect(range == tail && body == .deliver)
        #expect(isAlreadyComplete(done.confirmed(bytes(tail), at: range, found: found)))
        var other = bytes(tail)
        other[7] ^= 1
        // Different bytes under the same validators (a server that kept them over a change): the
        // object changed, and the finished file is fetched anew.
        guard case .restart(let reason) = done.confirmed(other, at: range, found: found) else {
            Issue.record("different bytes are another version"); return
        }
        #expect(reason.contains("differ") && reason.contains("/data/big.iso"), "\(reason)")
        // Other validators (a change, or a pool's node with another mtime): asked again.
        let retagged = head(206, [("Content-Range", "\(answer)/100000"), ("ETag", "\"v2\"")])
        guard case .askAgain(let why) = done.deciding(retagged, requested: asked).step else {
            Issue.record("new validators are asked again"); return
        }
        #expect(why.contains("\"v2\""), "\(why)")
        // Another size is another version.
        let (grown, _) = done.deciding(head(206, [("Content-Range", "\(answer)/200000")]), requested: asked)
        guard case .restart(let grew) = grown else { Issue.record("\(grown)"); return }
        #expect(grew.contains("size"))
    }

    @Test("other validators: the held ones answered again prove a pool; gone for four answers, a change")
    func otherValidatorsOverTime() {
        let tail = ProbeDecision.confirmationRange(size: 100_000)
        let answer = "bytes \(tail.lowerBound)-\(tail.upperBound - 1)/100000"
        let held = head(206, [("Content-Range", answer), ("ETag", "\"v1\"")])
        let retagged = head(206, [("Content-Range", answer), ("ETag", "\"v2\"")])
        // A pool: a 412 (another node), then the held validators again on a new connection.
        var pool = decision(.completed(record(size: 100_000)))
        guard case .askAgain = pool.decide(head(412, []), requested: .bounded(tail)).step else {
            Issue.record("a 412 is asked again"); return
        }
        guard case .compareHeld = pool.decide(held, requested: .bounded(tail)).step else {
            Issue.record("the held validators again: compared by bytes"); return
        }
        #expect(pool.watch.isPool)
        // A change: the held validators are gone, whatever the answers (412s, new validators).
        var changed = decision(.completed(record(size: 100_000)))
        for answer in [head(412, []), retagged, head(412, [])] {
            guard case .askAgain = changed.decide(answer, requested: .bounded(tail)).step else {
                Issue.record("asked again"); return
            }
        }
        guard case .restart(let reason) = changed.decide(retagged, requested: .bounded(tail)).step else {
            Issue.record("four answers without the held validators: a change"); return
        }
        #expect(reason.contains("4 answers in a row") && reason.contains("changed"), "\(reason)")
        #expect(!changed.watch.isPool)
        // The same for a partial download, with dates only: another Last-Modified is the change.
        let dated = map(etag: nil, lastModified: date)
        var resuming = decision(.resuming(dated))
        let lead = ProbeDecision.window
        let requested = RequestedRange.bounded(ByteRange((2 << 20) - lead, 3 << 20))
        let later = head(
            206,
            [
                ("Content-Range", "bytes \((2 << 20) - lead)-3145727/4194304"),
                ("Last-Modified", "Wed, 16 Nov 1994 08:00:00 GMT"),
            ])
        for _ in 0..<3 {
            guard case .askAgain = resuming.decide(later, requested: requested).step else {
                Issue.record("asked again"); return
            }
        }
        guard case .restart = resuming.decide(later, requested: requested).step else {
            Issue.record("a date that stays other is a change"); return
        }
    }

    @Test func a416ToACompletedFileIsAskedAgainWithoutRange() {
        let done = decision(.completed(record()))
        // Apache httpd and lighttpd: a 416 without Content-Range says nothing of the size; a
        // server that refuses ranges of small objects says the right size.
        for refusal in [head(416, []), head(416, [("Content-Range", "bytes */1000")])] {
            guard case .withoutRange = done.deciding(refusal, requested: .from(0)).step else {
                Issue.record("a 416 to a held file's range is asked again without Range"); return
            }
        }
        let (shrunk, _) = done.deciding(head(416, [("Content-Range", "bytes */999")]), requested: .from(0))
        guard case .restart(let reason) = shrunk else { Issue.record("\(shrunk)"); return }
        #expect(reason.contains("size"))
        // The whole object then: its size and first bytes decide.
        let (whole, body) = done.deciding(head(200, [("Content-Length", "1000")]), requested: .from(0))
        guard case .compareHeld(let found, let range) = whole else { Issue.record("\(whole)"); return }
        #expect(range == ByteRange(0, 1000) && body == .deliver)
        #expect(isAlreadyComplete(done.confirmed(bytes(range), at: range, found: found)))
    }

    @Test func aCompletePartialDownloadIsConfirmedByItsLastBytes() {
        let local = LocalObject(
            identity: ObjectIdentity(size: 4 << 20, etag: "\"v1\""), path: "/data/big.iso", samples: edges(4 << 20))
        let complete = decision(.resuming(local))
        let tail = ProbeDecision.confirmationRange(size: 4 << 20)
        let response = head(
            206, [("Content-Range", "bytes \(tail.lowerBound)-\(tail.upperBound - 1)/4194304"), ("ETag", "\"v1\"")])
        guard case .compareHeld(let found, let range) = complete.deciding(response, requested: .bounded(tail)).step
        else { Issue.record("a complete map is confirmed by its bytes"); return }
        guard case .finishResumed(let object) = complete.confirmed(bytes(range), at: range, found: found) else {
            Issue.record("the same bytes finish it"); return
        }
        #expect(object.size == 4 << 20)
        guard case .restart = complete.confirmed([UInt8](repeating: 0, count: 1024), at: range, found: found) else {
            Issue.record("other bytes start over"); return
        }
        let (shrunk, _) = complete.deciding(head(416, [("Content-Range", "bytes */100")]), requested: .from(0))
        guard case .restart = shrunk else { Issue.record("\(shrunk)"); return }
        guard case .withoutRange = complete.deciding(head(416, []), requested: .bounded(tail)).step else {
            Issue.record("a 416 without the size is asked again without Range"); return
        }
    }

    @Test func redirectLoopsAndLongChainsFailAsTooManyRedirects() throws {
        var loop = decision(redirects: 0)
        loop.maxRedirects = 20
        let a = loop.url
        let b = RemoteURL(testing: "https://example.com/b.iso")
        var sent = 0
        while sent < 20 {
            let location = loop.url == a ? "/b.iso" : "/big.iso"
            let (step, _) = loop.decide(head(302, [("Location", location)]), requested: first)
            sent += 1
            guard case .redirect(let next) = step else {
                guard case .fail(let error) = step else { Issue.record("\(step)"); return }
                #expect(error.kind == .tooManyRedirects && error.message.contains("loop"), "\(error)")
                #expect(error.message.contains("\(a.redacted) -> \(b.redacted)"), "\(error)")
                break
            }
            loop.followed(to: next)
        }
        #expect(sent == 4, "A -> B -> A -> B, then back to A a third time: \(sent) responses")
        // Once back to the same URL is allowed (a redirect to itself after setting a cookie).
        let (again, _) = decision().deciding(head(302, [("Location", "/big.iso")]), requested: first)
        guard case .redirect = again else { Issue.record("\(again)"); return }
        let (tooMany, _) = decision(redirects: 3).deciding(head(302, [("Location", "/y")]), requested: first)
        guard case .fail(let error) = tooMany else { Issue.record("\(tooMany)"); return }
        #expect(error.kind == .tooManyRedirects && !error.isTransient)
    }

    @Test func aCompletedFileThatChangedIsFetchedAnew() {
        let done = decision(.completed(record()))
        // 412: the server's copy has other validators: asked again, on a new connection.
        guard case .askAgain = done.deciding(head(412, []), requested: .from(0)).step else {
            Issue.record("a 412 is asked again"); return
        }
        let (step, _) = done.deciding(
            head(206, [("Content-Range", "bytes 0-1999/2000"), ("ETag", "\"v1\"")]), requested: .from(0))
        guard case .restart = step else { Issue.record("\(step)"); return }
        // A server ignoring ranges: the same size, then the bytes, confirm it.
        guard case .compareHeld = done.deciding(head(200, [("Content-Length", "1000")]), requested: .from(0)).step
        else { Issue.record("the whole object is compared"); return }
        let (chunked, _) = done.deciding(
            head(200, [("Transfer-Encoding", "chunked"), ("ETag", "\"v1\"")]), requested: .from(0))
        guard case .restart = chunked else { Issue.record("an unknown size confirms nothing: \(chunked)"); return }
        // A 200 under other validators is asked again too.
        guard
            case .askAgain = done.deciding(
                head(200, [("Content-Length", "1000"), ("ETag", "\"v2\"")]), requested: .from(0)
            ).step
        else { Issue.record("other validators are asked again"); return }
    }

    // MARK: Partial downloads

    @Test func aMatching206Resumes() {
        let resuming = decision(.resuming(map()))
        let lead = ProbeDecision.window
        let requested = RequestedRange.bounded(ByteRange((2 << 20) - lead, 3 << 20))
        let (step, _) = resuming.deciding(
            head(206, [("Content-Range", "bytes \((2 << 20) - lead)-3145727/4194304"), ("ETag", "\"v1\"")]),
            requested: requested)
        guard case .ranged(_, let range) = step else { Issue.record("\(step)"); return }
        #expect(range.own == ByteRange(2 << 20, 3 << 20) && range.lead == lead)
        #expect(range.sent == ByteRange((2 << 20) - lead, 3 << 20))
    }

    @Test func newValidatorsAreAskedAgainBeforeResuming() {
        let resuming = decision(.resuming(map()))
        let lead = ProbeDecision.window
        let requested = RequestedRange.bounded(ByteRange((2 << 20) - lead, 3 << 20))
        let range = "bytes \((2 << 20) - lead)-3145727"
        // Another size is another object.
        let (resized, _) = resuming.deciding(
            head(206, [("Content-Range", "\(range)/5000000"), ("ETag", "\"v1\"")]), requested: requested)
        guard case .restart(let reason) = resized else { Issue.record("\(resized)"); return }
        #expect(reason.contains("size"))
        // Other validators, or a 412: a change or a pool's node; asked again on a new connection.
        let (retagged, body) = resuming.deciding(
            head(206, [("Content-Range", "\(range)/4194304"), ("ETag", "\"v2\"")]), requested: requested)
        guard case .askAgain = retagged else { Issue.record("\(retagged)"); return }
        #expect(body == .abort)
        guard case .askAgain = resuming.deciding(head(412, []), requested: requested).step else {
            Issue.record("a 412 is asked again"); return
        }
    }

    @Test func aServerThatStoppedServingRangesRestartsAsAStream() {
        let (step, _) = decision(.resuming(map())).deciding(
            head(200, [("Content-Length", "4194304")]), requested: .bounded(ByteRange(2 << 20, 3 << 20)))
        guard case .stream(_, let discards) = step else { Issue.record("\(step)"); return }
        #expect(discards)
    }

    private func isAlreadyComplete(_ step: ProbeDecision.Step) -> Bool {
        if case .alreadyComplete = step { return true }
        return false
    }
}

extension ProbeDecision {
    /// What `head` decides, from this state (the decision itself is left as it was).
    fileprivate func deciding(_ head: ResponseHead, requested: RequestedRange) -> (step: Step, body: BodyDisposition) {
        var copy = self
        return copy.decide(head, requested: requested)
    }
}
