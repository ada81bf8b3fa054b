import Foundation
import Swoop
import SwoopTestOrigin
import Testing

/// `Downloader.suggestedFileName(for: DownloadRequest)`: the file is named by the server's
/// `Content-Disposition`, never outside the chosen directory, with one extra request.
@Suite("Content-Disposition names (-J)")
struct RemoteHeaderNameTests {
    /// An object served at `/download?id=7`-like paths, named by `disposition`.
    private func named(_ disposition: String?, size: Int64 = 200_000, seed: UInt64 = 31) -> TestObject {
        var object = TestObject(size: size, seed: seed)
        object.contentDisposition = disposition
        return object
    }

    static let headerCases: [(disposition: String?, expected: String)] = [
        ("attachment; filename=report.pdf", "report.pdf"),
        ("attachment; filename=\"fallback.txt\"; filename*=UTF-8''na%C3%AFve.txt", "naïve.txt"),
        ("attachment; filename=\"q \\\"x\\\";y.txt\"", "q \"x\";y.txt"),
        ("attachment; filename=\"../../escape.txt\"", "escape.txt"),
        ("attachment; filename*=UTF-8''..%2F..%2Fclimb.txt", "climb.txt"),
        ("attachment; filename=\"..\"", "download"),
        ("attachment; filename=\"unterminated", "download"),
        (nil, "download"),
    ]

    // MARK: Library

    @Test("the library names the object from one ranged GET of its first byte", arguments: headerCases)
    func libraryNames(disposition: String?, expected: String) async throws {
        try await withTestOrigin { origin in
            origin.addObject(named(disposition), at: "/download")
            let name = try await withDownloader(quickConfiguration()) {
                try await $0.suggestedFileName(for: DownloadRequest(url: origin.url("/download?id=7")))
            }
            #expect(name == expected)
            #expect(try await eventually { origin.requests.count == 1 })
            let request = origin.requests[0]
            #expect(request.method == "GET")
            #expect(request.header("range") == "bytes=0-0")
            #expect(request.bodyBytesSent == 1)
        }
    }

    @Test("the name holds for the download that follows, which reuses the connection")
    func nameThenDownload() async throws {
        let scratch = try Scratch()
        defer { scratch.cleanup() }
        try await withTestOrigin { origin in
            let object = named("attachment; filename=\"report.pdf\"", size: 3 << 20)
            origin.addObject(object, at: "/download")
            try await withDownloader(quickConfiguration(connections: 1)) { downloader in
                let request = DownloadRequest(url: origin.url("/download?id=7"))
                let name = try await downloader.suggestedFileName(for: request)
                let result = try await downloader.download(request, to: scratch.path(name))
                #expect(result.path.hasSuffix("/report.pdf"))
            }
            #expect(try TestData.sha256(of: scratch.path("report.pdf")) == object.sha256)
            #expect(origin.connectionsAccepted == 1, "the lookup's connection is reused")
        }
    }

    @Test("redirects are followed as a download follows them; credentials stay with their host")
    func redirects() async throws {
        try await withTestOrigin { first in
            try await withTestOrigin { second in
                second.addObject(named("attachment; filename=\"signed.bin\""), at: "/blob")
                first.addRedirect(from: "/get", to: "http://localhost:\(second.port)/blob?sig=1")
                first.addRedirect(from: "/ftp", to: "ftp://localhost/blob")
                let request = DownloadRequest(url: first.url("/get"), headers: [("Authorization", "Bearer TOPSECRET")])
                try await withDownloader(quickConfiguration()) { downloader async throws in
                    #expect(try await downloader.suggestedFileName(for: request) == "signed.bin")
                    let refused = await #expect(throws: DownloadError.self) {
                        try await downloader.suggestedFileName(for: DownloadRequest(url: first.url("/ftp")))
                    }
                    #expect(refused?.message.contains("only http and https redirects are followed") == true)
                }
                #expect(try await eventually { second.requests.count == 1 })
                #expect(second.requests[0].header("authorization") == nil, "leaked to another host")
                #expect(first.requests.first?.header("authorization") == "Bearer TOPSECRET")
            }
        }
    }

    @Test("an HTTP error is the download's error; transient ones are retried")
    func failures() async throws {
        try await withTestOrigin { origin in
            origin.addObject(named("attachment; filename=ok.bin"), at: "/busy")
            try await withDownloader(quickConfiguration(maxTries: 3)) { downloader async throws in
                let missing = await #expect(throws: DownloadError.self) {
                    try await downloader.suggestedFileName(for: DownloadRequest(url: origin.url("/missing")))
                }
                #expect(missing?.kind == .httpStatus)
                #expect(missing?.httpStatus == 404)
                origin.resetLog()
                origin.updateFaults { $0.failFirstRequests = 2 }
                #expect(try await downloader.suggestedFileName(for: DownloadRequest(url: origin.url("/busy"))) == "ok.bin")
                #expect(origin.requestCount == 3)
            }
        }
    }

    @Test("cancelling the task or shutting the downloader down ends a lookup that waits to retry")
    func cancellation() async throws {
        try await withTestOrigin { origin async throws in
            origin.addObject(named("attachment; filename=ok.bin"), at: "/busy")
            origin.updateFaults {
                $0.failFirstRequests = 100
                $0.retryAfterSeconds = 60
            }
            var configuration = quickConfiguration()
            configuration.retry.maxDelay = .seconds(120)
            let downloader = Downloader(configuration: configuration)
            let request = DownloadRequest(url: origin.url("/busy"))
            let started = ContinuousClock.now
            let task = Task { try await downloader.suggestedFileName(for: request) }
            #expect(try await eventually { origin.requestCount >= 1 })
            task.cancel()
            let cancelled = await #expect(throws: DownloadError.self) { try await task.value }
            #expect(cancelled?.kind == .cancelled)

            let waiting = Task { try await downloader.suggestedFileName(for: request) }
            #expect(try await eventually { origin.requestCount >= 2 })
            await downloader.shutdown()
            let shutDown = await #expect(throws: DownloadError.self) { try await waiting.value }
            #expect(shutDown?.kind == .cancelled)
            #expect(ContinuousClock.now - started < .seconds(30), "neither waited for Retry-After")
        }
    }
}
