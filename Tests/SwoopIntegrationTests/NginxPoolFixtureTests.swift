import Foundation
import SwoopTestOrigin
import Testing

/// The `NginxPool` fixture behaves as its documentation says (Swoop is not involved): through the
/// balancer, ETag and Last-Modified alternate between the nodes' copies, each node judges
/// `If-Match` by its own ETag, and the bytes are equal or differ as configured.
@Suite("The nginx load-balanced pool fixture")
struct NginxPoolFixtureTests {
    @Test(
        "validators alternate through the balancer, each node judges If-Match by its own",
        arguments: [NginxPool.Copies.sameBytes, .differentBytes])
    func alternatingValidators(_ copies: NginxPool.Copies) async throws {
        let size: Int64 = 100_000
        let pool = try await NginxPool.start(copies: copies, size: size, seed: 5)
        defer { pool.stop() }
        let (node0, node1) = (pool.nodes[0], pool.nodes[1])
        #expect(node0.etag != node1.etag && node0.lastModified != node1.lastModified)
        #expect(node0.seed == 5 && node1.seed == (copies == .sameBytes ? 5 : 6))

        // Each node, asked directly, sends the validators the fixture names.
        let direct = try await PythonHTTPClient.send(
            pool.nodes.map { .init(url: $0.baseURL + pool.path, method: "HEAD") })
        #expect(direct.map { $0.header("ETag") } == [node0.etag, node1.etag])
        #expect(direct.map { $0.header("Last-Modified") } == [node0.lastModified, node1.lastModified])

        let range = PythonHTTPClient.Request(url: pool.url, headers: ["Range": "bytes=0-9"])
        let ranged = try await PythonHTTPClient.send(Array(repeating: range, count: 4))
        let etags = ranged.map { $0.header("ETag") }
        #expect(Set(etags) == [node0.etag, node1.etag])
        #expect(etags[0] != etags[1] && etags[2] == etags[0] && etags[3] == etags[1], "\(etags)")
        for response in ranged {
            let node = try #require(pool.nodes.first { $0.etag == response.header("ETag") })
            #expect(response.status == 206)
            #expect(response.header("Last-Modified") == node.lastModified)
            #expect(response.header("Content-Range") == "bytes 0-9/\(size)")
            #expect(Array(response.body) == Payload.bytes(seed: node.seed, offset: 0, count: 10))
        }

        // The whole file, twice: once from each node.
        let whole = try await PythonHTTPClient.send(Array(repeating: .init(url: pool.url), count: 2))
        #expect(Set(whole.map { $0.header("ETag") }) == [node0.etag, node1.etag])
        for response in whole {
            let node = try #require(pool.nodes.first { $0.etag == response.header("ETag") })
            #expect(Array(response.body) == Payload.bytes(seed: node.seed, offset: 0, count: Int(size)))
        }
        #expect((whole[0].body == whole[1].body) == (copies == .sameBytes))

        // If-Match with node 0's ETag passes on node 0 only; with both, on both.
        func twice(ifMatch: String) async throws -> [PythonHTTPClient.Response] {
            let request = PythonHTTPClient.Request(url: pool.url, headers: ["Range": "bytes=0-9", "If-Match": ifMatch])
            return try await PythonHTTPClient.send([request, request])
        }
        let matching = try await twice(ifMatch: node0.etag)
        #expect(matching.map(\.status).sorted() == [206, 412])
        // (nginx's 412 page has no ETag: the access logs below say node 1 sent it.)
        #expect(matching.first { $0.status == 206 }?.header("ETag") == node0.etag)
        let both = try await twice(ifMatch: "\(node0.etag), \(node1.etag)")
        #expect(both.map(\.status) == [206, 206])

        // Every request through the balancer reached one node, half each (nginx logs a request
        // just after its response).
        func logs() -> [[Nginx.LogEntry]] {
            (0..<2).map { ((try? pool.log(ofNode: $0)) ?? []).filter { $0.uri == pool.path } }
        }
        #expect(try await eventually { logs().map(\.count) == [6, 6] }, "\(logs().map(\.count))")
        let served = logs()
        #expect(served[0].filter { $0.status == 412 }.isEmpty && served[1].filter { $0.status == 412 }.count == 1)

        // Stopped, nothing is left: no listener, no directory.
        pool.stop()
        for port in [pool.port] + pool.nodes.map(\.port) {
            #expect(!FreePort.isListening(port), "port \(port)")
        }
        #expect(!FileManager.default.fileExists(atPath: pool.directory.path))
    }
}
