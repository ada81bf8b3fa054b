import Testing

@testable import SwoopCore

/// Which proxy a request goes through, as libcurl 7.88 decides it, and how a proxy's own answer
/// is read and told.
@Suite("Proxy routes and answers")
struct ProxyRouteTests {
    @Test("the environment as curl reads it: <scheme>_proxy, HTTPS_PROXY but never HTTP_PROXY, then all_proxy")
    func environmentVariables() {
        let environment = [
            "HTTP_PROXY": "http://upper:1", "HTTPS_PROXY": "http://secure:2", "all_proxy": "socks5h://all:3",
        ]
        let route = ProxyRoute(setting: .environment, environment: environment)
        #expect(route.proxy(for: "https://example.com/a")?.description == "http://secure:2")
        #expect(route.proxy(for: "https://example.com/a")?.variable == "HTTPS_PROXY")
        // HTTP_PROXY is ignored (a CGI client could set it through a header): all_proxy is used.
        #expect(route.proxy(for: "http://example.com/a")?.description == "socks5h://all:3")
        #expect(route.proxy(for: "http://example.com/a")?.variable == "all_proxy")
        // An empty variable turns the proxy off, without falling back to all_proxy.
        let off = ProxyRoute(setting: .environment, environment: ["http_proxy": "", "all_proxy": "http://all:3"])
        #expect(off.proxy(for: "http://example.com/") == nil)
        #expect(ProxyRoute(setting: .environment).proxy(for: "http://example.com/") == nil)
    }

    @Test("a configured proxy wins over the environment; none means none")
    func configured() {
        let environment = ["http_proxy": "http://env:1"]
        let configured = ProxyRoute(setting: .url("user:secret@proxy.example:3128"), environment: environment)
        let proxy = configured.proxy(for: "http://example.com/")
        #expect(proxy?.description == "http://proxy.example:3128")
        #expect(proxy?.variable == nil)
        #expect(ProxyRoute(setting: .none, environment: environment).proxy(for: "http://example.com/") == nil)
    }

    @Test(
        "default ports and forms as libcurl takes them",
        arguments: [
            ("proxy.example", "http://proxy.example:1080"),
            ("https://proxy.example", "https://proxy.example:443"),
            ("SOCKS5H://Proxy.example:9050/", "socks5h://Proxy.example:9050"),
            ("http://[::1]:3128", "http://[::1]:3128"),
            ("http://a:b@127.0.0.1:8080", "http://127.0.0.1:8080"),
        ])
    func endpoints(input: String, shown: String) {
        #expect(ProxyEndpoint(input, variable: nil)?.description == shown)
    }

    @Test(
        "no_proxy matching as libcurl 7.88 does it",
        arguments: [
            ("example.com", "example.com", true),
            ("www.example.com", "example.com", true),
            ("www.example.com", ".example.com", true),
            ("nonexample.com", "example.com", false),
            ("example.com.", "example.com", true),
            ("Example.COM", "example.com", true),
            ("example.com", "other.org, example.com", true),
            ("example.com", "other.org example.com", true),
            ("anything.org", "*", true),
            ("anything.org", "*, other", false),
            ("127.0.0.1", "127.0.0.1", true),
            ("127.0.0.1", "127.0.0.0/8", true),
            ("10.1.2.3", "10.1.0.0/16", true),
            ("10.2.2.3", "10.1.0.0/16", false),
            ("127.0.0.1", "127.0.0.1/33", false),
            ("[::1]", "::1", true),
            ("[2001:db8::5]", "2001:db8::/32", true),
            ("[2001:db9::5]", "2001:db8::/32", false),
            ("[::ffff:10.0.0.1]", "::ffff:10.0.0.0/120", true),
            ("localhost", "127.0.0.1", false),
        ])
    func noProxy(host: String, list: String, bypasses: Bool) {
        #expect(ProxyRoute.bypasses(host: host, noProxy: list) == bypasses)
    }

    @Test("no_proxy and the configured list: a bypassed host goes direct, also past a configured proxy")
    func bypassed() {
        let environment = ["http_proxy": "http://env:1", "no_proxy": "internal.example"]
        let route = ProxyRoute(setting: .environment, environment: environment)
        #expect(route.proxy(for: "http://files.internal.example:8080/a") == nil)
        #expect(route.proxy(for: "http://example.com/a") != nil)
        let flagged = ProxyRoute(setting: .url("http://p:1"), noProxy: "127.0.0.1", environment: environment)
        #expect(flagged.proxy(for: "http://127.0.0.1:8080/a") == nil)
        #expect(flagged.proxy(for: "http://files.internal.example/a") != nil, "the list replaces no_proxy")
        #expect(flagged.proxy(for: "http://[::1]:8080/a") != nil)
    }

