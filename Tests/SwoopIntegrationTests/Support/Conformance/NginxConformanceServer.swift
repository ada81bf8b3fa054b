import Foundation

/// nginx on a loopback port (the ``Nginx`` fixture, one worker, `sendfile on`), serving a
/// document root: strong ETags (`"mtime-size"` in hex), `If-Match` and `If-Unmodified-Since`
/// evaluated on range requests (`412`), and a file read as it is when each part of a response is
/// sent (a file rewritten in place shows its new bytes to responses under way). Its access log
/// is JSON lines, written as each request ends.
final class NginxConformanceServer: DocumentRootServer {
    let name = "nginx"
    private let nginx: Nginx

    var root: URL { nginx.root }
    var baseURL: String { nginx.baseURL }
    var accessLog: URL { nginx.prefix.appendingPathComponent("access.log") }

    private init(nginx: Nginx) {
        self.nginx = nginx
    }

    static func start() async throws -> NginxConformanceServer {
        NginxConformanceServer(nginx: try await Nginx.start())
    }

    func parse(_ line: Substring) -> ServedRequest? {
        guard let entry = try? JSONDecoder().decode(Nginx.LogEntry.self, from: Data(line.utf8)) else { return nil }
        return ServedRequest(
            method: entry.method, path: entry.uri, status: entry.status, bodyBytes: entry.bytes,
            range: entry.range.isEmpty ? nil : entry.range)
    }

    func stop() {
        nginx.stop()
    }
}
