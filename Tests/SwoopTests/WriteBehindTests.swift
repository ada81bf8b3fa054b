import Foundation
import SwoopCore
import SwoopTestSupport
import SystemPackage
import Testing

@testable import SwoopStore

/// The part file's writer: bytes taken on one thread, written on another, through a small ring.
/// Every test runs off Swift's cooperative pool: the ring's waits block a thread.
@Suite("Write-behind")
struct WriteBehindTests {
    /// A file in a directory of its own, removed afterwards.
    private final class ScratchFile {
        let directory: URL
        let path: String
        let descriptor: FileDescriptor

        init(_ mode: FileDescriptor.AccessMode = .readWrite) throws {
            directory = FileManager.default.temporaryDirectory.appendingPathComponent("swoop-wb-\(UUID())")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            path = directory.appendingPathComponent("part").path
            _ = FileManager.default.createFile(atPath: path, contents: nil)
            descriptor = try FileDescriptor.open(path, mode)
        }

        deinit {
            try? descriptor.close()
            try? FileManager.default.removeItem(at: directory)
        }

        var contents: [UInt8] { [UInt8]((try? Data(contentsOf: URL(fileURLWithPath: path))) ?? Data()) }
    }

    @Test(
        "writes of every size through a small ring read back as written at any moment, and land in order",
        arguments: [1, 2, 3] as [UInt64])
    func orderAndReadBack(seed: UInt64) async throws {
        try await offThePool {
            var random = SplitMix64(seed: seed)
            let scratch = try ScratchFile()
            let behind = WriteBehind(capacity: 64 << 10)
            let file = WriteBehind.File(descriptor: scratch.descriptor, path: scratch.path)
            let size = 1 << 20
            var written = [UInt8](repeating: 0, count: size)
            let pool = (0..<(size / 2)).map { _ in UInt8.random(in: 0...255, using: &random) }
            // The end of the bytes written so far, for reads that must come back whole.
            var end = 0
            for step in 0..<2_000 {
                // Mostly pieces that continue one another (as a response's do), some over bytes
                // already written, some larger than the ring; never a gap (a gap reads back only
                // once the file extends past it).
                let count = Int(random.logUniform(1...(200 << 10)))
                let offset =
                    step % 5 == 0 ? Int.random(in: 0...min(end, size - count), using: &random) : min(end, size - count)
                let from = Int.random(in: 0...(pool.count - count), using: &random)
                let bytes = Array(pool[from..<(from + count)])
                try bytes.withUnsafeBytes { try behind.write($0, at: Int64(offset), to: file) }
                written.replaceSubrange(offset..<(offset + count), with: bytes)
                end = max(end, offset + count)
                if step % 7 == 0 {
                    let lower = Int.random(in: 0..<end, using: &random)
                    let upper = Int.random(in: (lower + 1)...end, using: &random)
                    let read = behind.read(ByteRange(Int64(lower), Int64(upper)), from: file)
                    #expect(read == Array(written[lower..<upper]), "seed \(seed), step \(step): \(lower)..<\(upper)")
                }
            }
            #expect(behind.fence(for: file).wait() == nil)
            #expect(scratch.contents == Array(written[..<end]), "seed \(seed)")
        }
    }

    @Test("the write queue starts by itself once a threshold of bytes waits, and for a fence below it")
    func wakeUps() async throws {
        try await offThePool {
            let scratch = try ScratchFile()
            let behind = WriteBehind(capacity: 64 << 20)
            let file = WriteBehind.File(descriptor: scratch.descriptor, path: scratch.path)
            let small = [UInt8](repeating: 3, count: 1000)
            try small.withUnsafeBytes { try behind.write($0, at: 0, to: file) }
            #expect(behind.fence(for: file).wait() == nil)
            #expect(scratch.contents == small, "a fence writes what waits below the threshold")
            // Past the threshold, no fence: the bytes reach the file on their own (checked until they do).
            let large = [UInt8](repeating: 4, count: WriteBehind.wakeThreshold)
            try large.withUnsafeBytes { try behind.write($0, at: 1000, to: file) }
            let deadline = Moment.now + .seconds(30)
            while scratch.contents.count < 1000 + large.count, Moment.now < deadline {
                usleep(1000)
            }
            #expect(scratch.contents == small + large)
        }
    }

    @Test("bytes beyond what the file and the ring hold are not read back")
    func readPastTheEnd() async throws {
        try await offThePool {
            let scratch = try ScratchFile()
            let behind = WriteBehind(capacity: 64 << 10)
            let file = WriteBehind.File(descriptor: scratch.descriptor, path: scratch.path)
            let bytes = [UInt8](repeating: 7, count: 1000)
            try bytes.withUnsafeBytes { try behind.write($0, at: 0, to: file) }
            #expect(behind.read(ByteRange(0, 1000), from: file) == bytes)
            #expect(behind.read(ByteRange(500, 1001), from: file) == nil)
            // A piece after a gap: the gap is not held anywhere (no preallocation here).
            try bytes.withUnsafeBytes { try behind.write($0, at: 3000, to: file) }
            #expect(behind.read(ByteRange(3000, 4000), from: file) == bytes)
            behind.fence(for: file).wait()
            // Once written, the gap reads as the file system's zeros.
            #expect(behind.read(ByteRange(900, 3100), from: file) == [UInt8](repeating: 7, count: 100)
                + [UInt8](repeating: 0, count: 2000) + [UInt8](repeating: 7, count: 100))
        }
    }

    @Test("a write that fails is reported by the fence and by the next write; another file's writes go on")
    func failure() async throws {
        try await offThePool {
            let readOnly = try ScratchFile(.readOnly)
            let healthy = try ScratchFile()
            let behind = WriteBehind(capacity: 64 << 10)
            let failing = WriteBehind.File(descriptor: readOnly.descriptor, path: readOnly.path)
            let other = WriteBehind.File(descriptor: healthy.descriptor, path: healthy.path)
            // Within the ring: taken before the writer has tried it.
            let bytes = [UInt8](repeating: 1, count: 16 << 10)
            try bytes.withUnsafeBytes { try behind.write($0, at: 0, to: failing) }
            try bytes.withUnsafeBytes { try behind.write($0, at: 0, to: other) }
            #expect(behind.fence(for: failing).wait() == .badFileDescriptor)
            #expect(behind.fence(for: other).wait() == nil)
            #expect(healthy.contents == bytes)
            #expect(throws: Errno.badFileDescriptor) {
                try bytes.withUnsafeBytes { try behind.write($0, at: 0, to: failing) }
            }
        }
    }
}
