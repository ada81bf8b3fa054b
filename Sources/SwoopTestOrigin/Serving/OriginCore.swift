import NIOCore
import NIOHTTP1
import Synchronization

/// Everything the event loops share: the objects, switches, counters and request log, behind
/// one lock. Every operation is short and does no I/O while holding it.
final class OriginCore: Sendable {
    struct Redirect: Sendable {
        var location: String
        var status: Int
    }

    /// A request that has arrived and is being answered; the handler turns it into a
    /// ``RecordedRequest`` when the response ends.
    struct Ticket: Sendable {
        var ordinal: Int
        var logGeneration: Int
    }

    /// `changeAfterBodyBytes`'s count since it was last armed.
    struct BodyByteCount {
        /// Bumped each time it is armed, so bytes of responses from an earlier arming are ignored.
        var arming = 0
        var sent: Int64 = 0
        var fired = false
    }

    private struct State {
        var objects: [String: TestObject] = [:]
        var redirects: [String: Redirect] = [:]
        var faults = FaultSwitches()
        /// Whether `changeAfterRequests` has fired since it was last armed.
        var changeFired = false
        var bodyByteCount = BodyByteCount()
        /// What the lying validator modes remember, by path.
        var memory: [String: PathMemory] = [:]
        /// Finished requests with their ordinals, kept in ordinal (arrival) order.
        var log: [(ordinal: Int, request: RecordedRequest)] = []
        /// Bumped by `resetLog()`, so responses still running from before it are not logged.
        var logGeneration = 0
        var requestCount = 0
        var connectionsAccepted = 0
        /// Requests received and not yet finished, and the most there have been at once.
        var inFlight = 0
        var peakInFlight = 0
        /// When the worker of ``FaultSwitches/workPerRequest`` is done with the requests so far.
        var workDoneAt = ContinuousClock.now
        /// Each client address's allowance under ``FaultSwitches/perClientBytesPerSecond``: bytes
        /// it may be sent now, as of when.
        var clientAllowance: [String: ClientAllowance] = [:]
        /// Body bytes sent to each address under ``FaultSwitches/clientBodyLimits``, since its
        /// limit was set.
        var clientBodySent: [String: Int64] = [:]
        /// Accepted connections not yet closed, with their IDs.
        var openChannels: [ObjectIdentifier: (id: Int, channel: any Channel)] = [:]
        var isShutDown = false

        /// Puts `object` at `path` (nil removes it). A different object where there was one is a
        /// replacement, remembered for `staleValidatorsFor`: the one replaced and when, unless an
        /// earlier replacement's window is still open.
        mutating func replace(_ path: String, with object: TestObject?, now: ContinuousClock.Instant) {
            let old = objects[path]
            objects[path] = object
            guard object != nil else {
                memory[path]?.replaced = nil
                return
            }
            guard let old, old != object else { return }
            if let replaced = memory[path]?.replaced, let window = faults.staleValidatorsFor,
                now < replaced.at + window
            {
                return
            }
            memory[path, default: PathMemory()].replaced = (old, now)
        }

        /// The object at `path` replaced by its next content generation (seed + 1), or with
        /// `blocks`, those 4 KiB blocks rewritten in place.
        mutating func change(_ path: String, rewriting blocks: [Int64]? = nil, now: ContinuousClock.Instant) {
            guard var object = objects[path] else { return }
            if let blocks {
                object = object.rewritten(blocksAt: blocks)
            } else {
                object.seed &+= 1
            }
            replace(path, with: object, now: now)
        }

        mutating func armBodyByteCount() {
            bodyByteCount = BodyByteCount(arming: bodyByteCount.arming + 1)
        }
    }

    private let state = Mutex(State())

    // MARK: Connections

    /// Called in accept order on the listening channel's event loop; returns the connection ID.
    func accepted(_ channel: any Channel) -> Int {
        let key = ObjectIdentifier(channel)
        let id = state.withLock { state in
            state.connectionsAccepted += 1
            state.openChannels[key] = (state.connectionsAccepted, channel)
            return state.connectionsAccepted
        }
        channel.closeFuture.whenComplete { [self] _ in
            _ = state.withLock { $0.openChannels.removeValue(forKey: key) }
        }
        return id
    }

    /// The ID that `accepted(_:)` gave this channel.
    func connectionID(of channel: any Channel) -> Int {
        state.withLock { $0.openChannels[ObjectIdentifier(channel)]?.id } ?? 0
    }

    var connectionsAccepted: Int { state.withLock { $0.connectionsAccepted } }

