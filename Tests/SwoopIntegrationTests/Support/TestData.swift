import Crypto
import Foundation

/// Deterministic test bytes and checksums.
enum TestData {
    /// Writes `size` pseudo-random bytes derived from `seed`; returns their SHA-256 (hex).
    @discardableResult
    static func write(to url: URL, size: Int, seed: UInt64) throws -> String {
        _ = FileManager.default.createFile(atPath: url.path, contents: nil)
        let handle = try FileHandle(forWritingTo: url)
        defer { try? handle.close() }
        var hasher = SHA256()
        var state = seed &+ 0x9E37_79B9_7F4A_7C15
        var remaining = size
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        while remaining > 0 {
            let count = min(remaining, buffer.count)
            buffer.withUnsafeMutableBytes { raw in
                let words = raw.bindMemory(to: UInt64.self)
                for index in 0..<((count + 7) / 8) {
                    state &+= 0x9E37_79B9_7F4A_7C15
                    var z = state
                    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
                    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
                    words[index] = z ^ (z >> 31)
                }
            }
            let chunk = buffer[0..<count]
            hasher.update(data: chunk)
            try handle.write(contentsOf: chunk)
            remaining -= count
        }
        return hasher.finalize().hex
    }

    /// SHA-256 of a file (hex).
    static func sha256(of path: String) throws -> String {
        let handle = try FileHandle(forReadingFrom: URL(fileURLWithPath: path))
        defer { try? handle.close() }
        var hasher = SHA256()
        while let chunk = try handle.read(upToCount: 1 << 20), !chunk.isEmpty {
            hasher.update(data: chunk)
        }
        return hasher.finalize().hex
    }

    static func sha256(_ bytes: some Sequence<UInt8>) -> String {
        SHA256.hash(data: Array(bytes)).hex
    }
}

extension Sequence<UInt8> {
    var hex: String { map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined() }
}

extension SHA256.Digest {
    var hex: String { Array(self).hex }
}
