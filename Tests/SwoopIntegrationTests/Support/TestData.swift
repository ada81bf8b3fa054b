import Crypto
import Foundation
import SwoopTestSupport

/// Deterministic test bytes and checksums. Making and hashing them takes a second or more for the
/// larger objects in a debug build, so each runs on a thread of its own (``offThePool(_:)``), never
/// on one of Swift's two cooperative threads, which every other test shares: with SHA-256 and file
/// writes there, a test that only polled for a condition waited 40-49 s in a full suite for a turn.
enum TestData {
    /// Writes `size` pseudo-random bytes derived from `seed`; returns their SHA-256 (hex).
    @discardableResult
    static func write(to url: URL, size: Int, seed: UInt64) async throws -> String {
        try await offThePool { try writeBlocking(to: url, size: size, seed: seed) }
    }

    /// SHA-256 of a file (hex).
    static func sha256(of path: String) async throws -> String {
        try await offThePool { try sha256Blocking(of: path) }
    }

    private static func writeBlocking(to url: URL, size: Int, seed: UInt64) throws -> String {
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

    private static func sha256Blocking(of path: String) throws -> String {
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
