import NIOHTTP1
import SwoopTestOrigin
import Testing

/// `nodePool`: a load-balanced pool whose nodes hold copies of each object with validators of
/// their own (the same bytes, or another version), each node judging preconditions by its own.
@Suite struct NodePoolTests {
    private func body(seed: UInt64, _ range: ClosedRange<Int64>) -> [UInt8] {
        Payload.bytes(seed: seed, offset: range.lowerBound, count: Int(range.upperBound - range.lowerBound + 1))
    }

    @Test func sameBytesRoundRobinAlternatesTheValidators() async throws {
        try await withOrigin { origin in
            let object = TestObject(size: 10_000, seed: 3)
            origin.addObject(object, at: "/a")
            let pool = FaultSwitches.NodePool(nodes: 2, copies: .sameBytes)
            origin.updateFaults { $0.nodePool = pool }
            let nodes = [pool.copy(of: object, onNode: 0), pool.copy(of: object, onNode: 1)]
            #expect(nodes[0] == object)
            #expect(nodes[1].seed == object.seed)
            #expect(nodes[1].etagValue != nodes[0].etagValue)
            #expect(nodes[1].lastModifiedEpochSeconds == object.lastModifiedEpochSeconds + 60)

            let connection = try await RawHTTPConnection.connect(to: origin)
            for turn in 0..<4 {
                let response = try await connection.request(.GET, "/a", headers: [("Range", "bytes=0-9")])
                let node = nodes[turn % 2]
                #expect(response.status == 206)
                #expect(response.header("ETag") == node.etagValue, "request \(turn + 1)")
                #expect(response.header("Last-Modified") == node.lastModifiedValue, "request \(turn + 1)")
                #expect(response.header("Content-Range") == "bytes 0-9/10000")
                #expect(response.body == body(seed: 3, 0...9))
            }
            #expect(try await eventually { origin.requests.count == 4 })
            #expect(origin.requests.map(\.faultApplied) == ["node0", "node1", "node0", "node1"])
        }
    }

    @Test func eachNodeJudgesPreconditionsByItsOwnValidators() async throws {
        try await withOrigin { origin in
            let object = TestObject(size: 10_000, seed: 3)
            origin.addObject(object, at: "/a")
            let pool = FaultSwitches.NodePool(nodes: 2, copies: .sameBytes)
            origin.updateFaults { $0.nodePool = pool }
            let (node0, node1) = (pool.copy(of: object, onNode: 0), pool.copy(of: object, onNode: 1))
            let connection = try await RawHTTPConnection.connect(to: origin)
            let range = ("Range", "bytes=100-199")

            // Odd requests reach node 0, even ones node 1.
            func statuses(_ headers: [(String, String)]) async throws -> [Int] {
                let first = try await connection.request(.GET, "/a", headers: headers)
                let second = try await connection.request(.GET, "/a", headers: headers)
                return [first.status, second.status]
            }
            #expect(try await statuses([range, ("If-Match", node0.etagValue!)]) == [206, 412])
            #expect(try await statuses([range, ("If-Match", node1.etagValue!)]) == [412, 206])
            let both = "\(node0.etagValue!), \(node1.etagValue!)"
            #expect(try await statuses([range, ("If-Match", both)]) == [206, 206])
            // Node 1's copy is newer than node 0's Last-Modified, not the other way round.
            #expect(try await statuses([range, ("If-Unmodified-Since", node0.lastModifiedValue!)]) == [206, 412])
            #expect(try await statuses([range, ("If-Unmodified-Since", node1.lastModifiedValue!)]) == [206, 206])
            // If-Range with node 0's ETag: a range from node 0, the whole object from node 1.
            #expect(try await statuses([range, ("If-Range", node0.etagValue!)]) == [206, 200])
            #expect(try await statuses([("If-None-Match", node0.etagValue!)]) == [304, 200])

            let failed = try await connection.request(.GET, "/a", headers: [range, ("If-Match", node1.etagValue!)])
            #expect(failed.status == 412)
            #expect(failed.header("ETag") == node0.etagValue)
            #expect(failed.body.isEmpty)
        }
    }

