import Crypto
import Foundation
import Swoop
import SwoopTestOrigin
import SwoopTestSupport
import Testing

/// `swoop get -r` against the test origin acting as an S3-compatible store that accepts any key
/// (``FaultSwitches/S3Listing``): names are bytes, working files never collide with keys, server
/// text never reaches the terminal raw, skips change the exit status, reruns decide from the
/// listing, and an object replaced mid-download is fetched again. The origin logs every request,
/// so the requests a rerun costs are counted in the server's log.
@Suite("S3 names and reruns", .serialized)
struct S3NameTests {
    static let bucket = "names"

    /// `swoop get -r s3://names/PREFIX -d out` against `origin`, unsigned.
    static func prefixCommand(_ origin: TestOrigin, _ prefix: String, _ extra: [String] = []) -> [String] {
        ["get", "-r", "s3://\(bucket)/\(prefix)", "-d", "out", "--endpoint-url", origin.baseURL, "--no-sign-request"]
            + extra
    }

    static let environment = [
        "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent", "AWS_CONFIG_FILE": "/nonexistent", "AWS_REGION": "us-east-1",
    ]

    /// The requests other than listings (per-object requests) in the origin's log.
    static func objectRequests(_ origin: TestOrigin) -> [RecordedRequest] {
        origin.requests.filter { !($0.query ?? "").contains("list-type=2") }
    }

