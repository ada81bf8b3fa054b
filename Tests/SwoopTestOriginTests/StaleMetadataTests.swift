import NIOHTTP1
import SwoopTestOrigin
import Testing

/// Servers whose validators outlive the file they describe (`staleValidatorsFor`,
/// `metadataFromFirstRequest`), and `changeAfterBodyBytes`, the replacement of a file partway
/// through its download.
@Suite struct StaleMetadataTests {
    private func body(seed: UInt64, _ range: ClosedRange<Int64>) -> [UInt8] {
        Payload.bytes(seed: seed, offset: range.lowerBound, count: Int(range.upperBound - range.lowerBound + 1))
    }

    // MARK: staleValidatorsFor

    @Test func aReplacedObjectKeepsItsOldValidatorsForTheWindow() async throws {
        try await withOrigin { origin in
            let old = TestObject(size: 5000, seed: 5)
            origin.addObject(old, at: "/a")
            // Far longer than the test takes, however loaded the machine.
            origin.updateFaults { $0.staleValidatorsFor = .seconds(600) }
            let connection = try await RawHTTPConnection.connect(to: origin)
            #expect(try await connection.request(.GET, "/a").header("ETag") == old.etagValue)

            origin.changeObject(at: "/a")
            let new = try #require(origin.object(at: "/a"))
            let stale = try await connection.request(.GET, "/a")
            #expect(stale.header("ETag") == old.etagValue)
            #expect(stale.header("Last-Modified") == old.lastModifiedValue)
            #expect(stale.body == body(seed: 6, 0...4999))
            // The old validators pass the preconditions and fetch the new bytes; the new ones fail.
            let resumed = try await connection.request(
                .GET, "/a", headers: [("Range", "bytes=1000-1999"), ("If-Match", old.etagValue!)])
            #expect(resumed.status == 206)
            #expect(resumed.body == body(seed: 6, 1000...1999))
            let ranged = try await connection.request(
                .GET, "/a", headers: [("Range", "bytes=0-9"), ("If-Range", old.lastModifiedValue!)])
            #expect(ranged.status == 206)
            let fresh = try await connection.request(.GET, "/a", headers: [("If-Match", new.etagValue!)])
            #expect(fresh.status == 412)

            // A second replacement within the window (a different object put in place) still
            // shows the validators from before the first.
            origin.addObject(TestObject(size: 7000, seed: 40), at: "/a")
            let again = try await connection.request(.GET, "/a")
            #expect(again.header("ETag") == old.etagValue)
            #expect(again.header("Content-Length") == "7000")
            #expect(again.body == body(seed: 40, 0...6999))

            #expect(try await eventually { origin.requests.count == 6 })
            let faults = origin.requests.map(\.faultApplied)
            #expect(faults == [nil] + Array(repeating: "staleValidators", count: 5))
        }
    }

    @Test func staleValidatorsFollowChangeAfterRequests() async throws {
        try await withOrigin { origin in
            let old = TestObject(size: 3000, seed: 7)
            origin.addObject(old, at: "/a")
            origin.updateFaults {
                $0.changeAfterRequests = 1
                $0.staleValidatorsFor = .seconds(600)
            }
            let connection = try await RawHTTPConnection.connect(to: origin)
            let first = try await connection.request(.GET, "/a")
            let second = try await connection.request(.GET, "/a")
            #expect(first.header("ETag") == old.etagValue && first.body == body(seed: 7, 0...2999))
            #expect(second.header("ETag") == old.etagValue && second.body == body(seed: 8, 0...2999))
            #expect(origin.object(at: "/a")?.seed == 8)
        }
    }

