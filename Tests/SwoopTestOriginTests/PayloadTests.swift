import Testing

@testable import SwoopTestOrigin

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

@Suite struct PayloadTests {
    @Test func anyRangeEqualsTheSameSliceOfTheWholeStream() {
        let whole = Payload.bytes(seed: 9, offset: 0, count: 3 * 4096 + 123)
        let ranges: [(Int, Int)] = [
            (0, 1), (0, 4096), (1, 7), (5, 4096), (4095, 2), (4093, 4099), (8, 8000), (12_000, 411),
        ]
        for (offset, count) in ranges {
            let part = Payload.bytes(seed: 9, offset: Int64(offset), count: count)
            #expect(part == Array(whole[offset..<(offset + count)]), "offset \(offset) count \(count)")
        }
        // Deterministic across calls.
        #expect(Payload.bytes(seed: 9, offset: 0, count: 1000) == Array(whole[0..<1000]))
    }

    @Test func fillMatchesBytesAtLargeOffsets() {
        let offset: Int64 = 5 << 30 + 3
        var buffer = [UInt8](repeating: 0, count: 70_001)
        buffer.withUnsafeMutableBytes { Payload.fill($0, seed: 77, offset: offset) }
        #expect(buffer == Payload.bytes(seed: 77, offset: offset, count: 70_001))
    }

    @Test func adjacentSeedsDifferInEveryByte() {
        let a = Payload.bytes(seed: 1, offset: 0, count: 1 << 20)
        let b = Payload.bytes(seed: 2, offset: 0, count: 1 << 20)
        #expect(zip(a, b).allSatisfy { $0 != $1 })
    }

    @Test func unrelatedSeedsShareOnlyChanceBytes() {
        let a = Payload.bytes(seed: 1, offset: 0, count: 1 << 20)
        let b = Payload.bytes(seed: 1 + 256 * 1000, offset: 0, count: 1 << 20)
        let equal = zip(a, b).filter { $0 == $1 }.count
        #expect(equal < (1 << 20) / 100)  // 1/256 expected
    }

    @Test func shiftedReadsDoNotMatch() {
        let base: Int64 = 10 * 4096 + 17
        let stream = Payload.bytes(seed: 5, offset: base, count: 2 * 4096 + 4096)
        let window = 4096
        for shift in 1...4096 {
            var equal = 0
            for i in 0..<window where stream[i] == stream[i + shift] {
                equal += 1
            }
            #expect(equal < 64, "shift \(shift): \(equal) equal bytes of \(window)")
        }
    }

    @Test func writesTheSameBytesToAFile() throws {
        let path = "/tmp/swoop-payload-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).bin"
        defer { unlink(path) }
        let size = 3 * (1 << 20) + 5
        try Payload.write(toFile: path, seed: 3, size: Int64(size))
        let fd = open(path, O_RDONLY)
        #expect(fd >= 0)
        defer { close(fd) }
        var contents = [UInt8](repeating: 0, count: size + 1)
        var total = 0
        while true {
            let n = contents.withUnsafeMutableBytes { read(fd, $0.baseAddress! + total, $0.count - total) }
            if n <= 0 { break }
            total += n
        }
        #expect(total == size)
        #expect(Array(contents[0..<size]) == Payload.bytes(seed: 3, offset: 0, count: size))
    }
}

@Suite struct ValidatorTests {
    @Test func validatorsFollowTheSeed() {
        var object = TestObject(size: 1000, seed: 4)
        let etag = object.etagValue!
        let lastModified = object.lastModifiedEpochSeconds
        #expect(etag.hasPrefix("\"") && etag.hasSuffix("\"") && etag.count == 18)
        object.seed += 1
        #expect(object.etagValue != etag)
        #expect(object.lastModifiedEpochSeconds > lastModified)
        object.etag = .weak
        #expect(object.etagValue == "W/" + "\"\(object.etagOpaque)\"")
        object.etag = .none
        #expect(object.etagValue == nil)
        object.lastModified = false
        #expect(object.lastModifiedValue == nil)
        #expect(TestObject(size: 1001, seed: 5).etagValue != TestObject(size: 1000, seed: 5).etagValue)
    }

    @Test func httpDatesRoundTrip() {
        #expect(HTTPDate.format(epochSeconds: 784_111_777) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT") == 784_111_777)
        #expect(HTTPDate.format(epochSeconds: 951_782_400) == "Tue, 29 Feb 2000 00:00:00 GMT")
        for seconds: Int64 in [0, 946_684_800, 1_700_000_000, 4_102_444_799] {
            #expect(HTTPDate.parse(HTTPDate.format(epochSeconds: seconds)) == seconds)
        }
        #expect(HTTPDate.parse("Sunday, 06-Nov-94 08:49:37 GMT") == nil)
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 UTC") == nil)
        #expect(HTTPDate.parse("garbage") == nil)
    }

    @Test func rangeHeaderParsing() {
        #expect(ByteRangeRequest(parsing: "bytes=0-99") == .from(first: 0, last: 99))
        #expect(ByteRangeRequest(parsing: "Bytes = 5-") == .from(first: 5, last: nil))
        #expect(ByteRangeRequest(parsing: "bytes=-10") == .suffix(length: 10))
        #expect(ByteRangeRequest(parsing: "bytes=0-1,5-6") == nil)
        #expect(ByteRangeRequest(parsing: "bytes=9-3") == nil)
        #expect(ByteRangeRequest(parsing: "items=0-1") == nil)
        #expect(ByteRangeRequest(parsing: "bytes=a-b") == nil)
        #expect(ByteRangeRequest(parsing: "bytes=-") == nil)
        #expect(ByteRangeRequest.from(first: 0, last: 999).resolve(size: 10) == 0...9)
        #expect(ByteRangeRequest.suffix(length: 999).resolve(size: 10) == 0...9)
        #expect(ByteRangeRequest.suffix(length: 0).resolve(size: 10) == nil)
        #expect(ByteRangeRequest.from(first: 10, last: nil).resolve(size: 10) == nil)
        #expect(ByteRangeRequest.from(first: 0, last: 0).resolve(size: 0) == nil)
    }

    @Test func entityTagLists() {
        guard case .tags(let tags)? = EntityTagList.parse(#" "a", W/"b" ,"c,d""#) else {
            Issue.record("list did not parse")
            return
        }
        #expect(
            tags == [
                EntityTag(isWeak: false, opaque: "a"), EntityTag(isWeak: true, opaque: "b"),
                EntityTag(isWeak: false, opaque: "c,d"),
            ])
        #expect(EntityTagList.parse("*").map { if case .any = $0 { true } else { false } } == true)
        #expect(EntityTagList.parse("abc") == nil)
        #expect(EntityTag(isWeak: true, opaque: "x").strongMatches(EntityTag(isWeak: true, opaque: "x")) == false)
        #expect(EntityTag(isWeak: true, opaque: "x").weakMatches(EntityTag(isWeak: false, opaque: "x")))
    }
}
