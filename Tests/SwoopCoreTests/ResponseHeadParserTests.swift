import Testing
@testable import SwoopCore

@Suite("ResponseHeadParser")
struct ResponseHeadParserTests {
    /// Feeds `lines` (each with its own line ending) as curl does, one call per line; returns what
    /// each call returned.
    private func feed(_ parser: inout ResponseHeadParser, _ lines: [String]) -> [ResponseHead?] {
        lines.map { line in
            let bytes = Array(line.utf8)
            return bytes.withUnsafeBytes { parser.consume($0) }
        }
    }

    @Test func parsesAFinalResponse() throws {
        var parser = ResponseHeadParser()
        let results = feed(
            &parser,
            [
                "HTTP/1.1 206 Partial Content\r\n",
                "Content-Range: bytes 0-99/1000\r\n",
                "Content-Length: 100\r\n",
                "\r\n",
            ])
        #expect(results.dropLast().allSatisfy { $0 == nil })
        let head = try #require(results.last ?? nil)
        #expect(head.status == 206)
        #expect(head.contentRange == "bytes 0-99/1000")
        #expect(head.contentLength == 100)
        #expect(head.fields.map(\.name) == ["content-range", "content-length"])
        #expect(parser.finished?.status == 206)
    }

    @Test func skipsInterimResponses() throws {
        var parser = ResponseHeadParser()
        let results = feed(
            &parser,
            [
                "HTTP/1.1 100 Continue\r\n",
                "X-Interim: yes\r\n",
                "\r\n",
                "HTTP/1.1 103 Early Hints\r\n",
                "Link: </style.css>; rel=preload\r\n",
                "\r\n",
                "HTTP/1.1 200 OK\r\n",
                "Content-Length: 5\r\n",
                "\r\n",
            ])
        #expect(results.prefix(8).allSatisfy { $0 == nil })
        let head = try #require(results.last ?? nil)
        #expect(head.status == 200)
        #expect(head.values("x-interim").isEmpty)  // the 1xx block's fields are dropped
        #expect(head.values("link").isEmpty)
        #expect(head.contentLength == 5)
    }

    @Test func namesAreCaseInsensitiveAndValuesTrimmed() throws {
        var parser = ResponseHeadParser()
        let results = feed(
            &parser,
            [
                "HTTP/2 206\r\n",
                "CONTENT-RANGE:bytes 0-0/1\r\n",
                "eTaG:   \"abc\" \t\r\n",
                "Content-Type :  application/octet-stream\r\n",
                "X-Empty:\r\n",
                "Location: http://example.com/a:b\r\n",
                "not a header line\r\n",
                "\r\n",
            ])
        let head = try #require(results.last ?? nil)
        #expect(head.status == 206)
        #expect(head.contentRange == "bytes 0-0/1")
        #expect(head.etag == "\"abc\"")
        #expect(head.contentType == "application/octet-stream")
        #expect(head.value("x-empty") == "")
        #expect(head.location == "http://example.com/a:b")  // split at the first colon only
        #expect(head.fields.count == 5)
    }

    @Test func acceptsBareLineFeeds() throws {
        var parser = ResponseHeadParser()
        let results = feed(&parser, ["HTTP/1.0 404 Not Found\n", "Retry-After: 7\n", "\n"])
        let head = try #require(results.last ?? nil)
        #expect(head.status == 404)
        #expect(head.retryAfterSeconds == 7)
    }

    @Test func aLaterResponseBlockResetsTheFields() throws {
        // curl hands over every response it sees on one transfer, e.g. a redirect then the target.
        var parser = ResponseHeadParser()
        let first = feed(
            &parser,
            [
                "HTTP/1.1 302 Found\r\n",
                "Location: /elsewhere\r\n",
                "ETag: \"old\"\r\n",
                "\r\n",
            ])
        #expect(first.last??.status == 302)
        #expect(first.last??.location == "/elsewhere")
        let second = feed(
            &parser,
            [
                "HTTP/1.1 200 OK\r\n",
                "Content-Length: 10\r\n",
                "\r\n",
            ])
        let head = try #require(second.last ?? nil)
        #expect(head.status == 200)
        #expect(head.location == nil)
        #expect(head.etag == nil)
        #expect(head.fields.count == 1)
        #expect(parser.finished?.status == 200)
    }

