import Swoop
import SwoopTestOrigin
import Testing

/// The object behind the URL changes while it downloads (its bytes, or the coding it is stored
/// with): the file ends as one whole object, or the download fails and keeps nothing.
extension FaultTests {
    @Test("the object changes mid-download: restart once from zero, never a mix")
    func changesMidDownload() async throws {
        try await exclusively {
            let scratch = try Scratch()
            defer { scratch.cleanup() }
            try await withTestOrigin { origin in
                origin.addObject(TestObject(size: 16 << 20, seed: 8), at: "/object.iso")
                origin.updateFaults {
                    $0.changeAfterRequests = 3
                    $0.throttleBytesPerSecond = 8 << 20
                }
                let target = scratch.path("object.iso")
                let result = try await withDownloader(quickConfiguration()) {
                    try await $0.download(DownloadRequest(url: origin.url("/object.iso")), to: target)
                }
                let changed = try #require(origin.object(at: "/object.iso"))
                #expect(changed.seed == 9)
                #expect(try await TestData.sha256(of: target) == changed.sha256, "the file is entirely the new version")
                #expect(origin.requests.contains { $0.status == 412 })
                #expect(result.bytes == changed.size)
            }
        }
    }

    @Test("with --on-change fail, a change mid-download fails and keeps nothing")
    func changesMidDownloadFails() async throws {
        try await exclusively {
            var configuration = quickConfiguration()
            configuration.files.onObjectChange = .fail
            try await download(
                TestObject(size: 16 << 20, seed: 10),
                faults: {
                    $0.changeAfterRequests = 3
                    $0.throttleBytesPerSecond = 8 << 20
                }, configuration: configuration, within: .seconds(20)
            ) { run, _ in
                expectFailure(run, .objectChanged, mentioning: "changed")
                #expect(!run.scratch.exists(part: "object.iso"))
            }
        }
    }

    @Test("a stored Content-Encoding: gzip is kept as stored, never decoded")
    func gzipStored() async throws {
        // The origin labels every response gzip and sends the object's bytes: those are the file.
        let object = TestObject(size: 4 << 20, seed: 16)
        try await download(object, faults: { $0.gzipEncoding = true }, within: .seconds(20)) { run, origin in
            let result = expectSuccess(run)
            #expect(result?.retries == 0)
            #expect(origin.requests.count > 1, "fetched in ranges: \(origin.requests.count) requests")
        }
    }

    @Test("a Content-Encoding that changes mid-download is a changed object: restart once, or fail if asked")
    func gzipChanges() async throws {
        // The probe's response says identity, every later one gzip: another representation.
        try await download(
            TestObject(size: 4 << 20, seed: 16),
            faults: {
                $0.gzipEncoding = true
                $0.honestFirstRequests = 1
            }, configuration: quickConfiguration(stall: .seconds(30)), within: .seconds(20)
        ) { run, origin in
            _ = expectSuccess(run)
            let fromTheStart = origin.requests.filter { $0.header("range")?.hasPrefix("bytes=0-") == true }
            #expect(fromTheStart.count == 2, "started over once")
        }
        var failing = quickConfiguration(stall: .seconds(30))
        failing.files.onObjectChange = .fail
        try await download(
            TestObject(size: 4 << 20, seed: 16),
            faults: {
                $0.gzipEncoding = true
                $0.honestFirstRequests = 1
            }, configuration: failing, within: .seconds(20)
        ) { run, _ in
            expectFailure(run, .objectChanged, mentioning: "Content-Encoding identity became gzip")
        }
    }
}
