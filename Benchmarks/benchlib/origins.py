"""Origins the harness starts and always stops: nginx, the Swoop test origin, the netlab WAN link.

Each is a context manager; leaving the `with` (normally, on an exception or on Ctrl-C) stops the
process it started, by its pid. A registry also stops whatever is still running at exit, in case
the harness dies between starting a server and entering its `with` block.
"""

import atexit
import os
import re
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import time

from .util import TMP_DIR, log

NETLAB_DIR = "/work/shared/netlab"

_live = {}  # id -> stop callable


def _register(key, stop):
    _live[key] = stop


def _unregister(key):
    _live.pop(key, None)


@atexit.register
def stop_everything():
    for key, stop in list(_live.items()):
        try:
            stop()
        except Exception as error:  # pragma: no cover - best effort at exit
            log("cleanup of %s failed: %s" % (key, error))
        _live.pop(key, None)


def _stop_process(proc, name, grace=5.0):
    """SIGTERM, then SIGKILL after `grace` seconds; only this pid."""
    if proc.poll() is not None:
        return
    try:
        proc.send_signal(signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        log("%s (pid %d) ignored SIGTERM; killing it" % (name, proc.pid))
        proc.kill()
        proc.wait()


def free_port(host="127.0.0.1"):
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def free_common_port(hosts, attempts=50):
    """A port that is free on every one of `hosts` (loopback addresses), for servers that must share
    one port on several addresses (S12's edges: one name, one port, many addresses)."""
    for _ in range(attempts):
        port = free_port(hosts[0])
        ok = True
        for host in hosts[1:]:
            with socket.socket() as s:
                try:
                    s.bind((host, port))
                except OSError:
                    ok = False
                    break
        if ok:
            return port
    raise RuntimeError("no port free on all of %s after %d tries" % (", ".join(hosts), attempts))


def _port_open(host, port):
    try:
        with socket.create_connection((host, port), timeout=0.2):
            return True
    except OSError:
        return False


def nginx_config(prefix, root, host, port, rate=None, conn_limit=None, extra_locations="", tls=False):
    """A foreground, single-process nginx whose files all live under `prefix`. `conn_limit`: at most
    that many connections per client address (503 beyond), like a mirror's per-client limit."""
    http_lines = ""
    if conn_limit:
        http_lines = "    limit_conn_zone $binary_remote_addr zone=perclient:1m;\n"
    rate_lines = ""
    if rate:
        # nginx 1.22 sends up to sendfile_max_chunk (2 MiB by default) per write before it applies
        # the limit_rate delay, so every request would start with a burst above the cap; 64 KiB
        # chunks keep the per-connection cap honest.
        rate_lines = "        limit_rate %s;\n        sendfile_max_chunk 64k;\n" % rate
    if conn_limit:
        rate_lines += "        limit_conn perclient %d;\n        limit_conn_status 503;\n" % conn_limit
    return """daemon off;
master_process off;
worker_processes 1;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;

events {{
    worker_connections 4096;
}}

http {{
    access_log {prefix}/access.log;
    client_body_temp_path {prefix}/temp/client_body;
    proxy_temp_path {prefix}/temp/proxy;
    fastcgi_temp_path {prefix}/temp/fastcgi;
    uwsgi_temp_path {prefix}/temp/uwsgi;
    scgi_temp_path {prefix}/temp/scgi;
    default_type application/octet-stream;
    sendfile on;
    keepalive_requests 100000;
    keepalive_timeout 120s;
{http_lines}
    server {{
        listen {host}:{port}{ssl};
        root {root};{tls_lines}
        location / {{
{rate_lines}        }}
{extra_locations}
    }}
}}
""".format(prefix=prefix, root=root, host=host, port=port, rate_lines=rate_lines, http_lines=http_lines,
           extra_locations=extra_locations, ssl=" ssl" if tls else "",
           tls_lines=("\n        ssl_certificate %s/cert.pem;\n        ssl_certificate_key %s/key.pem;" % (prefix, prefix)) if tls else "")


class Nginx:
    """nginx serving `root` on host:port (a free loopback port by default), optionally in a netns."""

    def __init__(self, root, label, rate=None, host="127.0.0.1", port=None, netns=None, conn_limit=None,
                 extra_locations="", tls=False):
        self.root, self.label, self.rate, self.conn_limit = root, label, rate, conn_limit
        self.extra_locations, self.tls = extra_locations, tls
        self.host, self.port, self.netns = host, port, netns
        self.proc = None
        self.prefix = os.path.join(TMP_DIR, "nginx-%s-%d" % (label, os.getpid()))

    @property
    def base_url(self):
        return "%s://%s:%d" % ("https" if self.tls else "http", self.host, self.port)

    def __enter__(self):
        nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        last_error = ""
        for _attempt in range(5):
            port = self.port or free_port(self.host)
            shutil.rmtree(self.prefix, ignore_errors=True)
            os.makedirs(os.path.join(self.prefix, "temp"))
            if self.tls:
                # A self-signed certificate for the address (the clients are told not to verify it:
                # every tool alike, so TLS costs each the same).
                subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                                "-subj", "/CN=%s" % self.host, "-addext", "subjectAltName=IP:%s" % self.host,
                                "-keyout", os.path.join(self.prefix, "key.pem"),
                                "-out", os.path.join(self.prefix, "cert.pem")],
                               check=True, capture_output=True, stdin=subprocess.DEVNULL)
            conf = os.path.join(self.prefix, "nginx.conf")
            with open(conf, "w") as f:
                f.write(nginx_config(self.prefix, self.root, self.host, port, self.rate, self.conn_limit,
                                     self.extra_locations, self.tls))
            cmd = [nginx, "-p", self.prefix, "-c", conf, "-e", os.path.join(self.prefix, "error.log")]
            if self.netns:
                cmd = ["ip", "netns", "exec", self.netns] + cmd
            out = open(os.path.join(self.prefix, "stdout.log"), "wb")
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                         start_new_session=True)
            out.close()
            key = "nginx-%d" % self.proc.pid
            _register(key, lambda p=self.proc: _stop_process(p, "nginx"))
            pidfile = os.path.join(self.prefix, "nginx.pid")
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and self.proc.poll() is None:
                # nginx writes its pid file only after it has bound its listening socket.
                try:
                    with open(pidfile) as f:
                        written = f.read().strip()
                except OSError:
                    written = ""
                if written == str(self.proc.pid) and (self.netns or _port_open(self.host, port)):
                    self.port = port
                    log("nginx %s listening on %s:%d%s%s" % (
                        self.label, self.host, port, " in netns " + self.netns if self.netns else "",
                        ", limit_rate " + self.rate if self.rate else ""))
                    return self
                time.sleep(0.05)
            _stop_process(self.proc, "nginx")
            _unregister(key)
            try:
                with open(os.path.join(self.prefix, "error.log")) as f:
                    last_error = f.read()[-2000:]
            except OSError:
                pass
            if self.port:  # a fixed port: retrying will not help
                break
        raise RuntimeError("nginx %s did not start (prefix %s):\n%s" % (self.label, self.prefix, last_error))

    def __exit__(self, *exc):
        if self.proc is not None:
            _stop_process(self.proc, "nginx")
            _unregister("nginx-%d" % self.proc.pid)
            self.proc = None
        if exc[0] is None or issubclass(exc[0], KeyboardInterrupt):  # keep the logs after a failure
            shutil.rmtree(self.prefix, ignore_errors=True)
        return False


