import Foundation
import Testing

/// The conformance servers' start (Swoop is not involved): a server is taken for started only when
/// it listens on its port itself, not when another program holds that port.
@Suite("The server process fixture")
struct ServerProcessFixtureTests {
    @Test("a server whose port another program holds is not taken for started, though the port answers")
    func portHeldByAnother() async throws {
        let python = try ServerPrograms.python()
        let held = try FreePort.bound(listening: true)  // as another test's server would hold it
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
