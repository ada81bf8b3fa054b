"""Small shared helpers: paths, logging, sizes, hashing."""

import hashlib
import json
import os
import sys
import time

BENCH_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO_ROOT = os.path.dirname(BENCH_DIR)
RESULTS_DIR = os.path.join(BENCH_DIR, "results")
TMP_DIR = os.path.join(RESULTS_DIR, "tmp")
WWW_DIR = os.path.join(TMP_DIR, "www")
OUT_DIR = os.path.join(TMP_DIR, "out")
LOG_DIR = os.path.join(TMP_DIR, "logs")
BIN_DIR = os.path.join(TMP_DIR, "bin")

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB

_t0 = time.monotonic()


def log(message):
    """A progress line on stderr, stamped with the minutes and seconds since the start."""
    elapsed = time.monotonic() - _t0
    sys.stderr.write("[%3d:%02d] %s\n" % (elapsed // 60, elapsed % 60, message))
    sys.stderr.flush()


def human_size(size):
    for unit, factor in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if size >= factor and size % factor == 0:
            return "%d %s" % (size // factor, unit)
    for unit, factor in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if size >= factor:
            return "%.1f %s" % (size / factor, unit)
    return "%d B" % size


def size_token(size):
    """A file-name friendly size: 1g, 256m, 64m, 300k."""
    for unit, factor in (("g", GiB), ("m", MiB), ("k", KiB)):
        if size >= factor and size % factor == 0:
            return "%d%s" % (size // factor, unit)
    return str(size)


def sha256_file(path, block=4 * MiB):
    digest = hashlib.sha256()
    with open(path, "rb", buffering=0) as f:
        buf = bytearray(block)
        view = memoryview(buf)
        while True:
            n = f.readinto(buf)
            if not n:
                break
            digest.update(view[:n])
    return digest.hexdigest()


def ensure_dirs():
    for d in (TMP_DIR, WWW_DIR, OUT_DIR, LOG_DIR, BIN_DIR):
        os.makedirs(d, exist_ok=True)


def write_json(path, data):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=2, sort_keys=False)
        f.write("\n")
    os.replace(tmp, path)


def median(values):
    values = sorted(values)
    n = len(values)
    if n == 0:
        return None
    mid = n // 2
    return values[mid] if n % 2 else (values[mid - 1] + values[mid]) / 2.0
