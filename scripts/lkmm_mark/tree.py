# SPDX-License-Identifier: GPL-2.0-only
"""Kernel tree provisioning: Debian's linux-source-6.1, unpacked into a cache.

The tree never enters the repository.  `ensure_tree()` returns a checked
kernel tree: either the one given with --tree, or the cached unpack of the
Debian package (installed with apt when missing).
"""
import os
import shutil
import subprocess
import sys
from pathlib import Path

PACKAGE = "linux-source-6.1"
# The exact base the committed series was generated against.
PACKAGE_VERSION = "6.1.192-3"
TARBALL = Path("/usr/src/linux-source-6.1.tar.xz")


class UserError(Exception):
    """A problem with the user's input: printed as one line, exit 2."""


def cache_dir():
    base = os.environ.get("LKMM_MARK_CACHE")
    if base:
        return Path(base)
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(xdg) / "lkmm-mark"


def log(msg):
    print("lkmm-mark: " + msg, file=sys.stderr, flush=True)


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
    if os.geteuid() != 0:
        raise UserError("%s is not installed; run: sudo apt-get install %s" % (PACKAGE, spec))
    log("installing %s with apt" % spec)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "update", "-q"], env=env, stdout=subprocess.DEVNULL)
    r = subprocess.run(["apt-get", "install", "-y", "-q", spec], env=env,
                       stdout=subprocess.DEVNULL)
    if r.returncode != 0:
        # The pinned version may have left the archive: take what there is,
        # and say so (check_base() reports the difference).
        r = subprocess.run(["apt-get", "install", "-y", "-q", PACKAGE], env=env,
                           stdout=subprocess.DEVNULL)
        if r.returncode != 0:
            raise UserError("apt-get install %s failed" % PACKAGE)


def check_kernel_tree(path, target="fs/btrfs"):
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
    """The cached unpack of linux-source-6.1, made once."""
    dest = cache_dir() / PACKAGE
    stamp = cache_dir() / (PACKAGE + ".unpacked")
    ver = installed_version()
    if ver is None or not TARBALL.exists():
        apt_install("%s=%s" % (PACKAGE, PACKAGE_VERSION))
        ver = installed_version()
    if stamp.exists() and stamp.read_text().strip() == ver and dest.is_dir():
        return dest
    log("unpacking %s %s into %s" % (PACKAGE, ver, cache_dir()))
    cache_dir().mkdir(parents=True, exist_ok=True)
    if dest.exists():
        shutil.rmtree(dest)
    tmp = cache_dir() / (PACKAGE + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    r = subprocess.run(["tar", "-xJf", str(TARBALL), "-C", str(tmp)])
    if r.returncode != 0:
        raise UserError("cannot unpack %s" % TARBALL)
    (tmp / PACKAGE).rename(dest)
    tmp.rmdir()
    stamp.write_text(ver + "\n")
    return dest


def ensure_tree(path=None, target="fs/btrfs"):
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
    for t in tools:
        if shutil.which(t) is None:
            raise UserError("%s not found; install it with: apt-get install %s"
                            % (t, {"spatch": "coccinelle"}.get(t, t)))
