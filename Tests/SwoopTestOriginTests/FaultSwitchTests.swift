import NIOCore
import NIOHTTP1
import SwoopTestOrigin
import Testing

/// Each fault switch does what its documentation says, on the wire and in the request log.
@Suite struct FaultSwitchTests {
    @Test func noRangeSupportSendsTheWholeBody() async throws {
        try await withOrigin { origin in
            origin.addObject(TestObject(size: 5000), at: "/a")
            origin.updateFaults { $0.rangeSupport = false }
            let connection = try await RawHTTPConnection.connect(to: origin)
            let response = try await connection.request(.GET, "/a", headers: [("Range", "bytes=10-19")])
            #expect(response.status == 200)
            #expect(response.header("Accept-Ranges") == nil)
            #expect(response.header("Content-Range") == nil)
            #expect(response.body == Payload.bytes(seed: 1, offset: 0, count: 5000))
            #expect(try await eventually { origin.requests.count == 1 })
            #expect(origin.requests[0].faultApplied == "noRanges")
        }
    }

    @Test func dropAfterBytesCutsEachResponse() async throws {
        try await withOrigin { origin in
            origin.addObject(TestObject(size: 100_000), at: "/a")
            origin.updateFaults {
                $0.drops = .init(afterBytes: 12_345, firstRequests: 2)
            }
            for expected in [12_345, 12_345, 100_000] {
                let connection = try await RawHTTPConnection.connect(to: origin)
                let response = try await connection.request(.GET, "/a")
                #expect(response.status == 200)
                #expect(response.body.count == expected)
                #expect(response.ending == (expected == 100_000 ? .complete : .closed))
                #expect(response.body == Payload.bytes(seed: 1, offset: 0, count: expected))
            }
            #expect(try await eventually { origin.requests.count == 3 })
            #expect(origin.requests.map(\.bodyBytesSent) == [12_345, 12_345, 100_000])
            #expect(origin.requests.map(\.faultApplied) == ["drop", "drop", nil])
            #expect(origin.requests.map(\.connectionID) == [1, 2, 3])
        }
    }

    @Test func dropAfterZeroSendsOnlyTheHeaders() async throws {
        try await withOrigin { origin in
            origin.addObject(TestObject(size: 1000), at: "/a")
            origin.updateFaults { $0.drops = .init(afterBytes: 0) }
            let connection = try await RawHTTPConnection.connect(to: origin)
            let response = try await connection.request(.GET, "/a", headers: [("Range", "bytes=100-")])
            #expect(response.status == 206)
            #expect(response.body.isEmpty)
            #expect(response.ending == .closed)
        }
    }

    @Test func dropProbabilityOneCutsInsideEveryBody() async throws {
        try await withOrigin { origin in
            origin.addObject(TestObject(size: 50_000), at: "/a")
            origin.updateFaults { $0.drops = .init(probability: 1) }
            for _ in 0..<5 {
                let connection = try await RawHTTPConnection.connect(to: origin)
                let response = try await connection.request(.GET, "/a")
                #expect(response.ending == .closed)
                #expect(response.body.count < 50_000)
            }
            #expect(try await eventually { origin.requests.count == 5 })
            #expect(origin.requests.allSatisfy { $0.faultApplied == "drop" && $0.bodyBytesSent < 50_000 })
        }
    }

    @Test(arguments: [503, 429])
    func failFirstRequestsWithRetryAfter(status: Int) async throws {
        try await withOrigin { origin in
            origin.addObject(TestObject(size: 1000), at: "/a")
            origin.updateFaults {
                $0.failures = .init(firstRequests: 2, status: status, retryAfterSeconds: 7)
            }
            let connection = try await RawHTTPConnection.connect(to: origin)
            for _ in 0..<2 {
                let failed = try await connection.request(.GET, "/a")
                #expect(failed.status == status)
                #expect(failed.header("Retry-After") == "7")
                #expect(!failed.body.isEmpty && failed.body.count < 100)
                #expect(failed.ending == .complete)  // the connection stays usable
            }
            let served = try await connection.request(.GET, "/a")
            #expect(served.status == 200)
            #expect(served.header("Retry-After") == nil)
            #expect(try await eventually { origin.requests.count == 3 })
            #expect(origin.requests.map(\.faultApplied) == ["fail\(status)", "fail\(status)", nil])
            #expect(origin.requests.map(\.status) == [status, status, 200])
        }
    }

