extension FaultSwitches {
    /// A pool of `nodes` servers behind a load balancer in front of every object. Each request is
    /// answered by one node, from that node's copy of the object, with that copy's `ETag` and
    /// `Last-Modified`; the node evaluates the request's preconditions (`If-Match`,
    /// `If-Unmodified-Since`, `If-None-Match`, `If-Modified-Since`, `If-Range`) against its own
    /// validators. Node 0's copy is the object itself. Every response of an object is recorded
    /// as `node<i>` (`node0`, `node1`, ...), redirects and error pages of the origin are not.
    public struct NodePool: Sendable, Hashable {
        /// What the nodes' copies hold.
        public enum Copies: Sendable, Hashable {
            /// The same bytes, copied at different times: node i's copy is i minutes newer
            /// (``TestObject/mtimeOffsetSeconds`` + 60 × i), so its ETag and Last-Modified differ.
            case sameBytes
            /// Another version on each node, as in a deploy half done: node i serves seed + i with
            /// the same size and that version's validators (node 1 holds what
            /// ``TestOrigin/changeObject(at:)`` would make of the object).
            case differentBytes
        }

        /// How the balancer picks a request's node.
        public enum Assignment: Sendable, Hashable {
            /// Round robin per request, as nginx's `upstream` does: the Kth request (its ordinal,
            /// as for the other "first K requests" switches) goes to node (K - 1) mod `nodes`.
            case perRequest
            /// Fixed per TCP connection, as a layer-4 balancer does: connection C
            /// (``RecordedRequest/connectionID``) goes to node (C - 1) mod `nodes`.
            case perConnection
        }

        /// How many nodes, at least 2.
        public var nodes: Int
        public var copies: Copies
        public var assignment: Assignment

        public init(nodes: Int = 2, copies: Copies, assignment: Assignment = .perRequest) {
            precondition(nodes >= 2, "a pool has at least 2 nodes")
            self.nodes = nodes
            self.copies = copies
            self.assignment = assignment
        }

        /// The node that answers the request with ordinal `ordinal` on connection `connectionID`.
        public func node(ordinal: Int, connectionID: Int) -> Int {
            let turn = assignment == .perRequest ? ordinal : connectionID
            return ((turn - 1) % nodes + nodes) % nodes
        }

        /// `object` as node `node` serves it: its bytes (``TestObject/seed``) and validators.
        public func copy(of object: TestObject, onNode node: Int) -> TestObject {
            var copy = object
            switch copies {
            case .sameBytes: copy.mtimeOffsetSeconds += 60 * Int64(node)
            case .differentBytes: copy.seed &+= UInt64(node)
            }
            return copy
        }
    }

    /// Answers `416` to every request with a `Range` header (satisfiable, malformed or not) for an
    /// object of at most `objectsUpTo` bytes, and the whole object with `200` to a request without
    /// one. Preconditions are evaluated first (a `412` wins); ``rangeSupport`` `false` wins over
    /// it. Recorded as `refuse416`.
    public struct RangeRefusal: Sendable, Hashable {
        /// Objects of at most this size are refused.
        public var objectsUpTo: Int64
        /// Whether the 416 carries `Content-Range: bytes */SIZE` (or no `Content-Range`).
        public var withContentRange: Bool

        public init(objectsUpTo: Int64, withContentRange: Bool = true) {
            self.objectsUpTo = objectsUpTo
            self.withContentRange = withContentRange
        }
    }

    /// Changes the object at `path` once when the body bytes of its responses reach `bytes` in
    /// total, counting the responses that began while this value was set: replaced whole (seed
    /// + 1, as ``TestOrigin/changeObject(at:)`` does), or with `rewritingBlocksAt`, the 4 KiB
    /// blocks at those offsets rewritten in place (``TestOrigin/rewriteInPlace(at:blocksAt:)``).
    /// Bytes count as they are handed to the socket, so the change is made before the byte that
    /// reaches the count is sent: a client that has seen it, and any request it sends next,
    /// finds the new object. Responses under way keep sending the bytes they started with after
    /// a replacement, and send the new bytes after a rewrite in place (a server reading a file
    /// patched under it). Setting another value, or ``TestOrigin/resetLog()``, arms it again
    /// with a count of 0.
    public struct ChangeAfterBodyBytes: Sendable, Hashable {
        /// The object's path, e.g. `/a.bin`.
        public var path: String
        /// The total body bytes of that path after which it changes; at least 1.
        public var bytes: Int64
        /// The offsets of the 4 KiB blocks rewritten in place; `nil`: the object is replaced whole.
        public var rewritingBlocksAt: [Int64]?

        public init(path: String, bytes: Int64, rewritingBlocksAt: [Int64]? = nil) {
            precondition(path.hasPrefix("/"), "object paths start with /")
            precondition(bytes >= 1, "changeAfterBodyBytes needs at least 1 byte")
            self.path = path
            self.bytes = bytes
            self.rewritingBlocksAt = rewritingBlocksAt
        }
    }
}
