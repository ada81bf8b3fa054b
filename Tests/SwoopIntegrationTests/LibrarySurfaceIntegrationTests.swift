import Foundation
import Swoop
import SwoopTestOrigin
import SystemPackage
import Testing

/// The library's progress sequence, file-path targets and local errors, against the test origin.
@Suite("Library surface (downloads)")
struct LibrarySurfaceIntegrationTests {
    @Test("progressUpdates: reports on the caller's task while it runs, ending with the download")
    func progressSequence() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            let object = TestObject(size: 16 << 20, seed: 31)
            origin.addObject(object, at: "/p.bin")
            // 4 connections at 2 MiB/s each: about 2 s, 20 reports at 100 ms.
            origin.updateFaults { $0.throttleBytesPerSecond = 2 << 20 }
            var configuration = quickConfiguration(connections: 4)
            configuration.progressInterval = .milliseconds(100)
            try await withDownloader(configuration) { downloader in
                let task = try downloader.start(
                    DownloadRequest(url: URL(string: origin.url("/p.bin"))!), to: FilePath(scratch.path("p.bin")))
                var seen: [Int64] = []
                for await progress in task.progressUpdates {
                    seen.append(progress.bytesDone)
                }
                // The loop ended by itself: the download is over.
                let result = try await task.result()
                #expect(result.bytes == object.size)
                // How many depends on when this task is scheduled (unread reports give way to newer
                // ones), so only that some came, in order, within the object.
                #expect(!seen.isEmpty && seen.allSatisfy { $0 <= object.size }, "\(seen) over \(result.duration)")
                #expect(seen == seen.sorted(), "bytes done never goes back")
                var late = 0
                for await _ in task.progressUpdates { late += 1 }
                #expect(late == 0, "a finished download's sequence ends at once")
            }
            #expect(try await TestData.sha256(of: scratch.path("p.bin")) == object.sha256)
        }
    }

    @Test("a target on a virtual file system (/proc) is named for what it is, not 'removed'")
    func virtualFileSystem() async throws {
        try await withTestOrigin { origin in
            origin.addObject(TestObject(size: 1000, seed: 32), at: "/v.bin")
            try await withDownloader(quickConfiguration()) { downloader in
                do throws(DownloadError) {
                    _ = try await downloader.download(
                        DownloadRequest(url: origin.url("/v.bin")), to: "/proc/swoop-\(getpid()).bin")
                    Issue.record("a file was created under /proc")
                } catch {
                    #expect(error.kind == .localIO, "\(error)")
                    #expect(error.reason.contains("virtual file system"), "\(error.message)")
                    #expect(!error.reason.contains("removed"), "\(error.message)")
                    #expect(error.remedy == .chooseWritableLocation)
                }
            }
        }
    }
}