    @Test func theNewValidatorsComeOnceTheWindowHasPassed() async throws {
        try await withOrigin { origin in
            let old = TestObject(size: 1000, seed: 1)
            origin.addObject(old, at: "/a")
            let window = Duration.milliseconds(300)
            origin.updateFaults { $0.staleValidatorsFor = window }
            let connection = try await RawHTTPConnection.connect(to: origin)
            let clock = ContinuousClock()
            let replaced = clock.now
            origin.changeObject(at: "/a")
            let new = try #require(origin.object(at: "/a"))
            // Asks until the new ETag comes; it never comes before the window has passed.
            var etag: String?
            let deadline = replaced + .seconds(30)
            while clock.now < deadline {
                let asked = clock.now
                etag = try await connection.request(.HEAD, "/a").header("ETag")
                if etag == new.etagValue {
                    #expect(clock.now - replaced >= window)
                    break
                }
                #expect(etag == old.etagValue)
                #expect(asked - replaced < window)
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(etag == new.etagValue)
        }
    }

    // MARK: metadataFromFirstRequest

    @Test func metadataOfTheFirstRequestOutliveAShorterReplacement() async throws {
        try await withOrigin { origin in
            let first = TestObject(size: 10_000, seed: 1)
            origin.addObject(first, at: "/a")
            origin.updateFaults { $0.metadataFromFirstRequest = true }
            let connection = try await RawHTTPConnection.connect(to: origin)
            #expect(try await connection.request(.HEAD, "/a").status == 200)  // caches them
            let shorter = TestObject(size: 6000, seed: 2)
            origin.addObject(shorter, at: "/a")

            let whole = try await connection.request(.GET, "/a")
            #expect(whole.status == 200)
            #expect(whole.header("ETag") == first.etagValue)
            #expect(whole.header("Last-Modified") == first.lastModifiedValue)
            #expect(whole.header("Content-Length") == "10000")
            #expect(whole.body == body(seed: 2, 0...5999))
            #expect(whole.ending == .closed)

            let inside = try await RawHTTPConnection.connect(to: origin)
            let part = try await inside.request(.GET, "/a", headers: [("Range", "bytes=5000-5999")])
            #expect(part.status == 206)
            #expect(part.header("Content-Range") == "bytes 5000-5999/10000")
            #expect(part.body == body(seed: 2, 5000...5999))
            #expect(part.ending == .complete)
            // Preconditions use the cached validators.
            let matched = try await inside.request(
                .GET, "/a", headers: [("Range", "bytes=0-9"), ("If-Match", first.etagValue!)])
            #expect(matched.status == 206)
            let current = try await inside.request(.GET, "/a", headers: [("If-Match", shorter.etagValue!)])
            #expect(current.status == 412)
            // A range across the current end is cut there; one past it, and a suffix of the cached
            // size, get the head and no bytes.
            let across = try await inside.request(.GET, "/a", headers: [("Range", "bytes=5500-6499")])
            #expect(across.header("Content-Range") == "bytes 5500-6499/10000")
            #expect(across.body == body(seed: 2, 5500...5999))
            #expect(across.ending == .closed)
            for range in ["bytes=9000-9999", "bytes=-100"] {
                let beyond = try await RawHTTPConnection.connect(to: origin)
                let response = try await beyond.request(.GET, "/a", headers: [("Range", range)])
                #expect(response.status == 206, "\(range)")
                #expect(response.header("Content-Range")?.hasSuffix("/10000") == true)
                #expect(response.body.isEmpty)
                #expect(response.ending == .closed)
            }
            let unsatisfiable = try await RawHTTPConnection.connect(to: origin)
            let past = try await unsatisfiable.request(.GET, "/a", headers: [("Range", "bytes=10000-")])
            #expect(past.status == 416)
            #expect(past.header("Content-Range") == "bytes */10000")

            #expect(try await eventually { origin.requests.count == 9 })
            let log = origin.requests
            #expect(
                log.map(\.faultApplied) == [
                    nil, "firstMetadata+objectEnd", "firstMetadata", "firstMetadata", "firstMetadata",
                    "firstMetadata+objectEnd", "firstMetadata+objectEnd", "firstMetadata+objectEnd", "firstMetadata",
                ])
            #expect(log[1].bodyBytesSent == 6000)
        }
    }

