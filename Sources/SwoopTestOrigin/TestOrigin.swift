import NIOCore
import NIOHTTP1
import NIOPosix

/// An in-process HTTP/1.1 origin for tests and benchmarks: serves ``TestObject``s with ranges,
/// validators and persistent connections, records every request, and misbehaves on demand
/// through ``FaultSwitches``.
///
/// ```swift
/// let origin = try await TestOrigin.start()
/// origin.addObject(TestObject(size: 10 << 20), at: "/a.bin")
/// origin.updateFaults { $0.drops = .init(afterBytes: 1 << 20) }
/// // … download origin.url("/a.bin") …
/// try await origin.shutdown()
/// ```
///
/// It must be shut down with ``shutdown()`` before it is released.
public final class TestOrigin: Sendable {
    /// The address it listens on.
    public let host: String
    /// The bound port (the one picked by the system when started with port 0).
    public let port: Int

    private let core: OriginCore
    private let group: MultiThreadedEventLoopGroup
    private let listener: any Channel

    private init(host: String, port: Int, core: OriginCore, group: MultiThreadedEventLoopGroup, listener: any Channel) {
        self.host = host
        self.port = port
        self.core = core
        self.group = group
        self.listener = listener
    }

    deinit {
        assert(core.isShutDown, "TestOrigin on port \(port) was released without shutdown()")
    }

    /// Starts an origin on loopback (port 0), runs `body` with it, and shuts it down however
    /// `body` ends.
    public static func withRunning<T>(threads: Int = 1, _ body: (TestOrigin) async throws -> T) async throws -> T {
        let origin = try await start(threads: threads)
        do {
            let result = try await body(origin)
            try await origin.shutdown()
            return result
        } catch {
            try? await origin.shutdown()
            throw error
        }
    }

