import Testing
@testable import SwoopCore

/// Hand-picked responses the validator must accept or refuse, with the error it gives.
@Suite("ResponseValidator examples")
struct ResponseValidatorTests {
    let url: RemoteURL
    let object: RemoteObject
    let requested = ByteRange(1000, 2000)

    init() throws {
        url = RemoteURL(testing: "https://example.com/big.iso")
        object = RemoteObject(
            url: url, size: 10_000, etag: "\"abc\"", lastModified: "Tue, 15 Nov 1994 12:45:26 GMT", acceptsRanges: true)
    }

    private func head(_ status: Int, _ fields: [(String, String)]) -> ResponseHead {
        ResponseHead(status: status, fields: fields.map { (name: $0.0, value: $0.1) })
    }

    private var good: [(String, String)] {
        [("Content-Range", "bytes 1000-1999/10000"), ("Content-Length", "1000"), ("ETag", "\"abc\"")]
    }

    private func segmentError(_ head: ResponseHead, object: RemoteObject? = nil) -> DownloadError? {
        do {
            _ = try ResponseValidator.segment(head, requested: requested, object: object ?? self.object)
            return nil
        } catch {
            return error
        }
    }

    @Test func acceptsTheExactRange() {
        #expect(segmentError(head(206, good)) == nil)
        // Header names in any case; Content-Length may be absent.
        #expect(segmentError(head(206, [("CONTENT-RANGE", "bytes 1000-1999/10000"), ("etag", "\"abc\"")])) == nil)
        // The same value twice is not a conflict.
        #expect(segmentError(head(206, good + [("Content-Length", "1000")])) == nil)
        #expect(segmentError(head(206, good + [("Content-Encoding", "identity")])) == nil)
    }

