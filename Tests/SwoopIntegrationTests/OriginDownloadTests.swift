import Foundation
import Swoop
import SwoopTestOrigin
import Testing

/// The engine against the project's own origin: range support, validators, lying servers.
@Suite("Downloads from the test origin")
struct OriginDownloadTests {
    @Test("a server that ignores Range yields the right file over one stream")
    func ignoresRange() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            let object = TestObject(size: 5 << 20, seed: 7)
            origin.addObject(object, at: "/norange.bin")
            origin.updateFaults { $0.rangeSupport = false }
            let result = try await withDownloader(quickConfiguration(connections: 8)) {
                try await $0.download(DownloadRequest(url: origin.url("/norange.bin")), to: scratch.path("norange.bin"))
            }
            #expect(result.bytes == object.size)
            #expect(try await TestData.sha256(of: scratch.path("norange.bin")) == object.sha256)
            let log = origin.requests
            // One stream, no segment requests; after a stream of 100 ms or more one request asks
            // whether the server still serves its validators (its body not taken).
            #expect(log.count <= 2, "one stream, no segment requests: \(log.map(\.status))")
            #expect(log.first?.status == 200)
            #expect(log.first?.bodyBytesSent == object.size)
            #expect(log.dropFirst().allSatisfy { $0.header("if-match") == object.etagValue }, "\(log)")
            #expect(result.connectionsUsed == 1)
        }
    }

    /// A body without `Content-Length` leaves the size unknown: the part file is created on the disk
    /// queue while the probe's response waits. An empty one has ended by then, and is the download.
    @Test(
        "a chunked body from a server without ranges, of unknown size: every byte, and an empty one in one request",
        arguments: [0, 1, 70_000, 3 << 20])
    func chunkedWithoutRanges(size: Int) async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            let object = TestObject(size: Int64(size), seed: 19)
            origin.addObject(object, at: "/chunked.bin")
            origin.updateFaults {
                $0.rangeSupport = false
                $0.chunkedBodies = true
            }
            let result = try await withDownloader(quickConfiguration(connections: 4)) {
                try await $0.download(DownloadRequest(url: origin.url("/chunked.bin")), to: scratch.path("c.bin"))
            }
            #expect(result.bytes == object.size)
            #expect(try await TestData.sha256(of: scratch.path("c.bin")) == object.sha256)
            let log = origin.requests
            // One stream; when it lasted 100 ms or more (a loaded machine, the larger sizes) one
            // request asks under its validators whether the server still serves them, its body not
            // taken. Nothing is fetched again.
            #expect(log.count <= 2, "one stream, none asked again: \(log.map(\.status))")
            #expect(log.first?.bodyBytesSent == object.size)
            #expect(log.dropFirst().allSatisfy { $0.header("if-match") == object.etagValue }, "\(log)")
            #expect(result.retries == 0)
        }
    }

    @Test("the download's connections are close-on-exec: a process the application starts does not inherit them")
    func connectionsCloseOnExec() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            origin.addObject(TestObject(size: 64 << 20, seed: 41), at: "/exec.bin")
            origin.updateFaults { $0.throttleBytesPerSecond = 1 << 20 }
            try await withDownloader(quickConfiguration(connections: 4)) { downloader in
                let task = try downloader.start(
                    DownloadRequest(url: origin.url("/exec.bin")), to: scratch.path("exec.bin"))
                defer { task.cancel() }
                #expect(try await eventually { tcpSockets(toPort: origin.port).count >= 4 }, "the connections are open")
                let inheritable = tcpSockets(toPort: origin.port).inheritable
                #expect(inheritable.isEmpty, "a child process would inherit: \(inheritable)")
            }
        }
    }

    @Test("a weak ETag makes segment requests use If-Unmodified-Since")
    func weakETag() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            let object = TestObject(size: 12 << 20, seed: 3, etag: .weak, lastModified: true)
            origin.addObject(object, at: "/weak.bin")
            _ = try await withDownloader(quickConfiguration(connections: 4)) {
                try await $0.download(DownloadRequest(url: origin.url("/weak.bin")), to: scratch.path("weak.bin"))
            }
            #expect(try await TestData.sha256(of: scratch.path("weak.bin")) == object.sha256)
            let segments = origin.requests.dropFirst()
            #expect(!segments.isEmpty)
            for request in segments {
                #expect(request.header("if-match") == nil, "a weak ETag cannot be used with If-Match")
                #expect(request.header("if-unmodified-since") == object.lastModifiedValue)
                #expect(request.status == 206)
            }
        }
    }

    @Test("a strong ETag makes every segment request use If-Match")
    func strongETag() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            let object = TestObject(size: 12 << 20, seed: 4)
            origin.addObject(object, at: "/strong.bin")
            _ = try await withDownloader(quickConfiguration(connections: 4)) {
                try await $0.download(DownloadRequest(url: origin.url("/strong.bin")), to: scratch.path("strong.bin"))
            }
            #expect(try await TestData.sha256(of: scratch.path("strong.bin")) == object.sha256)
            let log = origin.requests
            #expect(log.first?.header("if-match") == nil)
            #expect(log.first?.header("range") == "bytes=0-1048575")
            #expect(log.first?.header("accept-encoding") == "identity")
            for request in log.dropFirst() {
                #expect(request.header("if-match") == object.etagValue)
                #expect(request.header("accept-encoding") == "identity")
            }
        }
    }

    @Test(
        "a Content-Range that does not match the request is refused and never written",
        arguments: [
            FaultSwitches.ContentRangeLie.offByOne, .wrongTotal, .wrongStart,
        ])
    func lyingContentRange(lie: FaultSwitches.ContentRangeLie) async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            let object = TestObject(size: 6 << 20, seed: 5)
            origin.addObject(object, at: "/liar.bin")
            origin.updateFaults {
                $0.contentRangeLie = lie
                $0.honestFirstRequests = 1  // the probe is honest; every segment response lies
            }
            // A probe retried after a stall would be the second request, and lied to.
            var configuration = quickConfiguration(connections: 2, maxTries: 2, stall: .seconds(30))
            configuration.files.checkpointInterval = .milliseconds(10)
            configuration.files.onObjectChange = .fail  // a different total reads as a changed object
            let error = await #expect(throws: DownloadError.self) {
                try await withDownloader(configuration) {
                    try await $0.download(DownloadRequest(url: origin.url("/liar.bin")), to: scratch.path("liar.bin"))
                }
            }
            let log = origin.requests.map { "\($0.header("range") ?? "-") \($0.status) \($0.faultApplied ?? "")" }
            #expect(
                error?.message.contains("Content-Range") == true, "message: \(error?.message ?? ""); requests: \(log)")
            #expect(!scratch.exists("liar.bin"), "no file at the target path")
            if lie == .wrongTotal {
                // A changed size means a changed object: nothing of it is kept.
                #expect(error?.kind == .objectChanged)
                #expect(!scratch.exists(part: "liar.bin"))
                return
            }
            #expect(error?.kind == .invalidResponse)
            // Only the probe's honest first MiB was written; the lied bytes never reached the file.
            let part = try Data(contentsOf: URL(fileURLWithPath: scratch.part("liar.bin")))
            #expect(part.count == Int(object.size))
            #expect(part.prefix(1 << 20) == Data(Payload.bytes(seed: object.seed, offset: 0, count: 1 << 20)))
            #expect(part.dropFirst(1 << 20).allSatisfy { $0 == 0 }, "bytes from a lying response were written")
            #expect(origin.requests.dropFirst().allSatisfy { $0.faultApplied?.contains("contentRangeLie") == true })
        }
    }

    @Test("a segment's first request takes a short remainder along instead of leaving it for later")
    func noSlivers() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            // The probe's MiB, then one 5 MiB segment for each of the three other connections (the
            // probe's connection takes work once its MiB is in): the default first request (4 MiB)
            // would leave a 1 MiB sliver of each for a request of its own.
            let segment: Int64 = 5 << 20
            let object = TestObject(size: (1 << 20) + 3 * segment, seed: 12)
            origin.addObject(object, at: "/slivers.bin")
            _ = try await withDownloader(quickConfiguration(connections: 4)) {
                try await $0.download(DownloadRequest(url: origin.url("/slivers.bin")), to: scratch.path("slivers.bin"))
            }
            #expect(try await TestData.sha256(of: scratch.path("slivers.bin")) == object.sha256)
            let starts = Set((0..<3).map { (1 << 20) + $0 * segment })
            // Each request also asks for a window of the bytes before it (its lead), to compare.
            let window = Int64(4096)
            let first = origin.requests.dropFirst().compactMap { request -> (Int64, Int64)? in
                guard let range = request.header("range"), range.hasPrefix("bytes=") else { return nil }
                let bounds = range.dropFirst(6).split(separator: "-").compactMap { Int64($0) }
                guard bounds.count == 2, starts.contains(bounds[0] + window) else { return nil }
                return (bounds[0] + window, bounds[1] + 1 - bounds[0] - window)
            }
            #expect(Set(first.map(\.0)) == starts, "every segment starts with a request: \(first)")
            for (start, length) in first {
                #expect(length == segment, "the request at \(start) covers \(length) bytes, not the whole segment")
            }
        }
    }

    @Test("an empty object becomes an empty file")
    func emptyObject() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            origin.addObject(TestObject(size: 0), at: "/empty")
            let result = try await withDownloader(quickConfiguration()) {
                try await $0.download(DownloadRequest(url: origin.url("/empty")), to: scratch.path("empty"))
            }
            #expect(result.bytes == 0)
            #expect(try FileManager.default.attributesOfItem(atPath: scratch.path("empty"))[.size] as? Int == 0)
        }
    }

    @Test("redirects are followed on the probe only; segments go to the final URL")
    func redirectOnce() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            let object = TestObject(size: 8 << 20, seed: 9)
            origin.addObject(object, at: "/real.bin")
            origin.addRedirect(from: "/start", to: "/hop", status: 301)
            origin.addRedirect(from: "/hop", to: origin.url("/real.bin"), status: 307)
            _ = try await withDownloader(quickConfiguration(connections: 4)) {
                try await $0.download(DownloadRequest(url: origin.url("/start")), to: scratch.path("real.bin"))
            }
            #expect(try await TestData.sha256(of: scratch.path("real.bin")) == object.sha256)
            let paths = origin.requests.map(\.path)
            #expect(paths.filter { $0 == "/start" }.count == 1)
            #expect(paths.filter { $0 == "/hop" }.count == 1)
            #expect(paths.dropFirst(2).allSatisfy { $0 == "/real.bin" })
        }
    }

    @Test("a server that works on every request: few connections and large requests, also on a connection already open")
    func workPerRequest() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        // The adaptive count measures the origin's pace: beside the heavy tests it measures the machine
        // (a clean-clone run saw 9 connections, the load 5.7 per core, while the bench test of a
        // per-request server ran). One at a time with them, as timing-sensitive tests are.
        try await exclusively {
            try await workPerRequestRuns(scratch)
        }
    }

    private func workPerRequestRuns(_ scratch: Scratch) async throws {
        try await withTestOrigin { origin in
            origin.addObject(TestObject(size: 48 << 20, seed: 64), at: "/a.bin")
            origin.addObject(TestObject(size: 48 << 20, seed: 65), at: "/b.bin")
            origin.updateFaults { $0.workPerRequest = .milliseconds(80) }
            var configuration = quickConfiguration()
            configuration.connections = .adaptive(maximum: 64)
            try await withDownloader(configuration) { downloader in
                // The first download opens its connection; the second's probe goes out on it, with no
                // handshake of its own to tell the path's round trip from the server's 80 ms.
                for name in ["a.bin", "b.bin"] {
                    origin.resetLog()
                    let result = try await downloader.download(
                        DownloadRequest(url: origin.url("/\(name)")), to: scratch.path(name))
                    let log = origin.requests
                    let ranges = log.map { $0.header("range") ?? "-" }
                    #expect(result.bytes == 48 << 20)
                    // Alone, 2 connections and 3 requests. On a machine whose run queue is longer than
                    // its cores (a full suite beside this in-process origin) the origin's bytes come
                    // late, a starved server looks like one that pays for more connections, and the
                    // count reached 5 and 6 with 8 and 9 requests (three CI runs, the load 9 per core): judged
                    // looser there, still below the 8 or 64 this test was written against.
                    let starved = MachineLoad.stretch > 1.5
                    let seen = "\(result.connectionsUsed) connections, \(origin.maximumConcurrentRequests) at once"
                    print("workPerRequest \(name): \(seen), \(log.count) requests, load stretch \(MachineLoad.stretch)")
                    #expect(result.connectionsUsed <= (starved ? 7 : 4), "\(name): \(seen), \(ranges)")
                    // The origin counts a response until its last write completes, and one the client cut
                    // short until the connection closes: one more than the client's count, at most.
                    #expect(origin.maximumConcurrentRequests <= (starved ? 8 : 4), "\(name): \(seen)")
                    #expect(log.count <= (starved ? 14 : 8), "\(name): \(ranges)")
                }
            }
        }
    }
}

