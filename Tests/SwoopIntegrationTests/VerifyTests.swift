import Crypto
import Foundation
import SwoopTestOrigin
import Testing
@testable import Swoop
@testable import SwoopStore

/// Digests the server publishes, checked as the bytes arrive: each header kind against nginx
/// (`add_header`), a flipped byte on the server, a composite S3 checksum, `Content-Digest` per
/// response and a resume after `kill -9` against the test origin.
@Suite("Verifying published digests", .serialized)
struct VerifyTests {
    /// One way a server publishes a whole-object digest.
    struct Kind: CustomStringConvertible, Sendable {
        var name: String
        var header: String
        var value: @Sendable ([UInt8]) -> String
        var description: String { name }
    }

    private static func crc(_ crc: CRC, _ bytes: [UInt8]) -> UInt64 {
        bytes.withUnsafeBytes { crc.update(0, $0) }
    }

    private static func bigEndian(_ value: UInt64, bytes: Int) -> [UInt8] {
        (0..<bytes).reversed().map { UInt8(truncatingIfNeeded: value >> (8 * UInt64($0))) }
    }

    private static func base64(_ bytes: [UInt8]) -> String { Data(bytes).base64EncodedString() }

    static let kinds: [Kind] = [
        Kind(name: "Repr-Digest sha-256", header: "repr-digest") {
            "sha-256=:\(base64(Array(SHA256.hash(data: $0)))):"
        },
        Kind(name: "Repr-Digest sha-512", header: "repr-digest") {
            "sha-512=:\(base64(Array(SHA512.hash(data: $0)))):"
        },
        Kind(name: "x-goog-hash crc32c, md5", header: "x-goog-hash") {
            "crc32c=\(base64(bigEndian(crc(.crc32c, $0), bytes: 4))),md5=\(base64(Array(Insecure.MD5.hash(data: $0))))"
        },
        Kind(name: "x-amz-checksum-crc64nvme", header: "x-amz-checksum-crc64nvme") {
            base64(bigEndian(crc(.crc64nvme, $0), bytes: 8))
        },
        Kind(name: "x-amz-checksum-sha256", header: "x-amz-checksum-sha256") { base64(Array(SHA256.hash(data: $0))) },
        Kind(name: "x-oss-hash-crc64ecma", header: "x-oss-hash-crc64ecma") { String(crc(.crc64xz, $0)) },
    ]

    /// nginx serving `good.bin` and `bad.bin` (one byte flipped), both with `header: value`.
    private func serve(_ bytes: [UInt8], header: String, value: String, in scratch: Scratch) async throws -> Nginx {
        let config = ["good.bin", "bad.bin"].map { "location = /\($0) { add_header \(header) \"\(value)\"; }" }.joined(
            separator: "\n")
        let nginx = try await Nginx.start(extraServerConfig: config)
        try Data(bytes).write(to: nginx.root.appendingPathComponent("good.bin"))
        var flipped = bytes
        flipped[bytes.count / 2 + 12_345] ^= 0x01
        try Data(flipped).write(to: nginx.root.appendingPathComponent("bad.bin"))
        return nginx
    }

    private func object(size: Int, seed: UInt64) -> [UInt8] {
        Payload.bytes(seed: seed, offset: 0, count: size)
    }

    @Test("a published digest is verified: a match succeeds, a flipped byte fails and keeps nothing", arguments: kinds)
    func verifiesEachHeaderKind(kind: Kind) async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        let bytes = object(size: (6 << 20) + 333, seed: 5)
        let nginx = try await serve(bytes, header: kind.header, value: kind.value(bytes), in: scratch)
        defer { nginx.stop() }

        let good = try await CLI.run([nginx.url("/good.bin"), "-c", "4", "--json"], in: scratch.url)
        #expect(good.status == 0, "stderr: \(good.stderr)")
        #expect(good.stdout.contains("\"source\":\"\(kind.header)\""), "stdout: \(good.stdout)")
        #expect(try await TestData.sha256(of: scratch.path("good.bin")) == TestData.sha256(bytes))

