import Foundation
import Swoop
import SwoopTestOrigin
import Synchronization
import Testing
@testable import SwoopStore

/// One object fetched in shares by several `swoop get URL --shard K/N` processes into one part
/// file (issue 58): each share from its own client address, against an origin that caps each
/// address as a CDN does; shares run one after another (nothing at the target until the last),
/// a share killed and run again, and the object changing between the shares' starts, honestly
/// (new validators: refused) and under validators that lie (the seams show it: nothing published).
@Suite("One object in shares", .serialized)
struct SharedObjectTests {
    private static let MiB: Int64 = 1 << 20

    /// One share's `--json` summary.
    struct ShareSummary: Decodable {
        var ok: Bool
        var share: String?
        var shareBytes: Int64?
        var sharesComplete: Int?
        var finishedObject: Bool?
        var seamsChecked: Int?
        var alreadyComplete: Bool?
        var receivedBytes: Int64?
        var verified: [Verified]?
        var digestsFromShares: Int?
        var error: String?

        struct Verified: Decodable {
            var source: String
        }
    }

    private static func summary(_ result: CLI.Result) throws -> ShareSummary {
        try JSONDecoder().decode(ShareSummary.self, from: Data(result.stdout.utf8))
    }

    /// `swoop get URL -o obj.bin --shard K/N --json`, with any `extra` arguments.
    private static func share(
        _ index: Int, of count: Int, url: String, in scratch: Scratch, _ extra: [String] = [], name: String = "obj.bin"
    ) throws -> CLI.Running {
        try CLI.start([url, "-o", name, "--shard", "\(index)/\(count)", "--json", "-q"] + extra, in: scratch.url)
    }