/// How many TCP connections to `port` this process has, and those a child process would inherit
/// (no close-on-exec). Each socket descriptor is asked for its peer (`getpeername`) and its flags
/// (`fcntl`) rather than looked up in the system's socket table: reading /proc/net/tcp beside the
/// thousands of sockets of a full suite, on a cooperative thread, is what this test must not do.
private func tcpSockets(toPort port: Int) -> (count: Int, inheritable: [String]) {
    var count = 0
    var found: [String] = []
    for name in (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? [] {
        guard let fd = Int32(name), peerPort(of: fd) == port else { continue }
        var type: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &length) == 0, type == Int32(SOCK_STREAM.rawValue) else {
            continue
        }
        let flags = fcntl(fd, F_GETFD)
        guard flags >= 0 else { continue }
        count += 1
        if flags & FD_CLOEXEC == 0 { found.append("fd \(fd)") }
    }
    return (count, found)
}

/// The remote port of socket `fd`, if it is a connected IPv4 or IPv6 socket.
private func peerPort(of fd: Int32) -> Int? {
    var address = sockaddr_storage()
    var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
    let connected = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(fd, $0, &length) == 0 }
    }
    guard connected else { return nil }
    return withUnsafePointer(to: &address) { pointer -> Int? in
        switch Int32(pointer.pointee.ss_family) {
        case AF_INET:
            return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
                Int(UInt16(bigEndian: $0.pointee.sin_port))
            }
        case AF_INET6:
            return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) {
                Int(UInt16(bigEndian: $0.pointee.sin6_port))
            }
        default:
            return nil
        }
    }
}
