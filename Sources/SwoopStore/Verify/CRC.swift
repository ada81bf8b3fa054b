import CSwoopSystem
import SwoopCore

/// A cyclic redundancy check of the reflected kind object stores publish (initial value and final
/// XOR all ones), with its combine operation: the CRC of A followed by B from the CRCs of A and
/// B and B's length. Chunks checked in any order, by any connection, make the object's CRC
/// without reading it again.
///
/// Written here rather than taken from a package: none of the Swift packages available to this
/// project offers CRC-32C or the CRC-64s with a combine. Table-driven (slicing by 8); the combine
/// multiplies by x^(8n) modulo the polynomial, with the powers x^(2^k) precomputed. The standard
/// check values ("123456789") are in the unit tests.
package struct CRC: Sendable {
    /// Bits in the value: 32 or 64.
    package let width: Int
    /// The generator polynomial, bit-reflected.
    package let polynomial: UInt64
    /// Eight 256-entry tables, one after the other (slicing by 8).
    private let tables: [UInt64]
    /// x^(2^k) modulo the polynomial, k = 0 ..< 67 (enough for lengths up to 2^63 bytes).
    private let powers: [UInt64]
    /// For the carry-less fold (64-bit CRCs where the CPU has it): x^191 and x^127 mod P (a carry-less
    /// product of two reflected values comes out one bit short, so one power less than 192 and 128).
    private let foldConstants: (UInt64, UInt64)?

    package static let crc32 = CRC(width: 32, polynomial: 0xEDB8_8320)
    package static let crc32c = CRC(width: 32, polynomial: 0x82F6_3B78)
    /// CRC-64/XZ, which Alibaba OSS calls crc64ecma.
    package static let crc64xz = CRC(width: 64, polynomial: 0xC96C_5795_D787_0F42)
    package static let crc64nvme = CRC(width: 64, polynomial: 0x9A6C_9329_AC4B_C9B5)

    private init(width: Int, polynomial: UInt64) {
        self.width = width
        self.polynomial = polynomial
        var tables = [UInt64](repeating: 0, count: 8 * 256)
        for byte in 0..<256 {
            var value = UInt64(byte)
            for _ in 0..<8 { value = value & 1 != 0 ? (value >> 1) ^ polynomial : value >> 1 }
            tables[byte] = value
        }
        for slice in 1..<8 {
            for byte in 0..<256 {
                let previous = tables[(slice - 1) * 256 + byte]
                tables[slice * 256 + byte] = (previous >> 8) ^ tables[Int(previous & 0xFF)]
            }
        }
        self.tables = tables
        var powers: [UInt64] = []
        let one = UInt64(1) << (width - 1)  // x^0, reflected
        var power = one >> 1  // x^1
        for _ in 0..<67 {
            powers.append(power)
            power = Self.multiply(power, power, polynomial: polynomial, width: width)
        }
        self.powers = powers
        if width == 64, swoop_has_clmul() != 0 {
            func xPower(_ n: Int) -> UInt64 {
                var value = UInt64(1) << 63
                for bit in 0..<8 where n & (1 << bit) != 0 {
                    value = Self.multiply(powers[bit], value, polynomial: polynomial, width: 64)
                }
                return value
            }
            foldConstants = (xPower(191), xPower(127))
        } else {
            foldConstants = nil
        }
    }

    private var mask: UInt64 { width == 64 ? .max : (1 << UInt64(width)) - 1 }

    /// The CRC of the bytes that gave `crc`, followed by `bytes` (`crc` 0: of `bytes` alone).
    ///
    /// Large buffers go as four interleaved lanes combined at the end: one lane's steps depend on
    /// each other (a table load, then the next), four independent ones keep the CPU busy
    /// (about 2.5x the speed of one).
    package func update(_ crc: UInt64, _ bytes: UnsafeRawBufferPointer) -> UInt64 {
        if let (first, second) = foldConstants, bytes.count >= 256, let base = bytes.baseAddress {
            // The carry-less fold: the bulk to 16 bytes, which the tables finish, then the rest.
            let bulk = bytes.count & ~15
            var folded = (UInt64(0), UInt64(0))
            withUnsafeMutableBytes(of: &folded) {
                swoop_clmul_fold(~crc & mask, base, bulk, first, second, $0.baseAddress)
            }
            let value = withUnsafeBytes(of: folded) { step(0, $0) }
            return ~step(value, UnsafeRawBufferPointer(rebasing: bytes[bulk...])) & mask
        }
        return tableUpdate(crc, bytes)
    }

    /// ``update(_:_:)`` by the tables alone (the fold's reference in the tests).
    package func tableUpdate(_ crc: UInt64, _ bytes: UnsafeRawBufferPointer) -> UInt64 {
        let lane = bytes.count / 4 & ~7
        guard lane >= 4096 else { return ~step(~crc & mask, bytes) & mask }
        var states: (UInt64, UInt64, UInt64, UInt64) = (~crc & mask, mask, mask, mask)
        tables.withUnsafeBufferPointer { table in
            var index = 0
            @inline(__always) func fold(_ value: UInt64, _ at: Int) -> UInt64 {
                Self.slice(
                    value ^ UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: at, as: UInt64.self)), table)
            }
            while index < lane {
                states.0 = fold(states.0, index)
                states.1 = fold(states.1, lane + index)
                states.2 = fold(states.2, 2 * lane + index)
                states.3 = fold(states.3, 3 * lane + index)
                index += 8
            }
        }
        var result = ~states.0 & mask
        for next in [states.1, states.2, states.3] {
            result = combine(result, ~next & mask, secondLength: Int64(lane))
        }
        return ~step(~result & mask, UnsafeRawBufferPointer(rebasing: bytes[(4 * lane)...])) & mask
    }

    /// Eight bytes at once (already XORed into the register): one lookup in each of the tables.
    @inline(__always)
    private static func slice(_ x: UInt64, _ table: UnsafeBufferPointer<UInt64>) -> UInt64 {
        table[7 * 256 + Int(x & 0xFF)] ^ table[6 * 256 + Int((x >> 8) & 0xFF)]
            ^ table[5 * 256 + Int((x >> 16) & 0xFF)] ^ table[4 * 256 + Int((x >> 24) & 0xFF)]
            ^ table[3 * 256 + Int((x >> 32) & 0xFF)] ^ table[2 * 256 + Int((x >> 40) & 0xFF)]
            ^ table[1 * 256 + Int((x >> 48) & 0xFF)] ^ table[Int(x >> 56)]
    }

    /// One lane: the raw (not inverted) register after `bytes`.
    private func step(_ start: UInt64, _ bytes: UnsafeRawBufferPointer) -> UInt64 {
        var value = start
        tables.withUnsafeBufferPointer { table in
            var index = 0
            let count = bytes.count
            while count - index >= 8 {
                value = Self.slice(
                    value ^ UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: index, as: UInt64.self)), table)
                index += 8
            }
            while index < count {
                value = (value >> 8) ^ table[Int((value ^ UInt64(bytes[index])) & 0xFF)]
                index += 1
            }
        }
        return value
    }

    /// The CRC of A followed by B, from A's CRC, B's CRC and B's length in bytes.
    package func combine(_ first: UInt64, _ second: UInt64, secondLength: Int64) -> UInt64 {
        precondition(secondLength >= 0)
        var shift = UInt64(1) << (width - 1)  // x^0
        var n = UInt64(secondLength)
        var k = 3  // x^(8n) = product of x^(2^(k+3)) over the bits k of n
        while n != 0 {
            if n & 1 != 0 { shift = Self.multiply(powers[k], shift, polynomial: polynomial, width: width) }
            n >>= 1
            k += 1
        }
        return Self.multiply(shift, first, polynomial: polynomial, width: width) ^ second
    }

    /// `a * b` modulo the polynomial, both reflected (x^0 in the top bit).
    private static func multiply(_ a: UInt64, _ b: UInt64, polynomial: UInt64, width: Int) -> UInt64 {
        var b = b
        var product: UInt64 = 0
        var bit = UInt64(1) << (width - 1)
        while bit != 0 {
            if a & bit != 0 { product ^= b }
            bit >>= 1
            b = b & 1 != 0 ? (b >> 1) ^ polynomial : b >> 1
        }
        return product
    }
}

extension Checksum.Algorithm {
    /// The CRC engine of a CRC algorithm (``isCRC``); `nil` for the hashes.
    package var crc: CRC? {
        switch self {
        case .crc32: .crc32
        case .crc32c: .crc32c
        case .crc64nvme: .crc64nvme
        case .crc64xz: .crc64xz
        case .md5, .sha1, .sha256, .sha384, .sha512: nil
        }
    }
}