    @Test("five canonically equivalent names (café NFC and NFD, three forms of Ångstrom) are five files")
    func unicodeForms() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        let names = ["caf\u{E9}.txt", "cafe\u{301}.txt", "\u{C5}ngstrom", "\u{212B}ngstrom", "A\u{30A}ngstrom"]
        try await withTestOrigin { origin in
            origin.updateFaults { $0.s3Listing = .init() }
            // Small ones held in memory and large ones through part files, alternately.
            var objects: [TestObject] = []
            for (index, name) in names.enumerated() {
                let object = TestObject(
                    size: index % 2 == 0 ? 3 << 20 : 20_000 + Int64(index), seed: 100 + UInt64(index))
                objects.append(object)
                origin.addS3Object(object, bucket: Self.bucket, key: "u/" + name)
            }
            let result = try await CLI.run(
                Self.prefixCommand(origin, "u/", ["--json", "-q"]), in: scratch.url, environment: Self.environment)
            #expect(result.status == 0, "\(result.stderr)")
            let listed = try ByteNames.list(scratch.path("out"))
            #expect(
                Set(listed) == Set(names.map { Array($0.utf8) }),
                "\(listed.map { String(decoding: $0, as: UTF8.self) })")
            for (name, object) in zip(names, objects) {
                let bytes = try ByteNames.read(scratch.path("out") + "/" + name)
                #expect(try await TestData.sha256(bytes) == object.sha256, "\(Array(name.unicodeScalars))")
            }
            let summary = try JSONDecoder().decode(PrefixSummary.self, from: Data(result.stdout.utf8))
            #expect(summary.files == 5 && summary.succeeded == 5 && summary.skipped.isEmpty, "\(result.stdout)")
        }
    }

    @Test("keys named like working files (big, big.part, big.swoop, big2, big2.part): five files, after kill -9 too")
    func workingFileNames() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        let names = ["big", "big.part", "big.swoop", "big2", "big2.part"]
        try await withTestOrigin { origin in
            origin.updateFaults { $0.s3Listing = .init() }
            var objects: [TestObject] = []
            for (index, name) in names.enumerated() {
                let object = TestObject(size: 16 << 20, seed: 200 + UInt64(index))
                objects.append(object)
                origin.addS3Object(object, bucket: Self.bucket, key: "w/" + name)
            }
            let command = Self.prefixCommand(origin, "w/", ["-q"])
            // Slowly, killed once every file holds some bytes.
            let slow = try CLI.start(command + ["--limit-rate", "4m"], in: scratch.url, environment: Self.environment)
            let paths = names.map { scratch.path("out/" + $0) }
            @Sendable func partial() -> Int {
                paths.filter {
                    let status = Downloader.status(of: $0)
                    return status.state == .partial && status.bytesDone > 0
                }.count
            }
            // Polled and killed on a thread of its own: on the cooperative pool, other tests holding both
            // threads would hide the moment every file is partial.
            try await waitThenAct(
                within: .seconds(90), every: .milliseconds(50),
                until: { !slow.process.isRunning || partial() == paths.count }, then: { slow.signal(SIGKILL) })
            let killed = try await slow.wait(timeout: .seconds(30))
            #expect(partial() == names.count, "not every file had started before the kill: \(killed.stderr)")
            // The kill left no file at a target: only working files, in .swoop/.
            for name in names { #expect(!scratch.exists("out/" + name), "\(name) appeared before it was complete") }
            let resumed = try await CLI.run(command + ["--json"], in: scratch.url, environment: Self.environment)
            #expect(resumed.status == 0, "\(resumed.stderr)")
            for (name, object) in zip(names, objects) {
                #expect(try await TestData.sha256(of: scratch.path("out/" + name)) == object.sha256, "\(name)")
            }
            let summary = try JSONDecoder().decode(PrefixSummary.self, from: Data(resumed.stdout.utf8))
            #expect(summary.succeeded == 5, "\(resumed.stdout)")
            #expect(try ByteNames.list(scratch.path("out")).count == 5, "the working directory is gone")
            #expect(!scratch.exists("out/.swoop"))
        }
    }

    @Test("a key naming the working directory, or inside one, is skipped and counted; the others arrive")
    func workingDirectoryKeys() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            origin.updateFaults { $0.s3Listing = .init() }
            let ok = TestObject(size: 2 << 20, seed: 9)
            origin.addS3Object(ok, bucket: Self.bucket, key: "d/ok.bin")
            origin.addS3Object(TestObject(size: 1000, seed: 10), bucket: Self.bucket, key: "d/.swoop")
            origin.addS3Object(TestObject(size: 1000, seed: 11), bucket: Self.bucket, key: "d/sub/.swoop/0123.part")
            let result = try await CLI.run(
                Self.prefixCommand(origin, "d/", ["--json", "-q"]), in: scratch.url, environment: Self.environment)
            #expect(result.status == 6, "\(result.stderr)")
            #expect(try await TestData.sha256(of: scratch.path("out/ok.bin")) == ok.sha256)
            let summary = try JSONDecoder().decode(PrefixSummary.self, from: Data(result.stdout.utf8))
            #expect(Set(summary.skipped.map(\.key)) == ["d/.swoop", "d/sub/.swoop/0123.part"], "\(result.stdout)")
            #expect(summary.skipped.allSatisfy { $0.reason.contains("working directory") }, "\(result.stdout)")
            #expect(!summary.ok && summary.files == 3 && summary.succeeded == 1)
            #expect(!scratch.exists("out/.swoop") && !scratch.exists("out/sub"))
        }
    }

    @Test("keys with ESC, BEL, CSI and C1: no raw control byte on stderr, the exact names in --json")
    func controlCharacters() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        let hostile = [
            "c/\u{1B}]0;owned\u{07}title.txt", "c/\u{1B}[2Jclear.txt", "c/c1\u{9B}31mred.txt", "c/line\nbreak",
        ]
        try await withTestOrigin { origin in
            origin.updateFaults { $0.s3Listing = .init() }
            for (index, key) in hostile.enumerated() {
                origin.addS3Object(TestObject(size: 500, seed: 30 + UInt64(index)), bucket: Self.bucket, key: key)
            }
            origin.addS3Object(TestObject(size: 500, seed: 40), bucket: Self.bucket, key: "c/ok.txt")
            let plain = try await CLI.run(
                Self.prefixCommand(origin, "c/"), in: scratch.url, environment: Self.environment)
            #expect(plain.status == 6, "\(plain.stderr)")
            let raw = Array(plain.stderr.utf8)
            #expect(
                !raw.contains(0x1B) && !raw.contains(0x07),
                "raw control bytes on stderr: \(plain.stderr.debugDescription)")
            #expect(
                !plain.stderr.unicodeScalars.contains { (0x80...0x9F).contains($0.value) },
                "a C1 control reached stderr")
            #expect(plain.stderr.contains("\\x1b]0;owned\\x07title.txt"), "\(plain.stderr)")
            #expect(plain.stderr.contains("line\\x0abreak"), "\(plain.stderr)")
            let json = try await CLI.run(
                Self.prefixCommand(origin, "c/", ["--json"]), in: scratch.url, environment: Self.environment)
            #expect(json.status == 6)
            #expect(!Array(json.stderr.utf8).contains(0x1B))
            let summary = try JSONDecoder().decode(PrefixSummary.self, from: Data(json.stdout.utf8))
            #expect(
                Set(summary.skipped.map(\.key)).map { Array($0.utf8) }.sorted { $0.lexicographicallyPrecedes($1) }
                    == hostile.map { Array($0.utf8) }.sorted { $0.lexicographicallyPrecedes($1) }, "\(json.stdout)")
            #expect(summary.succeeded == 1 && scratch.exists("out/ok.txt"))
        }
    }

    @Test("a key skipped for safety (../x) makes the run exit 6 with a skipped list, and says so")
    func skippedKey() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            origin.updateFaults { $0.s3Listing = .init() }
            origin.addS3Object(TestObject(size: 100, seed: 1), bucket: Self.bucket, key: "s/../x")
            origin.addS3Object(TestObject(size: 100, seed: 2), bucket: Self.bucket, key: "s/ok.txt")
            let plain = try await CLI.run(
                Self.prefixCommand(origin, "s/"), in: scratch.url, environment: Self.environment)
            #expect(plain.status == 6, "\(plain.stderr)")
            #expect(plain.stderr.contains("1 skipped") && plain.stderr.contains("s3://names/s/../x"), "\(plain.stderr)")
            let json = try await CLI.run(
                Self.prefixCommand(origin, "s/", ["--json", "-q"]), in: scratch.url, environment: Self.environment)
            #expect(json.status == 6)
            let summary = try JSONDecoder().decode(PrefixSummary.self, from: Data(json.stdout.utf8))
            #expect(summary.skipped.map(\.key) == ["s/../x"] && !summary.ok, "\(json.stdout)")
            #expect(!FileManager.default.fileExists(atPath: scratch.url.appendingPathComponent("x").path))
        }
    }

    @Test("a store listing ETags without quotes: the rerun exits 0 and fetches no body, decided from the listing")
    func unquotedETags() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            origin.updateFaults { $0.s3Listing = .init(quotesETags: false) }
            for (index, size) in [Int64(10), 70_000, 5 << 20].enumerated() {
                origin.addS3Object(
                    TestObject(size: size, seed: 50 + UInt64(index)), bucket: Self.bucket, key: "e/\(index)")
            }
            let command = Self.prefixCommand(origin, "e/", ["--json", "-q"])
            let first = try await CLI.run(command, in: scratch.url, environment: Self.environment)
            #expect(first.status == 0, "\(first.stderr)")
            origin.resetLog()
            let again = try await CLI.run(command, in: scratch.url, environment: Self.environment)
            #expect(again.status == 0, "\(again.stderr)")
            let summary = try JSONDecoder().decode(PrefixSummary.self, from: Data(again.stdout.utf8))
            #expect(summary.alreadyComplete == 3 && summary.bytesReceived == 0, "\(again.stdout)")
            #expect(Self.objectRequests(origin).isEmpty, "\(Self.objectRequests(origin).map(\.path))")
        }
    }

    @Test("a rerun of 300 finished keys sends at most 5 per-object requests; a changed one is fetched; --recheck asks")
    func rerunFromListing() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            origin.updateFaults { $0.s3Listing = .init(pageSize: 100) }
            for index in 0..<300 {
                let size: Int64 = index % 50 == 0 ? 300_000 : 4096
                origin.addS3Object(
                    TestObject(size: size, seed: UInt64(index)), bucket: Self.bucket, key: "r/\(index).bin")
            }
            let command = Self.prefixCommand(origin, "r/", ["--json", "-q"])
            let first = try await CLI.run(command, in: scratch.url, environment: Self.environment)
            #expect(first.status == 0, "\(first.stderr)")

            origin.resetLog()
            let again = try await CLI.run(command, in: scratch.url, environment: Self.environment)
            #expect(again.status == 0, "\(again.stderr)")
            let perObject = Self.objectRequests(origin).count
            #expect(perObject <= 5, "the rerun sent \(perObject) per-object requests")
            let listings = origin.requests.count - perObject
            #expect(listings == 3, "three listing pages: \(listings)")
            let summary = try JSONDecoder().decode(PrefixSummary.self, from: Data(again.stdout.utf8))
            #expect(summary.alreadyComplete == 300 && summary.bytesReceived == 0, "\(again.stdout)")

            // One object replaced on the store: its ETag in the listing differs, so it is fetched.
            let path = TestOrigin.s3Path(bucket: Self.bucket, key: "r/7.bin")
            origin.changeObject(at: path)
            origin.resetLog()
            let changed = try await CLI.run(command, in: scratch.url, environment: Self.environment)
            #expect(changed.status == 0, "\(changed.stderr)")
            #expect(
                Set(Self.objectRequests(origin).map(\.path)) == [path], "\(Self.objectRequests(origin).map(\.path))")
            #expect(try await TestData.sha256(of: scratch.path("out/7.bin")) == origin.object(at: path)!.sha256)

            origin.resetLog()
            let rechecked = try await CLI.run(command + ["--recheck"], in: scratch.url, environment: Self.environment)
            #expect(rechecked.status == 0, "\(rechecked.stderr)")
            #expect(Self.objectRequests(origin).count >= 300, "--recheck confirms each file with the store")
        }
    }

    @Test("an object replaced mid-download (412 to If-Match): exit 0 with the new version, byte for byte")
    func replacedMidDownload() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            let key = "m/replaced.bin"
            let path = TestOrigin.s3Path(bucket: Self.bucket, key: key)
            origin.addS3Object(TestObject(size: 24 << 20, seed: 60), bucket: Self.bucket, key: key)
            origin.updateFaults { $0.changeAfterBodyBytes = .init(path: path, bytes: 6 << 20) }
            let result = try await CLI.run(
                [
                    "get", "s3://\(Self.bucket)/\(key)", "-o", "replaced.bin", "--endpoint-url", origin.baseURL,
                    "--no-sign-request", "-c", "4",
                ],
                in: scratch.url, environment: Self.environment)
            #expect(result.status == 0, "\(result.stderr)")
            let current = try #require(origin.object(at: path))
            #expect(current.seed == 61, "the origin replaced the object")
            #expect(try await TestData.sha256(of: scratch.path("replaced.bin")) == current.sha256)
            #expect(origin.requests.contains { $0.status == 412 }, "the store answered 412 to If-Match")
            #expect(result.stderr.contains("changed"), "the message says the object changed: \(result.stderr)")
        }
    }

    @Test("a listing page answered 503 is asked again on the policy's backoff; one never answered gives up, saying so")
    func listingRetries() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            let objects = (0..<3).map { TestObject(size: 10_000 + Int64($0), seed: 300 + UInt64($0)) }
            for (index, object) in objects.enumerated() {
                origin.addS3Object(object, bucket: Self.bucket, key: "t/\(index).bin")
            }
            // The first two requests (the listing's) are refused, the third answered.
            origin.updateFaults {
                $0.s3Listing = .init()
                $0.failures = .init(firstRequests: 2, status: 503)
            }
            let command = Self.prefixCommand(origin, "t/", ["--json", "-q"])
            let passed = try await CLI.run(command, in: scratch.url, environment: Self.environment)
            #expect(passed.status == 0, "\(passed.stderr)")
            for (index, object) in objects.enumerated() {
                #expect(try await TestData.sha256(of: scratch.path("out/\(index).bin")) == object.sha256)
            }
            let listings = origin.requests.filter { ($0.query ?? "").contains("list-type=2") }
            #expect(listings.map(\.status) == [503, 503, 200], "\(listings.map(\.status))")

            // Never answered: three tries, then the error says how many it took.
            origin.resetLog()
            origin.updateFaults { $0.failures = .init(firstRequests: 1_000, status: 503) }
            let failed = try await CLI.run(
                Self.prefixCommand(origin, "t/", ["-q", "--max-tries", "3"]), in: scratch.url,
                environment: Self.environment)
            #expect(failed.status != 0)
            #expect(failed.stderr.contains("gave up after 3 tries"), "\(failed.stderr)")
            #expect(origin.requests.count == 3, "\(origin.requests.map(\.status))")
        }
    }
}

