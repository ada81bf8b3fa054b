import SwoopTestSupport
import Testing
@testable import SwoopCore

/// Random and malformed response heads against an independent statement of what may be accepted.
///
/// The generator knows what each header value it writes *means* (it built it from numbers or from
/// a malformed template), so the oracle never parses a header: it compares meanings with the
/// request. Every head is checked in both directions: the validator accepts it exactly when the
/// oracle does.
@Suite("ResponseValidator fuzz", .serialized)  // CPU-bound: one case at a time, not all of the test pool
struct ResponseValidatorFuzzTests {
    @Test("segment() accepts exactly the heads that deliver the requested bytes of the same object", arguments: 0..<4)
    func segmentFuzz(batch: Int) throws {
        var random = SplitMix64(seed: 0x5E6_0000 &+ UInt64(batch))
        let url = RemoteURL(testing: "https://cdn.example.com/files/disk.img")
        var known: [String] = []
        var accepted = 0
        for iteration in 0..<2000 {
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
    func probeFuzz(batch: Int) throws {
        var random = SplitMix64(seed: 0x9_0BE0_0000 &+ UInt64(batch))
        let url = RemoteURL(testing: "https://cdn.example.com/files/disk.img")
        var known: [String] = []
        var partials = 0
        for iteration in 0..<2000 {
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

            // Whatever the oracle says, a partial result must be the requested bytes of an object of
            // the stated total.
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
                        range.lowerBound == requested.lowerBound && range.upperBound == upper && !range.isEmpty,
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

// MARK: - Generator

/// One generated head and what its fields mean.
struct FuzzedHead: CustomStringConvertible {
    /// What a Content-Range value says, as the generator built it.
    enum RangeMeaning: Equatable {
        /// `bytes first-last/total` written correctly (`total` nil for `*`); not necessarily consistent.
        case range(first: Int64, last: Int64, total: Int64?)
        /// `bytes */total`.
        case unsatisfied(total: Int64)
        case malformed
    }

    var status: Int
    var fields: [(name: String, value: String)] = []
    var contentRanges: [(value: String, meaning: RangeMeaning)] = []
    /// Content-Length values and their numbers (nil when not a plain decimal).
    var contentLengths: [(value: String, number: Int64?)] = []
    var etags: [String] = []
    var lastModifieds: [String] = []
    var encodings: [String] = []
    var contentTypes: [String] = []
    var locations: [String] = []
    var transferEncodings: [String] = []

    var head: ResponseHead { ResponseHead(status: status, fields: fields) }

    var description: String { "\(status) " + fields.map { "\($0.name): \($0.value)" }.joined(separator: " | ") }

    enum SegmentVerdict {
        case accept
        case reject(String)
        case knownIssue(String)
    }

    /// Values of one field that disagree (a server sending two different answers).
    private static func conflicting(_ values: [String]) -> Bool { Set(values).count > 1 }

    /// The stored coding the Content-Encoding fields name: their codings in order, without
    /// `identity`; `identity` when there are none.
    private var coding: String {
        // In the order the fields are sent (the generator may shuffle them).
        let codings = fields.filter { $0.name.lowercased() == "content-encoding" }.map(\.value)
            .flatMap { $0.split(separator: ",") }
            .map { String($0).trimmed(of: " \t").lowercased() }
            .filter { !$0.isEmpty && $0 != "identity" }
        return codings.isEmpty ? "identity" : codings.joined(separator: ", ")
    }

    private var singleRange: RangeMeaning? {
        guard let first = contentRanges.first, !Self.conflicting(contentRanges.map(\.value)) else { return nil }
        return first.meaning
    }

    private var singleLength: (present: Bool, number: Int64?) {
        guard let first = contentLengths.first else { return (false, nil) }
        return (true, Self.conflicting(contentLengths.map(\.value)) ? nil : first.number)
    }

    private static func isMultipart(_ type: String) -> Bool { type.lowercased().hasPrefix("multipart/byteranges") }

    /// The oracle for a segment response.
    func segmentVerdict(requested: ByteRange, object: RemoteObject) -> SegmentVerdict {
        guard status == 206 else { return .reject("status \(status)") }
        for (name, values) in [
            ("content-range", contentRanges.map(\.value)), ("content-length", contentLengths.map(\.value)),
            ("etag", etags), ("content-type", contentTypes),
        ] where Self.conflicting(values) {
            return .reject("conflicting \(name)")
        }
        guard case .range(let first, let last, let total)? = singleRange else {
            return .reject("no usable Content-Range")
        }
        guard first == requested.lowerBound, last == requested.upperBound - 1 else { return .reject("other bytes") }
        guard total == object.size else { return .reject("other total") }
        let length = singleLength
        if length.present && length.number != requested.count { return .reject("Content-Length") }
        // Identity: a strong ETag must be repeated exactly; otherwise a weak one must match weakly and
        // Last-Modified must not differ.
        let etag = etags.first
        if let expected = object.etag, !expected.hasPrefix("W/") {
            guard etag == expected else { return .reject("strong ETag \(etag ?? "missing")") }
        } else {
            if let expected = object.etag, let etag, Self.opaque(etag) != Self.opaque(expected) {
                return .reject("weak ETag differs")
            }
            if let expected = object.lastModified, let modified = lastModifieds.first, !Self.conflicting(lastModifieds),
                modified != expected
            {
                return .reject("Last-Modified differs")
            }
        }
        if contentTypes.contains(where: Self.isMultipart) { return .reject("multipart") }
        // The bytes are kept as stored: every response must name the coding the probe saw.
        if let stored = object.contentCoding, stored != coding {
            return .reject("content coding \(coding), not \(stored)")
        }
        return .accept
    }

    private static func opaque(_ tag: String) -> Substring { tag.hasPrefix("W/") ? tag.dropFirst(2) : Substring(tag) }

    enum ProbeVerdict {
        case result(ResponseValidator.ProbeResult)
        case refuse(String)
        /// A known weakness: the validator may return `value` (when given) instead of refusing.
        case knownIssue(String, ResponseValidator.ProbeResult?)
    }

    /// The oracle for a probe response.
    func probeVerdict(requested: RequestedRange, url: RemoteURL) -> ProbeVerdict {
        let singleValued = !["content-range", "content-length", "etag", "content-type"].contains { name in
            switch name {
            case "content-range": Self.conflicting(contentRanges.map(\.value))
            case "content-length": Self.conflicting(contentLengths.map(\.value))
            case "content-type": Self.conflicting(contentTypes)
            default: Self.conflicting(etags)
            }
        }
        let etag = Self.conflicting(etags) ? nil : etags.first
        let lastModified = Self.conflicting(lastModifieds) ? nil : lastModifieds.first
        switch status {
        case 206:
            guard singleValued else { return .refuse("conflicting fields") }
            guard case .range(let first, let last, let total?)? = singleRange else {
                return .refuse("no Content-Range with a total")
            }
            guard first <= last, last < total else { return .refuse("inconsistent Content-Range") }
            let upper: Int64
            switch requested {
            case .bounded(let asked): upper = min(asked.upperBound, total)
            case .from: upper = total
            }
            guard first == requested.lowerBound, last + 1 == upper else { return .refuse("other bytes") }
            let length = singleLength
            if length.present && length.number != last + 1 - first { return .refuse("Content-Length") }
            let object = RemoteObject(
                url: url, size: total, etag: etag, lastModified: lastModified, acceptsRanges: true,
                contentCoding: coding)
            if contentTypes.contains(where: Self.isMultipart) { return .refuse("multipart") }
            return .result(.partial(object, ByteRange(first, last + 1)))
        case 200:
            guard singleValued else { return .refuse("conflicting fields") }
            let chunked =
                !Self.conflicting(transferEncodings)
                && transferEncodings.first?.lowercased().contains("chunked") == true
            let length = singleLength
            let object = RemoteObject(
                url: url, size: chunked ? nil : length.number, etag: etag, lastModified: lastModified,
                acceptsRanges: false, contentCoding: coding)
            if length.present && length.number == nil { return .refuse("malformed Content-Length") }
            return .result(.whole(object))
        case 416:
            guard singleValued else { return .refuse("conflicting fields") }
            // Without Content-Range the size is unknown (Apache httpd, lighttpd); one that is there must be */total.
            guard !contentRanges.isEmpty else { return .result(.unsatisfiable(total: nil, etag: etag)) }
            guard case .unsatisfied(let total)? = singleRange else { return .refuse("416 without */total") }
            return .result(.unsatisfiable(total: total, etag: etag))
        case 301, 302, 303, 307, 308:
            guard let location = locations.first, !Self.conflicting(locations), !location.isEmpty else {
                return .refuse("redirect without Location")
            }
            return .result(.redirect(location: location))
        case 412:
            return .result(.preconditionFailed)
        default:
            return .refuse("status \(status)")
        }
    }
}

enum HeadFuzzer {
    static let dates = ["Tue, 15 Nov 1994 12:45:26 GMT", "Wed, 16 Nov 1994 08:00:00 GMT"]

    static func randomObject(url: RemoteURL, using random: inout SplitMix64) -> RemoteObject {
        let size = random.logUniform(1...(1 << 40))
        let etag: String? = random.weighted([(5, "\"v1-abc\""), (2, "W/\"v1-abc\""), (2, nil)])
        let lastModified: String? = random.chance(0.6) ? dates[0] : nil
        let coding = random.weighted([(8, "identity"), (2, "gzip")])
        return RemoteObject(
            url: url, size: size, etag: etag, lastModified: lastModified, acceptsRanges: true, contentCoding: coding)
    }

    static func status(using random: inout SplitMix64) -> Int {
        random.weighted([
            (50, 206), (10, 200), (8, 416), (2, 301), (2, 302), (1, 303), (2, 307), (1, 308), (1, 304), (5, 412),
            (18, Int.random(in: 100...599, using: &random)),
        ])
    }

    /// A decimal, sometimes with leading zeros (still a plain decimal).
    static func decimal(_ value: Int64, using random: inout SplitMix64) -> String {
        random.chance(0.05)
            ? String(repeating: "0", count: Int.random(in: 1...2, using: &random)) + String(value) : String(value)
    }

    static func unit(using random: inout SplitMix64) -> String {
        random.weighted([(20, "bytes"), (1, "Bytes"), (1, "BYTES")])
    }

    /// A Content-Range value near `first-last/total`.
    static func contentRange(
        first: Int64, last: Int64, total: Int64, using random: inout SplitMix64
    ) -> (String, FuzzedHead.RangeMeaning) {
        func format(
            _ f: Int64, _ l: Int64, _ t: Int64?, _ random: inout SplitMix64
        ) -> (String, FuzzedHead.RangeMeaning) {
            guard f >= 0, l >= 0, t.map({ $0 >= 0 }) ?? true else {
                return ("bytes \(f)-\(l)/\(t.map(String.init) ?? "*")", .malformed)
            }
            let unitText = unit(using: &random)
            let (firstText, lastText) = (decimal(f, using: &random), decimal(l, using: &random))
            let totalText = t.map { decimal($0, using: &random) } ?? "*"
            let text = "\(unitText) \(firstText)-\(lastText)/\(totalText)"
            return (text, .range(first: f, last: l, total: t))
        }
        let kind = random.weighted([(40, 0), (6, 1), (6, 2), (6, 3), (4, 4), (4, 5), (4, 6), (4, 7), (8, 8)])
        switch kind {
        case 0: return format(first, last, total, &random)
        case 1: return format(first + Int64.random(in: -1...1, using: &random), last, total, &random)
        case 2: return format(first, last + Int64.random(in: -1...1, using: &random), total, &random)
        case 3: return format(first, last, total + Int64.random(in: -1...1, using: &random), &random)
        case 4: return format(first, last, nil, &random)
        case 5: return format(first, last, random.logUniform(0...(1 << 41)), &random)
        case 6: return format(first, last + 1, total, &random)  // exclusive end
        case 7:
            let t = random.logUniform(1...(1 << 41))
            let f = random.logUniform(0...(t - 1))
            return format(f, f + random.logUniform(0...(t - 1 - f)), t, &random)
        default:
            let templates: [(String, FuzzedHead.RangeMeaning)] = [
                ("bytes \(first)-\(last)", .malformed),
                ("bytes=\(first)-\(last)/\(total)", .malformed),
                ("bytes \(first) - \(last)/\(total)", .malformed),
                ("items \(first)-\(last)/\(total)", .malformed),
                ("bytes -\(first)-\(last)/\(total)", .malformed),
                ("bytes +\(first)-\(last)/\(total)", .malformed),
                ("bytes \(first)-\(last)/\(total) junk", .malformed),
                ("bytes \(first)-\(last)/\(total)x", .malformed),
                ("bytes \(first)-\(last)/\(total), bytes \(first)-\(last)/\(total)", .malformed),
                ("bytes \(first)-\(last)/\(total)/\(total)", .malformed),
                ("bytes \(first)-1\(String(repeating: "0", count: 18))/\(total)", .malformed),
                ("bytes \(first)-\(last)/1\(String(repeating: "0", count: 18))", .malformed),
                ("bytes */*", .malformed),
                ("bytes */\(total)", .unsatisfied(total: total)),
                ("", .malformed),
                ("bytes", .malformed),
                ("\(first)-\(last)/\(total)", .malformed),
                ("bytes \(first)-\(last)\(total)", .malformed),
                ("bytes ٠-٩/١٠", .malformed),
                ("bytes 0x\(String(first, radix: 16))-\(last)/\(total)", .malformed),
            ]
            return templates.randomElement(using: &random)!
        }
    }

    static func contentLength(_ count: Int64, using random: inout SplitMix64) -> (String, Int64?) {
        let kind = random.weighted([(12, 0), (3, 1), (3, 2), (1, 3), (2, 4), (1, 5), (1, 6), (1, 7), (1, 8), (1, 9)])
        switch kind {
        case 0: return (decimal(count, using: &random), count)
        case 1: return (String(count + 1), count + 1)
        case 2: return (String(max(0, count - 1)), max(0, count - 1))
        case 3: return ("0", 0)
        case 4: let value = random.logUniform(0...(1 << 41)); return (String(value), value)
        case 5: return ("-\(count)", nil)
        case 6: return ("", nil)
        case 7: return ("\(count).0", nil)
        case 8: return ("\(count) \(count)", nil)
        default: return (["abc", "1e3", "0x10", "∞"].randomElement(using: &random)!, nil)
        }
    }

    /// Writes the chosen field values in a random order with random name casing.
    static func assemble(_ head: inout FuzzedHead, using random: inout SplitMix64) {
        var fields: [(String, String)] = []
        fields += head.contentRanges.map { ("Content-Range", $0.value) }
        fields += head.contentLengths.map { ("Content-Length", $0.value) }
        fields += head.etags.map { ("ETag", $0) }
        fields += head.lastModifieds.map { ("Last-Modified", $0) }
        fields += head.encodings.map { ("Content-Encoding", $0) }
        fields += head.contentTypes.map { ("Content-Type", $0) }
        fields += head.locations.map { ("Location", $0) }
        fields += head.transferEncodings.map { ("Transfer-Encoding", $0) }
        fields += [("Server", "fuzz"), ("Accept-Ranges", "bytes"), ("Date", dates[1])].filter { _ in random.chance(0.5)
        }
        fields.shuffle(using: &random)
        head.fields = fields.map { name, value in
            let cased = random.weighted([(6, name), (1, name.lowercased()), (1, name.uppercased())])
            return (cased, value)
        }
    }

    /// Repeats a field sometimes: the same value (harmless) or a different one (a conflict).
    static func maybeDuplicate<T>(
        _ values: inout [T], alternative: (inout SplitMix64) -> T, using random: inout SplitMix64
    ) {
        guard let first = values.first else { return }
        if random.chance(0.05) { values.append(first) }
        if random.chance(0.05) {
            let other = alternative(&random)
            values.insert(other, at: Int.random(in: 0...values.count, using: &random))
        }
    }

    static func commonFields(
        _ head: inout FuzzedHead, etag objectETag: String?, lastModified: String?, using random: inout SplitMix64
    ) {
        // ETag: the same, another, the weak or strong twin, or none.
        let strong = objectETag.map { $0.hasPrefix("W/") ? String($0.dropFirst(2)) : $0 } ?? "\"v1-abc\""
        let etag: String? = random.weighted([
            (10, objectETag), (2, "\"v2-def\""), (1, "W/" + strong), (1, strong), (1, "w/" + strong), (2, nil),
            (1, "\"V1-ABC\""),
        ])
        if let etag { head.etags = [etag] }
        maybeDuplicate(&head.etags, alternative: { _ in "\"v3-xyz\"" }, using: &random)
        let modified: String? = random.weighted([(6, lastModified ?? dates[0]), (2, dates[1]), (3, nil)])
        if let modified { head.lastModifieds = [modified] }
        maybeDuplicate(&head.lastModifieds, alternative: { _ in dates[1] }, using: &random)
        // Content-Encoding: mostly none.
        let codings = ["identity", "Identity", " identity ", "", "gzip", "br", "deflate", "gzip, identity", "x-gzip"]
        for _ in 0..<random.weighted([(14, 0), (4, 1), (1, 2)]) {
            head.encodings.append(
                random.chance(0.5)
                    ? codings[Int.random(in: 0...3, using: &random)] : codings.randomElement(using: &random)!)
        }
        let types = [
            "application/octet-stream", "text/html; charset=utf-8", "multipart/byteranges; boundary=3d6b6a416f9b5",
            "Multipart/ByteRanges; boundary=x",
        ]
        if random.chance(0.6) {
            head.contentTypes = [random.chance(0.8) ? types[0] : types.randomElement(using: &random)!]
        }
        if random.chance(0.03) { head.contentTypes.append(types.randomElement(using: &random)!) }
        head.contentTypes.shuffle(using: &random)
    }

    static func segmentHead(requested: ByteRange, object: RemoteObject, using random: inout SplitMix64) -> FuzzedHead {
        var head = FuzzedHead(status: status(using: &random))
        let size = object.size!
        if random.chance(0.95) {
            head.contentRanges = [
                contentRange(first: requested.lowerBound, last: requested.upperBound - 1, total: size, using: &random)
            ]
            maybeDuplicate(
                &head.contentRanges,
                alternative: {
                    contentRange(first: requested.lowerBound, last: requested.upperBound - 1, total: size, using: &$0)
                }, using: &random)
        }
        if random.chance(0.8) {
            head.contentLengths = [contentLength(requested.count, using: &random)]
            maybeDuplicate(
                &head.contentLengths, alternative: { contentLength(requested.count, using: &$0) }, using: &random)
        }
        commonFields(&head, etag: object.etag, lastModified: object.lastModified, using: &random)
        assemble(&head, using: &random)
        return head
    }

    static func probeHead(requested: RequestedRange, size: Int64, using random: inout SplitMix64) -> FuzzedHead {
        var head = FuzzedHead(status: status(using: &random))
        let upper: Int64
        switch requested {
        case .bounded(let asked): upper = min(asked.upperBound, size)
        case .from: upper = size
        }
        let first = requested.lowerBound
        let last = max(first, upper) - 1  // may be below first when nothing is there: then malformed
        if head.status == 416 && random.chance(0.7) {
            head.contentRanges = [
                random.chance(0.8)
                    ? ("bytes */\(size)", .unsatisfied(total: size))
                    : contentRange(first: first, last: last, total: size, using: &random)
            ]
        } else if random.chance(0.9) {
            head.contentRanges = [contentRange(first: first, last: last, total: size, using: &random)]
            maybeDuplicate(
                &head.contentRanges, alternative: { contentRange(first: first, last: last, total: size, using: &$0) },
                using: &random)
        }
        if random.chance(0.8) {
            head.contentLengths = [contentLength(head.status == 200 ? size : upper - first, using: &random)]
            maybeDuplicate(
                &head.contentLengths, alternative: { contentLength(upper - first, using: &$0) }, using: &random)
        }
        commonFields(&head, etag: random.chance(0.7) ? "\"v1-abc\"" : nil, lastModified: nil, using: &random)
        if (300..<400).contains(head.status) || random.chance(0.05) {
            let locations = [
                "/other/disk.img", "https://mirror.example.net/disk.img", "", "disk2.img", "//cdn2.example.com/x",
            ]
            if random.chance(0.9) { head.locations = [locations.randomElement(using: &random)!] }
            maybeDuplicate(&head.locations, alternative: { _ in "/elsewhere" }, using: &random)
        }
        if head.status == 200 && random.chance(0.2) {
            head.transferEncodings = [
                ["chunked", "gzip, chunked", "Chunked", "identity"].randomElement(using: &random)!
            ]
        }
        assemble(&head, using: &random)
        return head
    }
}

extension String {
    /// `self` without leading and trailing characters from `set`.
    func trimmed(of set: String) -> String {
        var slice = Substring(self)
        while let first = slice.first, set.contains(first) { slice.removeFirst() }
        while let last = slice.last, set.contains(last) { slice.removeLast() }
        return String(slice)
    }
}
