import SwoopTestSupport
import Testing
@testable import SwoopCore

@Suite("Byte comparison")
struct ByteComparisonTests {
    /// Equal runs of every length up to a few words agree; one changed byte anywhere (in a word or
    /// in the tail) is found, through the collections the ledger compares.
    @Test func everyPositionOfEveryLength() {
        var random = SplitMix64(seed: 0xB17E)
        for length in 0..<40 {
            let bytes = (0..<length).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            bytes.withUnsafeBytes { raw in
                #expect(ByteComparison.equal(bytes, raw[...]))
                #expect(ByteComparison.equal(bytes[...], raw[...]))
                for position in 0..<length {
                    var changed = bytes
                    changed[position] ^= 1 << UInt8(position % 8)
                    #expect(!ByteComparison.equal(changed, raw[...]), "length \(length), position \(position)")
                    #expect(!ByteComparison.equal(changed[...], raw[...]), "length \(length), position \(position)")
                }
                if length > 0 { #expect(!ByteComparison.equal(bytes.dropLast(), raw[...])) }
            }
        }
    }

    /// A slice in the middle of a buffer (not word-aligned) compares its own bytes only.
    @Test func unalignedSlices() {
        let bytes = (0..<100).map { UInt8($0) }
        bytes.withUnsafeBytes { raw in
            #expect(ByteComparison.equal(Array(bytes[3..<67]), raw[3..<67]))
            #expect(!ByteComparison.equal(Array(bytes[3..<67]), raw[4..<68]))
        }
    }
}
