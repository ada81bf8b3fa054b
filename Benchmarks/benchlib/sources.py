"""Source objects: random files for nginx, payload files that mirror the test origin's bytes.

Files are made once under results/tmp/www/ and reused while their size matches; their SHA-256
is cached in www/hashes.json (keyed by path relative to www/, size and mtime) so a run hashes each
source once. A file set (S5) lives in its own directory, www/NAME/, and is made and reused the same
way, file by file.
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


def _cache_key(path):
    return os.path.relpath(path, WWW_DIR)  # "rand-1g.bin", "s5/f256k-000.bin"


def _hash_cached(path, cache=None, quiet=False):
    """SHA-256 of a source, from the cache when its size and mtime match. With `cache` (a loaded
    cache dict) the caller saves it; without, the cache file is updated here."""
    st = os.stat(path)
    key = _cache_key(path)
    entry = (cache if cache is not None else _load_cache()).get(key)
    if entry and entry.get("size") == st.st_size and entry.get("mtime_ns") == st.st_mtime_ns:
        return entry["sha256"]
    if not quiet:
        log("hashing source %s (%s)" % (key, human_size(st.st_size)))
    digest = sha256_file(path)
    value = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": digest}
    if cache is not None:
        cache[key] = value
    else:
        cache = _load_cache()
        cache[key] = value
        _save_cache(cache)
    return digest


def _flush(path):
    """Writes a new source out to disk before any tool runs: otherwise the write-back of its
    bytes (gigabytes, for the large ones) lands on the first counted run, and only on that one."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_random(path, size):
    """`size` bytes from /dev/urandom, written to path.tmp and renamed."""
    tmp = path + ".tmp"
    with open("/dev/urandom", "rb", buffering=0) as src, open(tmp, "wb") as out:
        left = size
        while left:
            chunk = src.read(min(left, 4 * 1024 * 1024))
            out.write(chunk)
            left -= len(chunk)
    if os.path.getsize(tmp) != size:
        raise RuntimeError("wrote %d bytes to %s, wanted %d" % (os.path.getsize(tmp), tmp, size))
    _flush(tmp)
    os.replace(tmp, path)


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
        _flush(tmp)
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
        _flush(tmp)
        os.replace(tmp, path)
    return name, path, _hash_cached(path)


def file_set(directory, groups):
    """A set of random files in www/DIRECTORY/: for each (count, size) in `groups`, files named
    fSIZE-NNN.bin (f256k-000.bin ... f256k-299.bin, f32m-000.bin ...). A run that needs fewer files
    of a size reuses the first ones. Returns [{"name", "size", "sha256"}] with names relative to
    www/DIRECTORY/ (which are also the names the tools save them under)."""
    root = os.path.join(WWW_DIR, directory)
    os.makedirs(root, exist_ok=True)
    wanted = [("f%s-%03d.bin" % (size_token(size), i), size) for count, size in groups for i in range(count)]
    missing = [(n, s) for n, s in wanted
               if not (os.path.isfile(os.path.join(root, n)) and os.path.getsize(os.path.join(root, n)) == s)]
    if missing:
        log("making %d file(s) of random bytes in www/%s/ (%s, once)" % (
            len(missing), directory, human_size(sum(s for _, s in missing))))
        for name, size in missing:
            _write_random(os.path.join(root, name), size)
    cache = _load_cache()
    before = dict(cache)
    files = [{"name": n, "size": s, "sha256": _hash_cached(os.path.join(root, n), cache, quiet=True)}
             for n, s in wanted]
    if cache != before:
        log("hashed %d source file(s) in www/%s/" % (sum(1 for k in cache if cache[k] != before.get(k)), directory))
        _save_cache(cache)
    return files