    @Test func stallSendsSomeBytesThenNothingUntilTheClientCloses() async throws {
        try await withOrigin { origin in
            origin.addObject(TestObject(size: 100_000), at: "/a")
            origin.updateFaults {
                $0.stall = .init(afterBytes: 1000, firstRequests: 1)
            }
            let connection = try await RawHTTPConnection.connect(to: origin)
            let stalled = try await connection.request(.GET, "/a", timeout: .seconds(5))
            #expect(stalled.ending == .timedOut)
            #expect(stalled.status == 200)
            #expect(stalled.body.count == 1000)
            #expect(origin.requests.isEmpty)  // still under way
            await connection.close()
            #expect(try await eventually { origin.requests.count == 1 })
            #expect(origin.requests[0].faultApplied == "stall")
            #expect(origin.requests[0].bodyBytesSent == 1000)

            let next = try await RawHTTPConnection.connect(to: origin)
            #expect(try await next.request(.GET, "/a").body.count == 100_000)
        }
    }

    @Test func stallAfterZeroSendsHeadersOnly() async throws {
        try await withOrigin { origin in
            origin.addObject(TestObject(size: 1000), at: "/a")
            origin.updateFaults { $0.stall = .init(afterBytes: 0) }
            let connection = try await RawHTTPConnection.connect(to: origin)
            let stalled = try await connection.request(.GET, "/a", timeout: .seconds(5))
            #expect(stalled.ending == .timedOut)
            #expect(stalled.head != nil)
            #expect(stalled.body.isEmpty)
        }
    }

    @Test func changeAfterRequestsReplacesEveryObjectOnce() async throws {
        try await withOrigin { origin in
            let original = TestObject(size: 1000, seed: 5)
            origin.addObject(original, at: "/a")
            origin.addObject(TestObject(size: 10, seed: 8), at: "/b")
            origin.updateFaults { $0.changeAfterRequests = 2 }
            let connection = try await RawHTTPConnection.connect(to: origin)
            var etags: [String?] = []
            var bodies: [[UInt8]] = []
            for _ in 0..<4 {
                let response = try await connection.request(.GET, "/a")
                etags.append(response.header("ETag"))
                bodies.append(response.body)
            }
            var changed = original
            changed.seed = 6
            #expect(etags == [original.etagValue, original.etagValue, changed.etagValue, changed.etagValue])
            #expect(bodies[0] == Payload.bytes(seed: 5, offset: 0, count: 1000))
            #expect(bodies[3] == Payload.bytes(seed: 6, offset: 0, count: 1000))
            #expect(origin.object(at: "/a")?.seed == 6)
            #expect(origin.object(at: "/b")?.seed == 9)
            // A client resuming with the old validator now fails its precondition.
            let resumed = try await connection.request(
                .GET, "/a", headers: [("Range", "bytes=500-"), ("If-Match", original.etagValue!)])
            #expect(resumed.status == 412)
            let stale = try await connection.request(
                .GET, "/a", headers: [("If-Unmodified-Since", original.lastModifiedValue!)])
            #expect(stale.status == 412)
        }
    }

