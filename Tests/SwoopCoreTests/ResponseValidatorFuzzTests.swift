import SwoopTestSupport
import Testing
@testable import SwoopCore

/// Random and malformed response heads against an independent statement of what may be accepted.
///
/// The generator knows what each header value it writes *means* (it built it from numbers or from
/// a malformed template), so the oracle never parses a header: it compares meanings with the
/// request. Every head is checked in both directions: the validator accepts it exactly when the
/// oracle does.
///
/// CPU-bound (seconds a case on a loaded machine): one case at a time, yielding every 100 heads, so
/// that it never holds a thread of Swift's cooperative pool (two here) while other tests wait: in a
/// clean-clone CI run it ran for 33 s without yielding, and tests polling a download's progress
/// meanwhile saw none.
@Suite("ResponseValidator fuzz", .serialized)
struct ResponseValidatorFuzzTests {
    @Test("segment() accepts exactly the heads that deliver the requested bytes of the same object", arguments: 0..<4)
    func segmentFuzz(batch: Int) async throws {
        var random = SplitMix64(seed: 0x5E6_0000 &+ UInt64(batch))
        let url = RemoteURL(testing: "https://cdn.example.com/files/disk.img")
        var known: [String] = []
        var accepted = 0
        for iteration in 0..<2000 {
            if iteration % 100 == 0 { await Task.yield() }
            let object = HeadFuzzer.randomObject(url: url, using: &random)
            let size = object.size!
            let first = random.logUniform(0...(size - 1))
            let requested = ByteRange(first, first + random.logUniform(1...(size - first)))
            let head = HeadFuzzer.segmentHead(requested: requested, object: object, using: &random)
            let verdict = head.segmentVerdict(requested: requested, object: object)
            let result = Result<Void, DownloadError>(catching: { () throws(DownloadError) in
                try ResponseValidator.segment(head.head, requested: requested, object: object)
            })
            let context =
                "#\(iteration) requested \(requested) of \(size), object etag \(object.etag ?? "-") lm "
                + "\(object.lastModified ?? "-"): \(head)"
            switch (result, verdict) {
            case (.success, .accept):
                accepted += 1
            case (.failure, .reject):
                break
            case (.success, .knownIssue(let issue)):
                known.append("\(issue): \(context)")
            case (.failure, .knownIssue):
                break
            case (.success, .reject(let reason)):
                Issue.record("accepted a head that must be refused (\(reason)): \(context)")
            case (.failure(let error), .accept):
                Issue.record("refused a valid head (\(error.message)): \(context)")
            }
        }
        // The generator must exercise both outcomes.
        #expect(accepted > 100)
        #expect(known.isEmpty, "\(known.count) heads: \(known.prefix(2))")
    }

    @Test("probe() results always describe exactly what the server sent", arguments: 0..<4)
    func probeFuzz(batch: Int) async throws {
        var random = SplitMix64(seed: 0x9_0BE0_0000 &+ UInt64(batch))
        let url = RemoteURL(testing: "https://cdn.example.com/files/disk.img")
        var known: [String] = []
        var partials = 0
        for iteration in 0..<2000 {
            if iteration % 100 == 0 { await Task.yield() }
            let size = random.logUniform(0...(1 << 40))
            let requested: RequestedRange
            let start =
                random.chance(0.85) ? random.logUniform(0...max(0, size - 1)) : random.logUniform(0...(size + 10))
            if random.chance(0.7) {
                requested = .bounded(ByteRange(start, start + random.logUniform(1...(1 << 24))))
            } else {
                requested = .from(start)
            }
            let head = HeadFuzzer.probeHead(requested: requested, size: size, using: &random)
            let expected = head.probeVerdict(requested: requested, url: url)
            let result = Result<ResponseValidator.ProbeResult, DownloadError>(catching: { () throws(DownloadError) in
                try ResponseValidator.probe(head.head, requested: requested, url: url)
            })
            let context = "#\(iteration) requested \(requested.headerValue) of \(size): \(head)"

            // Whatever the oracle says, a partial result must be requested bytes (from the first one
            // asked for, all or fewer) of an object of the stated total.
            if case .success(.partial(let object, let range)) = result {
                partials += 1
                let total = object.size
                #expect(total != nil, "\(context)")
                if let total {
                    let upper: Int64
                    switch requested {
                    case .bounded(let asked): upper = min(asked.upperBound, total)
                    case .from: upper = total
                    }
                    #expect(
                        range.lowerBound == requested.lowerBound && range.upperBound <= upper && !range.isEmpty,
                        "\(context)")
                    #expect(object.acceptsRanges && object.url == url)
                }
            }
            switch (result, expected) {
            case (.success(let got), .result(let want)):
                #expect(got == want, "\(context)")
            case (.failure, .refuse):
                break
            case (.success(let got), .knownIssue(let issue, let refusedOrValue)):
                if let value = refusedOrValue {
                    #expect(got == value, "\(context)")
                }
                known.append("\(issue): \(context) -> \(got)")
            case (.failure, .knownIssue):
                break
            case (.success(let got), .refuse(let reason)):
                Issue.record("probe accepted a head that must be refused (\(reason)) as \(got): \(context)")
            case (.failure(let error), .result(let want)):
                Issue.record("probe refused a head that means \(want) (\(error.message)): \(context)")
            }
        }
        #expect(partials > 100)
        #expect(known.isEmpty, "\(known.count) heads: \(known.prefix(3))")
    }
}
