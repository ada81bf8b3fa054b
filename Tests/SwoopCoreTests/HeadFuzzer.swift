import SwoopTestSupport
import Testing
@testable import SwoopCore

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