    /// The connections open now.
    var openConnections: [any Channel] { state.withLock { $0.openChannels.values.map(\.channel) } }

    // MARK: Lifecycle

    var isShutDown: Bool { state.withLock { $0.isShutDown } }

    /// Marks the origin shut down and returns the connections to close; nil if it already was.
    func beginShutdown() -> [any Channel]? {
        state.withLock { state in
            guard !state.isShutDown else { return nil }
            state.isShutDown = true
            return state.openChannels.values.map(\.channel)
        }
    }

    // MARK: Objects and switches

    func setObject(_ object: TestObject?, at path: String) {
        let now = ContinuousClock.now
        state.withLock { $0.replace(path, with: object, now: now) }
    }

    func object(at path: String) -> TestObject? {
        state.withLock { $0.objects[path] }
    }

    func changeObject(at path: String, rewriting blocks: [Int64]? = nil) {
        let now = ContinuousClock.now
        state.withLock { $0.change(path, rewriting: blocks, now: now) }
    }

    func setRedirect(_ redirect: Redirect, from path: String) {
        state.withLock { $0.redirects[path] = redirect }
    }

    var faults: FaultSwitches { state.withLock { $0.faults } }

    func updateFaults(_ body: (inout FaultSwitches) -> Void) {
        state.withLock { state in
            let before = state.faults
            body(&state.faults)
            if state.faults.changeAfterRequests != before.changeAfterRequests {
                state.changeFired = false
            }
            if state.faults.changeAfterBodyBytes != before.changeAfterBodyBytes {
                state.armBodyByteCount()
            }
            for (address, limit) in before.clientBodyLimits where state.faults.clientBodyLimits[address] != limit {
                state.clientBodySent[address] = nil
            }
            if before.metadataFromFirstRequest, !state.faults.metadataFromFirstRequest {
                for path in state.memory.keys { state.memory[path]?.firstSeen = nil }
            }
        }
    }

    // MARK: Requests

    var requestCount: Int { state.withLock { $0.requestCount } }

    var peakInFlight: Int { state.withLock { $0.peakInFlight } }

    var requests: [RecordedRequest] { state.withLock { $0.log.map(\.request) } }

    func resetLog() {
        state.withLock { state in
            state.log.removeAll()
            state.logGeneration += 1
            state.requestCount = 0
            state.peakInFlight = state.inFlight
            state.changeFired = false
            state.armBodyByteCount()
        }
    }

    /// Of `count` body bytes for `address`, those its limit (``FaultSwitches/clientBodyLimits``)
    /// still allows, counted as sent; `count` when it has none.
    func takeClientBody(_ address: String, wants count: Int64) -> Int64 {
        state.withLock { state in
            guard let limit = state.faults.clientBodyLimits[address] else { return count }
            let granted = max(0, min(count, limit - state.clientBodySent[address, default: 0]))
            state.clientBodySent[address, default: 0] += granted
            return granted
        }
    }

    /// Takes up to `count` body bytes from `address`'s allowance at `rate` bytes per second,
    /// shared by all its connections (``ClientAllowance``).
    func takeClientAllowance(_ address: String, rate: Int, wants count: Int64) -> (granted: Int64, wait: Duration) {
        let now = ContinuousClock.now
        return state.withLock { state in
            var allowance = state.clientAllowance[address] ?? ClientAllowance(rate: rate, at: now)
            let outcome = allowance.take(count, rate: rate, at: now)
            state.clientAllowance[address] = allowance
            return outcome
        }
    }

