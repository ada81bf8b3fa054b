import SwoopCore

/// A proxy's reply to `CONNECT`, as far as a refusal's message needs it.
struct TunnelReply {
    private var statusLine: String?
    private var proxyStatusValues: [String] = []
    private var squidErrorValues: [String] = []

    mutating func consume(_ raw: UnsafeRawBufferPointer) {
        let line = String(decoding: raw, as: UTF8.self).trimmingWhitespace
        if line.hasPrefix("HTTP/") {
            statusLine = line
            proxyStatusValues = []
            squidErrorValues = []
        } else if let colon = line.firstIndex(of: ":") {
            let value = line[line.index(after: colon)...].trimmingWhitespace
            switch line[..<colon].lowercased() {
            case "proxy-status": proxyStatusValues.append(value)
            case "x-squid-error": squidErrorValues.append(value)
            default: break
            }
        }
    }

    var reasonPhrase: String? { statusLine.flatMap(ProxyAnswer.reasonPhrase(ofStatusLine:)) }
    var proxyStatus: ProxyStatus? {
        ProxyStatus(fieldValues: proxyStatusValues) ?? ProxyStatus(squidError: squidErrorValues)
    }
}
