extension ResponseHead {
    /// What an intermediary said of this response in its own words: its `Proxy-Status` entry
    /// (RFC 9209), else Squid's `X-Squid-Error` read as the RFC 9209 error it means. The one
    /// reading for a forward proxy's own answer, a refused tunnel and a gateway's 5xx.
    package var intermediaryStatus: ProxyStatus? {
        ProxyStatus(fieldValues: values("proxy-status")) ?? ProxyStatus(squidError: values("x-squid-error"))
    }

    /// A server error (5xx) that a gateway in front of the server (a reverse proxy, a cache, a
    /// CDN) wrote itself, with what it says went wrong: its `Proxy-Status` entry with an error
    /// (RFC 9209), Squid's `X-Squid-Error`, or Varnish's synthetic `503 Backend fetch failed`
    /// (with its `X-Varnish`). `nil` for the server's own answer, or one a gateway only passed on.
    package var gatewayAnswer: ProxyStatus? {
        guard status >= 500 else { return nil }
        if let said = intermediaryStatus, said.error != nil { return said }
        if reasonPhrase?.lowercased() == "backend fetch failed", !values("x-varnish").isEmpty {
            var varnish = ProxyStatus(name: "varnish", details: "Backend fetch failed")
            varnish.field = "X-Varnish"
            return varnish
        }
        return nil
    }
}
