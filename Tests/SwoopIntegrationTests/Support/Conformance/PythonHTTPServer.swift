import Foundation

/// `python3 -m http.server` on a loopback port, serving a document root of its own (it takes no
/// configuration file). It ignores `Range`: every GET is a 200 with the whole file, in one
/// stream, from the file it opened, with `Last-Modified` and no ETag. Its log lines carry no
/// byte counts, so ``served(_:)`` is `nil`.
final class PythonHTTPServer: DocumentRootServer {
    let name = "python3 -m http.server"
    let directory: URL
    let root: URL
    let port: Int
    let accessLog: URL
    private let server: ServerProcess

    var baseURL: String { "http://127.0.0.1:\(port)" }

    static func start() async throws -> PythonHTTPServer {
        let python = try ServerPrograms.python()
        return try await startTrying { try await PythonHTTPServer(python: python) }
    }

    private init(python: String) async throws {
        directory = try TemporaryDirectory.make(prefix: "swoop-python-http")
        root = try DocumentRoot.make(in: directory)
        port = try FreePort.find()
        accessLog = directory.appendingPathComponent("server.log")
        server = try await ServerProcess.started(
            name: name, executable: python,
            arguments: ["-m", "http.server", String(port), "--bind", "127.0.0.1", "--directory", root.path],
            output: accessLog, listeningOn: [port], directory: directory)
    }

    func parse(_ line: Substring) -> ServedRequest? { nil }

    func served(_ path: String) throws -> [ServedRequest]? { nil }

    func settleLog() async throws {}

    func stop() {
        server.stop()
        try? FileManager.default.removeItem(at: directory)
    }

    deinit { stop() }
}
