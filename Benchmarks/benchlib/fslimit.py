"""The file system's own limit for a list of small files (issue 57): `fslimit.c`, compiled on first
use into results/tmp/bin/, used by `Benchmarks/fs-limit` and as a reference row of S9."""

import os
import subprocess

from benchlib.util import BIN_DIR

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fslimit.c")


def compiled():
    """The fslimit binary, compiled when missing or older than its source."""
    path = os.path.join(BIN_DIR, "fslimit")
    if os.access(path, os.X_OK) and os.path.getmtime(path) >= os.path.getmtime(SOURCE):
        return path
    os.makedirs(BIN_DIR, exist_ok=True)
    subprocess.run(["cc", "-O2", "-Wall", "-o", path, SOURCE], check=True)
    return path
