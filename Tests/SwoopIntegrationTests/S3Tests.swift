import Foundation
import Swoop
import SwoopTestOrigin
import SwoopTestSupport
import Testing

/// `s3://BUCKET/KEY` by name against SeaweedFS's S3 gateway, which checks every signature, through
/// the `swoop` executable: credentials from the environment and from a profile, S3's errors in its
/// words, a prefix listed over several pages, reruns, kill -9, shards. The session-token case runs
/// against the test origin, whose tokens can be made to expire mid-download.
@Suite("S3 by name", .serialized, .s3Store)
struct S3Tests {
    static let bucket = "swoop-s3"

    /// The environment of a run with the store's credentials, and no shared files to find.
    static func environment(_ store: SeaweedS3Server, _ scratch: Scratch) -> [String: String] {
        [
            "AWS_ACCESS_KEY_ID": SeaweedS3Server.accessKey, "AWS_SECRET_ACCESS_KEY": SeaweedS3Server.secretKey,
            "AWS_REGION": "us-east-1", "AWS_SHARED_CREDENTIALS_FILE": scratch.path("no-credentials"),
            "AWS_CONFIG_FILE": scratch.path("no-config"), "AWS_ENDPOINT_URL": store.endpoint,
        ]
    }

    @Test("0 B, 1 B, an odd size and 256 MiB arrive byte-identical, credentials from the environment")
    func sizesFromEnvironment() async throws {
        let store = try S3Store.require()
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        for size in [0, 1, 1_234_567, 256 << 20] {
            let source = scratch.url.appendingPathComponent("source-\(size)")
            _ = try await TestData.write(to: source, size: size, seed: UInt64(size) + 7)
            try await store.put(source, key: "sizes/object-\(size).bin", bucket: Self.bucket)
            let result = try await CLI.run(
                ["get", "s3://\(Self.bucket)/sizes/object-\(size).bin", "-o", "got-\(size)", "-q"], in: scratch.url,
                environment: Self.environment(store, scratch))
            #expect(result.status == 0, "\(size) B: \(result.stderr)")
            #expect(try await TestData.sha256(of: scratch.path("got-\(size)")) == TestData.sha256(of: source.path))
            #expect(!scratch.exists(part: "got-\(size)") && !scratch.exists(map: "got-\(size)"))
        }
    }

    @Test("swoop bench measures an s3:// object, signed, its endpoint from --endpoint-url")
    func bench() async throws {
        let store = try S3Store.require()
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        let source = scratch.url.appendingPathComponent("source")
        _ = try await TestData.write(to: source, size: 4 << 20, seed: 71)
        try await store.put(source, key: "bench/object.bin", bucket: Self.bucket)
        var environment = Self.environment(store, scratch)
        environment["AWS_ENDPOINT_URL"] = nil
        let result = try await CLI.run(
            [
                "bench", "s3://\(Self.bucket)/bench/object.bin", "-c", "1,2", "--duration", "1", "--json",
                "--endpoint-url", store.endpoint,
            ], in: scratch.url, environment: environment)
        #expect(result.status == 0, "\(result.stderr)")
        let summary = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        let rows = try #require(summary["results"] as? [[String: Any]])
        #expect(rows.count == 2 && rows.allSatisfy { ($0["bytesPerSecond"] as? Double ?? 0) > 0 }, "\(rows)")
        let secret = SeaweedS3Server.secretKey
        #expect(!result.stdout.contains(secret) && !result.stderr.contains(secret), "no credentials in the output")
        #expect(try FileManager.default.contentsOfDirectory(atPath: scratch.url.path) == ["source"], "nothing written")
    }