class TestOrigin:
    """`swoop-test-origin serve` on a free loopback port."""

    def __init__(self, binary, label, objects, extra_args=(), threads=2):
        self.binary, self.label = binary, label
        self.objects = list(objects)  # "/f.bin=SIZE,seed=N"
        self.extra_args = list(extra_args)
        self.threads = threads
        self.proc = None
        self.base_url = None
        self.stderr_path = os.path.join(TMP_DIR, "logs", "test-origin-%s-%d.err" % (label, os.getpid()))
        self.summary = ""

    def __enter__(self):
        cmd = [self.binary, "serve", "--port", "0", "--threads", str(self.threads)]
        for obj in self.objects:
            cmd += ["--object", obj]
        cmd += self.extra_args
        os.makedirs(os.path.dirname(self.stderr_path), exist_ok=True)
        err = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=err, start_new_session=True)
        err.close()
        _register("origin-%d" % self.proc.pid, lambda p=self.proc: _stop_process(p, "test origin"))
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        buf = b""
        deadline = time.monotonic() + 15
        while b"\n" not in buf and time.monotonic() < deadline:
            if not sel.select(timeout=max(0.0, deadline - time.monotonic())):
                continue
            chunk = os.read(self.proc.stdout.fileno(), 4096)
            if not chunk:
                break
            buf += chunk
        sel.close()
        line = buf.decode(errors="replace").strip().splitlines()[0] if buf.strip() else ""
        if not line.startswith("listening on "):
            self.__exit__(RuntimeError, None, None)
            with open(self.stderr_path, errors="replace") as f:
                detail = f.read()[-2000:]
            raise RuntimeError("test origin %s did not start: %r %s" % (self.label, line, detail))
        self.base_url = line[len("listening on "):].strip().rstrip("/")
        log("test origin %s listening on %s (%s)" % (self.label, self.base_url, " ".join(self.extra_args) or "no faults"))
        return self

    def __exit__(self, *exc):
        if self.proc is not None:
            _stop_process(self.proc, "test origin")
            _unregister("origin-%d" % self.proc.pid)
            try:
                self.proc.stdout.close()
            except OSError:
                pass
            try:
                with open(self.stderr_path, errors="replace") as f:
                    self.summary = f.read().strip()[-2000:]
                if exc[0] is None:
                    log("test origin %s: %s" % (self.label, self.summary.splitlines()[-1] if self.summary else "stopped"))
                    os.unlink(self.stderr_path)
            except OSError:
                pass
            self.proc = None
        return False


