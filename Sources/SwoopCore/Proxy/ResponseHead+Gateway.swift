extension ResponseHead {
    /// A server error (5xx) that a gateway in front of the server (a reverse proxy, a cache, a
    /// CDN) wrote itself, with what it says went wrong: its `Proxy-Status` entry with an error
    /// (RFC 9209), Squid's `X-Squid-Error`, or Varnish's synthetic `503 Backend fetch failed`
    /// (with its `X-Varnish`). `nil` for the server's own answer, or one a gateway only passed on.
    package var gatewayAnswer: ProxyStatus? {
        guard status >= 500 else { return nil }
        if let status = ProxyStatus(fieldValues: values("proxy-status")), status.error != nil { return status }
        if let squid = ProxyStatus(squidError: values("x-squid-error")) { return squid }
        if reasonPhrase?.lowercased() == "backend fetch failed", !values("x-varnish").isEmpty {
            var varnish = ProxyStatus(name: "varnish", details: "Backend fetch failed")
            varnish.field = "X-Varnish"
            return varnish
        }
        return nil
    }
}
