#!/usr/bin/env python3
"""Servers whose cost models nginx does not have, for the connection-count rows (the CX scenarios).

    zoo.py per-request ROOT   a threaded HTTP/1.1 server (keep-alive) that reads the whole object and
                              computes its CRC-32 for every request before it answers, as an S3
                              emulator that checks an object's checksum on every GET does: each ranged
                              GET costs about as much as reading the whole object
    zoo.py pool ROOT          a WSGI static-file app on waitress with a fixed pool of 4 worker threads
                              (waitress's default): requests beyond 4 wait for a worker
    zoo.py single ROOT        a single-threaded HTTP/1.0 server: one request at a time, a new
                              connection for each (Python's http.server without threads)

Every server binds 127.0.0.1 on a free port, prints `listening on http://127.0.0.1:PORT` once bound,
answers GET and HEAD with ranges (one range: 206 with Content-Range; none: 200), a strong ETag and
Last-Modified, and stops on SIGTERM or SIGINT. Bodies go out with os.sendfile where the server
allows it (waitress copies through its buffers, as a WSGI server does).
"""

import email.utils
import http.server
import os
import re
import signal
import socketserver
import sys
import threading
import zlib

_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")


def _file_for(root, path):
    path = path.split("?", 1)[0]
    full = os.path.realpath(os.path.join(root, path.lstrip("/")))
    if not full.startswith(os.path.realpath(root) + os.sep) or not os.path.isfile(full):
        return None
    return full


def _range(header, size):
    """(start, end exclusive) for a single satisfiable range, None for no/ignored range, or "416"."""
    if not header:
        return None
    m = _RANGE.match(header.strip())
    if not m or (not m.group(1) and not m.group(2)):
        return None
    if not m.group(1):
        n = int(m.group(2))
        return (max(0, size - n), size) if n > 0 else "416"
    start = int(m.group(1))
    end = min(size, int(m.group(2)) + 1) if m.group(2) else size
    if start >= size or end <= start:
        return "416"
    return (start, end)


def _validators(full):
    st = os.stat(full)
    return st.st_size, '"%x-%x"' % (st.st_size, int(st.st_mtime)), email.utils.formatdate(st.st_mtime, usegmt=True)


def _crc_whole(full):
    crc = 0
    with open(full, "rb", buffering=0) as f:
        while True:
            block = f.read(4 << 20)
            if not block:
                break
            crc = zlib.crc32(block, crc)  # releases the GIL: requests work side by side on every core
    return crc


class _Handler(http.server.BaseHTTPRequestHandler):
    root = "."
    work_per_request = False

    def log_message(self, *_args):
        pass

    def do_HEAD(self):
        self._serve(body=False)

    def do_GET(self):
        self._serve(body=True)

    def _serve(self, body):
        full = _file_for(self.root, self.path)
        if full is None:
            self.send_error(404)
            return
        if self.work_per_request:
            _crc_whole(full)  # the server's work for this request, proportional to the object
        size, etag, modified = _validators(full)
        wanted = _range(self.headers.get("Range"), size)
        if wanted == "416":
            self.send_response(416)
            self.send_header("Content-Range", "bytes */%d" % size)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        start, end = wanted if wanted else (0, size)
        self.send_response(206 if wanted else 200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("ETag", etag)
        self.send_header("Last-Modified", modified)
        if wanted:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, end - 1, size))
        self.send_header("Content-Length", str(end - start))
        self.end_headers()
        if not body:
            return
        self.wfile.flush()
        with open(full, "rb") as f:
            offset, left = start, end - start
            while left > 0:
                sent = os.sendfile(self.connection.fileno(), f.fileno(), offset, min(left, 8 << 20))
                if sent <= 0:
                    break
                offset += sent
                left -= sent


class _Threaded(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    request_queue_size = 512


class _Single(http.server.HTTPServer):
    request_queue_size = 512


def _wsgi_app(root):
    def app(environ, start_response):
        full = _file_for(root, environ.get("PATH_INFO", "/"))
        if full is None:
            start_response("404 Not Found", [("Content-Length", "0")])
            return [b""]
        size, etag, modified = _validators(full)
        wanted = _range(environ.get("HTTP_RANGE"), size)
        if wanted == "416":
            start_response("416 Range Not Satisfiable", [("Content-Range", "bytes */%d" % size),
                                                         ("Content-Length", "0")])
            return [b""]
        start, end = wanted if wanted else (0, size)
        headers = [("Content-Type", "application/octet-stream"), ("Accept-Ranges", "bytes"), ("ETag", etag),
                   ("Last-Modified", modified), ("Content-Length", str(end - start))]
        if wanted:
            headers.append(("Content-Range", "bytes %d-%d/%d" % (start, end - 1, size)))
        start_response("206 Partial Content" if wanted else "200 OK", headers)
        if environ["REQUEST_METHOD"] == "HEAD":
            return [b""]
        f = open(full, "rb")
        f.seek(start)
        return _Slice(f, end - start)
    return app


class _Slice:
    """The bytes [start, start + length) of an open file, in 256 KiB blocks."""

    def __init__(self, f, length):
        self.f, self.left = f, length

    def __iter__(self):
        return self

    def __next__(self):
        if self.left <= 0:
            raise StopIteration
        block = self.f.read(min(self.left, 256 << 10))
        if not block:
            raise StopIteration
        self.left -= len(block)
        return block

    def close(self):
        self.f.close()


def main(argv):
    if len(argv) != 3 or argv[1] not in ("per-request", "pool", "single"):
        sys.exit(__doc__)
    kind, root = argv[1], argv[2]
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    if kind == "pool":
        from waitress.server import create_server
        server = create_server(_wsgi_app(root), host="127.0.0.1", port=0, threads=4, backlog=512,
                               connection_limit=1000, ident="zoo-pool")
        print("listening on http://127.0.0.1:%d" % int(server.effective_port), flush=True)
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        stop.wait()
        server.close()
        return 0
    handler = type("Handler", (_Handler,), {"root": root, "work_per_request": kind == "per-request",
                                            "protocol_version": "HTTP/1.1" if kind == "per-request" else "HTTP/1.0"})
    server = (_Threaded if kind == "per-request" else _Single)(("127.0.0.1", 0), handler)
    print("listening on http://127.0.0.1:%d" % server.server_address[1], flush=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)
    thread.start()
    stop.wait()
    server.shutdown()
    server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