    @Test func differentBytesServeAnotherVersionOnEachNode() async throws {
        try await withOrigin { origin in
            let object = TestObject(size: 50_000, seed: 20)
            origin.addObject(object, at: "/a")
            let pool = FaultSwitches.NodePool(nodes: 3, copies: .differentBytes)
            origin.updateFaults { $0.nodePool = pool }
            let connection = try await RawHTTPConnection.connect(to: origin)
            var etags: Set<String> = []
            for turn in 0..<6 {
                let node = turn % 3
                let copy = pool.copy(of: object, onNode: node)
                #expect(copy.seed == 20 + UInt64(node) && copy.size == object.size)
                let whole = turn < 3
                let headers = whole ? [] : [("Range", "bytes=1000-1999")]
                let response = try await connection.request(.GET, "/a", headers: headers)
                #expect(response.header("ETag") == copy.etagValue, "request \(turn + 1)")
                #expect(response.header("Last-Modified") == copy.lastModifiedValue)
                let expected = whole ? body(seed: copy.seed, 0...49_999) : body(seed: copy.seed, 1000...1999)
                #expect(response.body == expected)
                etags.insert(try #require(response.header("ETag")))
            }
            #expect(etags.count == 3)
            // Node 1 holds what changeObject makes of the object.
            var changed = object
            changed.seed += 1
            #expect(pool.copy(of: object, onNode: 1) == changed)
            #expect(try await eventually { origin.requests.count == 6 })
            #expect(origin.requests.map(\.faultApplied) == ["node0", "node1", "node2", "node0", "node1", "node2"])
        }
    }

    @Test func perConnectionAssignmentKeepsAConnectionOnOneNode() async throws {
        try await withOrigin { origin in
            let object = TestObject(size: 1000, seed: 4)
            origin.addObject(object, at: "/a")
            let pool = FaultSwitches.NodePool(nodes: 2, copies: .differentBytes, assignment: .perConnection)
            origin.updateFaults { $0.nodePool = pool }
            let first = try await RawHTTPConnection.connect(to: origin)
            let second = try await RawHTTPConnection.connect(to: origin)
            #expect(try await eventually { origin.connectionsAccepted == 2 })
            for _ in 0..<3 {
                let one = try await first.request(.GET, "/a")
                let two = try await second.request(.GET, "/a")
                #expect(one.header("ETag") == object.etagValue)
                #expect(one.body == body(seed: 4, 0...999))
                #expect(two.header("ETag") == pool.copy(of: object, onNode: 1).etagValue)
                #expect(two.body == body(seed: 5, 0...999))
            }
            #expect(try await eventually { origin.requests.count == 6 })
            for request in origin.requests {
                #expect(request.faultApplied == "node\(request.connectionID - 1)")
            }
            #expect(pool.node(ordinal: 7, connectionID: 3) == 0)
        }
    }

    @Test func thePoolFollowsAReplacedObject() async throws {
        try await withOrigin { origin in
            origin.addObject(TestObject(size: 1000, seed: 10), at: "/a")
            let pool = FaultSwitches.NodePool(nodes: 2, copies: .sameBytes)
            origin.updateFaults { $0.nodePool = pool }
            origin.changeObject(at: "/a")
            let changed = try #require(origin.object(at: "/a"))
            let connection = try await RawHTTPConnection.connect(to: origin)
            let zero = try await connection.request(.GET, "/a")
            let one = try await connection.request(.GET, "/a")
            #expect(zero.header("ETag") == changed.etagValue)
            #expect(one.header("ETag") == pool.copy(of: changed, onNode: 1).etagValue)
            #expect(zero.body == body(seed: 11, 0...999) && one.body == zero.body)
            // Not an object: no node is recorded.
            #expect(try await connection.request(.GET, "/missing").status == 404)
            #expect(try await eventually { origin.requests.count == 3 })
            #expect(origin.requests[2].faultApplied == nil)
        }
    }
}
