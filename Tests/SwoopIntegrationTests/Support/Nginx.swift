import Foundation
import Synchronization
import SwoopTestOrigin
import SwoopTestSupport

/// A real nginx on loopback for one test: its own prefix directory, config, document root and a
/// JSON access log recording the headers that matter (Range, If-Match, ...).
final class Nginx: @unchecked Sendable {
    /// One access-log line.
    struct LogEntry: Decodable, Sendable {
        var connection: Int
        var requests: Int
        var method: String
        var uri: String
        var status: Int
        var bytes: Int64
        var range: String
        var ifMatch: String
        var ifUnmodifiedSince: String
        var authorization: String
        var cookie: String
        var userAgent: String
        /// When the response ended (seconds since the epoch, to the millisecond) and how long it
        /// took from its request's first byte.
        var end: Double
        var seconds: Double
    }

    let prefix: URL
    let root: URL
    let port: Int
    private let process: ChildProcess
    /// The first connection ``log()`` reports (see ``startLog()``); 0: all of them.
    private let firstLoggedConnection = Mutex(0)

    /// The loopback address it listens on (127.0.0.x: several instances are several hosts).
    let host: String
    var baseURL: String { "\(scheme)://\(host):\(port)" }
    /// The self-signed certificate a TLS instance serves: what a client trusts with `--cacert`.
    var certificate: String { Self.certificate(in: prefix) }

    private static func certificate(in prefix: URL) -> String { prefix.appendingPathComponent("cert.pem").path }

    func url(_ path: String) -> String { baseURL + path }

    /// Starts nginx serving `root` (a fresh temporary directory unless given). `limitRate` is an
    /// nginx size such as "10m": a per-connection cap on every location.
    /// With `tls`, it serves HTTPS with a self-signed certificate for 127.0.0.1 (not trusted by
    /// anything, which is the point of the TLS tests).
    /// `host` is a loopback address; `extraHTTPConfig` goes in the `http` block (a
    /// `limit_conn_zone`, say).
    /// `port`: listen there (several hosts of one name share it); by default a free one.
    /// Started on a thread of its own (``offThePool(_:)``): starting waits for the port.
    static func start(
        limitRate: String? = nil, extraServerConfig: String = "", tls: Bool = false, host: String = "127.0.0.1",
        extraHTTPConfig: String = "", port: Int? = nil
    ) async throws -> Nginx {
        try await offThePool {
            try startBlocking(
                limitRate: limitRate, extraServerConfig: extraServerConfig, tls: tls, host: host,
                extraHTTPConfig: extraHTTPConfig, port: port)
        }
    }

    private static func startBlocking(
        limitRate: String?, extraServerConfig: String, tls: Bool, host: String, extraHTTPConfig: String, port: Int?
    ) throws -> Nginx {
        var lastError: Error?
        for _ in 0..<(port == nil ? 5 : 1) {
            do {
                return try Nginx(
                    limitRate: limitRate, extraServerConfig: extraServerConfig, tls: tls, host: host,
                    extraHTTPConfig: extraHTTPConfig, fixedPort: port)
            } catch {
                lastError = error
            }
        }
        throw lastError!
    }

    var scheme = "http"

