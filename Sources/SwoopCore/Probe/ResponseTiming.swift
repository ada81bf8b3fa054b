/// How long a response took to arrive, as libcurl measured it (curl's `-w` `%{time_connect}`,
/// `%{time_appconnect}` and `%{time_starttransfer}`, as spans rather than times since the start;
/// what `URLSessionTaskTransactionMetrics` tells a URLSession user).
public struct ResponseTiming: Sendable, Equatable {
    /// The TCP handshake with the server (or the proxy): one round trip. `nil` when the request
    /// went out on a connection that was already open.
    public var connect: Duration?
    /// The TLS handshake after it; `nil` without TLS or on a connection already open.
    public var tlsHandshake: Duration?
    /// From sending the request to the response's first byte: a round trip and the server's time
    /// to answer.
    public var firstByte: Duration

    public init(connect: Duration?, tlsHandshake: Duration?, firstByte: Duration) {
        self.connect = connect
        self.tlsHandshake = tlsHandshake
        self.firstByte = firstByte
    }
}
