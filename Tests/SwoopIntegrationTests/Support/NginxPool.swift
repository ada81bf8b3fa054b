import Foundation
import SwoopTestOrigin

/// A real load-balanced pool on loopback: nginx as a round-robin balancer (`upstream` with two
/// `server` lines, `proxy_pass`, no cache, `Range` and preconditions passed through) in front of
/// two nginx backends, each serving its own copy of one file. The copies have different mtimes,
/// so nginx gives each node its own `ETag` (`"hex(mtime)-hex(size)"`) and `Last-Modified`, and
/// each node evaluates `If-Match`, `If-Unmodified-Since` and `If-Range` against its own: from
/// one response to the next through the balancer, the validators alternate. The bytes are
/// ``Payload`` streams: the same seed on both nodes, or seed + node.
///
/// ```swift
/// let pool = try await NginxPool.start(copies: .sameBytes, size: 8 << 20)
/// defer { pool.stop() }
/// // … download pool.url …
/// ```
///
/// Each of the three is an nginx in the foreground, a child of the test process; ``stop()``
/// ends them and removes their directory.
final class NginxPool: Sendable {
    /// What the two copies hold.
    enum Copies: Sendable {
        /// The same bytes (a load-balanced pool in good order, but for its mtimes).
        case sameBytes
        /// Node i's copy is ``Payload`` stream seed + i, of the same size (a deploy half done).
        case differentBytes
    }

    /// One backend.
    struct Node: Sendable {
        let index: Int
        let port: Int
        /// `http://127.0.0.1:PORT`: the node itself, without the balancer.
        var baseURL: String { "http://127.0.0.1:\(port)" }
        /// Its document root.
        let root: URL
        /// The ``Payload`` seed of its copy.
        let seed: UInt64
        /// Its copy's modification time, in seconds since 1970.
        let mtime: Int64
        /// The `ETag` it sends for the copy, quotes included.
        let etag: String
        /// The `Last-Modified` it sends for the copy.
        let lastModified: String
        /// Its access log (``Nginx/LogEntry`` lines): which requests it answered.
        let accessLog: URL
    }

    /// The copies' modification times: node i's is `firstModified` + 60 × i seconds
    /// (2024-01-01T00:00:00Z and a minute later).
    static let firstModified: Int64 = 1_704_067_200

    let directory: URL
    /// The balancer's port.
    let port: Int
    let nodes: [Node]
    /// The file's path on every node and through the balancer, e.g. `/object.bin`.
    let path: String
    let size: Int64
    private let balancer: ServerProcess
    private let backends: [ServerProcess]

    /// `http://127.0.0.1:PORT`, the balancer.
    var baseURL: String { "http://127.0.0.1:\(port)" }
    /// The file through the balancer: what a client downloads.
    var url: String { baseURL + path }

    /// Writes the copies and starts the backends and the balancer on free loopback ports, waiting
    /// until all three listen. `fileName` is the file's name in each document root.
    static func start(
        copies: Copies, size: Int64 = 1 << 20, seed: UInt64 = 1, fileName: String = "object.bin"
    ) async throws -> NginxPool {
        try await startTrying {
            try await NginxPool(copies: copies, size: size, seed: seed, fileName: fileName)
        }
    }

    private init(copies: Copies, size: Int64, seed: UInt64, fileName: String) async throws {
        let directory = try TemporaryDirectory.make(prefix: "swoop-nginx-pool")
        self.directory = directory
        path = "/" + fileName
        self.size = size
        var started: [ServerProcess] = []
        do {
            var nodes: [Node] = []
            for index in 0..<2 {
                let node = try Self.makeNode(
                    index, in: directory, seed: copies == .sameBytes ? seed : seed + UInt64(index),
                    size: size, fileName: fileName)
                nodes.append(node)
                started.append(
                    try await Self.run(
                        "node\(index)", config: Self.backendConfig(node, directory: directory), port: node.port,
                        directory: directory))
            }
            let port = try FreePort.find()
            let config = Self.balancerConfig(port: port, nodes: nodes, directory: directory)
            started.append(try await Self.run("balancer", config: config, port: port, directory: directory))
            self.nodes = nodes
            self.port = port
            backends = Array(started.prefix(2))
            balancer = started[2]
        } catch {
            for server in started { server.stop() }
            try? FileManager.default.removeItem(at: directory)
            throw error
        }
    }

