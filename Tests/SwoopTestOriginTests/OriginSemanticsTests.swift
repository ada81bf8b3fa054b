import NIOHTTP1
import SwoopTestOrigin
import Testing

/// Plain HTTP semantics: ranges, validators, preconditions, persistent connections, redirects.
@Suite struct OriginSemanticsTests {
    static let size: Int64 = 100_000

    private func payload(_ range: ClosedRange<Int64>, seed: UInt64 = 1) -> [UInt8] {
        Payload.bytes(seed: seed, offset: range.lowerBound, count: Int(range.upperBound - range.lowerBound + 1))
    }

    @Test func fullGetSendsTheWholeObjectWithValidators() async throws {
        try await withOrigin { origin in
            let object = TestObject(size: Self.size, seed: 1)
            origin.addObject(object, at: "/a.bin")
            let connection = try await RawHTTPConnection.connect(to: origin)

            let response = try await connection.request(.GET, "/a.bin?x=1")
            #expect(response.status == 200)
            #expect(response.ending == .complete)
            #expect(response.header("Content-Length") == String(Self.size))
            #expect(response.header("Accept-Ranges") == "bytes")
            #expect(response.header("ETag") == object.etagValue)
            #expect(response.header("Last-Modified") == object.lastModifiedValue)
            #expect(response.header("Content-Type") == "application/octet-stream")
            #expect(response.header("Content-Range") == nil)
            #expect(response.body == payload(0...(Self.size - 1)))

            #expect(try await eventually { origin.requests.count == 1 })
            let logged = origin.requests[0]
            #expect(logged.method == "GET")
            #expect(logged.path == "/a.bin")
            #expect(logged.query == "x=1")
            #expect(logged.header("HOST") == "origin.test")
            #expect(logged.headers.first?.name == "host")
            #expect(logged.status == 200)
            #expect(logged.bodyBytesSent == Self.size)
            #expect(logged.faultApplied == nil)
            #expect(logged.connectionID == 1)
        }
    }

    @Test(
        arguments: [
            ("bytes=100-199", "bytes 100-199/100000", 100...199),
            ("bytes=99990-", "bytes 99990-99999/100000", 99_990...99_999),
            ("bytes=-10", "bytes 99990-99999/100000", 99_990...99_999),
            ("bytes=99000-200000", "bytes 99000-99999/100000", 99_000...99_999),
            ("bytes=-200000", "bytes 0-99999/100000", 0...99_999),
            ("bytes=0-0", "bytes 0-0/100000", 0...0),
        ] as [(String, String, ClosedRange<Int64>)])
    func satisfiableRangesGet206(range: String, contentRange: String, bytes: ClosedRange<Int64>) async throws {
        try await withOrigin { origin in
            origin.addObject(TestObject(size: Self.size), at: "/a.bin")
            let connection = try await RawHTTPConnection.connect(to: origin)
            let response = try await connection.request(.GET, "/a.bin", headers: [("Range", range)])
            #expect(response.status == 206)
            #expect(response.header("Content-Range") == contentRange)
            #expect(response.header("Content-Length") == String(bytes.count))
            #expect(response.body == payload(bytes))
        }
    }

    @Test func unsatisfiableRangesGet416() async throws {
        try await withOrigin { origin in
            origin.addObject(TestObject(size: Self.size), at: "/a.bin")
            origin.addObject(TestObject(size: 0), at: "/empty")
            let connection = try await RawHTTPConnection.connect(to: origin)
            for (path, range, total) in [
                ("/a.bin", "bytes=100000-", 100_000), ("/a.bin", "bytes=200000-300000", 100_000),
                ("/a.bin", "bytes=-0", 100_000), ("/empty", "bytes=0-0", 0), ("/empty", "bytes=-5", 0),
            ] {
                let response = try await connection.request(.GET, path, headers: [("Range", range)])
                #expect(response.status == 416, "\(path) \(range)")
                #expect(response.header("Content-Range") == "bytes */\(total)")
                #expect(response.body.isEmpty)
            }
        }
    }

