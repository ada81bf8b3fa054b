import SwoopCore

/// A proxy's reply to `CONNECT`, as far as a refusal's message needs it: its head, read as every
/// response head is (``ResponseHeadParser``), and its reason phrase whatever the status.
struct TunnelReply {
    private var parser = ResponseHeadParser()
    private var statusLine: String?

    mutating func consume(_ raw: UnsafeRawBufferPointer) {
        if raw.starts(with: "HTTP/".utf8) { statusLine = String(decoding: raw, as: UTF8.self) }
        _ = parser.consume(raw)
    }

    var reasonPhrase: String? { statusLine.flatMap(ProxyAnswer.reasonPhrase(ofStatusLine:)) }
    var proxyStatus: ProxyStatus? { (parser.finished ?? parser.partial)?.intermediaryStatus }
}
