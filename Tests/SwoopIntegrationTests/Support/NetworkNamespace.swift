import Foundation
import SwoopTestSupport

/// A network namespace of its own for one test: a loopback nobody else uses, so the servers in it
/// can be killed and restarted on fixed ports, and its TCP counters (`/proc/net/snmp`) count only
/// what runs inside it, whatever other tests do meanwhile. Needs root; deleted by ``remove()``.
final class NetworkNamespace: @unchecked Sendable {
    let name: String

    /// Why this machine cannot make one (not root, no `ip`), or `nil` when it can.
    static var unavailable: String? {
        if getuid() != 0 { return "network namespaces need root; run the tests as root to include this one" }
        if ip == nil { return "the ip command (iproute2) is missing; run scripts/setup" }
        return nil
    }

    private static var ip: String? {
        let candidates = ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"]
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    init() throws {
        name = "swoop-\(ProcessInfo.processInfo.processIdentifier)-\(UUID().uuidString.prefix(6))"
        try Self.run(["netns", "add", name])
        try Self.run(["-n", name, "link", "set", "lo", "up"])
    }

    /// A namespace made on a thread of its own (``offThePool(_:)``): making one runs `ip` and waits.
    static func make() async throws -> NetworkNamespace {
        try await offThePool { try NetworkNamespace() }
    }

    /// Starts `executable arguments` inside the namespace.
    func start(
        _ executable: String, _ arguments: [String], directory: String? = nil, stdout: String = "/dev/null",
        stderr: String = "/dev/null"
    ) throws -> ChildProcess {
        guard let ip = Self.ip else { throw TestFailure("ip (iproute2) is missing") }
        // `ip netns exec` enters the namespace and execs the program: its pid is the program's.
        return try ChildProcess(
            executable: ip, arguments: ["netns", "exec", name, executable] + arguments, directory: directory,
            stdout: stdout, stderr: stderr)
    }

    /// `swoop arguments`, run inside the namespace the way ``CLI/start(_:in:environment:)`` runs it.
    func startCLI(_ arguments: [String], in directory: URL) throws -> CLI.Running {
        let id = UUID().uuidString.prefix(8)
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("swoop-cli-\(id).out")
        let err = FileManager.default.temporaryDirectory.appendingPathComponent("swoop-cli-\(id).err")
        let process = try start(
            CLI.executable, arguments, directory: directory.path, stdout: out.path, stderr: err.path)
        return CLI.Running(process: process, stdoutURL: out, stderrURL: err)
    }

    /// TCP connections opened from inside the namespace so far (`ActiveOpens`: every `connect()`
    /// that sent a SYN, refused or not).
    func activeOpens() async throws -> Int {
        let name = name
        let output = try await offThePool { try Self.capture(["netns", "exec", name, "cat", "/proc/net/snmp"]) }
        let tcp = output.split(separator: "\n").filter { $0.hasPrefix("Tcp:") }
        guard tcp.count == 2 else { throw TestFailure("no Tcp lines in /proc/net/snmp: \(output)") }
        let names = tcp[0].split(separator: " ")
        let values = tcp[1].split(separator: " ")
        guard let index = names.firstIndex(of: "ActiveOpens"), index < values.count,
            let count = Int(values[index])
        else {
            throw TestFailure("no ActiveOpens in \(tcp)")
        }
        return count
    }

    func remove() {
        try? Self.run(["netns", "del", name])
    }

    deinit {
        remove()
    }

    private static func run(_ arguments: [String]) throws {
        _ = try capture(arguments)
    }

    private static func capture(_ arguments: [String]) throws -> String {
        guard let ip else { throw TestFailure("ip (iproute2) is missing") }
        let output = FileManager.default.temporaryDirectory
            .appendingPathComponent("swoop-ip-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: output) }
        let process = try ChildProcess(executable: ip, arguments: arguments, stdout: output.path, stderr: output.path)
        let status = process.waitBlocking()
        let text = (try? String(contentsOf: output, encoding: .utf8)) ?? ""
        guard status == 0 else {
            throw TestFailure("ip \(arguments.joined(separator: " ")) failed (\(status)): \(text)")
        }
        return text
    }
}
