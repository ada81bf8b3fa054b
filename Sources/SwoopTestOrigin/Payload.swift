#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import NIOCore

/// Deterministic content as a pure function of (seed, offset), so any range of any size can be
/// produced and checked without fixture files.
///
/// The stream is cut into 4 KiB blocks. Each block is 512 consecutive 64-bit words of a fixed
/// random table, read from a start position chosen by hashing (seed, block index), and XORed with
/// a per-block key. So:
/// - a read that is off by 1...4096 bytes (or any amount) compares unrelated random bytes;
/// - two seeds that differ only in their low 8 bits (for example `seed` and `seed + 1`, as
///   ``TestOrigin/changeObject(at:)`` makes) differ in *every* byte; any other two seeds give
///   unrelated content.
///
/// Generation is a table copy with one XOR per 8 bytes, several GB/s on one core.
public enum Payload {
    /// Fills `buffer` with the bytes of the stream `seed` starting at `offset`.
    public static func fill(_ buffer: UnsafeMutableRawBufferPointer, seed: UInt64, offset: Int64) {
        precondition(offset >= 0, "Payload offset must not be negative")
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
        PayloadTable.words.withUnsafeBufferPointer { table in
            let words = table.baseAddress!
            let lanes = (seed & 0xFF) &* 0x0101_0101_0101_0101
            let stream = PayloadTable.mix((seed >> 8) ^ 0x5D58_8B65_6C07_8965)
            var position = offset
            var written = 0
            let count = buffer.count
            while written < count {
                let block = UInt64(position >> 12)
                let hash = PayloadTable.mix(stream ^ (block &* 0x9E37_79B9_7F4A_7C15))
                let start = words + Int(hash & UInt64(PayloadTable.startPositions - 1))
                let key = PayloadTable.mix(hash ^ 0xD6E8_FEB8_6659_FD93) ^ lanes
                var inBlock = Int(position & 4095)
                let end = min(4096, inBlock + (count - written))
                let blockBytes = end - inBlock
                var out = base + written
                // Leading bytes up to a word boundary of the stream.
                while inBlock & 7 != 0, inBlock < end {
                    out.storeBytes(of: byte(start[inBlock >> 3] ^ key, at: inBlock & 7), as: UInt8.self)
                    out += 1
                    inBlock += 1
                }
                // Whole words.
                var word = inBlock >> 3
                let wholeEnd = end >> 3
                while word < wholeEnd {
                    out.storeBytes(of: (start[word] ^ key).littleEndian, as: UInt64.self)
                    out += 8
                    word += 1
                }
                inBlock = word << 3
                // Trailing bytes of a partial word.
                while inBlock < end {
                    out.storeBytes(of: byte(start[inBlock >> 3] ^ key, at: inBlock & 7), as: UInt8.self)
                    out += 1
                    inBlock += 1
                }
                written += blockBytes
                position += Int64(blockBytes)
            }
        }
    }

    /// The `count` bytes of the stream `seed` starting at `offset`.
    public static func bytes(seed: UInt64, offset: Int64, count: Int) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            fill(UnsafeMutableRawBufferPointer(buffer), seed: seed, offset: offset)
            initialized = count
        }
    }

    /// Writes the object's bytes to a file (used to give nginx the same content).
    ///
    /// Creates or truncates `path`. Throws `IOError` with the failing call's errno.
    public static func write(toFile path: String, seed: UInt64, size: Int64) throws {
        precondition(size >= 0, "Payload size must not be negative")
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw IOError(errnoCode: errno, reason: "open(\(path))") }
        defer { _ = close(fd) }

        let chunk = 1 << 20
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunk, alignment: 16)
        defer { buffer.deallocate() }
        var offset: Int64 = 0
        while offset < size {
            let n = Int(min(Int64(chunk), size - offset))
            let slice = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<n])
            fill(slice, seed: seed, offset: offset)
            var done = 0
            while done < n {
                let result = systemWrite(fd, slice.baseAddress! + done, n - done)
                if result < 0 {
                    if errno == EINTR { continue }
                    throw IOError(errnoCode: errno, reason: "write(\(path))")
                }
                done += result
            }
            offset += Int64(n)
        }
    }

    @inline(__always)
    private static func byte(_ word: UInt64, at index: Int) -> UInt8 {
        UInt8(truncatingIfNeeded: word >> UInt64(index << 3))
    }
}

/// `write(2)`, named apart from ``Payload/write(toFile:seed:size:)``.
private func systemWrite(_ fd: CInt, _ bytes: UnsafeRawPointer, _ count: Int) -> Int {
    write(fd, bytes, count)
}

/// The fixed random table every payload block is read from.
enum PayloadTable {
    /// Distinct block start positions (a power of two); the table holds one block more so that a
    /// block starting at the last position is still contiguous.
    static let startPositions = 8192
    static let words: [UInt64] = {
        var state: UInt64 = 0x243F_6A88_85A3_08D3
        return (0..<(startPositions + 512)).map { _ in
            state &+= 0x9E37_79B9_7F4A_7C15
            return mix(state)
        }
    }()

    /// The splitmix64 finalizer: a bijective 64-bit mix.
    @inline(__always)
    static func mix(_ value: UInt64) -> UInt64 {
        var z = value
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
