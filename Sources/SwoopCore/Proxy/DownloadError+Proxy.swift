extension DownloadError {
    /// The proxy could not be reached, or failed before anything went through it: its name did
    /// not resolve, nothing listens at its port, or its handshake failed (`detail`: libcurl's
    /// words). The server was never reached. `beforeAnyResponse`: at first contact this is not
    /// retried, as for a server nobody answers; mid-download it is.
    package static func proxyUnreachable(
        _ proxy: ProxyEndpoint, detail: String, url: String, beforeAnyResponse: Bool, curlCode: Int
    ) -> DownloadError {
        var error = DownloadError(
            beforeAnyResponse ? .unreachable : .network,
            "cannot reach \(named(proxy)): \(detail); the server was never reached (\(url))",
            remedy: .checkProxy, curlCode: curlCode)
        error.proxy = proxy.description
        return error
    }

    /// The proxy failed in a way libcurl does not say more about (`proxy` is `nil` when the
    /// routing could not tell which proxy libcurl used).
    package static func proxyFailed(
        _ proxy: ProxyEndpoint?, detail: String, url: String, beforeAnyResponse: Bool, curlCode: Int
    ) -> DownloadError {
        var error = DownloadError(
            beforeAnyResponse ? .unreachable : .network,
            "\(proxy.map(named) ?? "the proxy") failed: \(detail); the server was never reached (\(url))",
            remedy: .checkProxy, curlCode: curlCode)
        error.proxy = proxy?.description
        return error
    }

    /// The proxy answered itself: it refused the tunnel, wants credentials (407), or sent an
    /// error of its own. A 5xx is retried like a server's (the proxy may recover), except at
    /// first contact when the proxy says the server cannot be reached at all, which is final as
    /// it is for a server Swoop cannot reach itself.
    package static func proxyAnswered(
        _ answer: ProxyAnswer, proxy: ProxyEndpoint?, url: String, beforeAnyResponse: Bool, curlCode: Int?
    ) -> DownloadError {
        let who = proxy.map(named) ?? "the proxy"
        let status = statusText(answer.status, phrase: answer.reasonPhrase)
        var reason: String
        if answer.status == 407 {
            reason = "\(who) wants credentials (\(status))"
        } else if answer.refusedTunnel {
            reason = "\(who) refused the tunnel to the server with \(status)"
        } else {
            reason = "\(who) answered \(status) itself, not the server"
        }
        if let proxyStatus = answer.proxyStatus { reason += " (\(proxyStatusText(proxyStatus)))" }
        let reached = answer.refusedTunnel || answer.status == 407 ? "; the server was never reached" : ""
        reason += "\(reached) (\(url))"
        let unreachable = beforeAnyResponse && answer.proxyStatus?.meansServerUnreachable == true
        let remedy: Remedy? = answer.status >= 500 ? nil : .checkProxy
        var error = DownloadError(
            unreachable ? .unreachable : .httpStatus, reason, remedy: remedy, httpStatus: answer.status,
            curlCode: curlCode)
        error.proxy = proxy?.description
        return error
    }

    /// "503 Service Unavailable": a status and its reason phrase as the intermediary sent it, escaped.
    static func statusText(_ status: Int, phrase: String?) -> String {
        guard let phrase, !phrase.isEmpty else { return "\(status)" }
        return "\(status) " + Wording.serverText(phrase, limit: 80)
    }

    /// "the proxy http://127.0.0.1:3128", and where it was set when the environment set it.
    private static func named(_ proxy: ProxyEndpoint) -> String {
        let source = proxy.variable.map { " (from \($0))" } ?? ""
        return "the proxy \(proxy)\(source)"
    }

    /// `Proxy-Status: squid: connection_refused (the server refused the proxy's connection), "no route"`;
    /// from Squid's own header, `X-Squid-Error: squid: connection_refused (...), "ERR_CONNECT_FAIL 111"`.
    package static func proxyStatusText(_ status: ProxyStatus) -> String {
        var parts: [String] = []
        if let error = status.error {
            parts.append(Wording.serverText(error, limit: 60) + (status.errorMeaning.map { " (\($0))" } ?? ""))
        }
        if let details = status.details { parts.append("\"\(Wording.serverText(details))\"") }
        let name = Wording.serverText(status.name, limit: 60)
        return "\(status.field): " + name + (parts.isEmpty ? "" : ": " + parts.joined(separator: ", "))
    }
}

extension ProxyStatus {
    /// The error says the server cannot be reached at all (no name, no route, refused), rather
    /// than that it failed or was slow.
    package var meansServerUnreachable: Bool {
        switch error {
        case "dns_error", "destination_not_found", "destination_ip_unroutable", "destination_ip_prohibited",
            "connection_refused":
            true
        default: false
        }
    }
}
