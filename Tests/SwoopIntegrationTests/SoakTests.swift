import Foundation
import Swoop
import SwoopTestOrigin
import Testing

@Suite("Soak", .serialized)
struct SoakTests {
    @Test("256 MiB over 16 connections from an origin that drops ~20% of responses and 503s the first tries")
    func soak() async throws {
        try await exclusively {
            let scratch = try Scratch()
            defer { scratch.cleanup() }
            try await withTestOrigin(threads: 2) { origin in
                let object = TestObject(size: 256 << 20, seed: 99)
                origin.addObject(object, at: "/soak.bin")
                origin.updateFaults {
                    $0.drops = .init(probability: 0.2)
                    $0.failures = .init(firstRequests: 8, status: 503, retryAfterSeconds: 0)
                }
                var configuration = quickConfiguration(connections: 16, maxTries: 12)
                configuration.retry.baseDelay = .milliseconds(50)
                configuration.retry.maxDelay = .seconds(1)
                // Only the origin's faults may cause retries here: a connection slowed past a short
                // stall or connect timeout by a machine running other suites (23 retries against
                // 22 faults once in CI) is not one of them.
                configuration.timeout.stall = .seconds(30)
                configuration.timeout.connect = .seconds(30)
                let started = ContinuousClock.now
                let result = try await withDownloader(configuration) {
                    try await $0.download(DownloadRequest(url: origin.url("/soak.bin")), to: scratch.path("soak.bin"))
                }
                let elapsed = ContinuousClock.now - started
                #expect(try await TestData.sha256(of: scratch.path("soak.bin")) == object.sha256)
                let dropped = origin.requests.filter { $0.faultApplied?.contains("drop") == true }.count
                let failed = origin.requests.filter { $0.status == 503 }.count
                print(
                    "soak: 256 MiB, 16 connections: \(result.retries) retries (\(dropped) dropped responses, \(failed) "
                        + "x 503) in \(elapsed), \(result.requests) requests, \(result.bytesReceived) bytes received"
                )
                #expect(failed == 8)
                #expect(dropped > 0)
                // Every 503 is retried; a drop is retried unless it hit a response the client had
                // already cut short (a steal), so drops bound the rest from above.
                #expect(result.retries >= failed)
                #expect(result.retries <= failed + dropped)
                #expect(elapsed < MachineLoad.bound(.seconds(120)))
            }
        }
    }
}