    /// Runs shares `indices` of `count` one after another, each expected to exit 0; their results.
    @discardableResult
    private static func runShares(
        _ indices: some Sequence<Int>, of count: Int, url: String, in scratch: Scratch, _ extra: [String] = [],
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> [CLI.Result] {
        var results: [CLI.Result] = []
        for index in indices {
            let result = try await share(index, of: count, url: url, in: scratch, extra).wait(timeout: .seconds(120))
            #expect(result.status == 0, "\(result.stderr)", sourceLocation: sourceLocation)
            results.append(result)
        }
        return results
    }

    /// The bytes share `share` of the object at `target` holds, from its map: what a resumed run of
    /// it must not ask for again.
    static func heldRanges(target: String, share: ObjectShare) -> [ByteRange] {
        guard case .success(let map) = SegmentMapFile.read(at: DownloadPaths(target: target, share: share).map) else {
            return []
        }
        let foreign = share.foreignRanges(of: map.layout)
        return map.completeRanges.flatMap { $0.subtracting(foreign) }
    }

    /// The most held bytes any one request for `path` (from `address`, or from anyone) asked for
    /// again (its overlap with the bytes around it, a seam's window: a few KiB), the held bytes all
    /// of them asked for, and the bytes all of them sent. A request without a range asks for all.
    private static func askedAgain(
        _ origin: TestOrigin, _ path: String, held: [ByteRange], from address: String? = nil
    ) -> (most: Int64, total: Int64, sent: Int64) {
        var most: Int64 = 0
        var total: Int64 = 0
        var sent: Int64 = 0
        for request in origin.requests
        where request.path == path && (address == nil || request.clientAddress == address) {
            sent += request.bodyBytesSent
            var asked = ByteRange(0, .max)
            if let value = request.header("range"), value.hasPrefix("bytes=") {
                let ends = value.dropFirst(6).split(separator: "-", omittingEmptySubsequences: false).map { Int64($0) }
                guard ends.count == 2, let first = ends[0] else { continue }
                asked = ByteRange(first, (ends[1] ?? .max - 1) + 1)
            }
            let again = held.reduce(0) { $0 + $1.clamped(to: asked).count }
            most = max(most, again)
            total += again
        }
        return (most, total, sent)
    }

    /// A killed share's rerun (`killed`, e.g. "share 1"; `rerun`, how the figures name it) asked only
    /// for its missing bytes: no request asked for more of the bytes it held (`held`, `heldRanges`)
    /// than its overlap or a seam's window, and it received at least the missing bytes, bounded
    /// loosely above (under a per-address cap the end of a run cuts requests short and steals their
    /// tails, whose bytes in flight arrive twice). Prints the figures.
    static func expectOnlyMissingAsked(
        _ origin: TestOrigin, _ path: String, held: DownloadStatus.Share, heldRanges: [ByteRange],
        killed: String, rerun: String, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let missing = held.bytes - held.bytesDone
        let (again, _, fetched) = askedAgain(origin, path, held: heldRanges)
        print(
            "\(killed) killed with \(held.bytesDone) of \(held.bytes) bytes held; \(rerun) fetched \(fetched) bytes "
                + "for \(missing) missing (the seams, the overlap and the requests cut short at the end included); "
                + "no request asked for more than \(again) held bytes")
        #expect(again <= 2 * 4096, "a request asked for \(again) bytes held", sourceLocation: sourceLocation)
        #expect(fetched >= missing && fetched <= 2 * missing + 2 * MiB, sourceLocation: sourceLocation)
    }

    /// Body bytes the origin sent to `address` (or to anyone) for `path`.
    private static func served(_ origin: TestOrigin, _ path: String, to address: String? = nil) -> Int64 {
        origin.requests.filter { $0.path == path && (address == nil || $0.clientAddress == address) }
            .reduce(0) { $0 + $1.bodyBytesSent }
    }

    @Test("four shares at once, each from its own address under a per-address cap: the object whole, once")
    func fourAtOnce() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            let object = TestObject(size: 48 * Self.MiB + 12_345, seed: 5801)
            origin.addObject(object, at: "/obj.bin")
            origin.updateFaults { $0.perClientBytesPerSecond = Int(16 * Self.MiB) }
            let runs = try (0..<4).map {
                try Self.share(
                    $0, of: 4, url: origin.url("/obj.bin"), in: scratch, ["--interface", "127.0.0.\($0 + 2)"])
            }
            var summaries: [ShareSummary] = []
            for run in runs {
                let result = try await run.wait(timeout: .seconds(300))
                #expect(result.status == 0, "\(result.stderr)")
                summaries.append(try Self.summary(result))
            }
            #expect(try await TestData.sha256(of: scratch.path("obj.bin")) == object.sha256)
            #expect(summaries.filter { $0.finishedObject == true }.count == 1, "one task published the object")
            let finisher = try #require(summaries.first { $0.finishedObject == true })
            #expect(finisher.sharesComplete == 4 && finisher.seamsChecked ?? 0 > 0)
            #expect(!FileManager.default.fileExists(atPath: scratch.path(".swoop")), "no working file is left")
            // Each address asked for its own share (and the overlap of its requests, and for the
            // finishing task the seams' windows), not the object: judged on what its requests asked
            // for, not on what the origin sent, because under the cap the requests cut short at the
            // end had their bytes in flight sent too (3.06 MiB beyond a share once, on a loaded
            // machine), while another share's stripe is 4 MiB.
            let layout = ChunkLayout(objectSize: object.size)
            for index in 0..<4 {
                let address = "127.0.0.\(index + 2)"
                let share = try #require(ObjectShare(index: index, count: 4))
                let own: Int64 = share.ranges(of: layout).reduce(0) { $0 + $1.count }
                let (most, foreign, sent) = Self.askedAgain(
                    origin, "/obj.bin", held: share.foreignRanges(of: layout), from: address)
                print(
                    "share \(index): \(sent) bytes sent for its \(own); its requests asked for \(foreign) bytes of "
                        + "other shares, at most \(most) in one")
                #expect(summaries[index].shareBytes == own)
                #expect(sent >= own, "share \(index): \(sent) bytes sent")
                #expect(most <= 2 * 4096 && foreign <= Self.MiB, "share \(index): \(foreign) foreign bytes asked")
            }
        }
    }

    @Test("shares one after another: nothing at the target until the last; each resumable; a rerun confirms")
    func oneAfterAnother() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            let object = TestObject(size: 40 * Self.MiB + 777, seed: 5802)
            origin.addObject(object, at: "/obj.bin")
            for index in [2, 0, 1] {
                let result = try await Self.share(index, of: 4, url: origin.url("/obj.bin"), in: scratch).wait(
                    timeout: .seconds(120))
                #expect(result.status == 0, "\(result.stderr)")
                let summary = try Self.summary(result)
                #expect(
                    summary.finishedObject == false && summary.sharesComplete == [2, 0, 1].firstIndex(of: index)! + 1)
                #expect(!scratch.exists("obj.bin"), "nothing at the target before the last share")
            }
            let status = Downloader.status(of: scratch.path("obj.bin"))
            #expect(status.canResume && status.shares.count == 4)
            #expect(status.shares.map(\.isComplete) == [true, true, true, false], "\(status.shares)")
            #expect(status.size == object.size && status.bytesDone == object.size - status.shares[3].bytes)
            // Without --shard, the part file the shares write is not emptied: a clear error instead.
            let plain = try await CLI.run([origin.url("/obj.bin"), "-o", "obj.bin", "-q"], in: scratch.url)
            #expect(plain.status == 5 && plain.stderr.contains("being fetched in 4 shares"), "\(plain.stderr)")

            origin.resetLog()
            let last = try await Self.share(3, of: 4, url: origin.url("/obj.bin"), in: scratch).wait(
                timeout: .seconds(120))
            #expect(last.status == 0, "\(last.stderr)")
            let summary = try Self.summary(last)
            #expect(summary.finishedObject == true && summary.sharesComplete == 4)
            // 40 MiB in 4 shares: stripes of 4 MiB, 11 of them, 10 seams.
            #expect(summary.seamsChecked == 10)
            #expect(try await TestData.sha256(of: scratch.path("obj.bin")) == object.sha256)
            // Its own 8 MiB and the seams' windows (alone: 8 MiB + 93 KB), not another share's
            // 4 MiB stripe: judged on what its requests asked for, since requests cut short and
            // stolen at the end add the bytes they had in flight to what the origin sent (+1.1 and
            // +1.6 MB in two clean-clone runs).
            let layout = ChunkLayout(objectSize: object.size)
            let (most, foreign, served) = Self.askedAgain(
                origin, "/obj.bin", held: try #require(ObjectShare(index: 3, count: 4)).foreignRanges(of: layout))
            print(
                "shares one after another: the last share was served \(served) bytes for its \(summary.shareBytes ?? 0)"
                    + "; its requests asked for \(foreign) bytes of other shares, at most \(most) in one")
            #expect(most <= 2 * 4096 && foreign <= Self.MiB)

            // A finished share run again: the file is confirmed, nothing fetched again.
            origin.resetLog()
            let again = try await Self.share(1, of: 4, url: origin.url("/obj.bin"), in: scratch).wait(
                timeout: .seconds(120))
            let confirmed = try Self.summary(again)
            #expect(again.status == 0 && confirmed.alreadyComplete == true, "\(again.stderr)")
            #expect(Self.served(origin, "/obj.bin") <= 2048)
        }
    }

    @Test("a share killed with SIGKILL and run again fetches only its missing bytes, then publishes the object")
    func killedShareResumes() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            let object = TestObject(size: 32 * Self.MiB, seed: 5803)
            origin.addObject(object, at: "/obj.bin")
            // 8 MiB a share at 2 MiB/s an address: about 4 s each. Share 1's address is sent 3 MiB and
            // then nothing: it is killed mid-way however slowly a loaded machine gets to the kill.
            origin.updateFaults {
                $0.perClientBytesPerSecond = Int(2 * Self.MiB)
                $0.clientBodyLimits = ["127.0.0.3": 3 * Self.MiB]
            }
            let runs = try (0..<4).map {
                try Self.share(
                    $0, of: 4, url: origin.url("/obj.bin"), in: scratch, ["--interface", "127.0.0.\($0 + 2)"])
            }
            let target = scratch.path("obj.bin")
            var deadline = MachineLoad.Deadline(.seconds(30))
            while (Downloader.status(of: target).shares.first { $0.share.index == 1 }?.bytesDone ?? 0) < 2 * Self.MiB {
                if deadline.exceeded() {
                    Issue.record("share 1 checkpointed nothing in \(deadline.bound())")
                    break
                }
                try await Task.sleep(for: .milliseconds(50))
            }
            runs[1].signal(SIGKILL)
            _ = try await runs[1].wait(timeout: .seconds(60))
            for index in [0, 2, 3] {
                let result = try await runs[index].wait(timeout: .seconds(300))
                #expect(result.status == 0, "\(result.stderr)")
                #expect(try Self.summary(result).finishedObject == false)
            }
            #expect(!scratch.exists("obj.bin"), "nothing at the target while share 1 is missing")
            let held = try #require(Downloader.status(of: target).shares.first { $0.share.index == 1 })
            #expect(held.bytesDone > 0 && held.bytesDone < held.bytes, "\(held)")
            let heldRanges = Self.heldRanges(target: target, share: try #require(ObjectShare(index: 1, count: 4)))
            origin.updateFaults { $0.clientBodyLimits = [:] }
            origin.resetLog()
            let rerun = try await Self.share(
                1, of: 4, url: origin.url("/obj.bin"), in: scratch,
                [
                    "--interface", "127.0.0.3",
                ]
            ).wait(timeout: .seconds(300))
            #expect(rerun.status == 0, "\(rerun.stderr)")
            #expect(try Self.summary(rerun).finishedObject == true)
            #expect(try await TestData.sha256(of: target) == object.sha256)
            Self.expectOnlyMissingAsked(
                origin, "/obj.bin", held: held, heldRanges: heldRanges, killed: "shared object: share 1",
                rerun: "its rerun")
        }
    }

    @Test("the object replaced (new validators) between the shares' starts: refused; --force starts over")
    func changeBetweenStarts() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            origin.addObject(TestObject(size: 20 * Self.MiB, seed: 5804), at: "/obj.bin")
            let first = try await Self.share(0, of: 2, url: origin.url("/obj.bin"), in: scratch).wait(
                timeout: .seconds(120))
            #expect(first.status == 0, "\(first.stderr)")
            let newer = TestObject(size: 20 * Self.MiB, seed: 5805)
            origin.addObject(newer, at: "/obj.bin")
            let second = try await Self.share(1, of: 2, url: origin.url("/obj.bin"), in: scratch).wait(
                timeout: .seconds(120))
            #expect(second.status == 4, "\(second.stderr)")
            let failure = try Self.summary(second).error ?? ""
            #expect(failure.contains("changed") && failure.contains("--force"), "\(failure)")
            #expect(!scratch.exists("obj.bin"))
            // Every share again with --force: the old shares are discarded, the new version fetched.
            try await Self.runShares([0, 1], of: 2, url: origin.url("/obj.bin"), in: scratch, ["--force"])
            #expect(try await TestData.sha256(of: scratch.path("obj.bin")) == newer.sha256)
        }
    }

    @Test("validators that lie (kept after a replace): the seams show two versions, nothing is published")
    func lyingValidatorsAreCaughtAtTheSeams() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            // The server computes validators once per path and sends them ever after.
            origin.updateFaults { $0.metadataFromFirstRequest = true }
            origin.addObject(TestObject(size: 24 * Self.MiB, seed: 5806), at: "/obj.bin")
            try await Self.runShares([0, 1], of: 4, url: origin.url("/obj.bin"), in: scratch)
            let newer = TestObject(size: 24 * Self.MiB, seed: 5807)
            origin.addObject(newer, at: "/obj.bin")
            let third = try await Self.share(2, of: 4, url: origin.url("/obj.bin"), in: scratch).wait(
                timeout: .seconds(120))
            #expect(third.status == 0, "share 2 cannot tell: \(third.stderr)")
            let last = try await Self.share(3, of: 4, url: origin.url("/obj.bin"), in: scratch).wait(
                timeout: .seconds(120))
            #expect(last.status == 4, "\(last.stderr)")
            #expect((try Self.summary(last).error ?? "").contains("two versions"))
            #expect(!scratch.exists("obj.bin"), "a mixed file is never published")
            #expect(Downloader.status(of: scratch.path("obj.bin")).shares.isEmpty, "the shares were discarded")
            // The array again: every share fetches what the server serves now.
            try await Self.runShares(0..<4, of: 4, url: origin.url("/obj.bin"), in: scratch)
            #expect(try await TestData.sha256(of: scratch.path("obj.bin")) == newer.sha256)
        }
    }

    @Test("a share without stripes (a small object) completes at once; another share count is refused")
    func shareWithoutStripes() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            // 10 MiB in stripes of 4 MiB: shares 0, 1 and 2 hold one each, share 3 none.
            let object = TestObject(size: 10 * Self.MiB, seed: 5808)
            origin.addObject(object, at: "/obj.bin")
            let empty = try await Self.share(3, of: 4, url: origin.url("/obj.bin"), in: scratch).wait(
                timeout: .seconds(120))
            #expect(empty.status == 0, "\(empty.stderr)")
            let summary = try Self.summary(empty)
            #expect(summary.shareBytes == 0 && summary.sharesComplete == 1 && summary.finishedObject == false)
            let other = try await Self.share(0, of: 2, url: origin.url("/obj.bin"), in: scratch).wait(
                timeout: .seconds(120))
            #expect(other.status == 5 && other.stderr.contains("being fetched in 4 shares"), "\(other.stderr)")
            try await Self.runShares(0..<3, of: 4, url: origin.url("/obj.bin"), in: scratch)
            #expect(try await TestData.sha256(of: scratch.path("obj.bin")) == object.sha256)
        }
    }

    @Test("the last share checks the object's digest: a published CRC verified, a wrong --checksum publishes nothing")
    func digestOfTheWholeObject() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            let size = 20 * Self.MiB + 4321
            let bytes = Payload.bytes(seed: 5809, offset: 0, count: Int(size))
            let crc = bytes.withUnsafeBytes { CRC.crc64nvme.update(0, $0) }
            let digest = Data((0..<8).reversed().map { UInt8(truncatingIfNeeded: crc >> (8 * UInt64($0))) })
            var object = TestObject(size: size, seed: 5809)
            object.headers = ["x-amz-checksum-crc64nvme": digest.base64EncodedString()]
            origin.addObject(object, at: "/obj.bin")
            let summaries = try await Self.runShares(0..<4, of: 4, url: origin.url("/obj.bin"), in: scratch)
                .map(Self.summary)
            #expect(summaries.last?.verified?.first?.source == "x-amz-checksum-crc64nvme", "\(summaries)")
            // One share (no seams): the published digest is checked too.
            let alone = try await Self.share(0, of: 1, url: origin.url("/obj.bin"), in: scratch, name: "one.bin").wait(
                timeout: .seconds(120))
            let one = try Self.summary(alone)
            #expect(alone.status == 0 && one.finishedObject == true && one.verified?.count == 1, "\(alone.stdout)")
            // Combined from the CRCs each share recorded of its stripes: the object is not read again.
            #expect(summaries.last?.digestsFromShares == 1)
            #expect(try await TestData.sha256(of: scratch.path("obj.bin")) == object.sha256)

            // An expected CRC: combined the same way; an expected SHA-256: the last share reads the file.
            let hex = String(crc, radix: 16)
            let expectedCRC = "crc64nvme=" + String(repeating: "0", count: 16 - hex.count) + hex
            let expectedSHA = try await "sha256=" + object.sha256
            for (name, checksum, combined) in [("crc.bin", expectedCRC, 1), ("sha.bin", expectedSHA, 0)] {
                var last: ShareSummary?
                for index in 0..<4 {
                    let result = try await Self.share(
                        index, of: 4, url: origin.url("/obj.bin"), in: scratch,
                        ["--checksum", checksum, "--no-verify"],
                        name: name
                    ).wait(timeout: .seconds(120))
                    #expect(result.status == 0, "\(result.stderr)")
                    last = try Self.summary(result)
                }
                #expect(
                    last?.verified?.count == 1 && last?.digestsFromShares == combined,
                    "\(name): \(String(describing: last))")
                #expect(try await TestData.sha256(of: scratch.path(name)) == object.sha256)
            }

            // A digest the bytes do not have: nothing at the target, the shares discarded.
            // Read from the file (SHA-256) or combined from the shares (a CRC).
            for wrong in ["sha256=" + String(repeating: "ab", count: 32), "crc64nvme=0123456789abcdef"] {
                for index in 0..<4 {
                    let result = try await Self.share(
                        index, of: 4, url: origin.url("/obj.bin"), in: scratch, ["--checksum", wrong], name: "other.bin"
                    ).wait(timeout: .seconds(120))
                    if index < 3 {
                        #expect(result.status == 0, "\(result.stderr)")
                    } else {
                        #expect(result.status != 0 && result.stderr.contains("checksum mismatch"), "\(result.stderr)")
                    }
                }
                #expect(!scratch.exists("other.bin"), "\(wrong): a file whose digest differs is never published")
                #expect(Downloader.status(of: scratch.path("other.bin")).shares.isEmpty, "the shares were discarded")
            }
        }
    }

    @Test("from code: a presigned URL that expired before the shares began: the pin, each run and the seams refresh it")
    func presignedURLExpired() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            let object = TestObject(size: 20 * Self.MiB, seed: 5812)
            origin.addObject(object, at: "/obj.bin")
            let validity = Duration.milliseconds(1500)
            origin.requireSignedURLs(validFor: validity)
            let calls = Mutex(0)
            let target = scratch.path("obj.bin")
            let expired = origin.signedURL("/obj.bin")
            // Past its validity (a lower bound on the clock: it holds on a loaded machine).
            try await Task.sleep(for: validity + .milliseconds(200))
            var request = DownloadRequest(url: expired)
            request.urlProvider = { _ in
                calls.withLock { $0 += 1 }
                return origin.signedURL("/obj.bin")
            }
            try await withDownloader(quickConfiguration(connections: 4)) { downloader in
                for index in 0..<4 {
                    let share = try #require(ObjectShare(index: index, count: 4))
                    let result = try await downloader.download(request, share: share, to: target)
                    #expect(result.finishedObject == (index == 3) && result.sharesComplete == index + 1)
                    if index == 3 { #expect(result.seamsChecked > 0) }
                }
            }
            // The pin's lookup, each share's run, and the seams' check: each asked once at least.
            #expect(calls.withLock { $0 } >= 6, "\(calls.withLock { $0 }) fresh URLs")
            #expect(try await TestData.sha256(of: target) == object.sha256)
        }
    }
}
