import Testing

@testable import SwoopCurl

/// Which failed TLS handshakes are a peer that closed the connection (a network fault, retried)
/// rather than a handshake the server refused (a TLS error, with certificate advice).
@Suite("Handshake failures")
struct HandshakeFailureTests {
    @Test(
        "a handshake cut short by the peer, in each of libcurl's words for it",
        arguments: [
            "OpenSSL SSL_connect: SSL_ERROR_SYSCALL in connection to 127.0.0.1:8443",
            "OpenSSL SSL_connect: unexpected eof while reading",
            "Recv failure: Connection reset by peer",
            // h2o over TLS, in a full suite: the server closed a new connection mid-handshake.
            "Send failure: Broken pipe",
        ])
    func cutShort(detail: String) {
        #expect(HTTPExchange.isCutShort(handshake: detail))
    }

    @Test(
        "a handshake the server refuses stays a TLS failure",
        arguments: [
            "OpenSSL/3.0.17: error:0A000410:SSL routines::sslv3 alert handshake failure",
            "error:0A00010B:SSL routines::wrong version number",
            "SSL certificate problem: unable to get local issuer certificate",
        ])
    func refused(detail: String) {
        #expect(!HTTPExchange.isCutShort(handshake: detail))
    }
}
