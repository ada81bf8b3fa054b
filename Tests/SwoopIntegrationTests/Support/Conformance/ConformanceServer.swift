import Foundation
import SwoopTestOrigin

/// One request as a server's access log records it.
struct ServedRequest: Sendable, Equatable {
    var method: String
    /// The request's path, without a query.
    var path: String
    var status: Int
    /// Body bytes sent, headers excluded.
    var bodyBytes: Int64
    /// The `Range` header; `nil` when the request had none.
    var range: String?
}

/// A real server the conformance suite downloads from, started once for the suite: it publishes
/// objects at paths and tells what it served.
protocol ConformanceServer: AnyObject, Sendable {
    /// A name for messages, e.g. "Apache httpd".
    var name: String { get }
    /// Makes `file`'s bytes the object at `path` (such as `plain/a.bin`), replacing any object
    /// there in one step (a rename, a PUT), and returns the URL a client downloads it from.
    func publish(_ file: URL, at path: String) async throws -> String
    /// Changes the object at `path` to `file`'s bytes, which differ from its own in the
    /// `blockSize`-byte blocks at `blocks` only, as a server's file is patched: in place, where
    /// the server serves files (the same inode, so responses under way read the new bytes; its
    /// modification time moves on), or by a new PUT of the object (a store).
    func rewrite(_ path: String, to file: URL, blocks: [Int64], blockSize: Int) async throws
    /// The requests for `path` its access log holds, oldest first; `nil` when it keeps no log of
    /// the body bytes it sends.
    func served(_ path: String) throws -> [ServedRequest]?
    /// Returns once ``served(_:)`` holds every request that ended before the call.
    func settleLog() async throws
    /// The CA certificate a client must trust for its HTTPS, `nil` for plain HTTP.
    var caFile: URL? { get }
    /// Stops it and everything it started, and removes its directory. Safe to call twice.
    func stop()
}

extension ConformanceServer {
    func settleLog() async throws {}
    var caFile: URL? { nil }

    func rewrite(_ path: String, to file: URL, blocks: [Int64], blockSize: Int) async throws {
        _ = try await publish(file, at: path)
    }
}

/// A server of the files under a document root, logging one line per request.
protocol DocumentRootServer: ConformanceServer {
    var root: URL { get }
    /// `scheme://127.0.0.1:port`
    var baseURL: String { get }
    var accessLog: URL { get }
    /// A log line as a request; `nil` for a line that describes none.
    func parse(_ line: Substring) -> ServedRequest?
}

extension DocumentRootServer {
    func publish(_ file: URL, at path: String) async throws -> String {
        try DocumentRoot.place(file, at: path, in: root)
        return "\(baseURL)/\(path)"
    }

    func rewrite(_ path: String, to file: URL, blocks: [Int64], blockSize: Int) async throws {
        try DocumentRoot.patch(root.appendingPathComponent(path), from: file, blocks: blocks, blockSize: blockSize)
    }

    func served(_ path: String) throws -> [ServedRequest]? {
        let text = (try? String(contentsOf: accessLog, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap(parse).filter { $0.path == "/" + path }
    }

    /// Fetches a sentinel file with Python's urllib (not with the tool under test) and waits until
    /// the log shows it; lighttpd writes its log out about once a second.
    func settleLog() async throws {
        let name = "sentinel-\(UUID().uuidString.prefix(8)).txt"
        let file = root.appendingPathComponent(name)
        try Data("sentinel\n".utf8).write(to: file)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: file.path)
        defer { try? FileManager.default.removeItem(at: file) }
        let script =
            "import ssl, sys, urllib.request; "
            + "context = ssl.create_default_context(cafile=sys.argv[2] or None); "
            + "urllib.request.urlopen(sys.argv[1], context=context).read()"
        let python = try ServerPrograms.python()
        _ = try await ServerPrograms.run(python, ["-c", script, "\(baseURL)/\(name)", caFile?.path ?? ""])
        let logged = try await eventually(timeout: .seconds(20)) { (try? served(name))??.isEmpty == false }
        guard logged else { throw TestFailure("\(self.name) did not log the request for \(name) within 20 s") }
    }

    /// Parses the line format the fixtures give servers that take one: `method|path|status|body
    /// bytes|range` with `-` for an absent range.
    func parseFields(_ line: Substring) -> ServedRequest? {
        let fields = line.split(separator: "|", omittingEmptySubsequences: false)
        guard fields.count == 5, let status = Int(fields[2]) else { return nil }
        let range = fields[4].trimmingCharacters(in: CharacterSet(charactersIn: "\" "))
        return ServedRequest(
            method: String(fields[0]), path: String(fields[1]), status: status, bodyBytes: Int64(fields[3]) ?? 0,
            range: range.isEmpty || range == "-" ? nil : range)
    }
}

/// Files in a document root, placed as a deploy places them.
enum DocumentRoot {
    /// Hard-links `file` (or copies it, across file systems) to a hidden name beside `path`, then
    /// renames it over `path`: a request that opened the old file keeps reading it, the next one
    /// gets the new. Directories are made readable by the servers' unprivileged workers.
    static func place(_ file: URL, at path: String, in root: URL) throws {
        let target = root.appendingPathComponent(path)
        let directory = target.deletingLastPathComponent()
        try FileManager.default.createDirectory(
            at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        let staged = directory.appendingPathComponent(".\(target.lastPathComponent).\(UUID().uuidString.prefix(8))")
        if link(file.path, staged.path) != 0 {
            try FileManager.default.copyItem(at: file, to: staged)
            let attributes = try FileManager.default.attributesOfItem(atPath: file.path)
            try FileManager.default.setAttributes(
                [.posixPermissions: 0o644, .modificationDate: attributes[.modificationDate] as Any],
                ofItemAtPath: staged.path)
        }
        guard rename(staged.path, target.path) == 0 else {
            throw TestFailure("cannot rename \(staged.path) to \(target.path): \(String(cString: strerror(errno)))")
        }
    }

    /// Writes `file`'s bytes of the blocks at `blocks` into `target` where it lies (no new inode,
    /// no truncation), as a database or `rsync --inplace` patches a file; the write moves its
    /// modification time to now.
    static func patch(_ target: URL, from file: URL, blocks: [Int64], blockSize: Int) throws {
        let source = try FileHandle(forReadingFrom: file)
        defer { try? source.close() }
        let destination = try FileHandle(forUpdating: target)
        defer { try? destination.close() }
        for offset in blocks {
            try source.seek(toOffset: UInt64(offset))
            let bytes = try source.read(upToCount: blockSize) ?? Data()
            try destination.seek(toOffset: UInt64(offset))
            try destination.write(contentsOf: bytes)
        }
        try destination.synchronize()
    }

    /// Makes `directory` and a `www` inside it, both readable by every user (Apache's workers run
    /// as www-data, h2o's as nobody).
    static func make(in directory: URL) throws -> URL {
        let www = directory.appendingPathComponent("www")
        try FileManager.default.createDirectory(at: www, withIntermediateDirectories: true)
        for url in [directory, www] {
            try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: url.path)
        }
        return www
    }
}
