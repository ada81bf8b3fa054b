import Crypto
import Foundation
import Swoop
import SwoopTestOrigin
import Testing

/// `-o -` and `Downloader.bytes(for:)`: the object in order, over many connections, in a bounded
/// window.
@Suite("Streaming")
struct StreamTests {
    /// Runs `swoop args` with standard output into a file; returns the exit status, the output's
    /// SHA-256 and size, and standard error.
    private func stream(
        _ arguments: [String], in scratch: Scratch, timeout: Duration = .seconds(120)
    ) async throws -> (status: Int32, sha256: String, size: Int, stderr: String) {
        let out = scratch.path("stdout.bin")
        let err = scratch.path("stderr.txt")
        let process = try ChildProcess(
            executable: CLI.executable, arguments: arguments, directory: scratch.url.path, stdout: out, stderr: err)
        guard let status = await process.wait(timeout: timeout) else {
            process.signal(SIGKILL)
            throw TestFailure("swoop \(arguments) did not exit within \(timeout)")
        }
        let size = (try? FileManager.default.attributesOfItem(atPath: out)[.size] as? Int) ?? 0
        let digest = try await TestData.sha256(of: out)
        return (status, digest, size, (try? String(contentsOfFile: err, encoding: .utf8)) ?? "")
    }

    /// Runs `swoop arguments` with standard output into the FIFO `fifo` and reads it `piece` bytes
    /// every 20 ms (a slow reader), sampling the process's resident memory as it goes.
    private func readSlowly(
        _ arguments: [String], through fifo: String, in scratch: Scratch, piece: Int
    ) async throws -> (status: Int32?, read: Int, sha256: String, peakRSS: Int) {
        // The reader end first (not blocking), so the child's open for writing does not wait.
        let reader = try openReader(fifo)
        let process = try ChildProcess(
            executable: CLI.executable, arguments: arguments, directory: scratch.url.path, stdout: fifo,
            stderr: scratch.path("stderr.txt"))
        var hasher = ContinuousHash()
        var peakRSS = 0
        var read = 0
        while let chunk = try reader.read(upToCount: piece), !chunk.isEmpty {
            hasher.update(chunk)
            read += chunk.count
            peakRSS = max(peakRSS, residentKiB(of: process.pid))
            try await Task.sleep(for: .milliseconds(20))
        }
        try reader.close()
        return (await process.wait(timeout: .seconds(60)), read, hasher.hex, peakRSS)
    }

    /// Nothing but what the test itself wrote: a stream leaves nothing on disk.
    private func expectNothingWritten(_ scratch: Scratch, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let names = try FileManager.default.contentsOfDirectory(atPath: scratch.url.path).filter {
            !["stdout.bin", "stderr.txt", "fifo"].contains($0)
        }
        #expect(names.isEmpty, "left behind: \(names)", sourceLocation: sourceLocation)
    }

    @Test("-o -: the bytes on the pipe are the object", arguments: [0, 1, 1000, 3 << 20, 40 << 20])
    func pipeEqualsObject(size: Int) async throws {
        let nginx = try await Nginx.start(limitRate: "8m")
        defer { nginx.stop() }
        let expected = try await nginx.addFile("o.bin", size: size, seed: UInt64(size))
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        let run = try await stream(["get", nginx.url("/o.bin"), "-o", "-", "-c", "8", "-q"], in: scratch)
        #expect(run.status == 0, "stderr: \(run.stderr)")
        #expect(run.size == size)
        #expect(run.sha256 == expected)
        try expectNothingWritten(scratch)
    }

    @Test("-o -: a server that ignores Range, with a small window and a slow origin")
    func ignoresRange() async throws {
        let nginx = try await Nginx.start(limitRate: "16m", extraServerConfig: "max_ranges 0;")
        defer { nginx.stop() }
        let expected = try await nginx.addFile("r.bin", size: 24 << 20, seed: 3)
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        let run = try await stream(["get", nginx.url("/r.bin"), "-o", "-", "--stream-window", "4M", "-q"], in: scratch)
        #expect(run.status == 0, "stderr: \(run.stderr)")
        #expect(run.sha256 == expected)
    }