    @Test func contentDispositionIsSentVerbatimWithTheObject() async throws {
        try await withOrigin { origin in
            var named = TestObject(size: 1000)
            named.contentDisposition = "attachment; filename*=UTF-8''na%C3%AFve.txt; filename=\"a;b.txt\""
            origin.addObject(named, at: "/named")
            origin.addObject(TestObject(size: 1000), at: "/plain")
            let connection = try await RawHTTPConnection.connect(to: origin)
            let whole = try await connection.request(.GET, "/named")
            #expect(whole.status == 200)
            #expect(whole.header("Content-Disposition") == named.contentDisposition)
            let ranged = try await connection.request(.GET, "/named", headers: [("Range", "bytes=0-0")])
            #expect(ranged.status == 206)
            #expect(ranged.header("Content-Disposition") == named.contentDisposition)
            let plain = try await connection.request(.GET, "/plain")
            #expect(plain.header("Content-Disposition") == nil)
        }
    }

    @Test func multipleOrMalformedRangesAreIgnored() async throws {
        try await withOrigin { origin in
            origin.addObject(TestObject(size: 1000), at: "/a.bin")
            let connection = try await RawHTTPConnection.connect(to: origin)
            for range in ["bytes=0-1,5-6", "bytes=5-1", "bytes=x-", "lines=0-1", "bytes="] {
                let response = try await connection.request(.GET, "/a.bin", headers: [("Range", range)])
                #expect(response.status == 200, "\(range)")
                #expect(response.body.count == 1000)
            }
            // No Range: 200 with Content-Length; empty object too.
            origin.addObject(TestObject(size: 0), at: "/empty")
            let empty = try await connection.request(.GET, "/empty")
            #expect(empty.status == 200 && empty.header("Content-Length") == "0" && empty.body.isEmpty)
        }
    }

    @Test func headHasTheHeadersOfGetAndNoBody() async throws {
        try await withOrigin { origin in
            origin.addObject(TestObject(size: Self.size), at: "/a.bin")
            let connection = try await RawHTTPConnection.connect(to: origin)
            let head = try await connection.request(.HEAD, "/a.bin")
            #expect(head.status == 200)
            #expect(head.header("Content-Length") == String(Self.size))
            #expect(head.body.isEmpty)
            let ranged = try await connection.request(.HEAD, "/a.bin", headers: [("Range", "bytes=10-19")])
            #expect(ranged.status == 206)
            #expect(ranged.header("Content-Range") == "bytes 10-19/100000")
            #expect(ranged.body.isEmpty)
            // The connection is still usable afterwards.
            let get = try await connection.request(.GET, "/a.bin", headers: [("Range", "bytes=0-9")])
            #expect(get.body == payload(0...9))
            #expect(try await eventually { origin.requests.count == 3 })
            #expect(origin.requests.map(\.bodyBytesSent) == [0, 0, 10])
        }
    }

    @Test func ifMatchUsesStrongComparison() async throws {
        try await withOrigin { origin in
            let strong = TestObject(size: 1000, seed: 1)
            let weak = TestObject(size: 1000, seed: 2, etag: .weak)
            origin.addObject(strong, at: "/strong")
            origin.addObject(weak, at: "/weak")
            origin.addObject(TestObject(size: 1000, etag: .none), at: "/none")
            let connection = try await RawHTTPConnection.connect(to: origin)

            func status(_ path: String, _ headers: [(String, String)]) async throws -> Int {
                try await connection.request(.GET, path, headers: headers).status
            }
            #expect(try await status("/strong", [("If-Match", strong.etagValue!)]) == 200)
            #expect(try await status("/strong", [("If-Match", "\"nope\", \(strong.etagValue!)")]) == 200)
            #expect(try await status("/strong", [("If-Match", "\"nope\"")]) == 412)
            #expect(try await status("/strong", [("If-Match", "W/\(strong.etagValue!)")]) == 412)
            #expect(try await status("/strong", [("If-Match", "*")]) == 200)
            #expect(try await status("/weak", [("If-Match", weak.etagValue!)]) == 412)
            #expect(try await status("/weak", [("If-Match", "*")]) == 200)
            #expect(try await status("/none", [("If-Match", "\"x\"")]) == 412)
            // Preconditions come before Range.
            let failed = try await connection.request(
                .GET, "/strong", headers: [("If-Match", "\"nope\""), ("Range", "bytes=0-9")])
            #expect(failed.status == 412)
            #expect(failed.body.isEmpty)
            let ranged = try await connection.request(
                .GET, "/strong", headers: [("If-Match", strong.etagValue!), ("Range", "bytes=0-9")])
            #expect(ranged.status == 206)
        }
    }

