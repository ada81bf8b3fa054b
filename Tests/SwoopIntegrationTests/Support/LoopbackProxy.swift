import Foundation

/// A forward proxy on loopback, run with python3 for the proxy tests: HTTP (absolute-form
/// requests and `CONNECT` tunnels) and SOCKS5, optionally asking for credentials, and logging
/// each request or tunnel as one line, so a test can see which way a download went.
final class LoopbackProxy: Sendable {
    let httpPort: Int
    let socksPort: Int
    private let script: PythonScript

    private init(httpPort: Int, socksPort: Int, script: PythonScript) {
        self.httpPort = httpPort
        self.socksPort = socksPort
        self.script = script
    }

    /// Starts the proxy; with `credentials` ("user:password") it refuses requests without them.
    static func start(credentials: String? = nil) async throws -> LoopbackProxy {
        let (script, ports) = try await PythonScript.start(
            loopbackProxyScript, named: "proxy",
            arguments: { log, ready in [log, ready] + (credentials.map { [$0] } ?? []) },
            ready: { text -> [Int]? in
                let ports = text.split(separator: " ").compactMap { Int($0) }
                return ports.count == 2 ? ports : nil
            })
        return LoopbackProxy(httpPort: ports[0], socksPort: ports[1], script: script)
    }

    var httpURL: String { "http://127.0.0.1:\(httpPort)" }

    /// From now on the proxy answers every request and `CONNECT` itself with `status` (e.g.
    /// "502 Bad Gateway") and these header lines (e.g. a `Proxy-Status`), as a proxy that cannot
    /// reach the server does, and drops the connections it was relaying (within 0.2 s);
    /// ``relay()`` undoes it.
    func answerItself(_ status: String, headers: [String] = []) throws {
        let text = ([status] + headers).joined(separator: "\n") + "\n"
        // Written whole before it appears: the proxy may read it at any moment.
        try text.write(to: script.directory.appendingPathComponent("answer"), atomically: true, encoding: .utf8)
    }

    /// Relays requests to the server again.
    func relay() {
        try? FileManager.default.removeItem(at: script.directory.appendingPathComponent("answer"))
    }

    /// The lines logged so far, e.g. "HTTP GET http://127.0.0.1:4242/a.bin",
    /// "HTTP CONNECT 127.0.0.1:4243", "SOCKS5 CONNECT localhost:4242 (name)",
    /// "HTTP ANSWERED 502 GET http://127.0.0.1:4242/a.bin" (``answerItself(_:headers:)``).
    var log: [String] { script.log }

    func stop() async { await script.stop() }
}

/// Runs `body` with a loopback proxy, stopping it however `body` ends.
func withLoopbackProxy<T>(credentials: String? = nil, _ body: (LoopbackProxy) async throws -> T) async throws -> T {
    try await stopping(try await LoopbackProxy.start(credentials: credentials), with: { await $0.stop() }, body)
}

