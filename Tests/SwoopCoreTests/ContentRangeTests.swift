import SwoopTestSupport
import Testing
@testable import SwoopCore

@Suite("Content-Range parsing")
struct ContentRangeTests {
    static let validCases: [(String, ContentRange)] = [
        ("bytes 0-99/100", .satisfied(ByteRange(0, 100), total: 100)),
        ("bytes 0-0/1", .satisfied(ByteRange(0, 1), total: 1)),
        ("bytes 42-42/1000", .satisfied(ByteRange(42, 43), total: 1000)),
        ("bytes 100-199/*", .satisfied(ByteRange(100, 200), total: nil)),
        ("bytes */1234", .unsatisfied(total: 1234)),
        ("bytes */0", .unsatisfied(total: 0)),
        ("Bytes 1-2/3", .satisfied(ByteRange(1, 3), total: 3)),
        ("BYTES 1-2/3", .satisfied(ByteRange(1, 3), total: 3)),
        ("  bytes 1-2/3\t", .satisfied(ByteRange(1, 3), total: 3)),
        ("bytes 007-009/010", .satisfied(ByteRange(7, 10), total: 10)),
        (
            "bytes 0-999999999999999998/999999999999999999",
            .satisfied(ByteRange(0, 999_999_999_999_999_999), total: 999_999_999_999_999_999)
        ),
    ]

    @Test("valid forms", arguments: validCases)
    func valid(_ text: String, expected: ContentRange) {
        #expect(ContentRange(text) == expected)
    }

    @Test(
        "malformed or inconsistent values are refused",
        arguments: [
            "", "bytes", "bytes ", "bytes 0-99", "bytes 0-99/", "bytes /100", "bytes 0-/100", "bytes -99/100",
            "items 0-99/100", "byte 0-99/100", "bytes=0-99/100", "bytes\t0-99/100", "octets 0-1/2", "0-99/100",
            "bytes -1-5/10", "bytes +1-5/10", "bytes 1-+5/10", "bytes 1-5/+10", "bytes 1--5/10", "bytes 1-5/-10",
            "bytes 1 0-20/100", "bytes 10-2 0/100", "bytes 10-20/10 0", "bytes 1 - 5/10", "bytes 1-5 /10",
            "bytes 1-5/ 10",
            "bytes 5-4/10", "bytes 10-10/10", "bytes 0-10/10", "bytes 0-0/0", "bytes 99-100/100",
            "bytes 0-1234567890123456789/*", "bytes 1234567890123456789-1234567890123456789/*",
            "bytes 0-1/1234567890123456789", "bytes */1234567890123456789", "bytes 0-1/99999999999999999999999",
            "bytes 0000000000000000001-2/3",
            "bytes */*", "bytes *", "bytes 0-99*100", "bytes 0-99|100",
            "bytes 0-99/100x", "bytes 0-99/100 junk", "bytes 0-99/100,bytes 0-99/100", "bytes 0-99/100/100",
            "bytes 0-99-100/200",
            "bytes 0x10-0x20/0x30", "bytes 1e2-2e2/3e2", "bytes 1.0-2.0/3.0",
            "bytes ٠-٩/١٠", "bytes １-２/３", "bytes ¹-²/³",
        ])
    func invalid(_ text: String) {
        #expect(ContentRange(text) == nil)
    }

    @Test("round trip of random well-formed values", arguments: 0..<2)
    func randomRoundTrip(batch: Int) {
        var random = SplitMix64(seed: 0xC0FFEE &+ UInt64(batch))
        for _ in 0..<2000 {
            let total = random.logUniform(1...999_999_999_999_999_999)
            let first = random.logUniform(0...(total - 1))
            let last = first + random.logUniform(0...(total - 1 - first))
            let knownTotal = random.chance(0.8)
            let text = "bytes \(first)-\(last)/\(knownTotal ? String(total) : "*")"
            #expect(
                ContentRange(text) == .satisfied(ByteRange(first, last + 1), total: knownTotal ? total : nil), "\(text)"
            )
            // One past the end is always refused when the total is known.
            #expect(ContentRange("bytes \(first)-\(total)/\(total)") == nil)
        }
    }

    /// The parser reads bytes; what it accepts and refuses is what the Character-level reading it
    /// replaced accepted and refused (``reference(_:)``), on strings built from the grammar's
    /// pieces and from what could confuse a byte reading: CRLF, combining marks, other digits.
    @Test("the byte parser agrees with the Character-level one", arguments: 0..<2)
    func agreesWithCharacterReading(batch: Int) {
        let pieces = [
            "bytes ", "BYTES ", "Bytes", " ", "\t", "\r\n", "\r", "\n", "0", "1", "7", "42", "999", "-", "/", "*",
            "\u{301}", "\u{200D}", "é", "١", "２", "x", "=", "bytes 0-9/10", "bytes */5",
        ]
        var random = SplitMix64(seed: 0xB17E5 &+ UInt64(batch))
        var accepted = 0
        for _ in 0..<4000 {
            var text = random.chance(0.7) ? "bytes " : ""
            for _ in 0..<Int(random.next() % 8) { text += pieces[Int(random.next() % UInt64(pieces.count))] }
            let expected = Self.reference(text)
            #expect(ContentRange(text) == expected, "\(text.unicodeScalars.map { String($0.value, radix: 16) })")
            if expected != nil { accepted += 1 }
        }
        #expect(accepted > 20)
    }

    /// The Character-level parser the byte one replaced, kept as the reference.
    static func reference(_ value: String) -> ContentRange? {
        func decimal(_ text: Substring) -> Int64? {
            guard !text.isEmpty, text.count <= 18, text.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
            return Int64(text)
        }
        let text = value.trimmingWhitespace
        guard text.count > 6, text.prefix(6).lowercased() == "bytes " else { return nil }
        let spec = text.dropFirst(6).trimmingWhitespace
        guard let slash = spec.firstIndex(of: "/") else { return nil }
        let rangePart = spec[..<slash]
        let totalPart = spec[spec.index(after: slash)...]
        var total: Int64?
        if totalPart != "*" {
            guard let parsed = decimal(totalPart) else { return nil }
            total = parsed
        }
        if rangePart == "*" { return total.map { .unsatisfied(total: $0) } }
        guard let dash = rangePart.firstIndex(of: "-"), let first = decimal(rangePart[..<dash]),
            let last = decimal(rangePart[rangePart.index(after: dash)...]), first <= last, last < Int64.max
        else { return nil }
        if let total, last >= total { return nil }
        return .satisfied(ByteRange(first, last + 1), total: total)
    }
}