class ZooServer:
    """benchlib/zoo.py KIND ROOT on a free loopback port (a server nginx cannot imitate: work per request,
    a worker pool, a single thread)."""

    def __init__(self, kind, root):
        self.kind, self.root = kind, root
        self.proc = None
        self.base_url = None

    def __enter__(self):
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "zoo.py")
        self.proc = subprocess.Popen([sys.executable, script, self.kind, self.root], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
        _register("zoo-%d" % self.proc.pid, lambda p=self.proc: _stop_process(p, "zoo server"))
        line = ""
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        if sel.select(timeout=15):
            line = self.proc.stdout.readline().decode(errors="replace").strip()
        sel.close()
        if not line.startswith("listening on "):
            self.__exit__(None, None, None)
            raise RuntimeError("zoo server %s did not start: %r" % (self.kind, line))
        self.base_url = line[len("listening on "):].rstrip("/")
        log("zoo server %s listening on %s" % (self.kind, self.base_url))
        return self

    def __exit__(self, *exc):
        if self.proc is not None:
            _stop_process(self.proc, "zoo server")
            _unregister("zoo-%d" % self.proc.pid)
            self.proc.stdout.close()
            self.proc = None
        return False


class Netlab:
    """/work/shared/netlab: two namespaces joined by a user-space delay line (delay + loss)."""

    def __init__(self, name, delay_ms, loss_pct, max_seconds=1800):
        self.name, self.delay_ms, self.loss_pct, self.max_seconds = name, delay_ms, loss_pct, max_seconds
        self.server_ip = self.client_ip = None
        self.up_done = False

    @property
    def server_ns(self):
        return self.name + "-srv"

    @property
    def client_ns(self):
        return self.name + "-cli"

    def __enter__(self):
        up = os.path.join(NETLAB_DIR, "up")
        if not os.access(up, os.X_OK):
            raise RuntimeError("netlab is missing: %s" % up)
        _register("netlab-" + self.name, self._down)
        self.up_done = True
        result = subprocess.run([up, self.name, str(self.delay_ms), str(self.loss_pct), "0", str(self.max_seconds)],
                                stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            self._down()
            raise RuntimeError("netlab up %s failed (%d): %s" % (self.name, result.returncode, result.stderr.strip()))
        words = result.stdout.split()
        if len(words) < 2:
            self._down()
            raise RuntimeError("netlab up printed %r" % result.stdout)
        self.server_ip, self.client_ip = words[-2], words[-1]
        log("netlab %s up: %s ms one-way, %s%% loss; server %s, client %s" % (
            self.name, self.delay_ms, self.loss_pct, self.server_ip, self.client_ip))
        return self

    def _down(self):
        if not self.up_done:
            return
        self.up_done = False
        result = subprocess.run([os.path.join(NETLAB_DIR, "down"), self.name], stdin=subprocess.DEVNULL,
                                capture_output=True, text=True, timeout=60)
        self.down_log = (result.stdout + result.stderr).strip()
        log("netlab %s down%s" % (self.name, (": " + self.down_log.splitlines()[-1]) if self.down_log else ""))

    def __exit__(self, *exc):
        self._down()
        _unregister("netlab-" + self.name)
        return False


HOSTS_FILE = "/etc/hosts"


class HostsEntries:
    """Lines `ADDRESS NAME` added to /etc/hosts for the duration of a `with` (root only), so every
    tool resolves NAME to all of `addresses` through getaddrinfo (glibc's files backend returns every
    line for a name, in file order). The file's bytes, mode and times are kept in memory and in
    results/tmp/hosts.backup-PID; leaving the `with` (also on an exception, Ctrl-C or SIGTERM, which
    the harness turns into KeyboardInterrupt) and the atexit registry write them back in place (the
    same inode: /etc/hosts is often a bind mount) and check the SHA-256. `getent ahosts NAME` must
    list every address before anything is measured."""

    def __init__(self, name, addresses, path=HOSTS_FILE):
        self.name, self.addresses, self.path = name, list(addresses), path
        self.original = None
        self.backup = os.path.join(TMP_DIR, "hosts.backup-%d" % os.getpid())
        self.resolved = []

    @staticmethod
    def _digest(data):
        import hashlib
        return hashlib.sha256(data).hexdigest()

    def __enter__(self):
        with open(self.path, "rb") as f:
            self.original = f.read()
        st = os.stat(self.path)
        self.stat = (st.st_mode, st.st_atime_ns, st.st_mtime_ns)
        self.original_sha256 = self._digest(self.original)
        if any(self.name in line.split()[1:] for line in self.original.decode(errors="replace").splitlines()
               if line.strip() and not line.lstrip().startswith("#")):
            import glob
            raise RuntimeError("%s already names %s (a run killed before it could restore the file? its copy: %s); "
                               "remove those lines first" % (self.path, self.name,
                                                             ", ".join(glob.glob(os.path.join(TMP_DIR, "hosts.backup-*")))
                                                             or "none left"))
        os.makedirs(TMP_DIR, exist_ok=True)
        with open(self.backup, "wb") as f:
            f.write(self.original)
        _register("hosts-" + self.name, self.restore)
        added = "".join("%s %s\n" % (a, self.name) for a in self.addresses)
        with open(self.path, "r+b") as f:
            f.seek(0, os.SEEK_END)
            if self.original and not self.original.endswith(b"\n"):
                f.write(b"\n")
            f.write(added.encode())
        log("%s: added %s for %s (backup %s, sha256 %s)" % (
            self.path, ", ".join(self.addresses), self.name, self.backup, self.original_sha256[:16]))
        try:
            out = subprocess.run(["getent", "ahosts", self.name], capture_output=True, text=True, timeout=10,
                                 stdin=subprocess.DEVNULL).stdout
        except (OSError, subprocess.SubprocessError) as error:
            self.restore()
            raise RuntimeError("getent ahosts %s failed: %s" % (self.name, error))
        seen = []
        for line in out.splitlines():
            words = line.split()
            if words and words[0] not in seen:
                seen.append(words[0])
        self.resolved = seen
        if sorted(seen) != sorted(self.addresses):
            self.restore()
            raise RuntimeError("getent ahosts %s gave %s, not %s" % (self.name, seen or "nothing", self.addresses))
        log("getent ahosts %s: %s" % (self.name, ", ".join(seen)))
        return self

    def restore(self):
        """Writes the original bytes back in place, with the original mode and times; checks the SHA-256."""
        if self.original is None:
            return
        with open(self.path, "r+b") as f:
            f.write(self.original)
            f.truncate(len(self.original))
            f.flush()
            os.fsync(f.fileno())
        mode, atime, mtime = self.stat
        os.chmod(self.path, mode & 0o7777)
        os.utime(self.path, ns=(atime, mtime))
        with open(self.path, "rb") as f:
            now = self._digest(f.read())
        if now != self.original_sha256:
            raise RuntimeError("%s restored but its sha256 is %s, not %s; the original is in %s" % (
                self.path, now, self.original_sha256, self.backup))
        log("%s restored (sha256 %s, as before)" % (self.path, now[:16]))
        self.original = None
        _unregister("hosts-" + self.name)
        try:
            os.unlink(self.backup)
        except OSError:
            pass

    def __exit__(self, *exc):
        self.restore()
        return False


class AccessLogs:
    """Per-run accounting from nginx access logs (the default `combined` format): after each run,
    the requests, bytes sent and 503s each server logged since the run before, keyed by a label
    (S12: the server's address). nginx logs a request when it ends, so an aborted one may land a
    moment after the client exits: `collect` waits until the logs stop growing (at most `settle` s)."""

    _LINE = re.compile(r'" (\d{3}) (\d+) "')

    def __init__(self, servers):
        self.servers = dict(servers)  # label -> Nginx
        self.offsets = {k: self._size(ng) for k, ng in self.servers.items()}

    @staticmethod
    def _path(ng):
        return os.path.join(ng.prefix, "access.log")

    def _size(self, ng):
        try:
            return os.path.getsize(self._path(ng))
        except OSError:
            return 0

    def collect(self, settle=2.0, quiet=0.3):
        deadline = time.monotonic() + settle
        sizes = {k: self._size(ng) for k, ng in self.servers.items()}
        stable_since = time.monotonic()
        while time.monotonic() < deadline:
            time.sleep(0.1)
            now = {k: self._size(ng) for k, ng in self.servers.items()}
            if now != sizes:
                sizes, stable_since = now, time.monotonic()
            elif time.monotonic() - stable_since >= quiet:
                break
        out = {}
        for k, ng in self.servers.items():
            stats = {"requests": 0, "bytes": 0, "status_503": 0, "other_errors": 0}
            try:
                with open(self._path(ng), "rb") as f:
                    f.seek(self.offsets[k])
                    data = f.read()
            except OSError:
                data = b""
            # Only whole lines; a partial last line waits for the next collect.
            end = data.rfind(b"\n") + 1
            self.offsets[k] += end
            for line in data[:end].decode(errors="replace").splitlines():
                m = self._LINE.search(line)
                if not m:
                    continue
                status, sent = int(m.group(1)), int(m.group(2))
                stats["requests"] += 1
                stats["bytes"] += sent
                if status == 503:
                    stats["status_503"] += 1
                elif status >= 400:
                    stats["other_errors"] += 1
            out[k] = stats
        return out