/// The fields of `swoop get -r --json` these tests read.
private struct PrefixSummary: Decodable {
    struct Skip: Decodable {
        var url: String
        var key: String
        var reason: String
    }

    var ok: Bool
    var files: Int
    var succeeded: Int
    var alreadyComplete: Int
    var bytesReceived: Int64
    var skipped: [Skip]
}

/// File names as bytes: Foundation's `String`s compare NFC and NFD names equal.
enum ByteNames {
    /// The names in `directory`, as the kernel gives them (no `.` or `..`).
    static func list(_ directory: String) throws -> [[UInt8]] {
        guard let handle = opendir(directory) else { throw TestFailure("cannot open \(directory)") }
        defer { closedir(handle) }
        var names: [[UInt8]] = []
        while let entry = readdir(handle) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                Array(raw.prefix { $0 != 0 })
            }
            if name != [0x2E] && name != [0x2E, 0x2E] { names.append(name) }
        }
        return names
    }

    /// The bytes of the file at `path`, opened by exactly these bytes.
    static func read(_ path: String) throws -> [UInt8] {
        let descriptor = open(path, O_RDONLY)
        guard descriptor >= 0 else { throw TestFailure("cannot open \(path.debugDescription)") }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
            guard count > 0 else { break }
            bytes += buffer[0..<count]
        }
        return bytes
    }
}