    @Test func metadataOfTheFirstRequestWithALongerOrChangedObject() async throws {
        try await withOrigin { origin in
            let first = TestObject(size: 4000, seed: 1)
            origin.addObject(first, at: "/a")
            origin.updateFaults { $0.metadataFromFirstRequest = true }
            let connection = try await RawHTTPConnection.connect(to: origin)
            #expect(try await connection.request(.GET, "/a").body == body(seed: 1, 0...3999))

            origin.changeObject(at: "/a")
            let changed = try await connection.request(.GET, "/a")
            #expect(changed.header("ETag") == first.etagValue)
            #expect(changed.body == body(seed: 2, 0...3999))

            origin.addObject(TestObject(size: 9000, seed: 30), at: "/a")
            let longer = try await connection.request(.GET, "/a", headers: [("Range", "bytes=3000-")])
            #expect(longer.status == 206)
            #expect(longer.header("Content-Range") == "bytes 3000-3999/4000")
            #expect(longer.body == body(seed: 30, 3000...3999))
            #expect(longer.ending == .complete)

            // A path first asked for after its change caches the changed object.
            origin.addObject(TestObject(size: 100, seed: 50), at: "/b")
            origin.changeObject(at: "/b")
            let later = try #require(origin.object(at: "/b"))
            #expect(try await connection.request(.GET, "/b").header("ETag") == later.etagValue)

            // Turned off, it forgets; turned on again, it caches anew.
            origin.updateFaults { $0.metadataFromFirstRequest = false }
            let current = try #require(origin.object(at: "/a"))
            let honest = try await connection.request(.GET, "/a")
            #expect(honest.header("ETag") == current.etagValue && honest.body.count == 9000)
            origin.updateFaults { $0.metadataFromFirstRequest = true }
            origin.changeObject(at: "/a")
            let recached = try await connection.request(.GET, "/a")
            let replaced = try #require(origin.object(at: "/a"))
            #expect(recached.header("ETag") == replaced.etagValue)
            #expect(try await eventually { origin.requests.count == 6 })
            #expect(origin.requests.map(\.faultApplied) == [nil, "firstMetadata", "firstMetadata", nil, nil, nil])
        }
    }

    // MARK: changeAfterBodyBytes

    @Test func changeAfterBodyBytesReplacesTheObjectOnceItsBytesAreSent() async throws {
        try await withOrigin { origin in
            origin.addObject(TestObject(size: 100_000, seed: 7), at: "/a")
            origin.addObject(TestObject(size: 80_000, seed: 1), at: "/other")
            origin.updateFaults { $0.changeAfterBodyBytes = .init(path: "/a", bytes: 150_000) }
            let connection = try await RawHTTPConnection.connect(to: origin)
            #expect(try await connection.request(.GET, "/a").body.count == 100_000)
            #expect(try await connection.request(.HEAD, "/a").status == 200)
            #expect(try await connection.request(.GET, "/other").body.count == 80_000)  // another path
            #expect(origin.object(at: "/a")?.seed == 7)
            // This response reaches the count: it ends with the old bytes, and then the object is new.
            let crossing = try await connection.request(.GET, "/a", headers: [("Range", "bytes=0-59999")])
            #expect(crossing.body == body(seed: 7, 0...59_999))
            #expect(origin.object(at: "/a")?.seed == 8)
            let after = try await connection.request(.GET, "/a")
            #expect(after.body == body(seed: 8, 0...99_999))
            #expect(after.header("ETag") == origin.object(at: "/a")?.etagValue)
            // Once only.
            _ = try await connection.request(.GET, "/a")
            #expect(origin.object(at: "/a")?.seed == 8)
            // resetLog arms it again, counting from 0.
            origin.resetLog()
            _ = try await connection.request(.GET, "/a")
            #expect(origin.object(at: "/a")?.seed == 8)
            _ = try await connection.request(.GET, "/a", headers: [("Range", "bytes=0-49999")])
            #expect(origin.object(at: "/a")?.seed == 9)
        }
    }

    @Test func changeAfterBodyBytesCountsBytesOfCutResponses() async throws {
        try await withOrigin { origin in
            origin.addObject(TestObject(size: 100_000, seed: 7), at: "/a")
            origin.updateFaults {
                $0.changeAfterBodyBytes = .init(path: "/a", bytes: 30_000)
                $0.drops = .init(afterBytes: 20_000)
            }
            // The second response passes the count partway: it goes on with the bytes it began with.
            for expected: UInt64 in [7, 7, 8] {
                let connection = try await RawHTTPConnection.connect(to: origin)
                let response = try await connection.request(.GET, "/a")
                #expect(response.ending == .closed && response.body.count == 20_000)
                #expect(response.body == body(seed: expected, 0...19_999))
            }
            #expect(origin.object(at: "/a")?.seed == 8)
        }
    }
}
