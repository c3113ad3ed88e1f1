# SPDX-License-Identifier: GPL-2.0-only
"""Locks on cache entries, so that two runs never write one entry at once.

`locked(name, what)` holds an exclusive flock(2) on <cache>/locks/<name>.lock
for the duration of a `with` block.  When another run holds it, one line
says who waits for what, then the call blocks until the lock is free.  The
kernel drops a flock when its holder dies, SIGKILL included, so a killed
run never leaves a lock behind.

An entry that a run goes on using after making it (a tree, a kernel build,
the initramfs) is also held shared: `ensure(name, what, complete, make)`
makes it under the exclusive lock when `complete()` is false, then keeps a
shared lock on it until the process ends (or `release(name)`), so that no
other run replaces it while this one builds in it, boots it or reads it.
Within one process a name has one lock file descriptor: `locked()` on a
name the process holds shared converts that lock to exclusive and back.
`child_kwargs()` gives subprocess.Popen the held descriptors, so that a
make or QEMU the run started keeps the entry locked until it has exited
too (and is sent SIGTERM when the run dies).

The entries themselves are made complete-or-absent: they are built under a
temporary name and renamed into place, or they carry a stamp written last
(see `stamp_ok()` / `write_stamp()`), so that a run killed half-way leaves
nothing a later run takes as complete.
"""
import contextlib
import fcntl
import os
import re
import signal

from .base import cache_dir, log

_held = {}          # lock path -> fd this process holds (shared between blocks)


def lock_path(name):
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name)
    d = cache_dir() / "locks"
    d.mkdir(parents=True, exist_ok=True)
    return d / (safe + ".lock")


def _flock(fd, mode, what, path):
    try:
        fcntl.flock(fd, mode | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder(fd)
        log("waiting for %s: another run%s holds %s"
            % (what, " (pid %s)" % holder if holder else "", path))
        fcntl.flock(fd, mode)
    os.ftruncate(fd, 0)
    os.pwrite(fd, b"%d\n" % os.getpid(), 0)


@contextlib.contextmanager
def locked(name, what=None):
    path = lock_path(name)
    fd = _held.get(str(path))
    if fd is not None:
        # held shared by this process: exclusive for the block, then shared again
        _flock(fd, fcntl.LOCK_EX, what or name, path)
        try:
            yield path
        finally:
            _flock(fd, fcntl.LOCK_SH, what or name, path)
        return
    fd = os.open(str(path), os.O_RDWR | os.O_CREAT, 0o644)
    _held[str(path)] = fd               # for child_kwargs() during the block
    try:
        _flock(fd, fcntl.LOCK_EX, what or name, path)
        yield path
    finally:
        del _held[str(path)]
        os.close(fd)                    # releases the lock


def acquire(name, what=None):
    """Take the lock exclusively for a step that runs in the background
    (the facts pass beside the source reading): an open descriptor that
    release_fd() closes.  A child forked meanwhile shares the lock until
    it exits too (the plan's cache writer)."""
    path = lock_path(name)
    fd = os.open(str(path), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        _flock(fd, fcntl.LOCK_EX, what or name, path)
    except BaseException:
        os.close(fd)
        raise
    return fd


def release_fd(fd):
    if fd is not None:
        os.close(fd)


def hold(name, what=None):
    """Take a shared lock on name (or keep the one held) until the process
    ends or release(name)."""
    path = lock_path(name)
    fd = _held.get(str(path))
    if fd is None:
        fd = os.open(str(path), os.O_RDWR | os.O_CREAT, 0o644)
        _held[str(path)] = fd
    _flock(fd, fcntl.LOCK_SH, what or name, path)
    return path


def release(name):
    fd = _held.pop(str(lock_path(name)), None)
    if fd is not None:
        os.close(fd)


def ensure(name, what, complete, make):
    """The entry complete and held shared: made (make()) under the
    exclusive lock when complete() is false, checked again once it is
    shared (another run may have remade it in between)."""
    hold(name, what)
    while not complete():
        with locked(name, what):
            if not complete():
                make()
                if not complete():
                    raise RuntimeError("%s: incomplete after it was made" % (what or name))


def child_kwargs():
    """Popen arguments for a child that works on held entries: it inherits
    the lock descriptors (the entries stay locked while it lives) and gets
    SIGTERM when this process dies (no orphaned make or QEMU)."""
    parent = os.getpid()
    try:
        import ctypes
        prctl = ctypes.CDLL(None, use_errno=True).prctl     # loaded before the fork
    except (OSError, AttributeError):
        prctl = None

    def _die_with_parent():
        if prctl is not None:
            prctl(1, signal.SIGTERM)        # PR_SET_PDEATHSIG
        if os.getppid() != parent:
            os._exit(1)
    return dict(pass_fds=tuple(_held.values()), preexec_fn=_die_with_parent)


def _holder(fd):
    try:
        pid = os.pread(fd, 32, 0).decode().strip()
    except (OSError, UnicodeDecodeError):
        return None
    return pid if pid and pid != str(os.getpid()) else None


def stamp_ok(stamp, key):
    """True when the stamp file exists and records exactly key."""
    try:
        return stamp.read_text().strip() == key
    except OSError:
        return False


def write_stamp(stamp, key):
    """Write the stamp atomically (last, after the entry is complete)."""
    write_atomic(stamp, key + "\n")


def write_atomic(path, text):
    """path holds text, or what it held before: never a part of text."""
    tmp = path.with_name(path.name + ".tmp%d" % os.getpid())
    tmp.write_text(text)
    os.replace(tmp, path)


def remove_stamp(stamp):
    """Before an entry is changed in place: from now on it is not complete."""
    try:
        stamp.unlink()
    except FileNotFoundError:
        pass