    @Test("credentials from a profile in the shared credentials file, region and endpoint from its config")
    func profile() async throws {
        let store = try S3Store.require()
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        let source = scratch.url.appendingPathComponent("source")
        _ = try await TestData.write(to: source, size: 3_000_001, seed: 41)
        try await store.put(source, key: "profile/p.bin", bucket: Self.bucket)
        let credentials = """
            [default]
            aws_access_key_id = wrong
            aws_secret_access_key = wrong

            # the one to use
            [swoop-test]
            aws_access_key_id = \(SeaweedS3Server.accessKey)
            aws_secret_access_key = \(SeaweedS3Server.secretKey)
            """
        let config = """
            [profile swoop-test]
            region = us-east-1
            endpoint_url = \(store.endpoint)
            """
        try credentials.write(toFile: scratch.path("credentials"), atomically: true, encoding: .utf8)
        try config.write(toFile: scratch.path("config"), atomically: true, encoding: .utf8)
        let environment = [
            "AWS_PROFILE": "swoop-test", "AWS_SHARED_CREDENTIALS_FILE": scratch.path("credentials"),
            "AWS_CONFIG_FILE": scratch.path("config"),
        ]
        let result = try await CLI.run(
            ["get", "s3://\(Self.bucket)/profile/p.bin", "-o", "p.bin", "-q"], in: scratch.url,
            environment: environment)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try await TestData.sha256(of: scratch.path("p.bin")) == TestData.sha256(of: source.path))
        // --profile wins over credentials in the environment.
        var mixed = environment
        mixed["AWS_PROFILE"] = nil
        mixed["AWS_ACCESS_KEY_ID"] = "wrong"
        mixed["AWS_SECRET_ACCESS_KEY"] = "wrong"
        let explicit = try await CLI.run(
            ["get", "s3://\(Self.bucket)/profile/p.bin", "-o", "p2.bin", "-q", "--profile", "swoop-test"],
            in: scratch.url, environment: mixed)
        #expect(explicit.status == 0, "\(explicit.stderr)")
    }

    @Test(
        "a wrong secret, key ID, key or bucket: S3's words, the fix, exit 1, nothing kept",
        arguments: [
            ("secret", "SignatureDoesNotMatch", "AWS_SECRET_ACCESS_KEY"),
            ("key ID", "InvalidAccessKeyId", "AWS_ACCESS_KEY_ID"),
            ("key", "NoSuchKey", "s3://swoop-s3/errors/missing.bin"),
            ("bucket", "NoSuchBucket", "swoop-no-such-bucket"),
        ])
    func errors(_ wrong: String, _ code: String, _ named: String) async throws {
        let store = try S3Store.require()
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        let source = scratch.url.appendingPathComponent("source")
        _ = try await TestData.write(to: source, size: 1000, seed: 5)
        try await store.put(source, key: "errors/present.bin", bucket: Self.bucket)
        var environment = Self.environment(store, scratch)
        var url = "s3://\(Self.bucket)/errors/present.bin"
        switch wrong {
        case "secret": environment["AWS_SECRET_ACCESS_KEY"] = "not-the-secret"
        case "key ID": environment["AWS_ACCESS_KEY_ID"] = "AKIANOBODY"
        case "key": url = "s3://\(Self.bucket)/errors/missing.bin"
        default: url = "s3://swoop-no-such-bucket/errors/present.bin"
        }
        let result = try await CLI.run(["get", url, "-o", "out.bin"], in: scratch.url, environment: environment)
        #expect(result.status == 1, "\(wrong): \(result.stderr)")
        #expect(result.stderr.contains(code) && result.stderr.contains(named), "\(wrong): \(result.stderr)")
        #expect(!result.stderr.contains(SeaweedS3Server.secretKey) && !result.stderr.contains("not-the-secret"))
        #expect(!scratch.exists("out.bin") && !scratch.exists(part: "out.bin") && !scratch.exists(map: "out.bin"))
    }

    @Test("s3:// lines in an -i list download like any URL, each named by its key unless out= says")
    func list() async throws {
        let store = try S3Store.require()
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await store.fill(prefix: "list/", names: ["a.bin", "deep/b.bin"], size: 70_000, bucket: Self.bucket)
        let list = """
            s3://\(Self.bucket)/list/a.bin
            s3://\(Self.bucket)/list/deep/b.bin
              out=renamed.bin
            """
        try list.write(toFile: scratch.path("list.txt"), atomically: true, encoding: .utf8)
        let result = try await CLI.run(
            ["get", "-i", "list.txt", "-d", "out", "-q"], in: scratch.url, environment: Self.environment(store, scratch)
        )
        #expect(result.status == 0, "\(result.stderr)")
        let a = try Data(contentsOf: scratch.url.appendingPathComponent("out/a.bin"))
        let b = try Data(contentsOf: scratch.url.appendingPathComponent("out/renamed.bin"))
        #expect(Array(a) == SeaweedS3Server.fillBytes(key: "list/a.bin", size: 70_000))
        #expect(Array(b) == SeaweedS3Server.fillBytes(key: "list/deep/b.bin", size: 70_000))
    }

    @Test("-r: a prefix of 1,050 nested keys over two listing pages, then a rerun that fetches no body")
    func prefix() async throws {
        let store = try S3Store.require()
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        let names = (0..<1050).map { String(format: "d%02d/sub/file-%04d.bin", $0 % 7, $0) }
        try await store.fill(prefix: "tree/", names: names, size: 4096, bucket: Self.bucket)
        let command = ["get", "-r", "s3://\(Self.bucket)/tree/", "-d", "out", "--json", "-q", "--jobs", "32"]
        let first = try await CLI.run(command, in: scratch.url, environment: Self.environment(store, scratch))
        #expect(first.status == 0, "\(first.stderr)")
        for name in names {
            let bytes = try Data(contentsOf: scratch.url.appendingPathComponent("out/" + name))
            #expect(Array(bytes) == SeaweedS3Server.fillBytes(key: "tree/" + name, size: 4096), "\(name)")
        }
        let summary = try JSONDecoder().decode(ListRun.self, from: Data(first.stdout.utf8))
        #expect(summary.files == 1050 && summary.succeeded == 1050, "\(first.stdout)")

        let again = try await CLI.run(command, in: scratch.url, environment: Self.environment(store, scratch))
        #expect(again.status == 0, "\(again.stderr)")
        let rerun = try JSONDecoder().decode(ListRun.self, from: Data(again.stdout.utf8))
        #expect(rerun.alreadyComplete == 1050 && rerun.bytesReceived == 0, "\(again.stdout)")
    }

    @Test("-r: five canonically equivalent names and five working-file names are ten files with their own bytes")
    func namesAreBytes() async throws {
        let store = try S3Store.require()
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        let names = [
            "caf\u{E9}.txt", "cafe\u{301}.txt", "\u{C5}ngstrom", "\u{212B}ngstrom", "A\u{30A}ngstrom",
            "big", "big.part", "big.swoop", "big2", "big2.part",
        ]
        try await store.fill(prefix: "names/", names: names, size: 300_000, bucket: Self.bucket)
        let command = ["get", "-r", "s3://\(Self.bucket)/names/", "-d", "out", "--json", "-q"]
        let result = try await CLI.run(command, in: scratch.url, environment: Self.environment(store, scratch))
        #expect(result.status == 0, "\(result.stderr)")
        let listed = try ByteNames.list(scratch.path("out"))
        #expect(
            Set(listed) == Set(names.map { Array($0.utf8) }), "\(listed.map { String(decoding: $0, as: UTF8.self) })")
        for name in names {
            let bytes = try ByteNames.read(scratch.path("out") + "/" + name)
            #expect(bytes == SeaweedS3Server.fillBytes(key: "names/" + name, size: 300_000), "\(name.debugDescription)")
        }
        let again = try await CLI.run(command, in: scratch.url, environment: Self.environment(store, scratch))
        let rerun = try JSONDecoder().decode(ListRun.self, from: Data(again.stdout.utf8))
        #expect(again.status == 0 && rerun.alreadyComplete == 10 && rerun.bytesReceived == 0, "\(again.stdout)")
    }

    @Test("--shard K/N over a prefix: the shards' files are disjoint and together the whole prefix")
    func shards() async throws {
        let store = try S3Store.require()
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        let names = (0..<60).map { "s-\($0).bin" }
        try await store.fill(prefix: "shards/", names: names, size: 10_000, bucket: Self.bucket)
        var seen: [String: Int] = [:]
        for index in 0..<3 {
            let directory = "out-\(index)"
            let result = try await CLI.run(
                ["get", "-r", "s3://\(Self.bucket)/shards/", "-d", directory, "--shard", "\(index)/3", "-q"],
                in: scratch.url, environment: Self.environment(store, scratch))
            #expect(result.status == 0, "\(result.stderr)")
            let files = (try? FileManager.default.contentsOfDirectory(atPath: scratch.path(directory))) ?? []
            #expect(!files.isEmpty, "shard \(index) fetched nothing")
            for file in files { seen[file, default: 0] += 1 }
        }
        #expect(Set(seen.keys) == Set(names) && seen.values.allSatisfy { $0 == 1 }, "\(seen)")
    }

    @Test("kill -9 of an s3:// download, then the same command resumes to the identical file")
    func killAndResume() async throws {
        let store = try S3Store.require()
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        let source = scratch.url.appendingPathComponent("source")
        _ = try await TestData.write(to: source, size: 64 << 20, seed: 64)
        try await store.put(source, key: "resume/r.bin", bucket: Self.bucket)
        let command = ["get", "s3://\(Self.bucket)/resume/r.bin", "-o", "r.bin"]
        let environment = Self.environment(store, scratch)
        let slow = try CLI.start(command + ["--limit-rate", "4m", "-q"], in: scratch.url, environment: environment)
        let target = scratch.path("r.bin")
        let seen = try await killOnceSaved(slow, target: target, atLeast: 2 << 20)
        let killed = try await slow.wait(timeout: .seconds(30))
        let saved = try #require(seen, "the download never got going: \(killed.stderr)")
        try #require(saved.bytesDone >= 2 << 20, "no progress before the kill: \(killed.stderr)")
        #expect(saved.url == "s3://\(Self.bucket)/resume/r.bin", "the map records the s3:// name: \(saved)")
        let resumed = try await CLI.run(command + ["--json", "-q"], in: scratch.url, environment: environment)
        #expect(resumed.status == 0, "\(resumed.stderr)")
        #expect(try await TestData.sha256(of: scratch.path("r.bin")) == TestData.sha256(of: source.path))
        let summary = try JSONDecoder().decode(OneRun.self, from: Data(resumed.stdout.utf8))
        #expect((summary.resumedBytes ?? 0) >= saved.bytesDone, "\(resumed.stdout)")
    }

    @Test("a session token that expires mid-download is read again from the credentials file; the download goes on")
    func sessionTokenChanges() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            let object = TestObject(size: 24 << 20, seed: 77)
            origin.addObject(object, at: "/tokens/t.bin")
            origin.updateFaults {
                $0.sessionTokens = .init(valid: "token-1")
                $0.throttleBytesPerSecond = 4 << 20
                // Responses end every 3 MiB, so requests keep being sent after the token changes.
                $0.drops = .init(afterBytes: 3 << 20)
            }
            let credentials = scratch.path("credentials")
            let writeCredentials = { @Sendable (token: String) throws in
                let text = """
                    [default]
                    aws_access_key_id = AKIATEMPORARY
                    aws_secret_access_key = temporary-secret
                    aws_session_token = \(token)
                    """
                try text.write(toFile: credentials, atomically: true, encoding: .utf8)
            }
            try writeCredentials("token-1")
            let environment = [
                "AWS_SHARED_CREDENTIALS_FILE": scratch.path("credentials"), "AWS_CONFIG_FILE": scratch.path("none"),
                "AWS_REGION": "us-east-1",
            ]
            let run = try CLI.start(
                ["get", "s3://tokens/t.bin", "-o", "t.bin", "--endpoint-url", origin.url(""), "-c", "4", "-q"],
                in: scratch.url, environment: environment)
            // Watched, and the token changed, from a thread of its own: on a loaded machine Swift's
            // two pool threads can be busy for seconds, and the download would end first.
            let target = scratch.path("t.bin")
            try await offThePool {
                var deadline = MachineLoad.Deadline(.seconds(60))
                while !deadline.exceeded(), run.process.isRunning, Downloader.status(of: target).bytesDone < 4 << 20 {
                    usleep(10_000)
                }
                // The token is refreshed (the file first, as a credential process does), then the old one expires.
                try writeCredentials("token-2")
                origin.updateFaults { $0.sessionTokens = .init(valid: "token-2") }
            }
            let result = try await run.wait(timeout: .seconds(120))
            #expect(result.status == 0, "\(result.stderr)")
            #expect(try await TestData.sha256(of: scratch.path("t.bin")) == object.sha256)
            let expired = origin.requests.filter { $0.faultApplied == "expiredToken" }.count
            #expect(expired >= 1, "no request met the expired token")
        }
    }
}

/// The fields of `swoop get -r --json` these tests read.
private struct ListRun: Decodable {
    var files: Int
    var succeeded: Int
    var alreadyComplete: Int
    var bytesReceived: Int64
}

/// The fields of `swoop get --json` these tests read.
private struct OneRun: Decodable {
    var resumedBytes: Int64?
}

/// One SeaweedFS S3 gateway for the suite (started by the ``S3StoreTrait`` scope, stopped when it ends).
enum S3Store {
    @TaskLocal static var current: SeaweedS3Server?

    static func require() throws -> SeaweedS3Server {
        guard let current else { throw TestFailure("no S3 store: the suite needs .s3Store") }
        return current
    }
}

struct S3StoreTrait: SuiteTrait, TestScoping {
    func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        let store = try await SeaweedS3Server.start()
        defer { store.stop() }
        try await S3Store.$current.withValue(store) { try await function() }
    }
}

extension Trait where Self == S3StoreTrait {
    /// A SeaweedFS S3 gateway for the suite: see ``S3Store``.
    static var s3Store: Self { S3StoreTrait() }
}
