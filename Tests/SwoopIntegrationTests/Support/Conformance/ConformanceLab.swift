import Foundation
import SwoopTestSupport
import Testing

/// The real servers of the conformance suite, started once for the suite (the
/// ``ConformanceServersTrait`` scope) and stopped when it ends, however its tests ended. Each
/// server starts on its own; one that cannot start (a program missing, say) fails only the
/// tests of its variants, with the reason.
final class ConformanceLab: Sendable {
    /// The lab of the running suite.
    @TaskLocal static var current: ConformanceLab?

    let pool: ObjectPool
    private let servers: [ServerVariant.Host: Result<any ConformanceServer, TestFailure>]

    private init(pool: ObjectPool, servers: [ServerVariant.Host: Result<any ConformanceServer, TestFailure>]) {
        self.pool = pool
        self.servers = servers
    }

    /// Makes the objects, then starts every server at once (SeaweedFS takes about 5 s).
    static func start() async throws -> ConformanceLab {
        let pool = try await ObjectPool.make()
        async let apache = attempt { try await ApacheServer.start() }
        async let lighttpd = attempt { try await LighttpdServer.start() }
        async let caddy = attempt { try await CaddyServer.start() }
        async let h2o = attempt { try await H2OServer.start() }
        async let python = attempt { try await PythonHTTPServer.start() }
        async let seaweed = attempt { try await SeaweedS3Server.start() }
        async let nginx = attempt { try await NginxConformanceServer.start() }
        let h2oResult = await h2o
        let h2oTLS = h2oResult.map { server -> any ConformanceServer in (server as? H2OServer)?.tls ?? server }
        return ConformanceLab(
            pool: pool,
            servers: [
                .apache: await apache, .lighttpd: await lighttpd, .caddy: await caddy, .h2o: h2oResult, .h2oTLS: h2oTLS,
                .python: await python, .seaweedS3: await seaweed, .nginx: await nginx,
            ])
    }

    private static func attempt(
        _ start: () async throws -> any ConformanceServer
    ) async -> Result<any ConformanceServer, TestFailure> {
        do {
            return .success(try await start())
        } catch {
            return .failure(error as? TestFailure ?? TestFailure("\(error)"))
        }
    }

    /// The lab of the running suite, or a failure saying the suite lacks its trait.
    static func require() throws -> ConformanceLab {
        guard let current else { throw TestFailure("no conformance servers: the suite needs .conformanceServers") }
        return current
    }

    /// The server of `variant`, or why it did not start.
    func server(for variant: ServerVariant) throws -> any ConformanceServer {
        guard let result = servers[variant.host] else { throw TestFailure("no server for \(variant)") }
        return try result.get()
    }

    /// What `swoop` needs besides the URL: `--cacert` for a server with a private CA.
    func trustArguments(for variant: ServerVariant) -> [String] {
        guard let server = try? server(for: variant), let ca = server.caFile else { return [] }
        return ["--cacert", ca.path]
    }

    /// Stops every server and removes the objects, on a thread of its own: each server's stop waits
    /// for it to exit (up to 10 s), and a cooperative thread must not wait for six of them.
    func stop() async {
        let lab = self
        _ = try? await offThePool { lab.stopBlocking() }
    }

    private func stopBlocking() {
        for case .success(let server) in servers.values { server.stop() }
        pool.remove()
    }
}

/// Starts the conformance servers around the whole suite it is attached to and stops them when
/// the suite ends (passed, failed or threw), so none is left running.
struct ConformanceServersTrait: SuiteTrait, TestScoping {
    func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        let lab = try await ConformanceLab.start()
        do {
            try await ConformanceLab.$current.withValue(lab) { try await function() }
        } catch {
            await lab.stop()
            throw error
        }
        await lab.stop()
    }
}

extension Trait where Self == ConformanceServersTrait {
    /// Real servers for the suite: see ``ConformanceLab``.
    static var conformanceServers: Self { ConformanceServersTrait() }
}

/// The objects the suite publishes, written once and hard-linked into the document roots: 0 B,
/// 1 B, an odd size and 64 MiB, and a replacement of another size and content. Their mtimes lie
/// an hour or two back, so Apache's ETags are strong (it sends weak ones for a file changed less
/// than a second ago) and a replacement's `Last-Modified` differs from the original's.
struct ObjectPool: Sendable {
    struct Object: Sendable {
        let file: URL
        let size: Int
        let sha256: String
    }

    let directory: URL
    /// 0 B, 1 B, 1,234,567 B and 64 MiB.
    let sizes: [Object]
    /// What replaces an object mid-download: 3 MiB + 4,321 B of other bytes.
    let replacement: Object

    /// The 64 MiB object.
    var large: Object { sizes[sizes.count - 1] }

    static func make() async throws -> ObjectPool {
        let directory = try TemporaryDirectory.make(prefix: "swoop-conformance-objects")
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: directory.path)
        let now = Date()
        func object(_ size: Int, seed: UInt64, age: TimeInterval) async throws -> Object {
            let file = directory.appendingPathComponent("object-\(size)-\(seed)")
            let sha256 = try await TestData.write(to: file, size: size, seed: seed)
            try FileManager.default.setAttributes(
                [.posixPermissions: 0o644, .modificationDate: now.addingTimeInterval(-age)], ofItemAtPath: file.path)
            return Object(file: file, size: size, sha256: sha256)
        }
        var sizes: [Object] = []
        for (index, size) in [0, 1, 1_234_567, 64 << 20].enumerated() {
            sizes.append(try await object(size, seed: UInt64(29 + index), age: 7200))
        }
        let replacement = try await object((3 << 20) + 4321, seed: 99, age: 3600)
        return ObjectPool(directory: directory, sizes: sizes, replacement: replacement)
    }

    func remove() {
        try? FileManager.default.removeItem(at: directory)
    }
}
