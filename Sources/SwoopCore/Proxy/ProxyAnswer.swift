import RawStructuredFieldValues

/// A proxy's own answer, instead of the server's: to the `CONNECT` that opens the tunnel for an
/// https URL, or to a plain http request it would not or could not pass on (a 407, or an error
/// its `Proxy-Status` field marks as its own).
package struct ProxyAnswer: Sendable, Equatable {
    package var status: Int
    /// The status line's reason phrase, as the proxy sent it (escape it before showing it).
    package var reasonPhrase: String?
    /// The proxy's own entry in `Proxy-Status` (RFC 9209), if it sent one.
    package var proxyStatus: ProxyStatus?
    /// It answered the `CONNECT` for a tunnel: no request reached the server.
    package var refusedTunnel: Bool

    package init(status: Int, reasonPhrase: String?, proxyStatus: ProxyStatus?, refusedTunnel: Bool) {
        self.status = status
        self.reasonPhrase = reasonPhrase
        self.proxyStatus = proxyStatus
        self.refusedTunnel = refusedTunnel
    }

    /// Whether a response that came through an HTTP proxy is the proxy's own answer rather than
    /// the server's: a 407 always is (only proxies send it); a 5xx is when the proxy's
    /// `Proxy-Status` entry names an error it met (a server's 502 passed along is not).
    package static func isOwnAnswer(status: Int, proxyStatus: ProxyStatus?) -> Bool {
        status == 407 || (status >= 500 && proxyStatus?.error != nil)
    }

    /// The reason phrase of a status line (`HTTP/1.1 502 Bad Gateway` → `Bad Gateway`), or `nil`.
    package static func reasonPhrase(ofStatusLine line: String) -> String? {
        let parts = line.trimmingWhitespace.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: true)
        guard parts.count == 3, parts[0].hasPrefix("HTTP/") else { return nil }
        return String(parts[2])
    }
}

/// The entry of a `Proxy-Status` field (RFC 9209) added by the proxy nearest the client: the
/// field lists the intermediaries a response passed, nearest the server first.
package struct ProxyStatus: Sendable, Equatable {
    /// How the proxy names itself.
    package var name: String
    /// The error it met (RFC 9209's `error` parameter: `connection_refused`, `dns_error`, ...).
    package var error: String?
    /// Its own words about it (`details`), as sent.
    package var details: String?
    /// The status the next hop sent it (`received-status`), when it got one.
    package var receivedStatus: Int?
    /// The header field it came in: `Proxy-Status`, or a proxy's own older one (Squid's
    /// `X-Squid-Error`, read as the RFC 9209 error it means: ``init(squidError:)``).
    package var field = "Proxy-Status"

    package init(name: String, error: String? = nil, details: String? = nil, receivedStatus: Int? = nil) {
        self.name = name
        self.error = error
        self.details = details
        self.receivedStatus = receivedStatus
    }

    /// The last entry of the field (its lines joined, as HTTP joins a list); `nil` when there is
    /// none or the field does not parse.
    package init?(fieldValues: [String]) {
        guard !fieldValues.isEmpty else { return nil }
        var parser = StructuredFieldValueParser(Array(fieldValues.joined(separator: ", ").utf8))
        guard let list = try? parser.parseListFieldValue(), case .item(let item)? = list.last else { return nil }
        switch item.rfc9651BareItem {
        case .token(let text), .string(let text): name = text
        default: return nil
        }
        let parameters = item.rfc9651Parameters
        if case .token(let text)? = parameters["error"] { error = text }
        if case .string(let text)? = parameters["details"] { details = text }
        if case .integer(let value)? = parameters["received-status"] { receivedStatus = Int(value) }
    }

    /// What RFC 9209's common error types mean, for people; `nil` for the others.
    package var errorMeaning: String? {
        switch error {
        case "dns_timeout": "the proxy timed out looking up the server's name"
        case "dns_error": "the proxy could not look up the server's name"
        case "destination_not_found": "the proxy does not know the server"
        case "destination_unavailable": "the proxy considers the server unavailable"
        case "destination_ip_prohibited": "the proxy may not connect to the server's address"
        case "destination_ip_unroutable": "the proxy has no route to the server's address"
        case "connection_refused": "the server refused the proxy's connection"
        case "connection_terminated": "the server closed the proxy's connection"
        case "connection_timeout": "the proxy timed out connecting to the server"
        case "connection_read_timeout": "the proxy timed out waiting for the server"
        case "connection_limit_reached": "the proxy has too many connections to the server"
        case "tls_protocol_error": "TLS between the proxy and the server failed"
        case "tls_certificate_error": "the proxy did not accept the server's certificate"
        case "http_request_denied": "the proxy's policy denies the request"
        case "http_response_timeout": "the proxy timed out waiting for the server's response"
        case "proxy_configuration_error": "the proxy is misconfigured"
        case "proxy_internal_error": "the proxy failed internally"
        case "proxy_loop_detected": "the request went round in a loop of proxies"
        default: nil
        }
    }
}