    @Test func refusesA200ToARangeRequest() throws {
        let error = try #require(
            segmentError(head(200, [("Content-Type", "text/html; charset=utf-8"), ("Content-Length", "5120")])))
        #expect(error.kind == .invalidResponse)
        #expect(error.httpStatus == 200)
        #expect(error.message.contains("200"))
        #expect(error.message.contains("text/html"))
        #expect(error.message.contains("error page"))
        #expect(error.isTransient)
    }

    @Test func preconditionFailedMeansTheObjectChanged() throws {
        let error = try #require(segmentError(head(412, [])))
        #expect(error.kind == .objectChanged)
        #expect(error.httpStatus == 412)
        #expect(error.message.contains("If-Match"))
        #expect(!error.isTransient)
        // Without an ETag, the precondition is If-Unmodified-Since.
        var dated = object
        dated.etag = nil
        #expect(segmentError(head(412, []), object: dated)?.message.contains("If-Unmodified-Since") == true)
    }

    @Test func rangeNotSatisfiableMeansTheObjectShrank() throws {
        let error = try #require(segmentError(head(416, [("Content-Range", "bytes */500")])))
        #expect(error.kind == .objectChanged)
        #expect(error.httpStatus == 416)
    }

    @Test("other statuses are HTTP errors", arguments: [404, 500, 503, 429, 301, 204, 100])
    func otherStatuses(status: Int) throws {
        var signed = object
        signed.url = RemoteURL(testing: "https://user:hunter2@example.com/big.iso?token=s3cret")
        let error = try #require(segmentError(head(status, good), object: signed))
        #expect(error.kind == .httpStatus)
        #expect(error.httpStatus == status)
        #expect(error.message.contains(String(status)))
        // The URL in the message is redacted.
        #expect(error.message.contains("https://example.com/big.iso"))
        #expect(!error.message.contains("s3cret") && !error.message.contains("hunter2"))
    }

    @Test func aChangedSizeIsAChangedObject() throws {
        let error = try #require(
            segmentError(head(206, [("Content-Range", "bytes 1000-1999/10001"), ("ETag", "\"abc\"")])))
        #expect(error.kind == .objectChanged)
        #expect(error.message.contains("10001"))
        // An unknown total cannot be checked against the planned size: refused too.
        #expect(segmentError(head(206, [("Content-Range", "bytes 1000-1999/*"), ("ETag", "\"abc\"")])) != nil)
    }

    /// The verdict on a head whose framing is right.
    private func verdict(_ head: ResponseHead, object: RemoteObject? = nil) -> ResponseValidator.SegmentVerdict? {
        try? ResponseValidator.segment(head, requested: requested, object: object ?? self.object).verdict
    }

    @Test func acceptsFewerBytesFromTheFirstOneAskedFor() throws {
        // A store that caps the bytes per response: what it holds, never written as what was asked.
        let (verdict, holds) = try ResponseValidator.segment(
            head(206, [("Content-Range", "bytes 1000-1499/10000"), ("Content-Length", "500"), ("ETag", "\"abc\"")]),
            requested: requested, object: object)
        #expect(verdict == .pinned && holds == ByteRange(1000, 1500))
        // A 200 that carries a Content-Range holds what that says.
        let partial = try ResponseValidator.segment(
            head(200, [("Content-Range", "bytes 1000-1999/10000"), ("ETag", "\"abc\"")]), requested: requested,
            object: object)
        #expect(partial.holds == requested)
    }

    @Test func refusesOtherBytes() {
        for value in [
            "bytes 1001-1999/10000", "bytes 1000-2000/10000", "bytes 0-9999/10000", "bytes */10000",
        ] {
            let error = segmentError(head(206, [("Content-Range", value), ("ETag", "\"abc\"")]))
            #expect(error?.kind == .invalidResponse, "\(value)")
        }
        #expect(
            segmentError(head(206, [("ETag", "\"abc\"")]))?.message.contains("without a valid Content-Range") == true)
    }

    @Test func refusesAMismatchedContentLength() {
        for length in ["999", "1001", "0", "", "abc", "1000 1000"] {
            let error = segmentError(
                head(
                    206, [("Content-Range", "bytes 1000-1999/10000"), ("Content-Length", length), ("ETag", "\"abc\"")]))
            #expect(error?.kind == .invalidResponse, "Content-Length '\(length)'")
        }
    }

    @Test func refusesConflictingDuplicates() throws {
        for extra in [("Content-Range", "bytes 0-999/10000"), ("Content-Length", "999"), ("ETag", "\"other\"")] {
            let error = try #require(segmentError(head(206, good + [extra])))
            #expect(error.message.contains("conflicting"), "\(extra)")
        }
    }

    @Test func aStoredContentCodingMustStayTheSame() throws {
        let codings = [("gzip", "gzip"), ("GZIP", "gzip"), ("gzip, identity", "gzip"), ("x-gzip", "x-gzip")]
        for (coding, normalized) in codings {
            var stored = object
            stored.contentCoding = normalized
            #expect(segmentError(head(206, good + [("Content-Encoding", coding)]), object: stored) == nil, "\(coding)")
            let dropped = try #require(segmentError(head(206, good), object: stored))
            #expect(dropped.kind == .objectChanged && dropped.message.contains("Content-Encoding"), "\(dropped)")
        }
        let added = try #require(segmentError(head(206, good + [("Content-Encoding", "br")])))
        #expect(added.kind == .objectChanged && added.message.contains("identity became br"), "\(added)")
        #expect(ResponseValidator.contentCoding(head(200, [("Content-Encoding", "identity")])) == "identity")
        #expect(ResponseValidator.contentCoding(head(200, [("Content-Encoding", "gzip, br")])) == "gzip, br")
    }

    @Test func refusesMultipart() throws {
        let error = try #require(segmentError(head(206, good + [("Content-Type", "multipart/byteranges; boundary=x")])))
        #expect(error.message.contains("multipart"))
    }

    @Test(
        "a second Content-Type cannot hide multipart/byteranges"
    )
    func multipartBehindAConflictingContentType() {
        let sneaky = head(
            206,
            good + [("Content-Type", "multipart/byteranges; boundary=x"), ("Content-Type", "application/octet-stream")])
        #expect(segmentError(sneaky) != nil)
    }

    @Test func otherValidatorsAreOther() throws {
        let changed = verdict(head(206, [("Content-Range", "bytes 1000-1999/10000"), ("ETag", "\"abd\"")]))
        #expect(changed == .other(.init(etag: "\"abd\"", lastModified: nil)))
        let weakened = verdict(head(206, [("Content-Range", "bytes 1000-1999/10000"), ("ETag", "W/\"abc\"")]))
        #expect(weakened == .other(.init(etag: "W/\"abc\"", lastModified: nil)))
        let pinned = head(206, [("Content-Range", "bytes 1000-1999/10000"), ("ETag", "\"abc\"")])
        #expect(verdict(pinned) == .pinned)
        // One value in the precondition: the pinned one.
        #expect(object.precondition! == ("If-Match", "\"abc\""))
        let missing = try #require(segmentError(head(206, [("Content-Range", "bytes 1000-1999/10000")])))
        #expect(missing.kind == .invalidResponse)
        #expect(missing.message.contains("stopped sending an ETag"))
    }

    @Test func weakETagAndLastModified() {
        var weak = object
        weak.etag = "W/\"abc\""
        let range = ("Content-Range", "bytes 1000-1999/10000")
        #expect(segmentError(head(206, [range, ("ETag", "W/\"abc\"")]), object: weak) == nil)
        #expect(segmentError(head(206, [range, ("ETag", "\"abc\"")]), object: weak) == nil)  // weak comparison
        #expect(segmentError(head(206, [range]), object: weak) == nil)
        #expect(
            verdict(head(206, [range, ("ETag", "W/\"abd\"")]), object: weak)
                == .other(.init(etag: "W/\"abd\"", lastModified: nil)))
        #expect(
            verdict(head(206, [range, ("Last-Modified", "Wed, 16 Nov 1994 08:00:00 GMT")]), object: weak)
                == .other(.init(etag: nil, lastModified: "Wed, 16 Nov 1994 08:00:00 GMT")))

        var dated = object
        dated.etag = nil
        #expect(
            segmentError(head(206, [range, ("Last-Modified", "Tue, 15 Nov 1994 12:45:26 GMT")]), object: dated) == nil)
        #expect(
            verdict(head(206, [range, ("Last-Modified", "Wed, 16 Nov 1994 08:00:00 GMT")]), object: dated)
                == .other(.init(etag: nil, lastModified: "Wed, 16 Nov 1994 08:00:00 GMT")))
        // Without a strong ETag, the pinned date goes in If-Unmodified-Since.
        #expect(dated.precondition! == ("If-Unmodified-Since", dated.lastModified!))
    }

    // MARK: Probe

    private func probe(
        _ head: ResponseHead, _ requested: RequestedRange
    ) -> Result<ResponseValidator.ProbeResult, DownloadError> {
        Result(catching: { () throws(DownloadError) in try ResponseValidator.probe(head, requested: requested, url: url)
        })
    }

    @Test func probePartialOfAShortObject() throws {
        let result = try probe(
            head(206, [("Content-Range", "bytes 0-499/500"), ("ETag", "\"abc\"")]), .bounded(ByteRange(0, 1 << 20))
        ).get()
        let object = RemoteObject(url: url, size: 500, etag: "\"abc\"", lastModified: nil, acceptsRanges: true)
        #expect(result == .partial(object, ByteRange(0, 500)))
    }

    @Test func probeFromAnOffset() throws {
        let result = try probe(
            head(206, [("Content-Range", "bytes 100-999/1000"), ("Content-Length", "900")]), .from(100)
        ).get()
        #expect(result == .partial(RemoteObject(url: url, size: 1000, acceptsRanges: true), ByteRange(100, 1000)))
        // A server that stops early says so: what it holds is used, no more.
        let fewer = try probe(head(206, [("Content-Range", "bytes 100-998/1000")]), .from(100)).get()
        #expect(fewer == .partial(RemoteObject(url: url, size: 1000, acceptsRanges: true), ByteRange(100, 999)))
    }

    @Test func probeRefusesPartialsWithoutTotalOrAtTheWrongPlace() {
        let asked = RequestedRange.bounded(ByteRange(0, 1000))
        for value in [
            "bytes 0-999/*", "bytes 1-999/5000", "bytes 0-1000/5000", "bytes */5000", "nonsense",
        ] {
            #expect(throws: DownloadError.self, "\(value)") {
                try probe(head(206, [("Content-Range", value)]), asked).get()
            }
        }
    }

    @Test func probeWholeObject() throws {
        let sized = try probe(
            head(200, [("Content-Length", "1234"), ("ETag", "\"abc\"")]), .bounded(ByteRange(0, 100))
        ).get()
        #expect(sized == .whole(RemoteObject(url: url, size: 1234, etag: "\"abc\"", acceptsRanges: false)))
        let chunked = try probe(
            head(200, [("Transfer-Encoding", "chunked"), ("Content-Length", "1234")]), .bounded(ByteRange(0, 100))
        ).get()
        #expect(chunked == .whole(RemoteObject(url: url, size: nil, acceptsRanges: false)))
        let stored = try probe(head(200, [("Content-Encoding", "gzip")]), .from(0)).get()
        #expect(stored == .whole(RemoteObject(url: url, size: nil, acceptsRanges: false, contentCoding: "gzip")))
    }

    @Test("probe 200 refuses a Content-Length that is not a plain decimal", arguments: ["-5", "+5", "5x", ""])
    func probeMalformedContentLength(value: String) throws {
        #expect(throws: DownloadError.self) { try probe(head(200, [("Content-Length", value)]), .from(0)).get() }
    }

    @Test(
        "probe refuses multipart/byteranges like segment() does"
    )
    func probeMultipart() {
        let result = probe(
            head(206, [("Content-Range", "bytes 0-99/1000"), ("Content-Type", "multipart/byteranges; boundary=x")]),
            .bounded(ByteRange(0, 100)))
        #expect(throws: DownloadError.self) { try result.get() }
    }

    @Test func probeUnsatisfiable() throws {
        #expect(
            try probe(head(416, [("Content-Range", "bytes */1234"), ("ETag", "\"e\"")]), .from(5000)).get()
                == .unsatisfiable(total: 1234, etag: "\"e\""))
        // Apache httpd and lighttpd say nothing of the size: the decision reads what the request implies.
        #expect(try probe(head(416, []), .from(5000)).get() == .unsatisfiable(total: nil, etag: nil))
        #expect(throws: DownloadError.self) {
            try probe(head(416, [("Content-Range", "bytes 0-1/1234")]), .from(5000)).get()
        }
    }

    @Test func probeRedirects() throws {
        for status in [301, 302, 303, 307, 308] {
            #expect(try probe(head(status, [("Location", "/next")]), .from(0)).get() == .redirect(location: "/next"))
            let error = try #require(probe(head(status, []), .from(0)).failure)
            #expect(error.message.contains("Location"))
            #expect(error.httpStatus == status)
        }
        #expect(throws: DownloadError.self) { try probe(head(300, [("Location", "/next")]), .from(0)).get() }
        #expect(throws: DownloadError.self) { try probe(head(304, [("Location", "/next")]), .from(0)).get() }
    }

    @Test func probePreconditionFailedAndErrors() throws {
        #expect(try probe(head(412, []), .from(0)).get() == .preconditionFailed)
        let error = try #require(probe(head(404, []), .from(0)).failure)
        #expect(error.kind == .httpStatus && error.httpStatus == 404)
        #expect(error.message.contains("404 Not Found"))
    }
}

extension Result {
    var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