    /// Counts a request that has fully arrived, fires `changeAfterRequests` when due, and plans
    /// the response from the state as it is now.
    func begin(_ request: HTTPRequestHead, connectionID: Int) -> (Ticket, ResponsePlan) {
        let target = RequestTarget(request.uri)
        let now = ContinuousClock.now
        return state.withLock { state in
            state.requestCount += 1
            state.inFlight += 1
            state.peakInFlight = max(state.peakInFlight, state.inFlight)
            let ordinal = state.requestCount
            if let after = state.faults.changeAfterRequests, ordinal > after, !state.changeFired {
                state.changeFired = true
                for path in state.objects.keys {
                    state.change(path, now: now)
                }
            }
            let faults = state.faults
            var view: ObjectView? = nil
            if let object = state.objects[target.path] {
                if faults.metadataFromFirstRequest, state.memory[target.path]?.firstSeen == nil {
                    state.memory[target.path, default: PathMemory()].firstSeen = object
                }
                view = ObjectView(
                    object: object, memory: state.memory[target.path], faults: faults,
                    node: faults.nodePool?.node(ordinal: ordinal, connectionID: connectionID), now: now)
            }
            var document: [UInt8]? = nil
            if let listing = faults.s3Listing, request.method == .GET, let query = target.query,
                let bucket = S3ListingDocument.bucket(of: target)
            {
                document = S3ListingDocument(mode: listing).body(bucket: bucket, query: query, objects: state.objects)
            }
            var plan = ResponsePlanner(
                request: request,
                target: target,
                ordinal: ordinal,
                connectionID: connectionID,
                faults: faults
            ).plan(view: view, redirect: state.redirects[target.path], document: document)
            if case .payload(_, _, _?) = plan.body, let left = faults.flipByte?.responses {
                state.faults.flipByte?.responses = left - 1
            }
            if let work = faults.workPerRequest {
                state.workDoneAt = max(now, state.workDoneAt) + work
                let wait = (state.workDoneAt - now).wholeMilliseconds
                plan.headDelayMilliseconds = max(plan.headDelayMilliseconds ?? 0, wait)
            }
            if case .payload = plan.body, faults.changeAfterBodyBytes?.path == target.path,
                !state.bodyByteCount.fired
            {
                plan.countedArming = state.bodyByteCount.arming
            }
            return (Ticket(ordinal: ordinal, logGeneration: state.logGeneration), plan)
        }
    }

    /// Adds body bytes written for a response counted by `changeAfterBodyBytes` (its arming),
    /// and replaces the object when the count reaches the switch's.
    func countBodyBytes(_ count: Int64, arming: Int) {
        let now = ContinuousClock.now
        state.withLock { state in
            guard let trigger = state.faults.changeAfterBodyBytes, arming == state.bodyByteCount.arming,
                !state.bodyByteCount.fired
            else { return }
            state.bodyByteCount.sent += count
            if state.bodyByteCount.sent >= trigger.bytes {
                state.bodyByteCount.fired = true
                state.change(trigger.path, rewriting: trigger.rewritingBlocksAt, now: now)
            }
        }
    }

    /// Logs a finished request in arrival order, unless the log was reset since it arrived.
    func finish(_ ticket: Ticket, _ request: RecordedRequest) {
        state.withLock { state in
            state.inFlight -= 1
            guard ticket.logGeneration == state.logGeneration else { return }
            // Usually the newest ordinal: search from the back.
            var index = state.log.endIndex
            while index > state.log.startIndex, state.log[index - 1].ordinal > ticket.ordinal {
                index -= 1
            }
            state.log.insert((ticket.ordinal, request), at: index)
        }
    }
}

/// The path and query of a request target (origin-form, or absolute-form as sent to proxies).
struct RequestTarget {
    var path: String
    var query: String?

    init(_ uri: String) {
        var rest = Substring(uri)
        if !rest.hasPrefix("/"), let scheme = rest.firstRange(of: "://") {
            let afterScheme = rest[scheme.upperBound...]
            rest = afterScheme.firstIndex(of: "/").map { afterScheme[$0...] } ?? "/"
        }
        if let question = rest.firstIndex(of: "?") {
            path = String(rest[..<question])
            query = String(rest[rest.index(after: question)...])
        } else {
            path = String(rest)
            query = nil
        }
    }
}

/// One client address's allowance of body bytes at a rate shared by all its connections: a
/// token bucket of 100 ms of the rate (at least 16 KiB), full at first. A grant waits for the
/// bytes asked for or a full bucket, whichever is less: never a dribble of the bytes that
/// trickled in since the last grant (that spent the event loop on tiny writes, at half the rate).
struct ClientAllowance: Sendable {
    private var bytes: Double
    private var at: ContinuousClock.Instant

    init(rate: Int, at now: ContinuousClock.Instant) {
        bytes = Self.capacity(rate)
        at = now
    }

    static func capacity(_ rate: Int) -> Double { max(Double(16 << 10), Double(rate) / 10) }

    /// Up to `count` bytes at `now`: those granted, or none and how long until they are there.
    mutating func take(_ count: Int64, rate: Int, at now: ContinuousClock.Instant) -> (granted: Int64, wait: Duration) {
        let capacity = Self.capacity(rate)
        let elapsed = now - at
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        bytes = min(capacity, bytes + max(0, seconds) * Double(rate))
        at = now
        let wanted = min(Double(count), capacity)
        guard bytes >= wanted else {
            return (0, .nanoseconds(Int64((wanted - bytes) / Double(rate) * 1e9) + 1))
        }
        let granted = min(count, Int64(bytes))
        bytes -= Double(granted)
        return (granted, .zero)
    }
}