    private init(
        limitRate: String?, extraServerConfig: String, tls: Bool, host: String, extraHTTPConfig: String,
        fixedPort: Int?
    ) throws {
        self.host = host
        let prefix = try TemporaryDirectory.make(prefix: "swoop-nginx")
        self.prefix = prefix
        root = prefix.appendingPathComponent("www")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        port = try fixedPort ?? FreePort.find(host: host)
        // With sendfile, nginx sends up to sendfile_max_chunk (2 MiB) before its rate delay, so
        // every short request would start with a burst; small chunks keep the cap smooth.
        var listen = "listen \(host):\(port);"
        if tls {
            let key = prefix.appendingPathComponent("key.pem").path
            let certificate = Self.certificate(in: prefix)
            let openssl = try ChildProcess(
                executable: "/usr/bin/openssl",
                arguments: [
                    "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", key, "-out", certificate,
                ])
            guard openssl.waitBlocking() == 0 else { throw TestFailure("openssl could not make a certificate") }
            listen = "listen \(host):\(port) ssl; ssl_certificate \(certificate); ssl_certificate_key \(key);"
            scheme = "https"
        }
        let rate = limitRate.map { "limit_rate \($0); sendfile_max_chunk 64k;" } ?? ""
        let config = """
            daemon off;
            master_process off;
            worker_processes 1;
            error_log \(prefix.path)/error.log warn;
            pid \(prefix.path)/nginx.pid;
            events { worker_connections 4096; }
            http {
                types { application/octet-stream bin; text/html html; }
                default_type application/octet-stream;
                sendfile on;
                keepalive_requests 100000;
                keepalive_timeout 60s;
                client_body_temp_path \(prefix.path)/tmp_body;
                proxy_temp_path \(prefix.path)/tmp_proxy;
                fastcgi_temp_path \(prefix.path)/tmp_fastcgi;
                uwsgi_temp_path \(prefix.path)/tmp_uwsgi;
                scgi_temp_path \(prefix.path)/tmp_scgi;
                \(Self.logFormat)
                access_log \(prefix.path)/access.log swoop;
                \(extraHTTPConfig)
                server {
                    \(listen)
                    root \(root.path);
                    \(rate)
                    \(extraServerConfig)
                }
            }
            """
        let configPath = prefix.appendingPathComponent("nginx.conf")
        try config.write(to: configPath, atomically: true, encoding: .utf8)
        let process = try ChildProcess(
            executable: Nginx.executable, arguments: ["-c", configPath.path, "-p", prefix.path],
            stderr: prefix.appendingPathComponent("stderr.log").path)
        self.process = process
        // Ready when it accepts connections and has written its pid file, which nginx does only
        // once its sockets are bound: the port listening alone may be another server's, one that
        // took the port between FreePort.find and nginx's bind (nginx then retries the bind for
        // about 2 s before it gives up, and a TLS test would talk to that other server).
        let deadline = Date().addingTimeInterval(10)
        let pidFile = prefix.appendingPathComponent("nginx.pid").path
        while !(FileManager.default.fileExists(atPath: pidFile) && FreePort.isListening(port, host: host)) {
            if !process.isRunning || Date() > deadline {
                process.signal(SIGKILL)
                let log = (try? String(contentsOf: prefix.appendingPathComponent("error.log"), encoding: .utf8)) ?? ""
                throw TestFailure("nginx did not start on port \(port): \(log)")
            }
            usleep(10_000)
        }
    }

    static var executable: String {
        for candidate in ["/usr/sbin/nginx", "/usr/bin/nginx", "/usr/local/sbin/nginx"]
        where FileManager.default.isExecutableFile(atPath: candidate) {
            return candidate
        }
        return "/usr/sbin/nginx"
    }

    /// Writes a file of deterministic bytes into the document root; returns its SHA-256.
    @discardableResult
    func addFile(_ name: String, size: Int, seed: UInt64 = 1) async throws -> String {
        try await TestData.write(to: root.appendingPathComponent(name), size: size, seed: seed)
    }

    /// The access log so far (since ``startLog()``, when it was called).
    func log() throws -> [LogEntry] {
        let first = firstLoggedConnection.withLock { $0 }
        return try Self.log(at: prefix.appendingPathComponent("access.log")).filter { $0.connection >= first }
    }

    /// The `log_format` directive (in an `http` block) of the JSON lines ``LogEntry`` reads, named
    /// `swoop`.
    static let logFormat = """
        log_format swoop escape=json '{"connection":$connection,"requests":$connection_requests,\
        "method":"$request_method","uri":"$uri","status":$status,"bytes":$body_bytes_sent,\
        "range":"$http_range","ifMatch":"$http_if_match","ifUnmodifiedSince":"$http_if_unmodified_since",\
        "authorization":"$http_authorization","cookie":"$http_cookie","userAgent":"$http_user_agent",\
        "end":$msec,"seconds":$request_time}';
        """

    /// The entries of an access log written with ``logFormat``; none if there is no file yet.
    static func log(at url: URL) throws -> [LogEntry] {
        let text = (try? String(contentsOf: url, encoding: .utf8)) ?? ""
        let decoder = JSONDecoder()
        return try text.split(separator: "\n").map { try decoder.decode(LogEntry.self, from: Data($0.utf8)) }
    }

    func clearLog() throws {
        try Data().write(to: prefix.appendingPathComponent("access.log"))
        // nginx keeps appending through its open descriptor; the truncation takes effect at once.
    }