    @Test func ifUnmodifiedSince() async throws {
        try await withOrigin { origin in
            let object = TestObject(size: 1000, seed: 10)
            origin.addObject(object, at: "/a")
            origin.addObject(TestObject(size: 1000, seed: 10, lastModified: false), at: "/nolm")
            let connection = try await RawHTTPConnection.connect(to: origin)
            let lastModified = object.lastModifiedValue!
            let earlier = TestObject(size: 1000, seed: 9).lastModifiedValue!
            let later = TestObject(size: 1000, seed: 11).lastModifiedValue!

            func status(_ path: String, _ headers: [(String, String)]) async throws -> Int {
                try await connection.request(.GET, path, headers: headers).status
            }
            #expect(try await status("/a", [("If-Unmodified-Since", lastModified)]) == 200)
            #expect(try await status("/a", [("If-Unmodified-Since", later)]) == 200)
            #expect(try await status("/a", [("If-Unmodified-Since", earlier)]) == 412)
            #expect(try await status("/a", [("If-Unmodified-Since", earlier), ("Range", "bytes=0-0")]) == 412)
            #expect(try await status("/a", [("If-Unmodified-Since", "not a date")]) == 200)
            #expect(try await status("/nolm", [("If-Unmodified-Since", earlier)]) == 200)
            // Only evaluated without If-Match.
            #expect(try await status("/a", [("If-Match", object.etagValue!), ("If-Unmodified-Since", earlier)]) == 200)
        }
    }

