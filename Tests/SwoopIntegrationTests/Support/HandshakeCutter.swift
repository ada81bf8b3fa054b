import Foundation

/// A TCP relay on loopback, run with python3, in front of a TLS server: the connections it is
/// told to cut (by their order of arrival, from 1) are closed as soon as the client's first
/// bytes (its TLS ClientHello) arrive, as an overloaded server or a middlebox does; the others
/// are relayed both ways. Each connection is logged as "N cut" or "N relayed".
final class HandshakeCutter: Sendable {
    let port: Int
    private let script: PythonScript

    private init(port: Int, script: PythonScript) {
        self.port = port
        self.script = script
    }

    /// Starts a relay to `127.0.0.1:target` that cuts the connections numbered in `cutting`.
    static func start(target: Int, cutting: Set<Int>) async throws -> HandshakeCutter {
        let cuts = cutting.sorted().map(String.init).joined(separator: ",")
        let (script, port) = try await PythonScript.start(
            handshakeCutterScript, named: "cutter", arguments: { log, ready in [String(target), cuts, log, ready] },
            ready: { Int($0) })
        return HandshakeCutter(port: port, script: script)
    }

    /// `https://127.0.0.1:PORT` + `path`: the TLS server's certificate is for 127.0.0.1.
    func url(_ path: String) -> String { "https://127.0.0.1:\(port)\(path)" }

    /// The connections cut so far.
    var cuts: Int { log.filter { $0.hasSuffix(" cut") }.count }

    /// One line per connection accepted so far, in order: "N cut" or "N relayed".
    var log: [String] { script.log }

    func stop() async { await script.stop() }
}

/// Runs `body` with a handshake cutter in front of `127.0.0.1:target`, stopping it however `body` ends.
func withHandshakeCutter<T>(
    target: Int, cutting: Set<Int>, _ body: (HandshakeCutter) async throws -> T
) async throws -> T {
    let cutter = try await HandshakeCutter.start(target: target, cutting: cutting)
    return try await stopping(cutter, with: { await $0.stop() }, body)
}

private let handshakeCutterScript = #"""
    """A TCP relay for Swoop's tests: connections numbered in CUTS (from 1, by arrival) are
    closed once their first bytes arrive; the others are relayed to 127.0.0.1:TARGET.

        python3 cutter.py TARGET CUTS LOG READY

    Writes the port it listens on to READY; runs until killed."""
    import os, select, socket, sys, threading

    target = int(sys.argv[1])
    cuts = {int(n) for n in sys.argv[2].split(",") if n}
    log_path, ready_path = sys.argv[3], sys.argv[4]
    lock = threading.Lock()


    def log(line):
        with lock, open(log_path, "a") as f:
            f.write(line + "\n")


    def pipe(source, sink):
        try:
            while True:
                data = source.recv(1 << 16)
                if not data:
                    break
                sink.sendall(data)
        except OSError:
            pass
        for sock in (source, sink):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


    def serve(client, number):
        if number in cuts:
            select.select([client], [], [], 10)
            client.recv(1 << 16)
            client.close()
            log(f"{number} cut")
            return
        server = socket.create_connection(("127.0.0.1", target))
        log(f"{number} relayed")
        threading.Thread(target=pipe, args=(server, client), daemon=True).start()
        pipe(client, server)


    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(256)
    with open(ready_path + ".tmp", "w") as f:
        f.write(str(listener.getsockname()[1]))
    os.rename(ready_path + ".tmp", ready_path)
    count = 0
    while True:
        client, _ = listener.accept()
        count += 1
        threading.Thread(target=serve, args=(client, count), daemon=True).start()
    """#
