import Foundation
import Swoop
import Synchronization
import SwoopTestOrigin
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// When a proxy is in the way, a failure names the party that failed: the proxy (its address,
/// and that the server was never reached) or the server behind it. Each test sets up one cause
/// and checks that the message names that one.
@Suite("Proxy failures")
struct ProxyFailureTests {
    @Test("--proxy with nothing listening at its port: the message names the proxy and its port, not the server")
    func proxyDown() async throws {
        try await withTestOrigin { origin in
            origin.addObject(TestObject(size: 1 << 20, seed: 94), at: "/d.bin")
            let closed = try ClosedPort()
            defer { closed.release() }
            let scratch = try Scratch()
            defer { scratch.cleanup() }
            let proxy = "http://127.0.0.1:\(closed.port)"
            let flag = try await CLI.start(
                [origin.url("/d.bin"), "--proxy", proxy], in: scratch.url,
                environment: ProxyTests.cleanEnvironment
            ).wait(timeout: .seconds(60))
            #expect(flag.status == 1, "stderr: \(flag.stderr)")
            #expect(flag.stderr.contains("cannot reach the proxy \(proxy):"), "stderr: \(flag.stderr)")
            #expect(flag.stderr.contains("the server was never reached"), "stderr: \(flag.stderr)")
            #expect(flag.stderr.contains("--proxy"), "the fix names the flag: \(flag.stderr)")
            #expect(!flag.stderr.contains("check the host name"), "the server is not blamed: \(flag.stderr)")
            #expect(origin.requests.isEmpty)

            // The same proxy from the environment says where it was set.
            var environment = ProxyTests.cleanEnvironment
            environment["http_proxy"] = proxy
            let variable = try await CLI.start(
                [origin.url("/d.bin"), "-o", "e.bin"], in: scratch.url, environment: environment
            ).wait(timeout: .seconds(60))
            #expect(variable.status == 1, "stderr: \(variable.stderr)")
            #expect(variable.stderr.contains("the proxy \(proxy) (from http_proxy)"), "stderr: \(variable.stderr)")
        }
    }

