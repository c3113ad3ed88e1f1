# SPDX-License-Identifier: GPL-2.0-only
"""What the verification stages share: the repository's qemu-test paths, the
cache directory of verify, the progress line, content hashes, the build
error.  Imports only base (and deps, for the host tools)."""
import hashlib
import os
from pathlib import Path

from .base import cache_dir, log

REPO = Path(__file__).resolve().parents[2]
QTEST = REPO / "qemu-test"
CONFIG_DIR = QTEST / "config"
RESULTS_DIR = QTEST / "results"


class BuildError(Exception):
    pass


def vdir():
    return cache_dir() / "verify"


def progress(msg):
    log("verify: " + msg)


def nproc():
    return os.cpu_count() or 2


def ensure_host_tools():
    from . import deps
    deps.ensure(deps.VERIFY, "verification")


def h(*parts):
    """sha256 of the parts, each separated by a NUL."""
    m = hashlib.sha256()
    for p in parts:
        m.update(p if isinstance(p, bytes) else str(p).encode())
        m.update(b"\0")
    return m.hexdigest()


def file_hash(paths):
    """sha256 of the files' names and contents.  The name without its
    directory: the key of a cache entry made from a checkout's files (config
    fragments, guest sources) is the same from every checkout."""
    m = hashlib.sha256()
    for p in paths:
        m.update(Path(p).name.encode() + b"\0")
        m.update(Path(p).read_bytes())
    return m.hexdigest()

