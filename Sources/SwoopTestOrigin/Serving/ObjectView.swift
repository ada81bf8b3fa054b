/// What the origin remembers of one path for the servers whose validators lie.
struct PathMemory: Sendable {
    /// The object the current one replaced, and when (for `staleValidatorsFor`).
    var replaced: (previous: TestObject, at: ContinuousClock.Instant)?
    /// The object as the path's first request saw it (for `metadataFromFirstRequest`).
    var firstSeen: TestObject?
}

/// An object as one response presents it: the validators and size it declares, which a lying
/// server takes from elsewhere (another node's copy, a cache), beside the bytes it really has.
struct ObjectView {
    /// The object whose `ETag` and `Last-Modified` are sent and against which preconditions are
    /// evaluated.
    var validators: TestObject
    /// The size sent in `Content-Length` and `Content-Range`, and against which ranges resolve.
    var declaredSize: Int64
    /// The object whose bytes and other headers are sent; there are no bytes past its end.
    var content: TestObject
    /// The node of ``FaultSwitches/nodePool`` that answers, if any.
    var node: Int?
    /// What made the view differ from the stored object, in `faultApplied`'s words.
    var faults: [String] = []

    /// The view of `object` for a request answered at `now` by `node` (nil without a pool).
    init(
        object: TestObject, memory: PathMemory?, faults switches: FaultSwitches, node: Int?,
        now: ContinuousClock.Instant
    ) {
        content = object
        validators = object
        declaredSize = object.size
        self.node = node
        if switches.metadataFromFirstRequest, let first = memory?.firstSeen {
            validators = first
            declaredSize = first.size
            if !Self.sameValidators(first, object) || first.size != object.size { faults.append("firstMetadata") }
        } else if let window = switches.staleValidatorsFor, let replaced = memory?.replaced,
            now < replaced.at + window
        {
            validators = replaced.previous
            if !Self.sameValidators(replaced.previous, object) { faults.append("staleValidators") }
        }
        if let pool = switches.nodePool, let node {
            content = pool.copy(of: content, onNode: node)
            validators = pool.copy(of: validators, onNode: node)
            faults.append("node\(node)")
        }
    }

    /// Whether the two send the same `ETag` and `Last-Modified`.
    private static func sameValidators(_ a: TestObject, _ b: TestObject) -> Bool {
        a.etagValue == b.etagValue && a.lastModifiedValue == b.lastModifiedValue
    }
}
