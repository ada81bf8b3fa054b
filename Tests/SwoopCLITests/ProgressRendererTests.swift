import Swoop
import Testing

@testable import SwoopCLI

/// What the progress line starts with: nothing until a report has something to show.
@Suite("Progress renderer")
struct ProgressRendererTests {
    private func report(
        bytes: Int64, of total: Int64?, connections: Int, waiting: DownloadProgress.Wait? = nil
    ) -> DownloadProgress {
        DownloadProgress(
            bytesDone: bytes, totalBytes: total, bytesPerSecond: 0, activeConnections: connections,
            connectionTarget: nil, elapsed: .seconds(1), waiting: waiting)
    }

    @Test("a probe that has not decided, and a download complete at once, start no line")
    func nothingToShow() {
        // The probe of a rerun, however long a busy machine makes it take.
        #expect(!ProgressRenderer.worthStarting(report(bytes: 0, of: nil, connections: 0)))
        // The last report of a rerun of a finished download: complete, nothing moved.
        #expect(!ProgressRenderer.worthStarting(report(bytes: 1 << 20, of: 1 << 20, connections: 0)))
        #expect(!ProgressRenderer.worthStarting(report(bytes: 0, of: 0, connections: 0)))
    }

    @Test("a transfer under way, a resumed one and a wait for a server start the line")
    func somethingToShow() {
        #expect(ProgressRenderer.worthStarting(report(bytes: 0, of: 1 << 20, connections: 1)))
        #expect(ProgressRenderer.worthStarting(report(bytes: 4096, of: nil, connections: 0)))
        #expect(ProgressRenderer.worthStarting(report(bytes: 1 << 19, of: 1 << 20, connections: 0)))
        let wait = DownloadProgress.Wait(
            server: "127.0.0.1:8080", cause: "connection refused", duration: .seconds(3), nextTry: .seconds(1),
            limit: nil)
        #expect(ProgressRenderer.worthStarting(report(bytes: 0, of: nil, connections: 0, waiting: wait)))
    }

    @Test("an object that changed on the server: the line says so, with the bytes fetched again")
    func objectChanged() {
        var progress = report(bytes: 1 << 20, of: 16 << 20, connections: 4)
        #expect(!ProgressRenderer.describe(progress).contains("changed"))
        progress.objectChanges = 1
        progress.bytesRefetched = 12 << 20
        let line = ProgressRenderer.describe(progress)
        #expect(line.contains("object changed: started over, 12.0 MiB fetched again"), "\(line)")
        progress.objectChanges = 2
        #expect(ProgressRenderer.describe(progress).contains("started over 2 times"))
    }
}
