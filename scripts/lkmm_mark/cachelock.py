# SPDX-License-Identifier: GPL-2.0-only
"""Locks on cache entries, so that two runs never write one entry at once.

`locked(name, what)` holds an exclusive flock(2) on <cache>/locks/<name>.lock
for the duration of a `with` block.  When another run holds it, one line
says who waits for what, then the call blocks until the lock is free.  The
kernel drops a flock when its holder dies, SIGKILL included, so a killed
run never leaves a lock behind.

The entries themselves are made complete-or-absent: they are built under a
temporary name and renamed into place, or they carry a stamp written last
(see `stamp_ok()` / `write_stamp()`), so that a run killed half-way leaves
nothing a later run takes as complete.
"""
import contextlib
import fcntl
import os
import re

from .base import cache_dir, log


def lock_path(name):
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name)
    d = cache_dir() / "locks"
    d.mkdir(parents=True, exist_ok=True)
    return d / (safe + ".lock")


def acquire(name, what=None):
    """Take the lock (waiting, with one line, when another run holds it):
    an open descriptor that release() closes.  A child forked meanwhile
    shares the lock until it exits too."""
    path = lock_path(name)
    fd = os.open(str(path), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            log("waiting for %s: another run%s holds %s"
                % (what or name, " (pid %s)" % holder if holder else "", path))
            fcntl.flock(fd, fcntl.LOCK_EX)
        os.ftruncate(fd, 0)
        os.pwrite(fd, b"%d\n" % os.getpid(), 0)
    except BaseException:
        os.close(fd)
        raise
    return fd


def release(fd):
    if fd is not None:
        os.close(fd)


@contextlib.contextmanager
def locked(name, what=None):
    fd = acquire(name, what)
    try:
        yield lock_path(name)
    finally:
        release(fd)


def _holder(fd):
    try:
        return os.pread(fd, 32, 0).decode().strip() or None
    except (OSError, UnicodeDecodeError):
        return None


def stamp_ok(stamp, key):
    """True when the stamp file exists and records exactly key."""
    try:
        return stamp.read_text().strip() == key
    except OSError:
        return False


def write_stamp(stamp, key):
    """Write the stamp atomically (last, after the entry is complete)."""
    tmp = stamp.with_name(stamp.name + ".tmp%d" % os.getpid())
    tmp.write_text(key + "\n")
    os.replace(tmp, stamp)
