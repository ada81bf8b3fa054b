import ArgumentParser
import SwoopTestOrigin

/// `serve`'s flags for servers whose validators or ranges do not describe the bytes they send,
/// and for replacing an object while it is served.
struct LyingServerOptions: ParsableArguments {
    enum PoolCopies: String, ExpressibleByArgument, CaseIterable {
        /// The same bytes on every node, copied at different times.
        case same
        /// Node i serves the object's seed + i.
        case different
    }

    @Option(help: "Serve every object from a pool of N nodes (at least 2) behind a round-robin balancer.")
    var poolNodes: Int?

    @Option(help: "What the pool's nodes hold: the same bytes with their own ETag and Last-Modified, or seed + node.")
    var poolCopies: PoolCopies = .same

    @Flag(help: "Pick the pool's node per connection (a layer-4 balancer) instead of per request.")
    var poolPerConnection = false

    @Option(help: "After an object is replaced, keep sending its old ETag and Last-Modified for S seconds.")
    var staleValidatorsFor: Double?

    @Flag(help: "Compute each path's ETag, Last-Modified and size at its first request, and send them ever after.")
    var metadataFromFirstRequest = false

    @Flag(name: .customLong("range-as-200"), help: "Answer a range with 200, a Content-Range and the range's bytes.")
    var rangeAs200 = false

    @Option(help: "Serve at most BYTES of a range (k/m/g suffixes).")
    var rangeCap: ByteCount?

    @Option(help: "Answer 416 to every range request for objects of at most BYTES (k/m/g suffixes).")
    var refuseRangesUpTo: ByteCount?

    @Flag(help: "Send those 416s without Content-Range.")
    var refuseWithoutContentRange = false

    @Option(help: "Replace every object (seed + 1) once, after K requests.")
    var changeAfterRequests: Int?

    @Option(help: "Replace the object at PATH (seed + 1) once BYTES of its body have been sent: /PATH=BYTES.")
    var changeAfterBodyBytes: PathBytes?

    func validate() throws {
        if let nodes = poolNodes, nodes < 2 { throw ValidationError("--pool-nodes must be at least 2") }
        if poolNodes == nil, poolPerConnection || poolCopies != .same {
            throw ValidationError("--pool-copies and --pool-per-connection need --pool-nodes")
        }
        if let seconds = staleValidatorsFor, !(seconds > 0) {
            throw ValidationError("--stale-validators-for must be positive")
        }
        if let cap = rangeCap, cap.value < 1 { throw ValidationError("--range-cap must be at least 1 byte") }
        if refuseWithoutContentRange, refuseRangesUpTo == nil {
            throw ValidationError("--refuse-without-content-range needs --refuse-ranges-up-to")
        }
        if let after = changeAfterRequests, after < 0 {
            throw ValidationError("--change-after-requests must not be negative")
        }
    }

    /// Sets the switches these flags name.
    func apply(to faults: inout FaultSwitches) {
        if let nodes = poolNodes {
            faults.nodePool = .init(
                nodes: nodes, copies: poolCopies == .same ? .sameBytes : .differentBytes,
                assignment: poolPerConnection ? .perConnection : .perRequest)
        }
        faults.staleValidatorsFor = staleValidatorsFor.map { .milliseconds(Int64(($0 * 1000).rounded())) }
        faults.metadataFromFirstRequest = metadataFromFirstRequest
        faults.rangeAs200 = rangeAs200
        faults.rangeCapBytes = rangeCap?.value
        faults.rangeRefusal = refuseRangesUpTo.map {
            .init(objectsUpTo: $0.value, withContentRange: !refuseWithoutContentRange)
        }
        faults.changeAfterRequests = changeAfterRequests
        faults.changeAfterBodyBytes = changeAfterBodyBytes.map { .init(path: $0.path, bytes: $0.bytes) }
    }
}

/// `/PATH=BYTES`, BYTES at least 1 with an optional k/m/g suffix.
struct PathBytes: ExpressibleByArgument, Sendable {
    var path: String
    var bytes: Int64

    init?(argument: String) {
        guard let equals = argument.lastIndex(of: "="), argument.hasPrefix("/"),
            let count = ByteCount(argument: String(argument[argument.index(after: equals)...])), count.value >= 1
        else { return nil }
        path = String(argument[..<equals])
        bytes = count.value
    }
}