    @Test("a proxy name that does not resolve is named, and the library reports it in DownloadError.proxy")
    func proxyNameUnknown() async throws {
        try await withTestOrigin { origin in
            origin.addObject(TestObject(size: 1 << 20, seed: 95), at: "/n.bin")
            let scratch = try Scratch()
            defer { scratch.cleanup() }
            var configuration = quickConfiguration(connections: 2)
            configuration.access.proxy = .url("http://no-such-proxy.invalid:3128")
            let error = try await #require(throws: DownloadError.self) {
                try await withDownloader(configuration) {
                    try await $0.download(DownloadRequest(url: origin.url("/n.bin")), to: scratch.path("n.bin"))
                }
            }
            #expect(error.proxy == "http://no-such-proxy.invalid:3128")
            #expect(error.kind == .unreachable && error.remedy == .checkProxy)
            #expect(error.reason.contains("cannot reach the proxy http://no-such-proxy.invalid:3128"), "\(error)")
            #expect(origin.requests.isEmpty)
        }
    }

    @Test("a proxy's own 502 (Proxy-Status) to a plain http request: the proxy's answer, its reason escaped")
    func proxysOwnError() async throws {
        try await withTestOrigin { origin in
            origin.addObject(TestObject(size: 1 << 20, seed: 96), at: "/o.bin")
            try await withLoopbackProxy { proxy in
                // A reason phrase with a terminal escape in it: printed escaped.
                try proxy.answerItself(
                    "502 Bad\u{1B}[2J Gateway",
                    headers: ["Proxy-Status: testproxy; error=connection_refused; details=\"origin said no\""])
                let scratch = try Scratch()
                defer { scratch.cleanup() }
                let run = try await CLI.start(
                    [origin.url("/o.bin"), "--proxy", proxy.httpURL], in: scratch.url,
                    environment: ProxyTests.cleanEnvironment
                ).wait(timeout: .seconds(60))
                #expect(run.status == 1, "stderr: \(run.stderr)")
                #expect(
                    run.stderr.contains(
                        "the proxy \(proxy.httpURL) answered 502 Bad\\x1b[2J Gateway itself, not the server"),
                    "stderr: \(run.stderr)")
                #expect(
                    run.stderr.contains(
                        "Proxy-Status: testproxy: connection_refused (the server refused the proxy's connection), "
                            + "\"origin said no\""), "stderr: \(run.stderr)")
                #expect(!run.stderr.contains("\u{1B}"), "nothing from the proxy reaches the terminal raw")
                #expect(origin.requests.isEmpty)
                #expect(proxy.log.contains("HTTP ANSWERED 502 GET \(origin.url("/o.bin"))"), "log: \(proxy.log)")
            }
        }
    }

    @Test("Squid's own 503 (X-Squid-Error: ERR_CONNECT_FAIL 111): the proxy's words, and at once, as a refused server")
    func squidsConnectFailure() async throws {
        try await withTestOrigin { origin in
            origin.addObject(TestObject(size: 1 << 20, seed: 98), at: "/s.bin")
            try await withLoopbackProxy { proxy in
                // What Squid 5 sends when the server refuses its connection: no Proxy-Status.
                try proxy.answerItself(
                    "503 Service Unavailable",
                    headers: ["Server: squid/5.7", "X-Squid-Error: ERR_CONNECT_FAIL 111", "Via: 1.1 proxy (squid/5.7)"])
                let scratch = try Scratch()
                defer { scratch.cleanup() }
                let started = ContinuousClock.now
                let run = try await CLI.start(
                    [origin.url("/s.bin"), "--proxy", proxy.httpURL], in: scratch.url,
                    environment: ProxyTests.cleanEnvironment
                ).wait(timeout: .seconds(60))
                let took = ContinuousClock.now - started
                #expect(run.status != 0, "stderr: \(run.stderr)")
                #expect(
                    run.stderr.contains(
                        "the proxy \(proxy.httpURL) answered 503 Service Unavailable itself, not the server "
                            + "(X-Squid-Error: squid: connection_refused (the server refused the proxy's connection), "
                            + "\"ERR_CONNECT_FAIL 111\")"), "stderr: \(run.stderr)")
                #expect(!run.stderr.contains("overloaded"), "stderr: \(run.stderr)")
                // The server cannot be reached at all: final at first contact, as a refused connection is
                // (before: retried for 24-41 s, then "the server is overloaded or down").
                let answered = proxy.log.filter { $0.hasPrefix("HTTP ANSWERED 503") }
                #expect(answered.count == 1, "log: \(proxy.log)")
                #expect(took < .seconds(10 * MachineLoad.stretch), "took \(took)")
                #expect(!scratch.exists("s.bin"))
            }
        }
    }

    @Test("a gateway in front of the server: its own 503 is named with what it said; one that cannot reach it, at once")
    func gatewayInFront() async throws {
        try await withTestOrigin { origin in
            origin.addObject(TestObject(size: 1 << 20, seed: 99), at: "/g.bin")
            try await withDownloader(quickConfiguration(maxTries: 2)) { downloader in
                // A cache whose backend failed (Varnish's synthetic page): retried as a 503 is, then its words.
                origin.updateFaults {
                    $0.failures = .init(
                        firstRequests: 100, gatewayReason: "Backend fetch failed",
                        gatewayFields: ["X-Varnish": "32770", "Via": "1.1 varnish (Varnish/7.1)"])
                }
                let scratch = try Scratch()
                defer { scratch.cleanup() }
                let cache = await #expect(throws: DownloadError.self) {
                    try await downloader.download(DownloadRequest(url: origin.url("/g.bin")), to: scratch.path("g.bin"))
                }
                #expect(cache?.kind == .httpStatus && cache?.httpStatus == 503)
                #expect(
                    cache?.reason.contains(
                        "503 Backend fetch failed from a gateway in front of the server, not the server itself "
                            + "(varnish: it could not fetch the object from the server behind it); try again later")
                        == true, "\(String(describing: cache))")
                #expect(origin.requestCount >= 2, "retried: \(origin.requestCount)")
                // A reverse proxy (Squid as an accelerator) whose server refuses its connections: as a
                // refused connection is without it, final at the first request.
                origin.resetLog()
                origin.updateFaults {
                    $0.failures = .init(
                        firstRequests: 100, gatewayFields: ["X-Squid-Error": "ERR_CONNECT_FAIL 111"])
                }
                let refused = await #expect(throws: DownloadError.self) {
                    try await downloader.download(DownloadRequest(url: origin.url("/g.bin")), to: scratch.path("g.bin"))
                }
                #expect(refused?.kind == .unreachable, "\(String(describing: refused))")
                #expect(
                    refused?.reason.contains(
                        "(X-Squid-Error: squid: connection_refused (the server refused the proxy's connection), "
                            + "\"ERR_CONNECT_FAIL 111\")") == true, "\(String(describing: refused))")
                #expect(origin.requestCount == 1)
                #expect(!scratch.exists("g.bin"))
            }
        }
    }

    @Test("a proxy that refuses the CONNECT for an https URL with a 503 is named, with its Proxy-Status")
    func tunnelRefusedWithProxyStatus() async throws {
        let nginx = try await Nginx.start(tls: true)
        defer { nginx.stop() }
        _ = try await nginx.addFile("c.iso", size: 1 << 20, seed: 97)
        try await withLoopbackProxy { proxy in
            try proxy.answerItself(
                "503 Service Unavailable",
                headers: ["Proxy-Status: testproxy; error=http_request_denied; details=\"not during maintenance\""])
            let scratch = try Scratch()
            defer { scratch.cleanup() }
            let run = try await CLI.start(
                [nginx.url("/c.iso"), "-k", "--max-tries", "2", "--proxy", proxy.httpURL], in: scratch.url,
                environment: ProxyTests.cleanEnvironment
            ).wait(timeout: .seconds(60))
            #expect(run.status == 1, "stderr: \(run.stderr)")
            #expect(
                run.stderr.contains(
                    "the proxy \(proxy.httpURL) refused the tunnel to the server with 503 Service Unavailable "
                        + "(Proxy-Status: testproxy: http_request_denied (the proxy's policy denies the request), "
                        + "\"not during maintenance\"); the server was never reached"), "stderr: \(run.stderr)")
            #expect(proxy.log.contains("HTTP ANSWERED 503 CONNECT 127.0.0.1:\(nginx.port)"), "log: \(proxy.log)")
        }
    }

    @Test("a 407 to a plain http request names the proxy and says it wants credentials")
    func proxyWantsCredentials() async throws {
        try await withTestOrigin { origin in
            origin.addObject(TestObject(size: 1 << 20, seed: 98), at: "/a.bin")
            try await withLoopbackProxy(credentials: "carol:PLAINSECRET1") { proxy in
                let scratch = try Scratch()
                defer { scratch.cleanup() }
                let run = try await CLI.start(
                    [origin.url("/a.bin"), "--proxy", proxy.httpURL], in: scratch.url,
                    environment: ProxyTests.cleanEnvironment
                ).wait(timeout: .seconds(60))
                #expect(run.status == 1, "stderr: \(run.stderr)")
                #expect(
                    run.stderr.contains(
                        "the proxy \(proxy.httpURL) wants credentials (407 Proxy Authentication Required); the server "
                            + "was never reached"), "stderr: \(run.stderr)")
                #expect(run.stderr.contains("check --proxy (address and credentials)"), "stderr: \(run.stderr)")
                #expect(origin.requests.isEmpty)
            }
        }
    }

    @Test("a 502 the server sends through the proxy is the server's: the proxy is not blamed")
    func serversErrorThroughProxy() async throws {
        try await withTestOrigin { origin in
            origin.addObject(TestObject(size: 1 << 20, seed: 99), at: "/s.bin")
            origin.updateFaults { $0.failures = .init(firstRequests: 100, status: 502) }
            try await withLoopbackProxy { proxy in
                let scratch = try Scratch()
                defer { scratch.cleanup() }
                let run = try await CLI.start(
                    [origin.url("/s.bin"), "--max-tries", "1", "--proxy", proxy.httpURL], in: scratch.url,
                    environment: ProxyTests.cleanEnvironment
                ).wait(timeout: .seconds(60))
                #expect(run.status == 1, "stderr: \(run.stderr)")
                #expect(run.stderr.contains("502 Bad Gateway"), "stderr: \(run.stderr)")
                #expect(!run.stderr.contains("the proxy"), "stderr: \(run.stderr)")
                #expect(!origin.requests.isEmpty)
            }
        }
    }

    @Test("a proxy that fails mid-download: the wait and the final error name the proxy and its reason")
    func proxyFailsMidDownload() async throws {
        try await withTestOrigin { origin in
            let object = TestObject(size: 16 << 20, seed: 100)
            origin.addObject(object, at: "/m.bin")
            origin.updateFaults { $0.throttleBytesPerSecond = 2 << 20 }
            try await withLoopbackProxy { proxy in
                let scratch = try Scratch()
                defer { scratch.cleanup() }
                // The default tries (8): more than the failures that hold a server down (three,
                // FailurePolicy.downAfter), so the download waits for the proxy. With 3 tries, one
                // request's third failure could end the download first, when the other connection
                // had not failed yet: a clean-clone run now and then saw no wait (with 2 tries,
                // every run).
                var configuration = quickConfiguration(connections: 2, maxTries: 8)
                configuration.access.proxy = .url(proxy.httpURL)
                // Long enough, with reports often enough, that the wait is reported while it lasts
                // even when the test process is short of CPU (with 3 s, a clean-clone run saw none).
                configuration.retry.maxOutage = .seconds(6)
                configuration.progressInterval = .milliseconds(100)
                let causes = Causes()
                let error = try await #require(throws: DownloadError.self) {
                    try await withDownloader(configuration) { downloader in
                        try await downloader.download(
                            DownloadRequest(url: origin.url("/m.bin")), to: scratch.path("m.bin")
                        ) {
                            progress in
                            if progress.bytesDone > 0, causes.flip() {
                                try? proxy.answerItself(
                                    "503 Service Unavailable",
                                    headers: ["Proxy-Status: testproxy; error=connection_limit_reached"])
                            }
                            if let waiting = progress.waiting { causes.record(waiting.cause) }
                        }
                    }
                }
                #expect(error.proxy == proxy.httpURL, "\(error)")
                #expect(error.httpStatus == 503, "\(error)")
                #expect(
                    error.reason.contains("the proxy \(proxy.httpURL) answered 503 Service Unavailable itself"),
                    "\(error)")
                #expect(error.reason.contains("connection_limit_reached"), "\(error)")
                #expect(
                    causes.seen.contains("the proxy \(proxy.httpURL): HTTP 503"),
                    "the wait names the proxy: \(causes.seen); the download failed with \(error)")
                #expect(Downloader.status(of: scratch.path("m.bin")).state == .partial, "the partial is kept")
            }
        }
    }
}

/// What a download's progress said it waited for, and a one-time switch.
private final class Causes: Sendable {
    private let state = Mutex((flipped: false, seen: Set<String>()))

    /// `true` the first time only.
    func flip() -> Bool {
        state.withLock { state in
            defer { state.flipped = true }
            return !state.flipped
        }
    }

    func record(_ cause: String) {
        state.withLock { _ = $0.seen.insert(cause) }
    }

    var seen: Set<String> { state.withLock { $0.seen } }
}
