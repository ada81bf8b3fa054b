import Foundation
import Swoop
import SwoopTestOrigin
import Testing

/// Downloads through a real forward proxy on loopback (``LoopbackProxy``): its log shows which
/// requests went through it.
@Suite("Proxies")
struct ProxyTests {
    /// No proxy variables from the test's own environment leak into the child.
    static let cleanEnvironment = [
        "http_proxy": "", "https_proxy": "", "HTTPS_PROXY": "", "all_proxy": "", "ALL_PROXY": "", "no_proxy": "",
        "NO_PROXY": "",
    ]

    @Test("--proxy sends every request through an HTTP proxy; --noproxy bypasses it")
    func httpProxyFlag() async throws {
        try await withTestOrigin { origin in
            try await withLoopbackProxy { proxy in
                let object = TestObject(size: 6 << 20, seed: 90)
                origin.addObject(object, at: "/p.bin")
                let scratch = try Scratch()
                defer { scratch.cleanup() }
                let through = try await CLI.start(
                    [origin.url("/p.bin"), "-q", "-c", "4", "--proxy", proxy.httpURL], in: scratch.url,
                    environment: Self.cleanEnvironment
                ).wait(timeout: .seconds(120))
                #expect(through.status == 0, "stderr: \(through.stderr)")
                #expect(try await TestData.sha256(of: scratch.path("p.bin")) == object.sha256)
                let proxied = proxy.log.filter { $0 == "HTTP GET \(origin.url("/p.bin"))" }
                #expect(
                    proxied.count == origin.requests.count && proxied.count >= 4,
                    "every request went through the proxy: \(proxy.log), origin saw \(origin.requests.count)")

                let before = proxy.log.count
                let direct = try await CLI.start(
                    [
                        origin.url("/p.bin"), "-q", "-o", "direct.bin", "--proxy", proxy.httpURL, "--noproxy",
                        "example.com,127.0.0.1",
                    ], in: scratch.url, environment: Self.cleanEnvironment
                ).wait(timeout: .seconds(120))
                #expect(direct.status == 0, "stderr: \(direct.stderr)")
                #expect(try await TestData.sha256(of: scratch.path("direct.bin")) == object.sha256)
                #expect(proxy.log.count == before, "--noproxy went around the proxy: \(proxy.log.dropFirst(before))")
            }
        }
    }

    @Test("http_proxy from the environment is honoured as curl does, and no_proxy bypasses it")
    func environmentProxy() async throws {
        try await withTestOrigin { origin in
            try await withLoopbackProxy { proxy in
                let object = TestObject(size: 3 << 20, seed: 91)
                origin.addObject(object, at: "/e.bin")
                let scratch = try Scratch()
                defer { scratch.cleanup() }
                var environment = Self.cleanEnvironment
                environment["http_proxy"] = proxy.httpURL
                let through = try await CLI.start(
                    [origin.url("/e.bin"), "-q"], in: scratch.url, environment: environment
                ).wait(timeout: .seconds(120))
                #expect(through.status == 0, "stderr: \(through.stderr)")
                #expect(try await TestData.sha256(of: scratch.path("e.bin")) == object.sha256)
                #expect(proxy.log.contains("HTTP GET \(origin.url("/e.bin"))"), "log: \(proxy.log)")

                let before = proxy.log.count
                environment["no_proxy"] = "localhost,127.0.0.1"
                let bypassed = try await CLI.start(
                    [origin.url("/e.bin"), "-q", "-o", "bypass.bin"], in: scratch.url, environment: environment
                ).wait(timeout: .seconds(120))
                #expect(bypassed.status == 0, "stderr: \(bypassed.stderr)")
                #expect(try await TestData.sha256(of: scratch.path("bypass.bin")) == object.sha256)
                #expect(proxy.log.count == before, "no_proxy went around the proxy: \(proxy.log.dropFirst(before))")

                // --proxy '' turns the environment's proxy off.
                environment["no_proxy"] = ""
                let off = try await CLI.start(
                    [origin.url("/e.bin"), "-q", "-o", "off.bin", "--proxy", ""], in: scratch.url,
                    environment: environment
                ).wait(timeout: .seconds(120))
                #expect(off.status == 0, "stderr: \(off.stderr)")
                #expect(proxy.log.count == before, "--proxy '' went around the proxy")
            }
        }
    }

    @Test("access.proxy with socks5h: the proxy resolves the name; its credentials are never logged or stored")
    func socksProxyWithCredentials() async throws {
        try await withTestOrigin { origin in
            try await withLoopbackProxy(credentials: "alice:PROXYSECRET7") { proxy in
                let object = TestObject(size: 4 << 20, seed: 92)
                origin.addObject(object, at: "/s.bin")
                let scratch = try Scratch()
                defer { scratch.cleanup() }
                let url = "http://localhost:\(origin.port)/s.bin"
                var configuration = quickConfiguration(connections: 3)
                configuration.access.proxy = .url("socks5h://alice:PROXYSECRET7@127.0.0.1:\(proxy.socksPort)")
                let result = try await withDownloader(configuration) {
                    try await $0.download(DownloadRequest(url: url), to: scratch.path("s.bin"))
                }
                #expect(result.bytes == object.size)
                #expect(try await TestData.sha256(of: scratch.path("s.bin")) == object.sha256)
                #expect(
                    proxy.log.contains("SOCKS5 CONNECT localhost:\(origin.port) (name)"),
                    "the name went to the proxy: \(proxy.log)")

                // The CLI, verbose, interrupted mid-way and failing on a missing object: no secret anywhere.
                origin.updateFaults { $0.throttleBytesPerSecond = 256 << 10 }
                let proxyURL = "socks5h://alice:PROXYSECRET7@127.0.0.1:\(proxy.socksPort)"
                let running = try CLI.start(
                    [url, "-o", "v.bin", "-vvv", "-c", "2", "--proxy", proxyURL], in: scratch.url,
                    environment: Self.cleanEnvironment)
                let target = scratch.path("v.bin")
                try await waitThenAct(
                    within: .seconds(60), until: { Downloader.status(of: target).bytesDone > 0 },
                    then: { running.signal(SIGINT) })
                let paused = try await running.wait(timeout: .seconds(30))
                #expect(paused.status == 130, "stderr: \(paused.stderr)")
                let wrong = try await CLI.start(
                    [
                        url, "-o", "w.bin", "-vvv", "--proxy",
                        "socks5h://alice:WRONGSECRET8@127.0.0.1:\(proxy.socksPort)",
                    ], in: scratch.url, environment: Self.cleanEnvironment
                ).wait(timeout: .seconds(60))
                #expect(wrong.status == 1, "stderr: \(wrong.stderr)")
                #expect(
                    wrong.stderr.contains("proxy") && wrong.stderr.contains("--proxy"),
                    "names the proxy and the flag: \(wrong.stderr)")
                #expect(FileManager.default.fileExists(atPath: scratch.map("v.bin")))
                var haystacks = [paused.stdout, paused.stderr, wrong.stdout, wrong.stderr]
                for name in try FileManager.default.contentsOfDirectory(atPath: scratch.url.path)
                where !name.hasSuffix(".part") && name != "s.bin" && name != ".swoop" {
                    haystacks.append(
                        String(decoding: try Data(contentsOf: scratch.url.appendingPathComponent(name)), as: UTF8.self))
                }
                for secret in ["PROXYSECRET7", "WRONGSECRET8"] {
                    #expect(!haystacks.contains { $0.contains(secret) }, "\(secret) leaked")
                }
            }
        }
    }

    @Test(
        "an https URL goes through an HTTP proxy's CONNECT tunnel; a proxy that wants credentials is named in the error"
    )
    func tunnelAndProxyAuthentication() async throws {
        let nginx = try await Nginx.start(tls: true)
        defer { nginx.stop() }
        let expected = try await nginx.addFile("t.iso", size: 2 << 20, seed: 93)
        try await withLoopbackProxy(credentials: "bob:TUNNELSECRET9") { proxy in
            let scratch = try Scratch()
            defer { scratch.cleanup() }
            let authorised = "http://bob:TUNNELSECRET9@127.0.0.1:\(proxy.httpPort)"
            let tunnel = try await CLI.start(
                [nginx.url("/t.iso"), "-q", "-k", "--proxy", authorised], in: scratch.url,
                environment: Self.cleanEnvironment
            ).wait(timeout: .seconds(120))
            #expect(tunnel.status == 0, "stderr: \(tunnel.stderr)")
            #expect(try await TestData.sha256(of: scratch.path("t.iso")) == expected)
            #expect(proxy.log.contains("HTTP CONNECT 127.0.0.1:\(nginx.port)"), "log: \(proxy.log)")

            let refused = try await CLI.start(
                [nginx.url("/t.iso"), "-k", "-o", "r.iso", "--proxy", proxy.httpURL], in: scratch.url,
                environment: Self.cleanEnvironment
            ).wait(timeout: .seconds(60))
            #expect(refused.status == 1, "stderr: \(refused.stderr)")
            #expect(
                refused.stderr.contains(
                    "the proxy \(proxy.httpURL) wants credentials (407 Proxy Authentication Required); the server was "
                        + "never reached") && refused.stderr.contains("--proxy"),
                "stderr: \(refused.stderr)")
            #expect(proxy.log.contains { $0.hasPrefix("HTTP 407 CONNECT") })
        }
    }
}