        let bad = try await CLI.run([nginx.url("/bad.bin"), "-c", "4"], in: scratch.url)
        #expect(bad.status != 0)
        #expect(
            bad.stderr.contains("checksum mismatch") && bad.stderr.contains(kind.header)
                && bad.stderr.contains(kind.value(bytes).prefix(12)),
            "stderr: \(bad.stderr)")
        #expect(!scratch.exists("bad.bin") && !scratch.exists(part: "bad.bin") && !scratch.exists(map: "bad.bin"))

        // --no-verify: the user asked for the server's bytes as they are.
        let unchecked = try await CLI.run([nginx.url("/bad.bin"), "-c", "4", "--no-verify", "--json"], in: scratch.url)
        #expect(unchecked.status == 0, "stderr: \(unchecked.stderr)")
        #expect(!unchecked.stdout.contains("\"verified\""))
        #expect(scratch.exists("bad.bin"))
    }

    @Test("a composite S3 checksum is not checked, and -v says so")
    func compositeIsNotChecked() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        let bytes = object(size: 3 << 20, seed: 6)
        let nginx = try await serve(bytes, header: "x-amz-checksum-crc32c", value: "sOO8/Q==-3", in: scratch)
        defer { nginx.stop() }
        let run = try await CLI.run([nginx.url("/good.bin"), "-v", "--json"], in: scratch.url)
        #expect(run.status == 0, "stderr: \(run.stderr)")
        #expect(run.stderr.contains("composite") && run.stderr.contains("not checked"), "stderr: \(run.stderr)")
        #expect(!run.stdout.contains("\"verified\""))
    }

    @Test("--checksum and a server digest together: both verified, no second read of the file")
    func expectedAndPublished() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        let bytes = object(size: 5 << 20, seed: 8)
        let kind = Self.kinds.first { $0.header == "x-oss-hash-crc64ecma" }!
        let nginx = try await serve(bytes, header: kind.header, value: kind.value(bytes), in: scratch)
        defer { nginx.stop() }
        let sha = TestData.sha256(bytes)
        let run = try await CLI.run([nginx.url("/good.bin"), "--checksum", "sha256=\(sha)", "--json"], in: scratch.url)
        #expect(run.status == 0, "stderr: \(run.stderr)")
        #expect(
            run.stdout.contains("\"source\":\"expected checksum\"")
                && run.stdout.contains("\"source\":\"x-oss-hash-crc64ecma\""), "\(run.stdout)")
        let crcOnly = try await CLI.run(
            [
                nginx.url("/good.bin"), "-o", "c.bin", "--checksum",
                "crc64xz=\(String(Self.crc(.crc64xz, bytes), radix: 16))", "--no-verify", "--json",
            ], in: scratch.url)
        #expect(crcOnly.status == 0 && crcOnly.stdout.contains("\"algorithm\":\"crc64xz\""), "\(crcOnly.stderr)")
    }

    @Test("-o -: the stream is checked as it goes out; a mismatch exits non-zero after the last byte")
    func streamIsVerified() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        let bytes = object(size: 5 << 20, seed: 9)
        let kind = Self.kinds.first { $0.header == "x-goog-hash" }!
        let nginx = try await serve(bytes, header: kind.header, value: kind.value(bytes), in: scratch)
        defer { nginx.stop() }
        for (name, good) in [("good.bin", true), ("bad.bin", false)] {
            let out = scratch.path("\(name).out")
            let command = "'\(CLI.executable)' '\(nginx.url("/" + name))' -o - -c 4 --stream-window 4M > '\(out)'"
            let shell = try ChildProcess(
                executable: "/bin/sh", arguments: ["-c", command + " 2>'\(out).err'"])
            let status = await shell.wait(timeout: .seconds(120))
            let stderr = (try? String(contentsOfFile: out + ".err", encoding: .utf8)) ?? ""
            let written = try Data(contentsOf: URL(fileURLWithPath: out))
            #expect(written.count == bytes.count, "\(name): every byte goes out either way")
            if good {
                #expect(status == 0, "stderr: \(stderr)")
                #expect(TestData.sha256(written) == TestData.sha256(bytes))
            } else {
                #expect(status == 1, "stderr: \(stderr)")
                #expect(
                    stderr.contains("checksum mismatch") && stderr.contains("x-goog-hash")
                        && stderr.contains("discard them"), "stderr: \(stderr)")
                #expect(!stderr.contains("incomplete"))
            }
        }
    }

    @Test("Content-Digest: a response with a flipped byte is fetched again, the file comes out right")
    func contentDigestRetriesABadResponse() async throws {
        try await withTestOrigin { origin in
            let object = TestObject(size: 8 << 20, seed: 12)
            origin.addObject(object, at: "/o.bin")
            origin.updateFaults {
                $0.contentDigest = true
                $0.flipByte = .init(offset: (5 << 20) + 77, responses: 1)
            }
            let scratch = try Scratch()
            defer { scratch.cleanup() }
            let result = try await withDownloader(quickConfiguration(connections: 4)) { downloader in
                try await downloader.download(DownloadRequest(url: origin.url("/o.bin")), to: scratch.path("o.bin"))
            }
            #expect(try await TestData.sha256(of: scratch.path("o.bin")) == object.sha256)
            #expect(result.retries >= 1)
            let flipped = origin.requests.filter { $0.faultApplied?.contains("flip") == true }
            #expect(flipped.count == 1)
        }
    }

    @Test("Content-Digest that never matches: the download fails after its tries and keeps what was good")
    func contentDigestAlwaysWrong() async throws {
        try await withTestOrigin { origin in
            let object = TestObject(size: 8 << 20, seed: 13)
            origin.addObject(object, at: "/o.bin")
            origin.updateFaults {
                $0.contentDigest = true
                $0.flipByte = .init(offset: (6 << 20) + 1)
            }
            let scratch = try Scratch()
            defer { scratch.cleanup() }
            let failure: DownloadError? = try await withDownloader(quickConfiguration(connections: 4, maxTries: 3)) {
                downloader in
                do {
                    _ = try await downloader.download(
                        DownloadRequest(url: origin.url("/o.bin")), to: scratch.path("o.bin"))
                    return nil
                } catch let error as DownloadError {
                    return error
                }
            }
            let error = try #require(failure, "the download succeeded")
            #expect(error.message.contains("content-digest"), "\(error.message)")
            #expect(!scratch.exists("o.bin"))
            let status = Downloader.status(of: scratch.path("o.bin"))
            #expect(status.state == .partial && status.bytesDone > 0 && status.bytesDone < object.size)
        }
    }

    @Test("kill -9 mid-download, then resume: the CRC of the bytes already there is not computed again; it verifies")
    func resumeAfterKillStillVerifies() async throws {
        try await withTestOrigin { origin in
            let scratch = try Scratch()
            defer { scratch.cleanup() }
            let size = 64 << 20
            let bytes = object(size: size, seed: 14)
            let kind = Self.kinds.first { $0.header == "x-oss-hash-crc64ecma" }!
            var published = TestObject(size: Int64(size), seed: 14)
            published.headers = [kind.header: kind.value(bytes)]
            origin.addObject(published, at: "/good.bin")
            // 256 KiB/s per response, 4 connections: the 4 MiB awaited below arrive in about 4 s,
            // the whole in about a minute; the pace is lifted for the resumed run.
            origin.updateFaults { $0.throttleBytesPerSecond = 256 << 10 }
            let target = scratch.path("good.bin")
            let running = try CLI.start(
                [origin.url("/good.bin"), "-c", "4", "--checkpoint-interval", "0.2", "-q"], in: scratch.url)
            // Until the map records some CRC runs (a checkpoint after bytes arrived), at most 60 s.
            let mapPath = Downloader.workingFiles(of: target).map
            let runs = try await waitThenAct(
                within: .seconds(60),
                until: { () -> CRCRuns? in
                    guard let data = FileManager.default.contents(atPath: mapPath),
                        let map = try? SegmentMap.decode(Array(data)),
                        let recorded = map.crcRuns, recorded.runs.reduce(0, { $0 + $1.range.count }) >= 4 << 20
                    else { return nil }
                    return recorded
                },
                then: { _ in running.signal(SIGKILL) })
            _ = try await running.wait(timeout: .seconds(30))
            origin.updateFaults { $0.throttleBytesPerSecond = nil }
            let recorded = try #require(runs, "the map never recorded CRC runs")
            #expect(recorded.algorithm == .crc64xz)
            // Every recorded run is right.
            for run in recorded.runs {
                #expect(
                    run.crc == Self.crc(.crc64xz, Array(bytes[Int(run.range.lowerBound)..<Int(run.range.upperBound)])),
                    "run \(run.range)")
            }
            let resumed = try await CLI.run([origin.url("/good.bin"), "-c", "4", "--json"], in: scratch.url)
            #expect(resumed.status == 0, "stderr: \(resumed.stderr)")
            #expect(resumed.stdout.contains("\"source\":\"x-oss-hash-crc64ecma\""), "\(resumed.stdout)")
            let summary = try JSONSerialization.jsonObject(with: Data(resumed.stdout.utf8)) as? [String: Any]
            #expect((summary?["resumedBytes"] as? Int ?? 0) >= 4 << 20, "\(resumed.stdout)")
            #expect(try await TestData.sha256(of: target) == TestData.sha256(bytes))
        }
    }
}
