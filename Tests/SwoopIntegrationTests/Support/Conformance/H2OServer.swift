import Foundation

/// h2o 2.2 serving one document root over HTTP and over HTTPS (a self-signed certificate for
/// 127.0.0.1 made with openssl, which ``certificate`` names for `swoop --cacert`), both from one
/// YAML file, in the foreground. Started as root it serves as `nobody`. It answers a range past
/// the end with a 416 and `Content-Range: bytes */SIZE`, and ignores `If-Match` and
/// `If-Unmodified-Since` on range requests. The ``tls`` endpoint is the same server over HTTPS.
final class H2OServer: DocumentRootServer {
    let name = "h2o"
    let directory: URL
    let root: URL
    let port: Int
    let accessLog: URL
    /// The self-signed certificate of the HTTPS listener.
    let certificate: URL
    /// The same document root and log over HTTPS.
    let tls: H2OTLSEndpoint
    private let server: ServerProcess

    var baseURL: String { "http://127.0.0.1:\(port)" }

    static func start() async throws -> H2OServer {
        let executable = try ServerPrograms.find("h2o", candidates: ["/usr/bin/h2o"], package: "apt h2o")
        let openssl = try ServerPrograms.find("openssl", candidates: ["/usr/bin/openssl"], package: "apt openssl")
        return try await startTrying { try await H2OServer(executable: executable, openssl: openssl) }
    }

    private init(executable: String, openssl: String) async throws {
        directory = try TemporaryDirectory.make(prefix: "swoop-h2o")
        root = try DocumentRoot.make(in: directory)
        port = try FreePort.find()
        var tlsPort = try FreePort.find()
        while tlsPort == port { tlsPort = try FreePort.find() }
        accessLog = directory.appendingPathComponent("access.log")
        certificate = directory.appendingPathComponent("cert.pem")
        let key = directory.appendingPathComponent("key.pem")
        tls = H2OTLSEndpoint(root: root, port: tlsPort, accessLog: accessLog, caFile: certificate)
        _ = try await ServerPrograms.run(
            openssl,
            [
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
                "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", key.path, "-out", certificate.path,
            ])
        let errorLog = directory.appendingPathComponent("error.log")
        let config = """
            error-log: \(errorLog.path)
            access-log:
              path: \(accessLog.path)
              format: "%m|%U|%s|%b|%{range}i"
            listen:
              host: 127.0.0.1
              port: \(port)
            listen:
              host: 127.0.0.1
              port: \(tlsPort)
              ssl:
                certificate-file: \(certificate.path)
                key-file: \(key.path)
                ocsp-update-interval: 0
            hosts:
              default:
                paths:
                  /:
                    file.dir: \(root.path)

            """
        let configFile = directory.appendingPathComponent("h2o.conf")
        try config.write(to: configFile, atomically: true, encoding: .utf8)
        server = try await ServerProcess.started(
            name: name, executable: executable, arguments: ["-c", configFile.path],
            output: directory.appendingPathComponent("stderr.log"), listeningOn: [port, tlsPort], logs: [errorLog],
            directory: directory)
    }

    func parse(_ line: Substring) -> ServedRequest? { parseFields(line) }

    func stop() {
        server.stop()
        try? FileManager.default.removeItem(at: directory)
    }

    deinit { stop() }
}

/// The HTTPS listener of an ``H2OServer``: the same files and log, another port. Stopping it
/// stops nothing; its server owns the process.
final class H2OTLSEndpoint: DocumentRootServer {
    let name = "h2o (HTTPS)"
    let root: URL
    let port: Int
    let accessLog: URL
    let caFile: URL?

    var baseURL: String { "https://127.0.0.1:\(port)" }

    init(root: URL, port: Int, accessLog: URL, caFile: URL) {
        self.root = root
        self.port = port
        self.accessLog = accessLog
        self.caFile = caFile
    }

    func parse(_ line: Substring) -> ServedRequest? { parseFields(line) }

    func stop() {}
}
