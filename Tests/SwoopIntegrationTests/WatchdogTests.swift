import Foundation
@testable import Swoop
import SwoopTestOrigin
import Testing

/// A download never waits forever: with no request in flight and no progress for longer than
/// any legitimate wait, it ends with an error naming what it waited for.
@Suite("Watchdog")
struct WatchdogTests {
    @Test(
        "a transfer stuck with nothing in flight ends with a clear error; the partial download is kept",
        .timeLimit(.minutes(1)))
    func stuckTransferEnds() async throws {
        let nginx = try await Nginx.start()
        defer { nginx.stop() }
        _ = try await nginx.addFile("stuck.bin", size: 8 << 20, seed: 21)
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        var configuration = Downloader.Configuration()
        configuration.connections = .fixed(4)
        configuration.timeout.connect = .seconds(1)
        configuration.timeout.stall = .seconds(1)
        configuration.retry.maxTries = 1
        configuration.retry.baseDelay = .milliseconds(10)
        configuration.retry.maxDelay = .milliseconds(100)
        // The probe's first MiB arrives; then the transfer sends nothing and sets no timer.
        configuration.tuning.faults.transferSendsNothing = true
        let started = ContinuousClock.now
        try await withDownloader(configuration) { downloader in
            do {
                _ = try await downloader.download(
                    DownloadRequest(url: nginx.url("/stuck.bin")), to: scratch.path("stuck.bin"))
                Issue.record("the stuck download should fail")
            } catch let error as DownloadError {
                #expect(error.message.contains("no request in flight and no progress"), "\(error)")
                #expect(error.message.contains("waiting for nothing"), "\(error)")
                #expect(error.remedy == .resume)
            }
        }
        // The limit is 1 s + 1 s + 10 ms; the watchdog looks every 250 ms.
        let took = ContinuousClock.now - started
        #expect(took >= .seconds(2) && took < MachineLoad.bound(.seconds(30)), "took \(took)")
        let kept = Downloader.status(of: scratch.path("stuck.bin"))
        #expect(kept.state == .partial && kept.bytesDone >= 1 << 20, "\(kept)")
        #expect(!scratch.exists("stuck.bin"))
    }
}