    @Test("Proxy-Status: the member nearest the client, its error, details and received status")
    func proxyStatus() throws {
        let status = try #require(
            ProxyStatus(fieldValues: [
                "origin-cdn; received-status=503", "corp-proxy; error=dns_error; details=\"no such host\"",
            ]))
        #expect(status == ProxyStatus(name: "corp-proxy", error: "dns_error", details: "no such host"))
        #expect(status.meansServerUnreachable)
        #expect(ProxyStatus(fieldValues: ["\"a b\"; received-status=200"])?.receivedStatus == 200)
        #expect(ProxyStatus(fieldValues: ["not a list (("]) == nil)
        #expect(ProxyStatus(fieldValues: []) == nil)
        #expect(ProxyAnswer.isOwnAnswer(status: 407, proxyStatus: nil))
        #expect(ProxyAnswer.isOwnAnswer(status: 502, proxyStatus: status))
        #expect(!ProxyAnswer.isOwnAnswer(status: 502, proxyStatus: nil), "a 502 passed along is the server's")
        #expect(!ProxyAnswer.isOwnAnswer(status: 502, proxyStatus: ProxyStatus(name: "p", receivedStatus: 502)))
        #expect(ProxyAnswer.reasonPhrase(ofStatusLine: "HTTP/1.1 502 Bad Gateway\r\n") == "Bad Gateway")
        #expect(ProxyAnswer.reasonPhrase(ofStatusLine: "HTTP/1.1 502") == nil)
    }

    @Test("Squid's X-Squid-Error read as the RFC 9209 error it means: only a refusal or no route is unreachable")
    func squidError() throws {
        let refused = try #require(ProxyStatus(squidError: ["ERR_CONNECT_FAIL 111"]))
        #expect(refused.error == "connection_refused" && refused.meansServerUnreachable)
        #expect(refused.field == "X-Squid-Error" && refused.details == "ERR_CONNECT_FAIL 111")
        #expect(ProxyStatus(squidError: ["ERR_DNS_FAIL 0"])?.meansServerUnreachable == true)
        #expect(ProxyStatus(squidError: ["ERR_CONNECT_FAIL 113"])?.meansServerUnreachable == true)
        // A timeout or a broken read may pass: retried as a server's failure is.
        #expect(ProxyStatus(squidError: ["ERR_CONNECT_FAIL 110"])?.meansServerUnreachable == false)
        #expect(ProxyStatus(squidError: ["ERR_READ_TIMEOUT 0"])?.error == "connection_read_timeout")
        #expect(ProxyStatus(squidError: ["ERR_SOMETHING_NEW"])?.error == "ERR_SOMETHING_NEW")
        #expect(ProxyStatus(squidError: ["ERR_SOMETHING_NEW"])?.meansServerUnreachable == false)
        #expect(ProxyStatus(squidError: []) == nil && ProxyStatus(squidError: ["nonsense"]) == nil)
    }

    @Test("each proxy failure names the proxy, where it was set, and whether the server was reached")
    func messages() {
        let proxy = ProxyEndpoint("http://10.0.0.9:3128", variable: "https_proxy")!
        let down = DownloadError.proxyUnreachable(
            proxy, detail: "Failed to connect to 10.0.0.9 port 3128 after 1 ms: Couldn't connect to server",
            url: "https://example.com/a", beforeAnyResponse: true, curlCode: 7)
        #expect(
            down.reason
                == "cannot reach the proxy http://10.0.0.9:3128 (from https_proxy): Failed to connect to 10.0.0.9 port "
                + "3128 after 1 ms: Couldn't connect to server; the server was never reached (https://example.com/a)")
        #expect(down.kind == .unreachable && down.proxy == "http://10.0.0.9:3128" && down.remedy == .checkProxy)
        #expect(down.shortCause == "the proxy http://10.0.0.9:3128: connection refused")
        let midway = DownloadError.proxyUnreachable(
            proxy, detail: "refused", url: "u", beforeAnyResponse: false, curlCode: 7)
        #expect(midway.kind == .network && midway.isTransient, "mid-download it is waited out")

        let denied = DownloadError.proxyAnswered(
            ProxyAnswer(status: 403, reasonPhrase: "Forbidden", proxyStatus: nil, refusedTunnel: true),
            proxy: proxy, url: "u", beforeAnyResponse: true, curlCode: 56)
        #expect(
            denied.reason
                == "the proxy http://10.0.0.9:3128 (from https_proxy) refused the tunnel to the server with 403 "
                + "Forbidden; the server was never reached (u)")
        #expect(!denied.isTransient && denied.httpStatus == 403 && denied.remedy == .checkProxy)

        let busy = DownloadError.proxyAnswered(
            ProxyAnswer(
                status: 503, reasonPhrase: "Busy\u{9B}2J", proxyStatus: ProxyStatus(name: "p", error: "x"),
                refusedTunnel: false),
            proxy: proxy, url: "u", beforeAnyResponse: true, curlCode: nil)
        #expect(
            busy.reason
                == "the proxy http://10.0.0.9:3128 (from https_proxy) answered 503 Busy\\x9b2J itself, not the server "
                + "(Proxy-Status: p: x) (u)")
        #expect(busy.isTransient && busy.remedy == nil, "a proxy's 503 is tried again")

        let noRoute = DownloadError.proxyAnswered(
            ProxyAnswer(
                status: 502, reasonPhrase: nil, proxyStatus: ProxyStatus(name: "p", error: "connection_refused"),
                refusedTunnel: false),
            proxy: nil, url: "u", beforeAnyResponse: true, curlCode: nil)
        #expect(noRoute.kind == .unreachable, "at first contact, a server the proxy cannot reach is final")
        #expect(
            noRoute.reason
                == "the proxy answered 502 itself, not the server (Proxy-Status: p: connection_refused (the server "
                + "refused the proxy's connection)) (u)")
    }
}