private let loopbackProxyScript = #"""
    """A forward proxy for Swoop's tests, on loopback: HTTP (absolute-form requests and CONNECT)
    and SOCKS5 (no auth, or user/password), each connection logged as one line. While a file
    "answer" lies beside LOG, every HTTP request and CONNECT is answered with its first line (the
    status) and the header lines after it, as a proxy does that cannot reach the server, and
    the connections being relayed are dropped.

        python3 proxy.py LOG READY [USER:PASSWORD]

    Writes "HTTP_PORT SOCKS_PORT" to READY once both listen; runs until killed."""
    import base64, os, select, socket, struct, sys, threading, urllib.parse

    log_path, ready_path = sys.argv[1], sys.argv[2]
    answer_path = os.path.join(os.path.dirname(log_path), "answer")
    auth = sys.argv[3] if len(sys.argv) > 3 else None
    lock = threading.Lock()


    def log(line):
        with lock, open(log_path, "a") as f:
            f.write(line + "\n")


    def recv_exactly(sock, count):
        data = b""
        while len(data) < count:
            chunk = sock.recv(count - len(data))
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        return data


    def pipe(source, sink):
        try:
            while True:
                # A proxy that starts answering itself drops what it relays (seen within 0.2 s).
                if os.path.exists(answer_path):
                    break
                if not select.select([source], [], [], 0.2)[0]:
                    continue
                data = source.recv(1 << 16)
                if not data:
                    break
                sink.sendall(data)
        except OSError:
            pass
        for s in (source, sink):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


    def relay(client, upstream, first=b""):
        if first:
            upstream.sendall(first)
        back = threading.Thread(target=pipe, args=(upstream, client), daemon=True)
        back.start()
        pipe(client, upstream)
        back.join()
        client.close()
        upstream.close()


    def http_client(client):
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = client.recv(1 << 16)
            if not chunk:
                client.close()
                return
            data += chunk
        head, rest = data.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        method, target, version = lines[0].split(" ", 2)
        headers = lines[1:]
        given = [h.split(":", 1)[1].strip() for h in headers if h.lower().startswith("proxy-authorization:")]
        if auth and given[:1] != ["Basic " + base64.b64encode(auth.encode()).decode()]:
            log(f"HTTP 407 {method} {target}")
            client.sendall(b"HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"test\"\r\n"
                           b"Content-Length: 0\r\nConnection: close\r\n\r\n")
            client.close()
            return
        try:
            with open(answer_path) as f:
                answer = f.read().splitlines()
        except OSError:
            answer = None
        if answer:
            log(f"HTTP ANSWERED {answer[0].split(' ')[0]} {method} {target}")
            reply = "HTTP/1.1 " + answer[0] + "\r\n" + "".join(h + "\r\n" for h in answer[1:])
            client.sendall(reply.encode("latin-1") + b"Content-Length: 0\r\nConnection: close\r\n\r\n")
            client.close()
            return
        if method == "CONNECT":
            host, port = target.rsplit(":", 1)
            upstream = socket.create_connection((host.strip("[]"), int(port)))
            log(f"HTTP CONNECT {target}")
            client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            relay(client, upstream, rest)
            return
        url = urllib.parse.urlsplit(target)
        log(f"HTTP {method} {url.scheme}://{url.netloc}{url.path}")
        upstream = socket.create_connection((url.hostname, url.port or 80))
        path = (url.path or "/") + ("?" + url.query if url.query else "")
        kept = [h for h in headers if not h.lower().startswith(("proxy-", "connection:", "keep-alive:"))]
        request = f"{method} {path} {version}\r\n" + "".join(h + "\r\n" for h in kept) + "Connection: close\r\n\r\n"
        relay(client, upstream, request.encode("latin-1") + rest)


    def socks_client(client):
        version, count = recv_exactly(client, 2)
        methods = recv_exactly(client, count)
        if auth:
            if 2 not in methods:
                client.sendall(b"\x05\xff")
                client.close()
                return
            client.sendall(b"\x05\x02")
            recv_exactly(client, 1)
            user = recv_exactly(client, recv_exactly(client, 1)[0]).decode()
            password = recv_exactly(client, recv_exactly(client, 1)[0]).decode()
            if f"{user}:{password}" != auth:
                log("SOCKS5 auth refused")
                client.sendall(b"\x01\x01")
                client.close()
                return
            client.sendall(b"\x01\x00")
        else:
            client.sendall(b"\x05\x00")
        _, command, _, kind = recv_exactly(client, 4)
        if kind == 1:
            host, form = socket.inet_ntoa(recv_exactly(client, 4)), "address"
        elif kind == 3:
            host, form = recv_exactly(client, recv_exactly(client, 1)[0]).decode(), "name"
        else:
            host, form = socket.inet_ntop(socket.AF_INET6, recv_exactly(client, 16)), "address"
        port = struct.unpack(">H", recv_exactly(client, 2))[0]
        log(f"SOCKS5 CONNECT {host}:{port} ({form})")
        upstream = socket.create_connection((host, port))
        client.sendall(b"\x05\x00\x00\x01\x00\x00\x00\x00\x00\x00")
        relay(client, upstream)


    def serve(listener, handler):
        while True:
            client, _ = listener.accept()
            threading.Thread(target=guarded, args=(handler, client), daemon=True).start()


    def guarded(handler, client):
        try:
            handler(client)
        except (OSError, ValueError, ConnectionError):
            client.close()


    listeners = []
    for handler in (http_client, socks_client):
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen(256)
        listeners.append(listener)
        threading.Thread(target=serve, args=(listener, handler), daemon=True).start()
    with open(ready_path + ".tmp", "w") as f:
        f.write(" ".join(str(l.getsockname()[1]) for l in listeners))
    import os
    os.rename(ready_path + ".tmp", ready_path)
    threading.Event().wait()
    """#
