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

    private struct State {
        var objects: [String: TestObject] = [:]
        var redirects: [String: Redirect] = [:]
        var faults = FaultSwitches()
        /// Whether `changeAfterRequests` has fired since it was last armed.
        var changeFired = false
        /// Finished requests with their ordinals, kept in ordinal (arrival) order.
        var log: [(ordinal: Int, request: RecordedRequest)] = []
        /// Bumped by `resetLog()`, so responses still running from before it are not logged.
        var logGeneration = 0
        var requestCount = 0
        var connectionsAccepted = 0
        /// Requests received and not yet finished, and the most there have been at once.
        var inFlight = 0
        var peakInFlight = 0
        /// Accepted connections not yet closed, with their IDs.
        var openChannels: [ObjectIdentifier: (id: Int, channel: any Channel)] = [:]
        var isShutDown = false
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
        state.withLock { $0.objects[path] = object }
    }

    func object(at path: String) -> TestObject? {
        state.withLock { $0.objects[path] }
    }

    func changeObject(at path: String) {
        state.withLock { state in
            state.objects[path]?.seed &+= 1
        }
    }

    func setRedirect(_ redirect: Redirect, from path: String) {
        state.withLock { $0.redirects[path] = redirect }
    }

    var faults: FaultSwitches { state.withLock { $0.faults } }

    func updateFaults(_ body: (inout FaultSwitches) -> Void) {
        state.withLock { state in
            let before = state.faults.changeAfterRequests
            body(&state.faults)
            if state.faults.changeAfterRequests != before {
                state.changeFired = false
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
        }
    }

    /// Counts a request that has fully arrived, fires `changeAfterRequests` when due, and plans
    /// the response from the state as it is now.
    func begin(_ request: HTTPRequestHead, connectionID: Int) -> (Ticket, ResponsePlan) {
        let target = RequestTarget(request.uri)
        return state.withLock { state in
            state.requestCount += 1
            state.inFlight += 1
            state.peakInFlight = max(state.peakInFlight, state.inFlight)
            let ordinal = state.requestCount
            if let after = state.faults.changeAfterRequests, ordinal > after, !state.changeFired {
                state.changeFired = true
                for path in state.objects.keys {
                    state.objects[path]!.seed &+= 1
                }
            }
            let plan = ResponsePlanner(
                request: request,
                target: target,
                ordinal: ordinal,
                connectionID: connectionID,
                faults: state.faults
            ).plan(object: state.objects[target.path], redirect: state.redirects[target.path])
            if case .payload(_, _, _?) = plan.body, let left = state.faults.flipByte?.responses {
                state.faults.flipByte?.responses = left - 1
            }
            return (Ticket(ordinal: ordinal, logGeneration: state.logGeneration), plan)
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