    /// Binds host:port (port 0 = any free port) and starts serving on `threads` event loops.
    public static func start(host: String = "127.0.0.1", port: Int = 0, threads: Int = 1) async throws -> TestOrigin {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: max(1, threads))
        let core = OriginCore()
        let listener: any Channel
        do {
            listener = try await ServerBootstrap(group: group)
                .serverChannelOption(.backlog, value: 512)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .serverChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(AcceptOrderHandler(core: core))
                    }
                }
                .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
                .childChannelOption(.writeBufferWaterMark, value: .init(low: 256 << 10, high: 1 << 20))
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        let id = core.connectionID(of: channel)
                        try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                        try channel.pipeline.syncOperations.addHandler(
                            OriginConnectionHandler(core: core, connectionID: id))
                    }
                }
                .bind(host: host, port: port)
                .get()
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
        return TestOrigin(
            host: host, port: listener.localAddress?.port ?? port, core: core, group: group, listener: listener)
    }

    /// Closes the listener and every connection, then stops the event loops. Calling it again does nothing.
    public func shutdown() async throws {
        guard let connections = core.beginShutdown() else { return }
        try? await listener.close()
        for connection in connections {
            try? await connection.close()
        }
        try await group.shutdownGracefully()
    }

    // MARK: Addresses

    /// `http://HOST:PORT`, with IPv6 hosts in brackets.
    public var baseURL: String {
        host.contains(":") ? "http://[\(host)]:\(port)" : "http://\(host):\(port)"
    }

    /// `baseURL + path`, e.g. `url("/a.bin")` is `http://127.0.0.1:PORT/a.bin`.
    public func url(_ path: String) -> String {
        baseURL + path
    }

    // MARK: Content

    /// Serves `object` at `path` (which starts with `/`), replacing what was there.
    public func addObject(_ object: TestObject, at path: String) {
        precondition(path.hasPrefix("/"), "object paths start with /")
        core.setObject(object, at: path)
    }

    /// Serves `object` as the object `key` of `bucket` in an S3-compatible store reached by path
    /// (`/BUCKET/KEY`, the key percent-encoded as S3 clients send it: every byte but `A-Z a-z
    /// 0-9 - . _ ~ /` as `%XX`), so the key's bytes are kept exactly; see
    /// ``FaultSwitches/s3Listing`` for listing them.
    public func addS3Object(_ object: TestObject, bucket: String, key: String) {
        addObject(object, at: Self.s3Path(bucket: bucket, key: key))
    }

    /// The path ``addS3Object(_:bucket:key:)`` serves `key` at.
    public static func s3Path(bucket: String, key: String) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var out = Array("/\(bucket)/".utf8)
        for byte in key.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"), UInt8(ascii: "/"):
                out.append(byte)
            default:
                out += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 0xF)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Stops serving `path` (it answers 404 from now on).
    public func removeObject(at path: String) {
        core.setObject(nil, at: path)
    }

    /// The object served at `path`, as it is now.
    public func object(at path: String) -> TestObject? {
        core.object(at: path)
    }

    /// Replaces the object's content generation: seed += 1 and a new ETag/Last-Modified, as if
    /// the file was replaced on the server.
    public func changeObject(at path: String) {
        core.changeObject(at: path)
    }

    /// Rewrites the 4 KiB blocks of the object at `path` that start at `offsets` in place
    /// (``TestObject/rewritten(blocksAt:)``): its size and other bytes stay, its validators change
    /// as a file server's do (a later mtime), and responses under way send the new bytes from
    /// here on.
    public func rewriteInPlace(at path: String, blocksAt offsets: [Int64]) {
        core.changeObject(at: path, rewriting: offsets)
    }

    /// Answers any request for `path` with `status` and `Location: location` (sent verbatim: it
    /// may be relative, point at another host, or use another scheme) and `Content-Length: 0`.
    public func addRedirect(from path: String, to location: String, status: Int = 302) {
        precondition(path.hasPrefix("/"), "redirect paths start with /")
        core.setRedirect(.init(location: location, status: status), from: path)
    }

    // MARK: Presigned URLs

    /// Serves only presigned URLs from now on, each valid for `validity` (`nil`: any URL again).
    public func requireSignedURLs(validFor validity: Duration?) {
        core.updateFaults { $0.urlSigning = validity.map { URLSigning(validFor: $0) } }
    }

    /// A presigned URL for `path`, valid from now for the validity set by ``requireSignedURLs(validFor:)``.
    public func signedURL(_ path: String) -> String {
        guard let signing = faults.urlSigning else { preconditionFailure("call requireSignedURLs(validFor:) first") }
        return url(path) + "?" + signing.query(for: path)
    }

    /// Refuses every presigned URL minted until now, even those still valid (as if their key
    /// was rotated): the requests that follow fail at once.
    public func revokeSignedURLs(answeringAfter delay: Duration? = nil) {
        core.updateFaults {
            $0.urlSigning?.revokedBefore = URLSigning.nowMilliseconds() + 1
            $0.urlSigning?.refusalDelayMilliseconds = delay.map(\.wholeMilliseconds)
        }
    }

    /// Closes every open connection now, responses under way included (as a restarting server
    /// or load balancer does): every request in flight fails at once.
    public func dropConnections() {
        for connection in core.openConnections { connection.close(promise: nil) }
    }

    // MARK: Faults

    /// The fault switches in force.
    public var faults: FaultSwitches {
        core.faults
    }

    /// Replaces all fault switches; responses already under way keep the ones they started with.
    public func setFaults(_ faults: FaultSwitches) {
        core.updateFaults { $0 = faults }
    }

    /// Changes some fault switches atomically.
    public func updateFaults(_ body: (inout FaultSwitches) -> Void) {
        core.updateFaults(body)
    }

    // MARK: Observation

    /// Every request since the start or the last ``resetLog()``, in arrival order; each is added
    /// when its response is complete or its connection dies.
    public var requests: [RecordedRequest] {
        core.requests
    }

    /// Empties ``requests`` and restarts ``requestCount`` (and so the "first K requests" fault
    /// counters, and `changeAfterRequests`) at 0. Responses still under way are not logged.
    /// Connection IDs keep counting.
    public func resetLog() {
        core.resetLog()
    }

    /// Connections accepted since the start.
    public var connectionsAccepted: Int {
        core.connectionsAccepted
    }

    /// Requests received since the start or the last ``resetLog()``, answered or not.
    public var requestCount: Int {
        core.requestCount
    }

    /// The most requests the origin was answering at the same time since the start (or the last
    /// ``resetLog()``): what a client's connection cap looks like from the server.
    public var maximumConcurrentRequests: Int {
        core.peakInFlight
    }
}

/// Waits until `condition` holds, for up to `timeout` stretched by the machine's load
/// (``MachineLoad``); `false` if it never did. The origin's request
/// log lags the client by a moment (a request is logged when the server has handled its end,
/// e.g. the client's close), more so when the test process is short of CPU.
public func eventually(timeout: Duration = .seconds(30), _ condition: () -> Bool) async throws -> Bool {
    var deadline = MachineLoad.Deadline(timeout)
    while !condition() {
        if deadline.exceeded() { return false }
        try await Task.sleep(for: .milliseconds(10))
    }
    return true
}
