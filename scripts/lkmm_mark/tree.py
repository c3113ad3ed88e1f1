# SPDX-License-Identifier: GPL-2.0-only
"""Kernel tree provisioning: Debian's linux-source-6.1, unpacked into a cache.

The tree never enters the repository.  `ensure_tree()` returns a checked
kernel tree: either the one given with --tree, or the cached unpack of the
Debian package (installed with apt when missing).
"""
import os
import shutil
import subprocess
from pathlib import Path

from .base import UserError, cache_dir, log  # noqa: F401 (re-exported)
from .target import default_target

PACKAGE = "linux-source-6.1"
# The exact base the committed series was generated against.
PACKAGE_VERSION = "6.1.192-3"
TARBALL = Path("/usr/src/linux-source-6.1.tar.xz")


def installed_version():
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", PACKAGE],
                             capture_output=True, text=True)
    except FileNotFoundError:
        return None
    if out.returncode != 0 or not out.stdout.strip():
        return None
    return out.stdout.strip()


def apt_install(spec):
    from . import deps
    try:
        deps.apt_install([spec], "%s not installed" % PACKAGE)
    except UserError:
        if os.geteuid() != 0:
            raise
        # The pinned version may have left the archive: take what there is,
        # and say so (check_base() reports the difference).
        deps.apt_install([PACKAGE], "%s not installed" % PACKAGE)


def check_kernel_tree(path, target=None):
    """The tree, checked; target None is the default target, "" none."""
    target = default_target() if target is None else target
    p = Path(path)
    if not p.exists():
        raise UserError("%s: no such directory" % path)
    if not p.is_dir():
        raise UserError("%s: not a directory" % path)
    for marker in ("Makefile", "Kconfig", "include/linux", "scripts"):
        if not (p / marker).exists():
            raise UserError("%s: not a kernel tree (no %s)" % (path, marker))
    if target and not (p / target).is_dir():
        raise UserError("%s: kernel tree has no %s directory" % (path, target))
    return p.resolve()


def kernel_version(tree):
    """'6.1.NNN' from the top Makefile."""
    vals = {}
    with open(Path(tree) / "Makefile") as f:
        for line in f:
            for key in ("VERSION", "PATCHLEVEL", "SUBLEVEL"):
                if line.startswith(key + " ="):
                    vals[key] = line.split("=", 1)[1].strip()
            if len(vals) == 3:
                break
    return "%s.%s.%s" % (vals.get("VERSION", "?"), vals.get("PATCHLEVEL", "?"),
                         vals.get("SUBLEVEL", "?"))


def pristine_tree():
    """The cached unpack of linux-source-6.1, made once.  Unpacked under a
    temporary name and renamed into place, the stamp written last, all
    under the entry's lock: a second run waits, a killed one leaves only
    a temporary directory that the next run removes."""
    from .cachelock import locked, stamp_ok, write_stamp
    dest = cache_dir() / PACKAGE
    stamp = cache_dir() / (PACKAGE + ".unpacked")
    ver = installed_version()
    if ver is None or not TARBALL.exists():
        apt_install("%s=%s" % (PACKAGE, PACKAGE_VERSION))
        ver = installed_version()
    if stamp_ok(stamp, ver) and dest.is_dir():
        return dest
    with locked(PACKAGE, "the unpacked " + PACKAGE):
        if stamp_ok(stamp, ver) and dest.is_dir():
            return dest                     # another run unpacked it meanwhile
        log("unpacking %s %s into %s" % (PACKAGE, ver, cache_dir()))
        cache_dir().mkdir(parents=True, exist_ok=True)
        if stamp.exists():
            stamp.unlink()
        for old in [dest] + list(cache_dir().glob(PACKAGE + ".tmp*")):
            if old.exists():
                shutil.rmtree(old)
        tmp = cache_dir() / (PACKAGE + ".tmp%d" % os.getpid())
        tmp.mkdir()
        r = subprocess.run(["tar", "-xJf", str(TARBALL), "-C", str(tmp)])
        if r.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            raise UserError("cannot unpack %s" % TARBALL)
        (tmp / PACKAGE).rename(dest)
        tmp.rmdir()
        write_stamp(stamp, ver)
    return dest


def ensure_tree(path=None, target=None):
    if path:
        return check_kernel_tree(path, target)
    return check_kernel_tree(pristine_tree(), target)


def base_description(tree):
    """How the tree relates to the pinned base, for cover letters and warnings."""
    kv = kernel_version(tree)
    pristine = cache_dir() / PACKAGE
    if Path(tree).resolve() == pristine.resolve():
        ver = installed_version() or "unknown"
        return kv, ver
    return kv, None


def require_tools(*tools):
    """Install (as root) or name the package of each missing program."""
    from . import deps
    known = dict(deps.TESTS)
    deps.ensure([(t, known.get(t, t)) for t in tools])