    @Test func changeObjectLooksLikeAReplacedFile() async throws {
        try await withOrigin { origin in
            let original = TestObject(size: 1000, seed: 1)
            origin.addObject(original, at: "/a")
            origin.changeObject(at: "/a")
            let changed = try #require(origin.object(at: "/a"))
            #expect(changed.seed == 2)
            #expect(changed.etagValue != original.etagValue)
            #expect(changed.lastModifiedValue != original.lastModifiedValue)
            let connection = try await RawHTTPConnection.connect(to: origin)
            let response = try await connection.request(.GET, "/a")
            #expect(response.header("ETag") == changed.etagValue)
            #expect(response.body == Payload.bytes(seed: 2, offset: 0, count: 1000))
        }
    }

    @Test func busyHTMLForRangedRequests() async throws {
        try await withOrigin { origin in
            origin.addObject(TestObject(size: 1000), at: "/a")
            origin.updateFaults { $0.busyPage = .init() }
            let connection = try await RawHTTPConnection.connect(to: origin)
            let ranged = try await connection.request(.GET, "/a", headers: [("Range", "bytes=0-99")])
            #expect(ranged.status == 200)
            #expect(ranged.header("Content-Type")?.hasPrefix("text/html") == true)
            #expect(String(decoding: ranged.body, as: UTF8.self).contains("busy"))
            #expect(ranged.header("Content-Length") == String(ranged.body.count))
            let plain = try await connection.request(.GET, "/a")
            #expect(plain.body == Payload.bytes(seed: 1, offset: 0, count: 1000))
            #expect(try await eventually { origin.requests.count == 2 })
            #expect(origin.requests.map(\.faultApplied) == ["busyHTML", nil])
        }
    }

    @Test(arguments: [
        (FaultSwitches.ContentRangeLie.offByOne, "bytes 101-200/1000"),
        (.wrongTotal, "bytes 100-199/1001"),
        (.wrongStart, "bytes 0-99/1000"),
    ])
    func contentRangeLies(lie: FaultSwitches.ContentRangeLie, header: String) async throws {
        try await withOrigin { origin in
            origin.addObject(TestObject(size: 1000), at: "/a")
            origin.updateFaults { $0.contentRangeLie = lie }
            let connection = try await RawHTTPConnection.connect(to: origin)
            let response = try await connection.request(.GET, "/a", headers: [("Range", "bytes=100-199")])
            #expect(response.status == 206)
            #expect(response.header("Content-Range") == header)
            #expect(response.header("Content-Length") == "100")
            #expect(response.body == Payload.bytes(seed: 1, offset: 100, count: 100))
            #expect(try await eventually { origin.requests.count == 1 })
            #expect(origin.requests[0].faultApplied == "contentRangeLie")
        }
    }

    @Test func shortBodyClosesBeforeTheDeclaredLength() async throws {
        try await withOrigin { origin in
            origin.addObject(TestObject(size: 10_000), at: "/big")
            origin.addObject(TestObject(size: 150), at: "/small")
            origin.updateFaults { $0.shortBody = true }
            for (path, declared, sent) in [("/big", 10_000, 9_900), ("/small", 150, 75)] {
                let connection = try await RawHTTPConnection.connect(to: origin)
                let response = try await connection.request(.GET, path)
                #expect(response.header("Content-Length") == String(declared))
                #expect(response.body.count == sent)
                #expect(response.ending == .closed)
            }
            #expect(try await eventually { origin.requests.count == 2 })
            #expect(origin.requests.map(\.bodyBytesSent) == [9_900, 75])
            #expect(origin.requests.map(\.faultApplied) == ["shortBody", "shortBody"])
        }
    }

    @Test func gzipEncodingOnlyLabelsTheBody() async throws {
        try await withOrigin { origin in
            origin.addObject(TestObject(size: 1000), at: "/a")
            origin.updateFaults { $0.gzipEncoding = true }
            let connection = try await RawHTTPConnection.connect(to: origin)
            let response = try await connection.request(.GET, "/a")
            #expect(response.header("Content-Encoding") == "gzip")
            #expect(response.body == Payload.bytes(seed: 1, offset: 0, count: 1000))
            #expect(try await eventually { origin.requests.count == 1 })
            #expect(origin.requests[0].faultApplied == "gzip")
        }
    }

