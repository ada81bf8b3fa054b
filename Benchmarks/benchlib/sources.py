"""Source objects: random files for nginx, payload files that mirror the test origin's bytes.

Files are made once under results/tmp/www/ and reused while their size matches; their SHA-256
is cached in www/hashes.json (keyed by name, size and mtime) so a run hashes each source once.
"""

import json
import os
import subprocess

from .util import WWW_DIR, human_size, log, sha256_file, size_token

_CACHE = os.path.join(WWW_DIR, "hashes.json")


def _load_cache():
    try:
        with open(_CACHE) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def _save_cache(cache):
    tmp = _CACHE + ".tmp"
    with open(tmp, "w") as f:
        json.dump(cache, f, indent=1, sort_keys=True)
    os.replace(tmp, _CACHE)


def _hash_cached(path):
    st = os.stat(path)
    name = os.path.basename(path)
    cache = _load_cache()
    entry = cache.get(name)
    if entry and entry.get("size") == st.st_size and entry.get("mtime_ns") == st.st_mtime_ns:
        return entry["sha256"]
    log("hashing source %s (%s)" % (name, human_size(st.st_size)))
    digest = sha256_file(path)
    cache = _load_cache()
    cache[name] = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": digest}
    _save_cache(cache)
    return digest


def random_file(size):
    """www/rand-SIZE.bin filled from /dev/urandom; returns (name, path, sha256)."""
    os.makedirs(WWW_DIR, exist_ok=True)
    name = "rand-%s.bin" % size_token(size)
    path = os.path.join(WWW_DIR, name)
    if not (os.path.isfile(path) and os.path.getsize(path) == size):
        log("making %s of random bytes: %s (once)" % (human_size(size), name))
        tmp = path + ".tmp"
        with open(tmp, "wb") as out:
            subprocess.run(["head", "-c", str(size), "/dev/urandom"], stdout=out, check=True)
        if os.path.getsize(tmp) != size:
            raise RuntimeError("head -c wrote %d bytes, wanted %d" % (os.path.getsize(tmp), size))
        os.replace(tmp, path)
    return name, path, _hash_cached(path)


def payload_file(origin_binary, seed, size):
    """The test origin's object bytes for (seed, size), via `swoop-test-origin payload`."""
    os.makedirs(WWW_DIR, exist_ok=True)
    name = "payload-seed%d-%s.bin" % (seed, size_token(size))
    path = os.path.join(WWW_DIR, name)
    if not (os.path.isfile(path) and os.path.getsize(path) == size):
        log("writing test-origin payload seed=%d %s: %s (once)" % (seed, human_size(size), name))
        tmp = path + ".tmp"
        subprocess.run([origin_binary, "payload", "--seed", str(seed), "--size", str(size),
                        "--output", tmp], check=True, stdin=subprocess.DEVNULL)
        if os.path.getsize(tmp) != size:
            raise RuntimeError("payload wrote %d bytes, wanted %d" % (os.path.getsize(tmp), size))
        os.replace(tmp, path)
    return name, path, _hash_cached(path)
