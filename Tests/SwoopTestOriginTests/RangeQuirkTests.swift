import NIOHTTP1
import SwoopTestOrigin
import Testing

/// Servers that answer ranges in their own way: `200` with a `Content-Range` (`rangeAs200`),
/// ranges cut to a maximum size (`rangeCapBytes`), and `416` to every range of a small object
/// (`rangeRefusal`).
@Suite struct RangeQuirkTests {
    private func body(seed: UInt64 = 1, _ range: ClosedRange<Int64>) -> [UInt8] {
        Payload.bytes(seed: seed, offset: range.lowerBound, count: Int(range.upperBound - range.lowerBound + 1))
    }

    @Test func rangeAs200SendsThePartWithStatus200() async throws {
        try await withOrigin { origin in
            origin.addObject(TestObject(size: 1000), at: "/a")
            origin.updateFaults { $0.rangeAs200 = true }
            let connection = try await RawHTTPConnection.connect(to: origin)
            let part = try await connection.request(.GET, "/a", headers: [("Range", "bytes=100-199")])
            #expect(part.status == 200)
            #expect(part.header("Content-Range") == "bytes 100-199/1000")
            #expect(part.header("Content-Length") == "100")
            #expect(part.body == body(100...199))
            #expect(part.ending == .complete)
            let suffix = try await connection.request(.GET, "/a", headers: [("Range", "bytes=-10")])
            #expect(suffix.status == 200 && suffix.header("Content-Range") == "bytes 990-999/1000")
            #expect(suffix.body == body(990...999))
            let whole = try await connection.request(.GET, "/a")
            #expect(whole.status == 200 && whole.header("Content-Range") == nil)
            #expect(whole.body == body(0...999))
            let past = try await connection.request(.GET, "/a", headers: [("Range", "bytes=1000-")])
            #expect(past.status == 416)
            #expect(try await eventually { origin.requests.count == 4 })
            #expect(origin.requests.map(\.faultApplied) == ["range200", "range200", nil, nil])
        }
    }

    @Test func rangeAs200WithACapTellsTheTruthAboutTheShorterRange() async throws {
        try await withOrigin { origin in
            let size: Int64 = 3 << 20
            origin.addObject(TestObject(size: size, seed: 9), at: "/a")
            origin.updateFaults {
                $0.rangeAs200 = true
                $0.rangeCapBytes = 1 << 20
            }
            let connection = try await RawHTTPConnection.connect(to: origin)
            let open = try await connection.request(.GET, "/a", headers: [("Range", "bytes=0-")])
            #expect(open.status == 200)
            #expect(open.header("Content-Range") == "bytes 0-1048575/3145728")
            #expect(open.header("Content-Length") == "1048576")
            #expect(open.body == body(seed: 9, 0...1_048_575))
            let tail = try await connection.request(.GET, "/a", headers: [("Range", "bytes=2500000-3145727")])
            #expect(tail.header("Content-Range") == "bytes 2500000-3145727/3145728")
            #expect(tail.body == body(seed: 9, 2_500_000...3_145_727))
            let small = try await connection.request(.GET, "/a", headers: [("Range", "bytes=10-19")])
            #expect(small.header("Content-Range") == "bytes 10-19/3145728")
            // Without a range, the whole object.
            let whole = try await connection.request(.GET, "/a")
            #expect(whole.status == 200 && whole.body.count == Int(size))
            #expect(try await eventually { origin.requests.count == 4 })
            #expect(origin.requests.map(\.faultApplied) == ["rangeCapped+range200", "range200", "range200", nil])
        }
    }

    @Test func rangeCapAloneShortensA206() async throws {
        try await withOrigin { origin in
            origin.addObject(TestObject(size: 5000), at: "/a")
            origin.updateFaults { $0.rangeCapBytes = 1024 }
            let connection = try await RawHTTPConnection.connect(to: origin)
            let capped = try await connection.request(.GET, "/a", headers: [("Range", "bytes=1000-")])
            #expect(capped.status == 206)
            #expect(capped.header("Content-Range") == "bytes 1000-2023/5000")
            #expect(capped.header("Content-Length") == "1024")
            #expect(capped.body == body(1000...2023))
            let suffix = try await connection.request(.GET, "/a", headers: [("Range", "bytes=-3000")])
            #expect(suffix.header("Content-Range") == "bytes 2000-3023/5000")
            let head = try await connection.request(.HEAD, "/a", headers: [("Range", "bytes=0-4999")])
            #expect(head.status == 206 && head.header("Content-Range") == "bytes 0-1023/5000")
            let fits = try await connection.request(.GET, "/a", headers: [("Range", "bytes=0-1023")])
            #expect(fits.header("Content-Range") == "bytes 0-1023/5000")
            #expect(try await eventually { origin.requests.count == 4 })
            #expect(origin.requests.map(\.faultApplied) == ["rangeCapped", "rangeCapped", "rangeCapped", nil])
        }
    }

    @Test(arguments: [true, false])
    func rangeRefusalAnswers416ToEveryRangeOfASmallObject(withContentRange: Bool) async throws {
        try await withOrigin { origin in
            let small = TestObject(size: 1000, seed: 2)
            origin.addObject(small, at: "/small")
            origin.addObject(TestObject(size: 1001, seed: 3), at: "/big")
            origin.updateFaults { $0.rangeRefusal = .init(objectsUpTo: 1000, withContentRange: withContentRange) }
            let connection = try await RawHTTPConnection.connect(to: origin)
            for range in ["bytes=0-9", "bytes=0-", "bytes=-1", "bytes=0-999", "bytes=5-1"] {
                for method in [HTTPMethod.GET, .HEAD] {
                    let refused = try await connection.request(method, "/small", headers: [("Range", range)])
                    #expect(refused.status == 416, "\(method) \(range)")
                    #expect(refused.header("Content-Range") == (withContentRange ? "bytes */1000" : nil))
                    #expect(refused.header("ETag") == small.etagValue)
                    #expect(refused.body.isEmpty && refused.ending == .complete)
                }
            }
            let whole = try await connection.request(.GET, "/small")
            #expect(whole.status == 200 && whole.body == body(seed: 2, 0...999))
            let big = try await connection.request(.GET, "/big", headers: [("Range", "bytes=0-9")])
            #expect(big.status == 206 && big.body == body(seed: 3, 0...9))
            // A failed precondition comes first.
            let failed = try await connection.request(
                .GET, "/small", headers: [("Range", "bytes=0-9"), ("If-Match", "\"other\"")])
            #expect(failed.status == 412)
            #expect(try await eventually { origin.requests.count == 13 })
            let faults = origin.requests.map(\.faultApplied)
            #expect(faults == Array(repeating: "refuse416", count: 10) + [nil, nil, nil])
        }
    }

    @Test func noRangeSupportWinsOverTheRefusal() async throws {
        try await withOrigin { origin in
            origin.addObject(TestObject(size: 100), at: "/a")
            origin.updateFaults {
                $0.rangeRefusal = .init(objectsUpTo: 1000)
                $0.rangeSupport = false
            }
            let connection = try await RawHTTPConnection.connect(to: origin)
            let response = try await connection.request(.GET, "/a", headers: [("Range", "bytes=0-9")])
            #expect(response.status == 200 && response.body == body(0...99))
        }
    }
}