    /// Starts the log afresh for a new client process: ``log()`` leaves out every connection
    /// accepted before this call. A killed client's requests are logged only when nginx finds
    /// their connection closed, which on a busy machine can be well after the kill; a wait cannot
    /// be sure to outlast that, but a marker can: this sends one request on a new connection, and
    /// nginx (one worker) numbers connections in the order it accepts them. Not for a client that
    /// keeps connections open across the call (a library downloader): its later requests would
    /// be left out.
    func startLog() async throws {
        precondition(scheme == "http", "the log marker is a plain HTTP request")
        try clearLog()
        let (host, port, logPath) = (host, port, prefix.appendingPathComponent("access.log"))
        let marker = try await offThePool {
            try LoopbackHTTP.get("/.log-start", host: host, port: port)
            // The request is logged before its connection closes; read it back to be sure.
            var deadline = MachineLoad.Deadline(.seconds(10))
            while !deadline.exceeded() {
                if let entry = try Self.log(at: logPath).last(where: { $0.uri == "/.log-start" }) { return entry }
                usleep(5_000)
            }
            throw TestFailure("nginx did not log the marker request")
        }
        firstLoggedConnection.withLock { $0 = marker.connection + 1 }
    }

    func stop() {
        if process.isRunning {
            process.signal(SIGKILL)
            _ = process.waitBlocking()
        }
        try? FileManager.default.removeItem(at: prefix)
    }

    deinit {
        stop()
    }
}

/// A unique temporary directory.
enum TemporaryDirectory {
    static func make(prefix: String) throws -> URL {
        let url = FileManager.default.temporaryDirectory
            .appendingPathComponent(
                "\(prefix)-\(ProcessInfo.processInfo.processIdentifier)-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }
}

/// One plain HTTP/1.0 request over a raw socket, for a marker in a server's log.
enum LoopbackHTTP {
    /// Sends `GET path` to `host:port` and reads the answer to its end (the server closes).
    static func get(_ path: String, host: String, port: Int) throws {
        guard let fd = FreePort.connectedSocket(host: host, port: port) else {
            throw TestFailure("could not connect to \(host):\(port)")
        }
        defer { close(fd) }
        let request = Array("GET \(path) HTTP/1.0\r\nHost: \(host)\r\n\r\n".utf8)
        guard write(fd, request, request.count) == request.count else { throw TestFailure("write() failed") }
        var buffer = [UInt8](repeating: 0, count: 4096)
        while read(fd, &buffer, buffer.count) > 0 {}
    }
}

/// A loopback port that nothing listens on, held (bound, not listening) so that nobody else
/// takes it until ``release()``: a connection to it is refused at once. (A port that
/// ``FreePort/find(host:)`` returned can be taken by another test's server at any moment, and a
/// test that expects a refusal then meets a server.)
struct ClosedPort {
    let port: Int
    private let descriptor: Int32

    init(host: String = "127.0.0.1") throws {
        (descriptor, port) = try FreePort.bound(host: host, listening: false)
    }

    func release() {
        close(descriptor)
    }
}

/// Loopback ports.
enum FreePort {
    /// A port nothing listens on right now (bind to port 0, read it back, close).
    static func find(host: String = "127.0.0.1") throws -> Int {
        let socket = try bound(host: host, listening: false)
        close(socket.fd)
        return socket.port
    }

    /// A TCP socket bound to a free port of `host`, listening when `listening` (as another
    /// program holding the port would), and that port; the caller closes it.
    static func bound(host: String = "127.0.0.1", listening: Bool) throws -> (fd: Int32, port: Int) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TestFailure("socket() failed") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr(host)
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && (!listening || listen(fd, 4) == 0) && getsockname(fd, $0, &length) == 0
            }
        }
        guard bound else {
            close(fd)
            throw TestFailure(listening ? "bind() or listen() failed" : "bind() failed")
        }
        return (fd, Int(UInt16(bigEndian: address.sin_port)))
    }

    static func isListening(_ port: Int, host: String = "127.0.0.1") -> Bool {
        guard let fd = connectedSocket(host: host, port: port) else { return false }
        close(fd)
        return true
    }

    /// A TCP socket connected to `host:port` (the caller closes it), or `nil` if nothing accepts.
    static func connectedSocket(host: String, port: Int) -> Int32? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr(host)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
        guard connected else {
            close(fd)
            return nil
        }
        return fd
    }
}

struct TestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

extension URL {
    /// Creates an empty file at this URL if none exists, and returns the URL.
    func creatingFile() throws -> URL {
        if !FileManager.default.fileExists(atPath: path) {
            _ = FileManager.default.createFile(atPath: path, contents: nil)
        }
        return self
    }
}
