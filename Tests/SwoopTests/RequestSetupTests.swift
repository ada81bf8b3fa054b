import Testing

@testable import Swoop
@testable import SwoopCore
@testable import SwoopCurl

/// What a request is given to send: its header lines (most often the one list made once), its
/// range (libcurl's own `Range` line), and its proxy setting.
@Suite("A request's setup")
struct RequestSetupTests {
    @Test("a request with no precondition and no caller's header sends the usual lines, made once")
    func usualLines() throws {
        let url = try RemoteURL("http://example.com/a.bin")
        let options = TransferOptions(Downloader.Configuration())
        let request = RequestHeaders([], originalURL: url).request(
            for: url, range: .bounded(ByteRange(0, 1 << 20)), options: options)
        #expect(request.headerLines == ["Accept-Encoding: identity"])
        #expect(request.headerLines == RequestHeaders.usualLines)

        let conditional = RequestHeaders([], originalURL: url).request(
            for: url, precondition: (name: "If-Match", value: "\"v1\""), range: nil, options: options)
        #expect(conditional.headerLines == ["Accept-Encoding: identity", "If-Match: \"v1\""])
        let callers = RequestHeaders([("X-Trace", "7")], originalURL: url).request(
            for: url, range: nil, options: options)
        #expect(callers.headerLines == ["Accept-Encoding: identity", "X-Trace: 7"])
    }

    @Test("a range is given to libcurl without its unit, and written with it where a header is wanted")
    func rangeForms() {
        #expect(RequestedRange.bounded(ByteRange(0, 1 << 20)).spec == "0-1048575")
        #expect(RequestedRange.bounded(ByteRange(0, 1 << 20)).headerValue == "bytes=0-1048575")
        #expect(RequestedRange.bounded(ByteRange(5, 6)).spec == "5-5")
        #expect(RequestedRange.from(7).spec == "7-")
        #expect(RequestedRange.from(7).headerValue == "bytes=7-")
        // Numbers whose text is longer than a small string holds.
        let far = RequestedRange.bounded(ByteRange(1 << 40, 1 << 41))
        #expect(far.spec == "1099511627776-2199023255551")
        #expect(far.headerValue == "bytes=1099511627776-2199023255551")
        #expect(RequestedRange.from(Int64.max - 1).spec == "9223372036854775806-")
    }

    @Test("the timeouts are given to libcurl in its units: whole milliseconds to connect, whole seconds to stall")
    func timeoutsInLibcurlsUnits() {
        var configuration = Downloader.Configuration()
        configuration.timeout.connect = .milliseconds(2500)
        configuration.timeout.stall = .milliseconds(1500)
        var options = TransferOptions(configuration)
        #expect(options.connectTimeoutMilliseconds == 2500)
        #expect(options.stallTimeoutSeconds == 2, "rounded up")
        // Changed later, they follow; below a millisecond or a second, libcurl's 0 (no limit) is
        // never what is sent.
        options.connectTimeout = .microseconds(10)
        options.stallTimeout = .zero
        #expect(options.connectTimeoutMilliseconds == 1)
        #expect(options.stallTimeoutSeconds == 1)
        options.connectTimeout = .seconds(30)
        options.stallTimeout = .seconds(60)
        #expect(options.connectTimeoutMilliseconds == 30_000)
        #expect(options.stallTimeoutSeconds == 60)
    }

    @Test("the environment's proxy with none of its variables set is no proxy; with any set, libcurl reads them")
    func proxyFromAnEmptyEnvironment() {
        let fromEnvironment = Downloader.Configuration.Proxy.fromEnvironment
        #expect(TransferOptions.proxy(fromEnvironment, environment: [:]) == .direct)
        #expect(TransferOptions.proxy(fromEnvironment, environment: ["no_proxy": "internal"]) == .fromEnvironment)
        // An empty variable is set: libcurl reads it (and it turns that scheme's proxy off).
        #expect(TransferOptions.proxy(fromEnvironment, environment: ["http_proxy": ""]) == .fromEnvironment)
        #expect(TransferOptions.proxy(.direct, environment: ["http_proxy": "http://p:1"]) == .direct)
        #expect(TransferOptions.proxy(.url("http://p:1"), environment: [:]) == .url("http://p:1"))
    }
}