    @Test func throttlePacesTheBody() async throws {
        try await withOrigin { origin in
            origin.addObject(TestObject(size: 256 << 10), at: "/a")
            origin.updateFaults { $0.throttleBytesPerSecond = 512 << 10 }
            let connection = try await RawHTTPConnection.connect(to: origin)
            let clock = ContinuousClock()
            let start = clock.now
            let response = try await connection.request(.GET, "/a")
            let elapsed = clock.now - start
            #expect(response.body.count == 256 << 10)
            // 0.5 s nominal (minus the first slice sent up front).
            #expect(elapsed > .milliseconds(400), "\(elapsed)")
            #expect(elapsed < MachineLoad.bound(.seconds(8)), "\(elapsed)")  // a loaded machine is slow, never fast
        }
    }

    @Test func stragglerConnectionsAreSlower() async throws {
        try await withOrigin { origin in
            origin.addObject(TestObject(size: 1 << 20), at: "/a")
            origin.updateFaults { $0.straggler = .init(every: 2, bytesPerSecond: 256 << 10) }
            // Connection 1 runs at full speed, connection 2 at 256 KiB/s (~4 s minus the first
            // slice). Both at once, so a loaded machine slows them alike: the paced one still
            // takes its 4 s, and the other one ends first.
            let fast = try await RawHTTPConnection.connect(to: origin)
            let slow = try await RawHTTPConnection.connect(to: origin)
            let clock = ContinuousClock()
            let start = clock.now
            @Sendable func fetch(
                _ connection: RawHTTPConnection
            ) async throws -> (count: Int, end: ContinuousClock.Instant) {
                let count = try await connection.request(.GET, "/a", timeout: .seconds(30)).body.count
                return (count, clock.now)
            }
            async let fastRun = fetch(fast)
            async let slowRun = fetch(slow)
            let (fastResult, slowResult) = try await (fastRun, slowRun)
            #expect(fastResult.count == 1 << 20 && slowResult.count == 1 << 20)
            let (fastDone, slowDone) = (fastResult.end, slowResult.end)
            #expect(slowDone - start > .milliseconds(3500), "\(slowDone - start)")
            #expect(fastDone < slowDone, "fast \(fastDone - start), slow \(slowDone - start)")
        }
    }

    @Test func logRecordsWhatWasSentWhenTheClientGoesAway() async throws {
        try await withOrigin { origin in
            // 64 s of body at this rate, so even a test process starved for half a minute (other
            // suites hashing and generating data on both cores) gives up long before the end.
            origin.addObject(TestObject(size: 16 << 20), at: "/a")
            origin.updateFaults { $0.throttleBytesPerSecond = 256 << 10 }
            let connection = try await RawHTTPConnection.connect(to: origin)
            let partial = try await connection.request(.GET, "/a", timeout: .seconds(3))
            #expect(partial.ending == .timedOut)
            await connection.close()
            #expect(try await eventually { origin.requests.count == 1 })
            let logged = origin.requests[0]
            #expect(logged.status == 200)
            #expect(logged.faultApplied == nil)
            #expect(logged.bodyBytesSent >= Int64(partial.body.count))
            #expect(logged.bodyBytesSent > 0 && logged.bodyBytesSent < 16 << 20)
        }
    }

    @Test func setFaultsReplacesAllSwitches() async throws {
        try await withOrigin { origin in
            #expect(origin.faults == FaultSwitches())
            var faults = FaultSwitches()
            faults.gzipEncoding = true
            faults.failures = .init(firstRequests: 3)
            origin.setFaults(faults)
            #expect(origin.faults == faults)
            origin.updateFaults { $0.gzipEncoding = false }
            #expect(origin.faults.gzipEncoding == false && origin.faults.failures?.firstRequests == 3)
        }
    }
}