    /// The entries of node `index`'s access log so far.
    func log(ofNode index: Int) throws -> [Nginx.LogEntry] {
        try Nginx.log(at: nodes[index].accessLog)
    }

    /// Stops the balancer and both nodes, and removes the directory. Safe to call twice.
    func stop() {
        balancer.stop()
        for backend in backends { backend.stop() }
        try? FileManager.default.removeItem(at: directory)
    }

    deinit { stop() }

    // MARK: Setting up

    /// Writes node `index`'s copy, with its mtime, into its document root.
    private static func makeNode(
        _ index: Int, in directory: URL, seed: UInt64, size: Int64, fileName: String
    ) throws -> Node {
        let root = directory.appendingPathComponent("node\(index)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        let file = root.appendingPathComponent(fileName)
        try Payload.write(toFile: file.path, seed: seed, size: size)
        let mtime = firstModified + 60 * Int64(index)
        let date = Date(timeIntervalSince1970: TimeInterval(mtime))
        try FileManager.default.setAttributes([.modificationDate: date], ofItemAtPath: file.path)
        return Node(
            index: index, port: try FreePort.find(), root: root, seed: seed, mtime: mtime,
            etag: "\"\(String(mtime, radix: 16))-\(String(size, radix: 16))\"", lastModified: httpDate(date),
            accessLog: directory.appendingPathComponent("node\(index)-access.log"))
    }

    /// What every one of the three configurations has: foreground, one worker, its own files.
    private static func common(_ name: String, directory: URL) -> String {
        """
        daemon off;
        master_process off;
        worker_processes 1;
        error_log \(directory.path)/\(name)-error.log warn;
        pid \(directory.path)/\(name).pid;
        events { worker_connections 1024; }
        """
    }

    private static func temporaryPaths(_ name: String, directory: URL) -> String {
        ["client_body", "proxy", "fastcgi", "uwsgi", "scgi"].map {
            "\($0)_temp_path \(directory.path)/\(name)-tmp-\($0);"
        }.joined(separator: "\n    ")
    }

    private static func backendConfig(_ node: Node, directory: URL) -> String {
        let name = "node\(node.index)"
        return """
            \(common(name, directory: directory))
            http {
                default_type application/octet-stream;
                sendfile on;
                keepalive_requests 100000;
                \(temporaryPaths(name, directory: directory))
                \(Nginx.logFormat)
                access_log \(node.accessLog.path) swoop;
                server {
                    listen 127.0.0.1:\(node.port);
                    root \(node.root.path);
                }
            }
            """
    }

    /// Round robin over the two nodes, one request at a time; a node that fails is not retried on
    /// the other (`proxy_next_upstream off`), so every response comes from the node whose turn it was.
    private static func balancerConfig(port: Int, nodes: [Node], directory: URL) -> String {
        let servers = nodes.map { "server 127.0.0.1:\($0.port);" }.joined(separator: " ")
        return """
            \(common("balancer", directory: directory))
            http {
                keepalive_requests 100000;
                \(temporaryPaths("balancer", directory: directory))
                \(Nginx.logFormat)
                access_log \(directory.path)/balancer-access.log swoop;
                upstream pool { \(servers) keepalive 32; }
                server {
                    listen 127.0.0.1:\(port);
                    location / {
                        proxy_pass http://pool;
                        proxy_http_version 1.1;
                        proxy_set_header Connection "";
                        proxy_buffering off;
                        proxy_cache off;
                        proxy_next_upstream off;
                    }
                }
            }
            """
    }

    /// Writes `config` as `NAME.conf` and starts nginx with it, waiting until it listens on `port`.
    private static func run(_ name: String, config: String, port: Int, directory: URL) async throws -> ServerProcess {
        let configURL = directory.appendingPathComponent("\(name).conf")
        try config.write(to: configURL, atomically: true, encoding: .utf8)
        let server = try ServerProcess(
            name: "nginx \(name)", executable: Nginx.executable,
            arguments: ["-c", configURL.path, "-p", directory.path],
            output: directory.appendingPathComponent("\(name).out"))
        do {
            try await server.waitUntilListening(
                on: port, logs: [directory.appendingPathComponent("\(name)-error.log")])
            return server
        } catch {
            server.stop()
            throw error
        }
    }

    /// An IMF-fixdate, as nginx writes `Last-Modified`.
    private static func httpDate(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter.string(from: date)
    }
}
