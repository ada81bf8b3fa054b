import NIOCore
import NIOHTTP1
import NIOPosix
import SwoopTestOrigin

/// What came back for one request, however it ended.
struct RawResponse: Sendable {
    enum Ending: Sendable, Equatable {
        /// The full response arrived.
        case complete
        /// The connection closed first (possibly before any head).
        case closed
        /// Nothing more came within the timeout.
        case timedOut
    }

    var head: HTTPResponseHead?
    var body: [UInt8] = []
    var ending: Ending

    var status: Int { head.map { Int($0.status.code) } ?? 0 }

    func header(_ name: String) -> String? {
        head?.headers.first(name: name)
    }
}

/// One client connection to a test origin, driven request by request, seeing exactly what the
/// server sends (NIO's HTTP/1 codec, no client library logic in between).
final class RawHTTPConnection: Sendable {
    let channel: any Channel
    private let collector: NIOLoopBound<ResponseCollector>

    private init(channel: any Channel, collector: NIOLoopBound<ResponseCollector>) {
        self.channel = channel
        self.collector = collector
    }

    static func connect(to origin: TestOrigin) async throws -> RawHTTPConnection {
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    try channel.pipeline.syncOperations.addHandler(ResponseCollector())
                }
            }
            .connect(host: origin.host, port: origin.port)
            .get()
        let collector = try await channel.eventLoop.submit {
            NIOLoopBound(
                try channel.pipeline.syncOperations.handler(type: ResponseCollector.self),
                eventLoop: channel.eventLoop
            )
        }.get()
        return RawHTTPConnection(channel: channel, collector: collector)
    }

    /// Sends a request without a body.
    func send(_ method: HTTPMethod = .GET, _ uri: String, headers: [(String, String)] = []) async throws {
        var head = HTTPRequestHead(version: .http1_1, method: method, uri: uri)
        head.headers.add(name: "Host", value: "origin.test")
        head.headers.add(contentsOf: headers)
        channel.write(HTTPClientRequestPart.head(head), promise: nil)
        try await channel.writeAndFlush(HTTPClientRequestPart.end(nil))
    }

    /// The next response, or what there is of it when the connection closes or `timeout` passes.
    func response(timeout: TimeAmount = .seconds(60)) async throws -> RawResponse {
        let collector = self.collector
        return try await channel.eventLoop.flatSubmit {
            collector.value.next(timeout: timeout)
        }.get()
    }

    /// Sends a request and waits for its response.
    func request(
        _ method: HTTPMethod = .GET,
        _ uri: String,
        headers: [(String, String)] = [],
        timeout: TimeAmount = .seconds(60)
    ) async throws -> RawResponse {
        try await send(method, uri, headers: headers)
        return try await response(timeout: timeout)
    }

    func close() async {
        try? await channel.close()
    }
}

/// Collects response parts into `RawResponse`s and hands them out in order.
private final class ResponseCollector: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPClientResponsePart

    private var eventLoop: (any EventLoop)?
    private var ready: [RawResponse] = []
    private var current: RawResponse?
    private var isClosed = false
    private var waiter: (promise: EventLoopPromise<RawResponse>, timeout: Scheduled<Void>)?

    func handlerAdded(context: ChannelHandlerContext) {
        eventLoop = context.eventLoop
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            current = RawResponse(head: head, ending: .complete)
        case .body(let buffer):
            current?.body.append(contentsOf: buffer.readableBytesView)
        case .end:
            if let response = current {
                current = nil
                deliver(response)
            }
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        isClosed = true
        if var response = current {
            current = nil
            response.ending = .closed
            deliver(response)
        } else if waiter != nil {
            deliver(RawResponse(head: nil, ending: .closed))
        }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A body cut short surfaces as a parser error at EOF; the close reports it.
        context.close(promise: nil)
    }

    func next(timeout: TimeAmount) -> EventLoopFuture<RawResponse> {
        let eventLoop = self.eventLoop!
        if !ready.isEmpty {
            return eventLoop.makeSucceededFuture(ready.removeFirst())
        }
        if isClosed {
            return eventLoop.makeSucceededFuture(RawResponse(head: nil, ending: .closed))
        }
        precondition(waiter == nil, "one response(timeout:) at a time")
        let promise = eventLoop.makePromise(of: RawResponse.self)
        let scheduled = eventLoop.assumeIsolated().scheduleTask(in: timeout) { [self] in
            guard let waiter else { return }
            self.waiter = nil
            var partial = current ?? RawResponse(head: nil, ending: .timedOut)
            partial.ending = .timedOut
            waiter.promise.succeed(partial)
        }
        waiter = (promise, scheduled)
        return promise.futureResult
    }

    private func deliver(_ response: RawResponse) {
        if let waiter {
            self.waiter = nil
            waiter.timeout.cancel()
            waiter.promise.succeed(response)
        } else {
            ready.append(response)
        }
    }
}

/// Starts an origin on port 0, runs `body`, and always shuts the origin down.
func withOrigin<T>(_ body: (TestOrigin) async throws -> T) async throws -> T {
    try await TestOrigin.withRunning(body)
}
