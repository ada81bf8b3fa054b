import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The conformance servers' start (Swoop is not involved): a server is taken for started only when
/// it listens on its port itself, not when another program holds that port.
@Suite("The server process fixture")
struct ServerProcessFixtureTests {
    /// A socket listening on a free loopback port, as another test's server would hold it.
    private func holdPort() throws -> (fd: Int32, port: Int) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TestFailure("socket() failed") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let listening = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && listen(fd, 4) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard listening else {
            close(fd)
            throw TestFailure("bind() or listen() failed")
        }
        return (fd, Int(UInt16(bigEndian: address.sin_port)))
    }

    @Test("a server whose port another program holds is not taken for started, though the port answers")
    func portHeldByAnother() async throws {
        let python = try ServerPrograms.python()
        let held = try holdPort()
        defer { close(held.fd) }
        #expect(FreePort.isListening(held.port), "the port answers: something listens")
        let directory = try TemporaryDirectory.make(prefix: "swoop-server-process")
        defer { try? FileManager.default.removeItem(at: directory) }
        await #expect(throws: TestFailure.self) {
            // python cannot bind the port, and exits: the start fails, so the caller tries another.
            let server = try await ServerProcess.started(
                name: "python3 -m http.server", executable: python,
                arguments: ["-m", "http.server", String(held.port), "--bind", "127.0.0.1"],
                output: directory.appendingPathComponent("server.log"), listeningOn: [held.port],
                directory: directory)
            server.stop()
        }
        // The kernel hands the table out a page per read, and a row can move between two reads
        // while other sockets open and close (a busy suite): look again, as the fixture's wait does.
        var found = false
        let deadline = ContinuousClock.now + .seconds(10)
        while !found && ContinuousClock.now < deadline {
            found = ProcessTree.listens(on: held.port, pid: getpid())
            if !found { try await Task.sleep(for: .milliseconds(20)) }
        }
        #expect(found, "the socket is found as this process's")
    }
}