    @Test("-o -: a server that drops connections mid-response: retried, in order, complete")
    func droppedConnections() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            let object = TestObject(size: 20 << 20, seed: 4)
            origin.addObject(object, at: "/d.bin")
            origin.updateFaults { $0.drops = .init(probability: 0.3) }
            let run = try await stream(
                [
                    "get", origin.url("/d.bin"), "-o", "-", "-c", "8", "--max-tries", "20", "--stream-window", "8M",
                    "-q",
                ], in: scratch)
            #expect(run.status == 0, "stderr: \(run.stderr)")
            #expect(try await run.sha256 == object.sha256)
        }
    }

    @Test("-o -: the object changing mid-stream fails with a non-zero exit, never a silent short stream")
    func changesMidStream() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            origin.addObject(TestObject(size: 16 << 20, seed: 5), at: "/c.bin")
            origin.updateFaults {
                $0.changeAfterRequests = 3
                $0.throttleBytesPerSecond = 8 << 20
            }
            let run = try await stream(
                ["get", origin.url("/c.bin"), "-o", "-", "-c", "4", "--stream-window", "4M"], in: scratch)
            #expect(run.status == 4, "stderr: \(run.stderr)")
            #expect(run.stderr.contains("incomplete"), "stderr: \(run.stderr)")
            // What went out cannot be taken back: the message says the stream stops, not that the
            // bytes were discarded.
            #expect(run.stderr.contains("the stream stops here"), "stderr: \(run.stderr)")
            #expect(!run.stderr.contains("discarded"), "stderr: \(run.stderr)")
            #expect(run.size < 16 << 20)
            try expectNothingWritten(scratch)
        }
    }

    @Test("-o -: a slow reader keeps memory at the window; a closed pipe ends quietly with exit 0")
    func slowReaderAndClosedPipe() async throws {
        try await exclusively {
            let nginx = try await Nginx.start()
            defer { nginx.stop() }
            let size = 96 << 20
            let expected = try await nginx.addFile("s.bin", size: size, seed: 6)
            let scratch = try Scratch()
            defer { scratch.cleanup() }
            let fifo = scratch.path("fifo")
            #expect(mkfifo(fifo, 0o600) == 0)
            let err = scratch.path("stderr.txt")
            // About 12 MiB/s: far slower than loopback.
            let slow = try await readSlowly(
                ["get", nginx.url("/s.bin"), "-o", "-", "-c", "8", "--stream-window", "8M", "-q"], through: fifo,
                in: scratch, piece: 256 << 10)
            #expect(slow.status == 0, "stderr: \((try? String(contentsOfFile: err, encoding: .utf8)) ?? "")")
            #expect(slow.read == size && slow.sha256 == expected)
            // The window (8 MiB) plus the process's own ~30 MiB, far below the 96 MiB object.
            #expect(slow.peakRSS > 0 && slow.peakRSS < (8 + 40) << 10, "peak RSS \(slow.peakRSS) KiB")

            // Again, and the reader closes the pipe after 100 bytes.
            let head = try openReader(fifo)
            let again = try ChildProcess(
                executable: CLI.executable, arguments: ["get", nginx.url("/s.bin"), "-o", "-", "-c", "8"],
                directory: scratch.url.path, stdout: fifo, stderr: err)
            let first = try head.read(upToCount: 100)
            try head.close()
            #expect(first?.count == 100)
            let closed = await again.wait(timeout: .seconds(30))
            #expect(
                closed == 0,
                "a closed pipe is a quiet end: \((try? String(contentsOfFile: err, encoding: .utf8)) ?? "")")
            try expectNothingWritten(scratch)
        }
    }

    @Test("-o -: a server that ignores Range and a slow reader: the one stream pauses, memory stays at the window")
    func ignoresRangeSlowReader() async throws {
        try await exclusively {
            let nginx = try await Nginx.start(extraServerConfig: "max_ranges 0;")
            defer { nginx.stop() }
            let size = 48 << 20
            let expected = try await nginx.addFile("n.bin", size: size, seed: 9)
            let scratch = try Scratch()
            defer { scratch.cleanup() }
            let fifo = scratch.path("fifo")
            #expect(mkfifo(fifo, 0o600) == 0)
            let slow = try await readSlowly(
                ["get", nginx.url("/n.bin"), "-o", "-", "--stream-window", "4M", "-q"], through: fifo, in: scratch,
                piece: 512 << 10)
            #expect(
                slow.status == 0,
                "stderr: \((try? String(contentsOfFile: scratch.path("stderr.txt"), encoding: .utf8)) ?? "")")
            #expect(slow.read == size && slow.sha256 == expected)
            #expect(slow.peakRSS > 0 && slow.peakRSS < (4 + 40) << 10, "peak RSS \(slow.peakRSS) KiB")
        }
    }

    @Test("the library: bytes(for:) in order; cancelling the consumer stops the fetching")
    func library() async throws {
        try await exclusively {
            let nginx = try await Nginx.start(limitRate: "4m")
            defer { nginx.stop() }
            let size = 64 << 20
            let expected = try await nginx.addFile("l.bin", size: 24 << 20, seed: 7)
            _ = try await nginx.addFile("big.bin", size: size, seed: 8)
            var configuration = Downloader.Configuration()
            configuration.connections = .fixed(8)
            try await withDownloader(configuration) { downloader in
                var hasher = ContinuousHash()
                let (bytes, response) = try await downloader.bytes(
                    for: DownloadRequest(url: URL(string: nginx.url("/l.bin"))!), window: 8 << 20)
                // What the server said, before the first chunk.
                #expect(response.expectedContentLength == 24 << 20 && response.acceptsRanges)
                #expect(response.url == nginx.url("/l.bin") && response.etag?.isEmpty == false)
                #expect(response.contentType != nil)
                // How long it took: a new connection (no TLS), then the request.
                let timing = try #require(response.timing)
                #expect(timing.connect.map { $0 > .zero && $0 < MachineLoad.bound(.seconds(2)) } == true, "\(timing)")
                #expect(
                    timing.tlsHandshake == nil && timing.firstByte > .zero
                        && timing.firstByte < MachineLoad.bound(.seconds(5)))
                for try await chunk in bytes {
                    hasher.update(Data(chunk))
                }
                #expect(hasher.hex == expected)
                // A refusal is thrown by the call itself, before any byte.
                await #expect(throws: DownloadError.self) {
                    _ = try await downloader.bytes(for: DownloadRequest(url: nginx.url("/missing.bin")))
                }

                // 8 connections at 4 MiB/s: 2 s for 64 MiB. Take 4 MiB, then cancel.
                try nginx.clearLog()
                let consumer = Task {
                    var taken = 0
                    let (bytes, _) = try await downloader.bytes(
                        for: DownloadRequest(url: nginx.url("/big.bin")), window: 8 << 20)
                    for try await chunk in bytes {
                        taken += chunk.count
                        if taken >= 4 << 20 { try await Task.sleep(for: .seconds(30)) }
                    }
                    return taken
                }
                try await Task.sleep(for: .milliseconds(300))
                while try nginx.log().reduce(0, { $0 + $1.bytes }) < 4 << 20 {
                    try await Task.sleep(for: .milliseconds(20))
                }
                consumer.cancel()
                _ = await consumer.result
                try await Task.sleep(for: .seconds(1))
                let served = try nginx.log().reduce(Int64(0)) { $0 + $1.bytes }
                try await Task.sleep(for: .seconds(1))
                let later = try nginx.log().reduce(Int64(0)) { $0 + $1.bytes }
                #expect(served == later, "fetching stopped")
                #expect(served < Int64(size) / 2, "served \(served) of \(size) bytes")
            }
        }
    }
}

/// SHA-256 over chunks, in hex.
private struct ContinuousHash {
    private var hasher = SHA256()
    mutating func update(_ data: Data) { hasher.update(data: data) }
    var hex: String { hasher.finalize().hex }
}

/// Opens a FIFO for reading without waiting for a writer, then makes reads blocking again.
private func openReader(_ path: String) throws -> FileHandle {
    let descriptor = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
    guard descriptor >= 0 else { throw TestFailure("open \(path): \(String(cString: strerror(errno)))") }
    _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) & ~O_NONBLOCK)
    return FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
}

/// The resident set of `pid` now, in KiB (0 once it is gone).
private func residentKiB(of pid: Int32) -> Int {
    guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
        let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") })
    else { return 0 }
    return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0
}
