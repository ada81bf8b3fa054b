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

    private func record(size: Int64 = 1000, etag: String? = "\"v1\"") -> LocalObject {
        LocalObject(identity: ObjectIdentity(size: size, etag: etag), path: "/data/big.iso")
    }

    private let first = RequestedRange.bounded(ByteRange(0, 1 << 20))

    // MARK: Requests

    @Test func requestsFollowTheLocalState() {
        let fresh = ProbeDecision.request(for: .fresh, probeSize: 1 << 20)
        #expect(fresh.range == .bounded(ByteRange(0, 1 << 20)) && fresh.precondition == nil)
        let done = ProbeDecision.request(for: .completed(record()), probeSize: 1 << 20)
        #expect(done.range == .from(1000) && done.precondition! == ("If-Match", "\"v1\""))
        let partial = ProbeDecision.request(for: .resuming(map(lastModified: date)), probeSize: 1 << 20)
        #expect(
            partial.range == .bounded(ByteRange(2 << 20, 3 << 20)) && partial.precondition! == ("If-Match", "\"v1\""))
        let dated = ProbeDecision.request(
            for: .resuming(map(etag: "W/\"v1\"", lastModified: date, complete: true)), probeSize: 1 << 20)
        #expect(dated.range == .from(4 << 20) && dated.precondition! == ("If-Unmodified-Since", date))
        #expect(ProbeDecision.probeSize(minimumSegmentSize: 4 << 20) == 4 << 20)
        #expect(ProbeDecision.probeSize(minimumSegmentSize: 1) == 1 << 20)
    }

    // MARK: Fresh downloads

    @Test func a206StartsARangedDownload() {
        let (step, body) = decision().decide(
            head(206, [("Content-Range", "bytes 0-1048575/5000000"), ("ETag", "\"v1\"")]), requested: first)
        guard case .ranged(let object, let range) = step else { Issue.record("\(step)"); return }
        #expect(object.size == 5_000_000 && object.strongETag == "\"v1\"" && range == ByteRange(0, 1 << 20))
        #expect(body == .deliver)
    }

    @Test func a200IsASingleStream() {
        let (step, body) = decision().decide(head(200, [("Content-Length", "123")]), requested: first)
        guard case .stream(let object, let discards) = step else { Issue.record("\(step)"); return }
        #expect(object.size == 123 && !object.acceptsRanges && !discards && body == .deliver)
    }

    @Test func anHTMLPageForAFileIsAnErrorPage() {
        let (step, body) = decision().decide(
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
        let (step, body) = decision().decide(head(416, [("Content-Range", "bytes */0")]), requested: first)
        guard case .empty(let object) = step else { Issue.record("\(step)"); return }
        #expect(object.size == 0 && body == .discard)
        let (other, _) = decision().decide(head(416, [("Content-Range", "bytes */7")]), requested: first)
        guard case .fail(let error) = other else { Issue.record("\(other)"); return }
        #expect(error.httpStatus == 416)
    }

    @Test func redirectsAreFollowedUpToTheLimit() {
        let (step, body) = decision().decide(
            head(302, [("Location", "https://cdn.example.net/x.iso")]), requested: first)
        guard case .redirect(let next) = step else { Issue.record("\(step)"); return }
        #expect(next.host == "cdn.example.net" && body == .discard)
        let (tooMany, _) = decision(redirects: 3).decide(head(302, [("Location", "/y")]), requested: first)
        guard case .fail(let error) = tooMany else { Issue.record("\(tooMany)"); return }
        #expect(error.message.contains("too many redirects"))
        // A location the parser refuses (another scheme: RemoteURLTests) fails the probe with its reason.
        let refusing = ProbeDecision(
            url: url, originalURL: url, basis: .fresh, maxRedirects: 3,
            resolve: { _, _ throws(DownloadError) in
                throw .invalidResponse("only http and https redirects are followed")
            })
        let (ftp, _) = refusing.decide(head(301, [("Location", "ftp://example.com/x")]), requested: first)
        guard case .fail(let refused) = ftp else { Issue.record("\(ftp)"); return }
        #expect(refused.message.contains("only http and https"))
    }

    @Test func errorsAndBadHeadsFail() {
        let (notFound, _) = decision().decide(head(404, []), requested: first)
        guard case .fail(let error) = notFound else { Issue.record("\(notFound)"); return }
        #expect(error.kind == .httpStatus && error.httpStatus == 404)
        let (precondition, _) = decision().decide(head(412, []), requested: first)
        guard case .fail(let failed) = precondition else { Issue.record("\(precondition)"); return }
        #expect(failed.httpStatus == 412)
    }

    @Test func aStoredContentCodingIsKeptAsIs() {
        let (gzip, body) = decision().decide(
            head(206, [("Content-Range", "bytes 0-9/10"), ("Content-Encoding", "gzip")]), requested: first)
        guard case .ranged(let object, _) = gzip else { Issue.record("\(gzip)"); return }
        #expect(object.contentCoding == "gzip" && body == .deliver)
    }

    // MARK: Completed targets

    @Test func a416ConfirmsACompletedFile() {
        let done = decision(.completed(record()))
        #expect(
            isAlreadyComplete(done.decide(head(416, [("Content-Range", "bytes */1000")]), requested: .from(1000)).step))
        #expect(
            isAlreadyComplete(
                done.decide(head(416, [("Content-Range", "bytes */1000"), ("ETag", "\"v1\"")]), requested: .from(1000))
                    .step))
        let (grown, _) = done.decide(head(416, [("Content-Range", "bytes */999")]), requested: .from(1000))
        guard case .fail(let error) = grown else { Issue.record("\(grown)"); return }
        #expect(error.kind == .targetExists && error.remedy == .replaceTarget)
        #expect(!error.message.contains("--"), "the library names no CLI flags: \(error.message)")
        let (retagged, _) = done.decide(
            head(416, [("Content-Range", "bytes */1000"), ("ETag", "\"v2\"")]), requested: .from(1000))
        guard case .fail = retagged else { Issue.record("\(retagged)"); return }
    }

    @Test func a416WithoutTheSizeIsFollowedByTheLastByte() {
        let done = decision(.completed(record()))
        // Apache httpd and lighttpd: a 416 without Content-Range says nothing of the size.
        let (ask, _) = done.decide(head(416, []), requested: .from(1000))
        guard case .confirm(let lastByte) = ask else { Issue.record("\(ask)"); return }
        #expect(lastByte == .bounded(ByteRange(999, 1000)))
        let confirmed = head(206, [("Content-Range", "bytes 999-999/1000"), ("ETag", "\"v1\"")])
        let (same, body) = done.decide(confirmed, requested: lastByte)
        #expect(isAlreadyComplete(same) && body == .discard, "one byte, read and dropped: \(same)")
        for response in [
            head(206, [("Content-Range", "bytes 999-999/2000"), ("ETag", "\"v1\"")]),
            head(206, [("Content-Range", "bytes 999-999/1000"), ("ETag", "\"v2\"")]),
            head(416, []),  // not even the last byte: the object is shorter now
        ] {
            let (step, _) = done.decide(response, requested: lastByte)
            guard case .fail(let error) = step else { Issue.record("\(step)"); continue }
            #expect(error.kind == .targetExists, "\(error)")
        }
        // An empty completed file: a 416 to bytes=0- means the object is still empty, with or without Content-Range.
        let empty = decision(.completed(record(size: 0)))
        #expect(isAlreadyComplete(empty.decide(head(416, []), requested: .from(0)).step))
        #expect(isAlreadyComplete(empty.decide(head(416, [("Content-Range", "bytes */0")]), requested: .from(0)).step))
    }

    @Test func a416WithoutContentRangeToByteZeroMeansAnEmptyObject() {
        let (step, _) = decision().decide(head(416, []), requested: first)
        guard case .empty(let object) = step else { Issue.record("\(step)"); return }
        #expect(object.size == 0)
    }

    @Test func aCompletePartialDownloadIsConfirmedByItsLastByte() {
        let complete = decision(.resuming(map(lastModified: date, complete: true)))
        let (ask, _) = complete.decide(head(416, []), requested: .from(4 << 20))
        guard case .confirm(let lastByte) = ask else { Issue.record("\(ask)"); return }
        let confirmed = head(206, [("Content-Range", "bytes 4194303-4194303/4194304"), ("ETag", "\"v1\"")])
        let (step, body) = complete.decide(confirmed, requested: lastByte)
        guard case .finishResumed(let object) = step else { Issue.record("\(step)"); return }
        #expect(object.size == 4 << 20 && body == .discard)
        let (shorter, _) = complete.decide(head(416, []), requested: lastByte)
        guard case .restart = shorter else { Issue.record("\(shorter)"); return }
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
        let (again, _) = decision().decide(head(302, [("Location", "/big.iso")]), requested: first)
        guard case .redirect = again else { Issue.record("\(again)"); return }
        let (tooMany, _) = decision(redirects: 3).decide(head(302, [("Location", "/y")]), requested: first)
        guard case .fail(let error) = tooMany else { Issue.record("\(tooMany)"); return }
        #expect(error.kind == .tooManyRedirects && !error.isTransient)
    }

    @Test func aCompletedFileThatChangedIsReported() {
        let done = decision(.completed(record()))
        for response in [head(412, []), head(206, [("Content-Range", "bytes 1000-1999/2000"), ("ETag", "\"v1\"")])] {
            let (step, _) = done.decide(response, requested: .from(1000))
            guard case .fail(let error) = step else { Issue.record("\(step)"); continue }
            #expect(error.kind == .targetExists)
        }
        // A server ignoring ranges: the same size and ETag confirm it; anything else does not.
        #expect(
            isAlreadyComplete(
                done.decide(head(200, [("Content-Length", "1000"), ("ETag", "\"v1\"")]), requested: .from(1000)).step))
        let (chunked, _) = done.decide(
            head(200, [("Transfer-Encoding", "chunked"), ("ETag", "\"v1\"")]), requested: .from(1000))
        guard case .fail = chunked else { Issue.record("an unknown size confirms nothing: \(chunked)"); return }
    }

    // MARK: Partial downloads

    @Test func aMatching206Resumes() {
        let resuming = decision(.resuming(map()))
        let requested = RequestedRange.bounded(ByteRange(2 << 20, 3 << 20))
        let (step, _) = resuming.decide(
            head(206, [("Content-Range", "bytes 2097152-3145727/4194304"), ("ETag", "\"v1\"")]), requested: requested)
        guard case .ranged(_, let range) = step else { Issue.record("\(step)"); return }
        #expect(range == ByteRange(2 << 20, 3 << 20))
    }

    @Test func aDifferentObjectRestarts() {
        let resuming = decision(.resuming(map()))
        let requested = RequestedRange.bounded(ByteRange(2 << 20, 3 << 20))
        let cases: [(ResponseHead, String)] = [
            (head(206, [("Content-Range", "bytes 2097152-3145727/5000000"), ("ETag", "\"v1\"")]), "size"),
            (head(206, [("Content-Range", "bytes 2097152-3145727/4194304"), ("ETag", "\"v2\"")]), "ETag"),
            (head(412, []), "412"),
        ]
        for (response, why) in cases {
            let (step, _) = resuming.decide(response, requested: requested)
            guard case .restart(let reason) = step else { Issue.record("\(why): \(step)"); continue }
            #expect(reason.contains(why), "\(reason)")
        }
        let dated = decision(.resuming(map(etag: nil, lastModified: date)))
        let (changed, _) = dated.decide(
            head(
                206,
                [
                    ("Content-Range", "bytes 2097152-3145727/4194304"),
                    ("Last-Modified", "Wed, 16 Nov 1994 08:00:00 GMT"),
                ]), requested: requested)
        guard case .restart = changed else { Issue.record("\(changed)"); return }
    }

    @Test func aCompleteMapIsFinishedOnA416() {
        let complete = decision(.resuming(map(complete: true)))
        let (step, _) = complete.decide(head(416, [("Content-Range", "bytes */4194304")]), requested: .from(4 << 20))
        guard case .finishResumed(let object) = step else { Issue.record("\(step)"); return }
        #expect(object.size == 4 << 20 && object.etag == "\"v1\"")
        let (shrunk, _) = complete.decide(head(416, [("Content-Range", "bytes */100")]), requested: .from(4 << 20))
        guard case .restart = shrunk else { Issue.record("\(shrunk)"); return }
    }

    @Test func aServerThatStoppedServingRangesRestartsAsAStream() {
        let (step, _) = decision(.resuming(map())).decide(
            head(200, [("Content-Length", "4194304")]), requested: .bounded(ByteRange(2 << 20, 3 << 20)))
        guard case .stream(_, let discards) = step else { Issue.record("\(step)"); return }
        #expect(discards)
    }

    private func isAlreadyComplete(_ step: ProbeDecision.Step) -> Bool {
        if case .alreadyComplete = step { return true }
        return false
    }
}