    @Test func ifRangeAndConditionalGets() async throws {
        try await withOrigin { origin in
            let object = TestObject(size: 1000)
            origin.addObject(object, at: "/a")
            let connection = try await RawHTTPConnection.connect(to: origin)
            let range = ("Range", "bytes=10-19")
            #expect(
                try await connection.request(.GET, "/a", headers: [range, ("If-Range", object.etagValue!)]).status
                    == 206)
            #expect(
                try await connection.request(.GET, "/a", headers: [range, ("If-Range", object.lastModifiedValue!)])
                    .status == 206)
            let stale = try await connection.request(.GET, "/a", headers: [range, ("If-Range", "\"old\"")])
            #expect(stale.status == 200)
            #expect(stale.body.count == 1000)
            #expect(
                try await connection.request(.GET, "/a", headers: [("If-None-Match", object.etagValue!)]).status == 304)
            #expect(
                try await connection.request(.GET, "/a", headers: [("If-Modified-Since", object.lastModifiedValue!)])
                    .status == 304)
            #expect(try await connection.request(.GET, "/a", headers: [("If-None-Match", "\"other\"")]).status == 200)
        }
    }

    @Test func persistentConnectionsAreReusedAndCanBeClosed() async throws {
        try await withOrigin { origin in
            origin.addObject(TestObject(size: 5000), at: "/a")
            let first = try await RawHTTPConnection.connect(to: origin)
            #expect(try await first.request(.GET, "/a").status == 200)
            #expect(try await first.request(.GET, "/a", headers: [("Range", "bytes=0-1")]).status == 206)

            let second = try await RawHTTPConnection.connect(to: origin)
            let closing = try await second.request(.GET, "/a", headers: [("Connection", "close")])
            #expect(closing.status == 200)
            #expect(closing.ending == .complete)
            #expect(closing.header("Connection") == "close")
            #expect(try await second.response(timeout: .seconds(30)).ending == .closed)

            #expect(try await eventually { origin.requests.count == 3 })
            #expect(origin.requests.map(\.connectionID) == [1, 1, 2])
            #expect(origin.connectionsAccepted == 2)
            #expect(origin.requestCount == 3)
        }
    }

    @Test func pipelinedRequestsAreAnsweredInOrder() async throws {
        try await withOrigin { origin in
            origin.addObject(TestObject(size: 300_000), at: "/a")
            let connection = try await RawHTTPConnection.connect(to: origin)
            try await connection.send(.GET, "/a", headers: [("Range", "bytes=0-199999")])
            try await connection.send(.HEAD, "/a")
            try await connection.send(.GET, "/a", headers: [("Range", "bytes=-5")])
            let first = try await connection.response()
            let second = try await connection.response()
            let third = try await connection.response()
            #expect(first.body == payload(0...199_999))
            #expect(second.status == 200 && second.body.isEmpty)
            #expect(third.body == payload(299_995...299_999))
            #expect(try await eventually { origin.requests.count == 3 })
            #expect(origin.requests.map(\.method) == ["GET", "HEAD", "GET"])
        }
    }

    @Test func concurrentConnectionsAreCountedAndLogged() async throws {
        try await withOrigin { origin in
            origin.addObject(TestObject(size: 200_000), at: "/a")
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<8 {
                    group.addTask {
                        let connection = try await RawHTTPConnection.connect(to: origin)
                        for _ in 0..<4 {
                            let response = try await connection.request(.GET, "/a")
                            #expect(response.body.count == 200_000)
                        }
                    }
                }
                try await group.waitForAll()
            }
            #expect(try await eventually { origin.requests.count == 32 })
            #expect(origin.connectionsAccepted == 8)
            #expect(origin.requestCount == 32)
            #expect(Set(origin.requests.map(\.connectionID)) == Set(1...8))
            #expect(origin.requests.allSatisfy { $0.bodyBytesSent == 200_000 })
        }
    }

    @Test func notFoundRedirectsAndMethods() async throws {
        try await withOrigin { origin in
            origin.addObject(TestObject(size: 10), at: "/a")
            origin.addRedirect(from: "/r302", to: "/a")
            origin.addRedirect(from: "/r301", to: "http://127.0.0.2:1/elsewhere", status: 301)
            origin.addRedirect(from: "/evil", to: "file:///etc/passwd", status: 307)
            let connection = try await RawHTTPConnection.connect(to: origin)

            let missing = try await connection.request(.GET, "/missing")
            #expect(missing.status == 404)
            #expect(!missing.body.isEmpty)
            for (path, location, status) in [
                ("/r302", "/a", 302), ("/r301", "http://127.0.0.2:1/elsewhere", 301),
                ("/evil", "file:///etc/passwd", 307),
            ] {
                let response = try await connection.request(.GET, path)
                #expect(response.status == status)
                #expect(response.header("Location") == location)
                #expect(response.header("Content-Length") == "0")
            }
            #expect(try await connection.request(.POST, "/r302").status == 302)
            let post = try await connection.request(.POST, "/a")
            #expect(post.status == 405)
            #expect(post.header("Allow") == "GET, HEAD")

            origin.removeObject(at: "/a")
            #expect(try await connection.request(.GET, "/a").status == 404)
            #expect(origin.object(at: "/a") == nil)
        }
    }

    @Test func resetLogRestartsTheRequestCount() async throws {
        try await withOrigin { origin in
            origin.addObject(TestObject(size: 10), at: "/a")
            let connection = try await RawHTTPConnection.connect(to: origin)
            _ = try await connection.request(.GET, "/a")
            _ = try await connection.request(.GET, "/a")
            #expect(try await eventually { origin.requests.count == 2 })
            origin.resetLog()
            #expect(origin.requests.isEmpty)
            #expect(origin.requestCount == 0)
            origin.updateFaults { $0.failures = .init(firstRequests: 1) }
            #expect(try await connection.request(.GET, "/a").status == 503)
            #expect(try await connection.request(.GET, "/a").status == 200)
            #expect(origin.connectionsAccepted == 1)
        }
    }

    @Test func addressesAndShutdown() async throws {
        let origin = try await TestOrigin.start()
        #expect(origin.port > 0)
        #expect(origin.baseURL == "http://127.0.0.1:\(origin.port)")
        #expect(origin.url("/a.bin") == "http://127.0.0.1:\(origin.port)/a.bin")
        origin.addObject(TestObject(size: 1 << 20), at: "/a")
        origin.updateFaults { $0.stall = .init(afterBytes: 10) }
        let connection = try await RawHTTPConnection.connect(to: origin)
        let stalled = try await connection.request(.GET, "/a", timeout: .milliseconds(300))
        #expect(stalled.ending == .timedOut)
        // Shutdown closes connections that are still busy. (The wait returns at the close; it is
        // long only so that a machine busy with other tests cannot turn it into a timeout.)
        try await origin.shutdown()
        #expect(try await connection.response(timeout: .seconds(30)).ending == .closed)
        try await origin.shutdown()  // a second call does nothing
        await connection.close()
    }
}
