import Foundation

/// Caddy 2.6 serving HTTPS on a loopback port with `tls internal`: Caddy makes its own CA and a
/// certificate for 127.0.0.1. `HOME`, `XDG_DATA_HOME` and `XDG_CONFIG_HOME` point into its
/// temporary directory, so the CA lands there (``rootCertificate``) and nothing touches the
/// machine's trust store (`skip_install_trust`); `admin off` keeps it from opening an admin port.
/// It offers HTTP/2; Swoop speaks HTTP/1.1. A range past the end gets a 416 with
/// `Content-Range: bytes */SIZE`. Its JSON access log gives the body bytes of each response.
final class CaddyServer: DocumentRootServer {
    let name = "Caddy"
    let directory: URL
    let root: URL
    let port: Int
    let accessLog: URL
    /// The CA certificate a client must trust (`swoop --cacert`).
    let rootCertificate: URL
    private let server: ServerProcess

    var baseURL: String { "https://127.0.0.1:\(port)" }
    var caFile: URL? { rootCertificate }

    static func start() async throws -> CaddyServer {
        let executable = try ServerPrograms.find("caddy", candidates: ["/usr/bin/caddy"], package: "apt caddy")
        return try await startTrying { try await CaddyServer(executable: executable) }
    }

    private init(executable: String) async throws {
        directory = try TemporaryDirectory.make(prefix: "swoop-caddy")
        root = try DocumentRoot.make(in: directory)
        port = try FreePort.find()
        accessLog = directory.appendingPathComponent("access.log")
        let data = directory.appendingPathComponent("data")
        rootCertificate = data.appendingPathComponent("caddy/pki/authorities/local/root.crt")
        let certificate = data.appendingPathComponent("caddy/certificates/local/127.0.0.1/127.0.0.1.crt")
        let config = """
            {
                admin off
                skip_install_trust
                auto_https disable_redirects
            }
            https://127.0.0.1:\(port) {
                bind 127.0.0.1
                tls internal
                root * \(root.path)
                file_server
                log {
                    output file \(accessLog.path)
                    format json
                }
            }

            """
        let configFile = directory.appendingPathComponent("Caddyfile")
        try config.write(to: configFile, atomically: true, encoding: .utf8)
        server = try ServerProcess(
            name: name, executable: executable,
            arguments: ["run", "--config", configFile.path, "--adapter", "caddyfile"],
            environment: [
                "HOME": directory.path, "XDG_DATA_HOME": data.path,
                "XDG_CONFIG_HOME": directory.appendingPathComponent("config").path,
            ],
            output: directory.appendingPathComponent("caddy.log"))
        do {
            try await server.waitUntilListening(on: port)
            // The certificate is issued just after the listener opens.
            try await server.waitUntil("a certificate for 127.0.0.1") {
                FileManager.default.fileExists(atPath: rootCertificate.path)
                    && FileManager.default.fileExists(atPath: certificate.path)
            }
        } catch {
            stop()
            throw error
        }
    }

    /// One line of Caddy's JSON access log.
    private struct LogLine: Decodable {
        struct Request: Decodable {
            var method: String
            var uri: String
            var headers: [String: [String]]?
        }
        var request: Request
        var status: Int
        var size: Int64
    }

    func parse(_ line: Substring) -> ServedRequest? {
        guard let entry = try? JSONDecoder().decode(LogLine.self, from: Data(line.utf8)) else { return nil }
        let path = entry.request.uri.split(separator: "?", maxSplits: 1).first.map(String.init) ?? entry.request.uri
        let range = entry.request.headers?.first { $0.key.lowercased() == "range" }?.value.first
        return ServedRequest(
            method: entry.request.method, path: path, status: entry.status, bodyBytes: entry.size, range: range)
    }

    func stop() {
        server.stop()
        try? FileManager.default.removeItem(at: directory)
    }

    deinit { stop() }
}
