import CCurl

/// How long an exchange's connection and request took, as libcurl measured them (curl's `-w`
/// `time_connect`, `time_appconnect`, `time_pretransfer` and `time_starttransfer`, as spans).
package struct ExchangeTiming: Sendable, Equatable {
    /// The TCP handshake (to the server, or to the proxy): one round trip. `nil` when the
    /// request went out on a connection that was already open.
    package var connect: Duration?
    /// The TLS handshake after it; `nil` without TLS or on a connection already open.
    package var tlsHandshake: Duration?
    /// From the request being sent to the response's first byte: a round trip and the server's
    /// time to answer.
    package var firstByte: Duration

    package init(connect: Duration?, tlsHandshake: Duration?, firstByte: Duration) {
        self.connect = connect
        self.tlsHandshake = tlsHandshake
        self.firstByte = firstByte
    }
}

extension HTTPExchange {
    /// This exchange's timing, read from its handle once the response's head has arrived (in
    /// ``ExchangeDelegate/exchange(_:didReceiveHead:)`` or later, before it completes); `nil`
    /// before that or without a handle.
    package func timing() -> ExchangeTiming? {
        guard let easy,
            let lookedUp = easy.getMicroseconds(CURLINFO_NAMELOOKUP_TIME_T),
            let connected = easy.getMicroseconds(CURLINFO_CONNECT_TIME_T),
            let secured = easy.getMicroseconds(CURLINFO_APPCONNECT_TIME_T),
            let sent = easy.getMicroseconds(CURLINFO_PRETRANSFER_TIME_T),
            let answered = easy.getMicroseconds(CURLINFO_STARTTRANSFER_TIME_T),
            answered >= sent, answered > 0
        else { return nil }
        // libcurl counts each time from the transfer's start; a reused connection made none.
        let opened = (easy.getLong(CURLINFO_NUM_CONNECTS) ?? 0) > 0
        return ExchangeTiming(
            connect: opened && connected >= lookedUp ? .microseconds(connected - lookedUp) : nil,
            tlsHandshake: opened && secured > connected ? .microseconds(secured - connected) : nil,
            firstByte: .microseconds(answered - sent))
    }
}
