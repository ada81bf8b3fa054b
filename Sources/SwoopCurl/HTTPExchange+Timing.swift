import CCurl
import SwoopCore

extension HTTPExchange {
    /// This exchange's timing, read from its handle once the response's head has arrived (in
    /// ``ExchangeDelegate/exchange(_:didReceiveHead:)`` or later, before it completes); `nil`
    /// before that or without a handle.
    package func timing() -> ResponseTiming? {
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
        return ResponseTiming(
            connect: opened && connected >= lookedUp ? .microseconds(connected - lookedUp) : nil,
            tlsHandshake: opened && secured > connected ? .microseconds(secured - connected) : nil,
            firstByte: .microseconds(answered - sent))
    }
}