    @Test func headerLinesBeforeAStatusLineAreDropped() throws {
        var parser = ResponseHeadParser()
        let results = feed(&parser, ["\r\n", "Stray: 1\r\n", "HTTP/1.1 204 No Content\r\n", "\r\n"])
        #expect(results[0] == nil)
        let head = try #require(results.last ?? nil)
        #expect(head.status == 204)
        #expect(head.values("stray").isEmpty)
    }

    @Test func aGarbledStatusLineYieldsNoHead() {
        var parser = ResponseHeadParser()
        let results = feed(&parser, ["HTTP/1.1 abc Broken\r\n", "Content-Length: 1\r\n", "\r\n"])
        #expect(results.allSatisfy { $0 == nil })
        #expect(parser.finished == nil)
    }

    @Test func repeatedFieldsAndConflicts() {
        let head = ResponseHead(
            status: 200,
            fields: [
                (name: "Content-Length", value: "5"), (name: "content-length", value: "5"),
                (name: "ETag", value: "\"a\""), (name: "ETAG", value: "\"b\""),
            ])
        #expect(head.values("content-length") == ["5", "5"])
        #expect(head.contentLength == 5)
        #expect(!head.isConflicting("content-length"))
        #expect(head.isConflicting("etag"))
        #expect(head.etag == nil)
        #expect(head.value("missing") == nil)
    }

    @Test(
        "trimming: spaces, tabs, CRs and LFs at either end, as Characters decide; nothing else",
        arguments: [
            ("a", "a"), (" a ", "a"), ("\t a\r\n", "a"), ("\r\n", ""), ("   ", ""), ("", ""), ("a b", "a b"),
            (" \u{301}a", " \u{301}a"), ("a \u{301}", "a \u{301}"), ("\n\u{E9}\n", "\u{E9}"),
        ])
    func trimming(text: String, expected: String) {
        #expect(text.trimmingWhitespace == expected)
        #expect(("x" + text + "x").dropFirst().dropLast().trimmingWhitespace == expected)
    }

    @Test func retryAfter() {
        #expect(ResponseHead(status: 503, fields: [(name: "Retry-After", value: "120")]).retryAfterSeconds == 120)
        #expect(ResponseHead(status: 503, fields: [(name: "Retry-After", value: "-1")]).retryAfterSeconds == nil)
        #expect(
            ResponseHead(status: 503, fields: [(name: "Retry-After", value: "Fri, 31 Dec 1999 23:59:59 GMT")])
                .retryAfterSeconds == nil)
        #expect(ResponseHead(status: 503).retryAfterSeconds == nil)
    }

    @Test("the reason phrase is kept where a message quotes it: a proxy's 407 and a 5xx, not an empty one")
    func reasonPhrase() {
        func phrase(_ statusLine: String) -> String? {
            var parser = ResponseHeadParser()
            return feed(&parser, [statusLine, ""]).last??.reasonPhrase
        }
        #expect(phrase("HTTP/1.1 407 Proxy Authentication Required") == "Proxy Authentication Required")
        #expect(phrase("HTTP/1.1 503 Backend fetch failed") == "Backend fetch failed")
        #expect(phrase("HTTP/1.1 503") == nil)
        #expect(phrase("HTTP/1.1 200 OK") == nil)
    }

    @Test("an intermediary's own words: Proxy-Status first, else X-Squid-Error; a head so far before its end")
    func intermediaryStatus() throws {
        var parser = ResponseHeadParser()
        _ = feed(&parser, ["HTTP/1.1 503 Service Unavailable", "X-Squid-Error: ERR_CONNECT_FAIL 111"])
        let partial = try #require(parser.partial)
        #expect(parser.finished == nil)
        #expect(partial.intermediaryStatus?.error == "connection_refused")
        let both = ResponseHead(
            status: 502,
            fields: [
                (name: "X-Squid-Error", value: "ERR_DNS_FAIL 0"),
                (name: "Proxy-Status", value: "edge; error=connection_timeout"),
            ])
        #expect(both.intermediaryStatus?.error == "connection_timeout")
        #expect(ResponseHead(status: 502).intermediaryStatus == nil)
    }
}
