extension ProxyStatus {
    /// What Squid's own error header says (`X-Squid-Error: ERR_CONNECT_FAIL 111`: its error page's
    /// name, and the system's error number where there is one), as the RFC 9209 error it means.
    /// Squid sends it with every error page it writes itself, and sends no `Proxy-Status`: without
    /// this, its "the server refused my connection" read as a server's 503, retried for half a
    /// minute and then called an overloaded server. `nil` without the header.
    package init?(squidError values: [String]) {
        guard let value = values.last?.trimmingWhitespace, value.hasPrefix("ERR_") else { return nil }
        let parts = value.split(separator: " ", omittingEmptySubsequences: true)
        let page = String(parts[0])
        let number = parts.count > 1 ? Int(parts[1]) : nil
        self.init(name: "squid", error: Self.squidMeaning(page: page, errno: number) ?? page, details: value)
        field = "X-Squid-Error"
    }

    /// The RFC 9209 error a Squid error page (and the Linux error number beside it) means; `nil`
    /// for pages with no counterpart.
    private static func squidMeaning(page: String, errno: Int?) -> String? {
        switch page {
        case "ERR_CONNECT_FAIL":
            switch errno {
            case 111: "connection_refused"  // ECONNREFUSED
            case 110: "connection_timeout"  // ETIMEDOUT
            case 101, 113: "destination_ip_unroutable"  // ENETUNREACH, EHOSTUNREACH
            default: "destination_unavailable"
            }
        case "ERR_DNS_FAIL": "dns_error"
        case "ERR_READ_TIMEOUT": "connection_read_timeout"
        case "ERR_LIFETIME_EXP": "http_response_timeout"
        case "ERR_ZERO_SIZE_OBJECT", "ERR_READ_ERROR", "ERR_WRITE_ERROR": "connection_terminated"
        case "ERR_ACCESS_DENIED", "ERR_CACHE_ACCESS_DENIED": "http_request_denied"
        case "ERR_SECURE_CONNECT_FAIL": "tls_protocol_error"
        default: nil
        }
    }
}
