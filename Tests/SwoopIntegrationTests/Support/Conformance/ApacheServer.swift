import Foundation

/// Apache httpd 2.4 on a loopback port, in the foreground (`apache2 -f CONF -k start
/// -DFOREGROUND`), with `ServerRoot /etc/apache2` and only the modules its cases need. Its
/// document root has one directory per case:
///
/// - `plain/`: files as they are (strong ETags `"size-mtime"`, ranges, a 416 without
///   `Content-Range` past the end).
/// - `deflate/`: `SetOutputFilter DEFLATE`, which compresses only for clients that accept gzip.
/// - `weak/`: every ETag made weak (`W/"..."`) with `Header edit`. Apache itself sends a weak tag
///   only while a file's mtime is less than a second before the request (`FileETag` chooses the
///   tag's parts, never its strength), which a test cannot hold steady.
/// - `xgzip/`: `AddEncoding x-gzip .gz .tgz`, the classic httpd.conf line: a stored `.tar.gz` is
///   served as it is, labelled `Content-Encoding: x-gzip` on 200 and 206.
///
/// The access log records method, path, status, body bytes (`%B`) and the `Range` header.
final class ApacheServer: DocumentRootServer {
    let name = "Apache httpd"
    let directory: URL
    let root: URL
    let port: Int
    let accessLog: URL
    private let server: ServerProcess

    var baseURL: String { "http://127.0.0.1:\(port)" }

    static func start() async throws -> ApacheServer {
        let executable = try ServerPrograms.find("apache2", candidates: ["/usr/sbin/apache2"], package: "apt apache2")
        return try await startTrying { try await ApacheServer(executable: executable) }
    }

    private init(executable: String) async throws {
        directory = try TemporaryDirectory.make(prefix: "swoop-apache")
        root = try DocumentRoot.make(in: directory)
        for folder in ["plain", "deflate", "weak", "xgzip"] {
            try FileManager.default.createDirectory(
                at: root.appendingPathComponent(folder), withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o755])
        }
        port = try FreePort.find()
        accessLog = directory.appendingPathComponent("access.log")
        let errorLog = directory.appendingPathComponent("error.log")
        let modules = "/usr/lib/apache2/modules"
        // Workers drop to www-data only when started as root; otherwise they stay this user.
        let user = getuid() == 0 ? "User www-data\nGroup www-data" : ""
        let config = """
            ServerRoot /etc/apache2
            LoadModule mpm_event_module \(modules)/mod_mpm_event.so
            LoadModule authz_core_module \(modules)/mod_authz_core.so
            LoadModule mime_module \(modules)/mod_mime.so
            LoadModule filter_module \(modules)/mod_filter.so
            LoadModule deflate_module \(modules)/mod_deflate.so
            LoadModule headers_module \(modules)/mod_headers.so
            ServerName localhost
            Listen 127.0.0.1:\(port)
            PidFile \(directory.path)/httpd.pid
            DefaultRuntimeDir \(directory.path)
            ErrorLog \(errorLog.path)
            LogLevel warn
            \(user)
            TypesConfig /etc/mime.types
            DocumentRoot \(root.path)
            LogFormat "%m|%U|%>s|%B|%{Range}i" conformance
            CustomLog \(accessLog.path) conformance
            <Directory />
                Require all granted
            </Directory>
            <Directory \(root.path)/deflate>
                SetOutputFilter DEFLATE
            </Directory>
            <Directory \(root.path)/weak>
                Header edit ETag "^\\"(.*)\\"$" "W/\\"$1\\""
            </Directory>
            <Directory \(root.path)/xgzip>
                AddEncoding x-gzip .gz .tgz
            </Directory>

            """
        let configFile = directory.appendingPathComponent("httpd.conf")
        try config.write(to: configFile, atomically: true, encoding: .utf8)
        server = try await ServerProcess.started(
            name: name, executable: executable, arguments: ["-f", configFile.path, "-k", "start", "-DFOREGROUND"],
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
