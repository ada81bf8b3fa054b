import NIOCore
import NIOHTTP1

/// Assigns connection IDs in accept order. Sits on the listening channel, before the
/// bootstrap's own accept handler, so it sees every accepted channel first.
final class AcceptOrderHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = any Channel
    typealias InboundOut = any Channel

    private let core: OriginCore

    init(core: OriginCore) {
        self.core = core
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        _ = core.accepted(unwrapInboundIn(data))
        context.fireChannelRead(data)
    }
}

/// Answers the requests of one connection, one at a time (NIO's pipelining handler holds back
/// the next until this one's `.end` is written), streaming bodies slice by slice as the socket
/// drains so memory stays flat, pacing them when throttled, and cutting or stalling them when a
/// fault says so.
final class OriginConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    /// Slice size when sending as fast as possible.
    private static let fullSpeedSlice: Int64 = 256 << 10

    /// The response being sent; event-loop confined.
    private final class Response {
        let ticket: OriginCore.Ticket
        var plan: ResponsePlan
        /// Body bytes handed to the channel.
        var queued: Int64 = 0
        /// Body bytes whose writes have completed, i.e. reached the socket.
        var written: Int64 = 0
        /// Where sending stops: the body length, or the interruption point.
        let stopAt: Int64
        let slice: Int64
        var paceStart: NIODeadline? = nil
        var timer: Scheduled<Void>? = nil
        /// The last write's outcome, to close only after everything before it is on the wire.
        var lastWrite: EventLoopFuture<Void>? = nil
        /// The body reached `stopAt` and the ending (end, cut or stall) is under way.
        var isEnding = false
        /// `pump` is on the stack; a nested call sets `pumpAgain` instead of writing.
        var isPumping = false
        var pumpAgain = false

        init(ticket: OriginCore.Ticket, plan: ResponsePlan) {
            self.ticket = ticket
            self.plan = plan
            switch plan.interruption {
            case .cut(let after, _)?, .stall(let after)?: stopAt = min(after, plan.bodyLength)
            case nil: stopAt = plan.bodyLength
            }
            if let rate = plan.bytesPerSecond {
                // About 50 slices a second, between 1 KiB and 64 KiB each.
                slice = min(64 << 10, max(1 << 10, Int64(rate) / 50))
            } else {
                slice = OriginConnectionHandler.fullSpeedSlice
            }
        }
    }

    private let core: OriginCore
    private let connectionID: Int
    private var requestHead: HTTPRequestHead?
    private var response: Response?

    init(core: OriginCore, connectionID: Int) {
        self.core = core
        self.connectionID = connectionID
    }

    // MARK: Inbound

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            requestHead = head
        case .body:
            break  // request bodies are ignored
        case .end:
            guard let head = requestHead, response == nil else { return }
            requestHead = nil
            let (ticket, planned) = core.begin(head, connectionID: connectionID)
            var plan = planned
            plan.record.clientAddress = context.channel.remoteAddress?.ipAddress
            guard let delay = plan.headDelayMilliseconds else {
                return start(Response(ticket: ticket, plan: plan), context: context)
            }
            _ = context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(delay)) { [self] in
                if context.channel.isActive { start(Response(ticket: ticket, plan: plan), context: context) }
            }
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            pump(context: context)
        }
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        // The connection died mid-response (a cut, a stall the client gave up on, a client that
        // went away): log what made it out.
        if let response {
            response.timer?.cancel()
            self.response = nil
            log(response)
        }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }

    // MARK: Sending

    private func start(_ response: Response, context: ChannelHandlerContext) {
        self.response = response
        let promise = context.eventLoop.makePromise(of: Void.self)
        context.write(wrapOutboundOut(.head(response.plan.head)), promise: promise)
        response.lastWrite = promise.futureResult
        pump(context: context)
    }

    /// Writes body slices while the channel is writable and the pace allows, then flushes.
    ///
    /// A flush can make the channel writable again and so call back in here; such a nested call
    /// only asks the outer one to go round again.
    private func pump(context: ChannelHandlerContext) {
        guard let response, !response.isEnding, response.timer == nil else { return }
        guard !response.isPumping else {
            response.pumpAgain = true
            return
        }
        response.isPumping = true
        repeat {
            response.pumpAgain = false
            writeSlices(of: response, context: context)
            context.flush()
        } while response.pumpAgain && response.timer == nil
        response.isPumping = false
        if response.queued == response.stopAt, !response.isEnding {
            end(response, context: context)
        }
    }

    private func writeSlices(of response: Response, context: ChannelHandlerContext) {
        while response.queued < response.stopAt {
            guard context.channel.isWritable else { return }  // resumed by channelWritabilityChanged
            var count = min(response.slice, response.stopAt - response.queued)
            if let rate = response.plan.bytesPerSecond {
                let now = NIODeadline.now()
                let start = response.paceStart ?? now
                response.paceStart = start
                // Allowance: rate × elapsed, plus one slice up front, minus what was sent.
                let elapsed = Double((now - start).nanoseconds) / 1e9
                let allowance = Int64(Double(rate) * elapsed) + response.slice - response.queued
                if allowance < count {
                    let wait = Double(count - allowance) / Double(rate)
                    return pump(response, after: .nanoseconds(Int64(wait * 1e9) + 1), context: context)
                }
                count = min(count, allowance)
            }
            if let rate = response.plan.perClientBytesPerSecond, let address = response.plan.record.clientAddress {
                // The client's address shares one rate over all its connections.
                let (granted, wait) = core.takeClientAllowance(address, rate: rate, wants: count)
                guard granted > 0 else {
                    let nanoseconds =
                        wait.components.seconds * 1_000_000_000 + wait.components.attoseconds / 1_000_000_000
                    return pump(response, after: .nanoseconds(nanoseconds), context: context)
                }
                count = granted
            }
            if let address = response.plan.record.clientAddress {
                // A client held at its body limit hears nothing until the limit moves: look again soon.
                count = core.takeClientBody(address, wants: count)
                guard count > 0 else { return pump(response, after: .milliseconds(20), context: context) }
            }
            writeSlice(of: response, count: Int(count), context: context)
        }
    }

    /// Sends the rest of `response` after `delay` (a pace that holds it back).
    private func pump(_ response: Response, after delay: TimeAmount, context: ChannelHandlerContext) {
        response.timer = context.eventLoop.assumeIsolated().scheduleTask(in: delay) { [self] in
            response.timer = nil
            pump(context: context)
        }
    }

    private func writeSlice(of response: Response, count: Int, context: ChannelHandlerContext) {
        var buffer = context.channel.allocator.buffer(capacity: count)
        switch response.plan.body {
        case .payload(var object, let offset, let flip):
            let at = offset + response.queued
            if let path = response.plan.readsInPlace, let current = core.object(at: path),
                current.seed == object.seed, current.size == object.size, current.edits != object.edits
            {
                object = current
            }
            buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: count) { memory in
                object.fill(UnsafeMutableRawBufferPointer(rebasing: memory[0..<count]), offset: at)
                if let flip, flip >= at, flip < at + Int64(count) { memory[Int(flip - at)] ^= 0xFF }
                return count
            }
        case .fixed(let bytes):
            let from = Int(response.queued)
            buffer.writeBytes(bytes[from..<(from + count)])
        }
        response.queued += Int64(count)
        if let arming = response.plan.countedArming {
            // Counted before the write, so no client can see a byte past the count before the
            // object is replaced.
            core.countBodyBytes(Int64(count), arming: arming)
        }
        let promise = context.eventLoop.makePromise(of: Void.self)
        promise.futureResult.assumeIsolated().whenSuccess {
            response.written += Int64(count)
        }
        context.write(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: promise)
        response.lastWrite = promise.futureResult
    }

    /// The body reached its stop point: finish the response, cut the connection, or go silent.
    private func end(_ response: Response, context: ChannelHandlerContext) {
        response.isEnding = true
        switch response.plan.interruption {
        case nil:
            let promise = context.eventLoop.makePromise(of: Void.self)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: promise)
            promise.futureResult.assumeIsolated().whenSuccess { [self] in
                guard self.response === response else { return }
                self.response = nil
                log(response)
                if !response.plan.keepAlive {
                    context.close(promise: nil)
                }
            }
        case .cut(_, let fault)?:
            response.plan.faults.append(fault)
            // Close once the bytes before the cut are written; channelInactive logs it.
            response.lastWrite?.assumeIsolated().whenComplete { _ in
                context.close(promise: nil)
            }
        case .stall?:
            // Send nothing more; the client's close (or shutdown) ends it in channelInactive.
            response.plan.faults.append("stall")
        }
    }

    private func log(_ response: Response) {
        var record = response.plan.record
        record.bodyBytesSent = response.written
        record.faultApplied = response.plan.faults.isEmpty ? nil : response.plan.faults.joined(separator: "+")
        core.finish(response.ticket, record)
    }
}
