import Foundation

/// lighttpd 1.4 on a loopback port, in the foreground (`lighttpd -D -f CONF`). Its document root
/// has two directories: `plain/` with ETags on (strong, `"decimal"`), and `noetag/` with
/// `static-file.etags = "disable"`, which leaves `Last-Modified` and the size as the only
/// validators. lighttpd answers a range past the end with a 416 without `Content-Range`, and does
/// not evaluate `If-Match` or `If-Unmodified-Since` on range requests.
///
/// Its access log (method, path, status, body bytes, `Range`) is written out about once a second.
final class LighttpdServer: DocumentRootServer {
    let name = "lighttpd"
    let directory: URL
    let root: URL
    let port: Int
    let accessLog: URL
    private let server: ServerProcess

    var baseURL: String { "http://127.0.0.1:\(port)" }

    static func start() async throws -> LighttpdServer {
        let executable = try ServerPrograms.find(
            "lighttpd", candidates: ["/usr/sbin/lighttpd"], package: "apt lighttpd")
        return try await startTrying { try await LighttpdServer(executable: executable) }
    }

    private init(executable: String) async throws {
        directory = try TemporaryDirectory.make(prefix: "swoop-lighttpd")
        root = try DocumentRoot.make(in: directory)
        port = try FreePort.find()
        accessLog = directory.appendingPathComponent("access.log")
        let errorLog = directory.appendingPathComponent("error.log")
        let config = """
            server.document-root = "\(root.path)"
            server.bind = "127.0.0.1"
            server.port = \(port)
            server.errorlog = "\(errorLog.path)"
            server.modules = ("mod_accesslog")
            accesslog.filename = "\(accessLog.path)"
            accesslog.format = "%m|%U|%s|%b|%{Range}i"
            mimetype.assign = ("" => "application/octet-stream")
            $HTTP["url"] =~ "^/noetag/" {
                static-file.etags = "disable"
            }

            """
        let configFile = directory.appendingPathComponent("lighttpd.conf")
        try config.write(to: configFile, atomically: true, encoding: .utf8)
        server = try await ServerProcess.started(
            name: name, executable: executable, arguments: ["-D", "-f", configFile.path],
            output: directory.appendingPathComponent("stderr.log"), listeningOn: [port], logs: [errorLog],
            directory: directory)
    }

    func parse(_ line: Substring) -> ServedRequest? { parseFields(line) }

    func stop() {
        server.stop()
        try? FileManager.default.removeItem(at: directory)
    }

    deinit { stop() }
}
