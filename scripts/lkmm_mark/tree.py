# SPDX-License-Identifier: GPL-2.0-only
"""Kernel tree provisioning: Debian's linux-source-6.1 (or -6.12, with
--kernel 6.12), unpacked into a cache.

The tree never enters the repository.  `ensure_tree()` returns a checked
kernel tree: either the one given with --tree, or the cached unpack of the
Debian package of the chosen kernel (installed with apt when missing).
"""
import os
import shutil
import subprocess
from pathlib import Path

from .base import UserError, cache_dir, log  # noqa: F401 (re-exported)
from .target import default_target

# The kernels --kernel provisions: Debian's package and the exact version
# each committed series (patches/, patches/6.12/) was generated against.
KERNELS = {
    "6.1": ("linux-source-6.1", "6.1.192-3"),
    "6.12": ("linux-source-6.12", "6.12.118-1~deb12u1"),
}
DEFAULT_KERNEL = "6.1"
PACKAGE, PACKAGE_VERSION = KERNELS[DEFAULT_KERNEL]


def check_kernel(kernel):
    """kernel (None: the default) if --kernel knows it, else UserError."""
    kernel = kernel or DEFAULT_KERNEL
    if kernel not in KERNELS:
        raise UserError("unknown kernel version '%s' for --kernel (known: %s)"
                        % (kernel, ", ".join(KERNELS)))
    return kernel


def resolve_kernel(kernel, tree=None):
    """The --kernel of a command: the one given (checked), else the
    version of a --tree when --kernel knows it, else the default."""
    if kernel is not None:
        return check_kernel(kernel)
    if tree:
        series = kernel_series(tree)
        if series in KERNELS:
            return series
    return DEFAULT_KERNEL


def patches_dir(kernel=None, target=None):
    """The committed series of a --kernel and --target: patches/ for the
    default ones, patches/<version>/ for another version and
    patches/<subsystem>/ for another target's subsystem (patches/foofs/,
    patches/6.12/foofs/); patches/*.patch stays 6.1's default target's."""
    from .target import is_default_target, subsystem_of
    kernel = check_kernel(kernel)
    d = Path(__file__).resolve().parents[2] / "patches"
    d = d if kernel == DEFAULT_KERNEL else d / kernel
    return d if target is None or is_default_target(target) else d / subsystem_of(target)


def package_of(kernel=None):
    """(package, pinned version, tarball) of a --kernel version."""
    pkg, ver = KERNELS[check_kernel(kernel)]
    return pkg, ver, Path("/usr/src") / (pkg + ".tar.xz")


def installed_version(kernel=None):
    pkg = package_of(kernel)[0]
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", pkg],
                             capture_output=True, text=True)
    except FileNotFoundError:
        return None
    if out.returncode != 0 or not out.stdout.strip():
        return None
    return out.stdout.strip()


def apt_install(spec):
    from . import deps
    pkg = spec.partition("=")[0]
    try:
        deps.apt_install([spec], "%s not installed" % pkg)
    except UserError:
        if os.geteuid() != 0:
            raise
        # The pinned version may have left the archive: take what there is,
        # and say so (check_base() reports the difference).
        deps.apt_install([pkg], "%s not installed" % pkg)


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


def kernel_series(tree):
    """'6.1', '6.12': VERSION.PATCHLEVEL of a tree's Makefile (None without
    one).  What depends on the version (policy overrides, the committed
    KCSAN results, verify's cache) follows the tree, --tree ones too."""
    try:
        kv = kernel_version(tree)
    except OSError:
        return None
    return None if "?" in kv else kv.rsplit(".", 1)[0]


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


def pristine_tree(kernel=None):
    """The cached unpack of linux-source-<kernel>, made once.  Unpacked
    under a temporary name and renamed into place, the stamp written last,
    all under the entry's lock: a second run waits, a killed one leaves
    only a temporary directory that the next run removes."""
    from .cachelock import locked, stamp_ok, write_stamp
    pkg, pinned, tarball = package_of(kernel)
    dest = cache_dir() / pkg
    stamp = cache_dir() / (pkg + ".unpacked")
    ver = installed_version(kernel)
    if ver is None or not tarball.exists():
        apt_install("%s=%s" % (pkg, pinned))
        ver = installed_version(kernel)
    if stamp_ok(stamp, ver) and dest.is_dir():
        return dest
    with locked(pkg, "the unpacked " + pkg):
        if stamp_ok(stamp, ver) and dest.is_dir():
            return dest                     # another run unpacked it meanwhile
        log("unpacking %s %s into %s" % (pkg, ver, cache_dir()))
        cache_dir().mkdir(parents=True, exist_ok=True)
        if stamp.exists():
            stamp.unlink()
        for old in [dest] + list(cache_dir().glob(pkg + ".tmp*")):
            if old.exists():
                shutil.rmtree(old)
        tmp = cache_dir() / (pkg + ".tmp%d" % os.getpid())
        tmp.mkdir()
        r = subprocess.run(["tar", "-xJf", str(tarball), "-C", str(tmp)])
        if r.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            raise UserError("cannot unpack %s" % tarball)
        (tmp / pkg).rename(dest)
        tmp.rmdir()
        write_stamp(stamp, ver)
    return dest


def ensure_tree(path=None, target=None, kernel=None):
    """--tree PATH, or the cached tree of --kernel (default 6.1)."""
    kernel = check_kernel(kernel)
    if path:
        return check_kernel_tree(path, target)
    return check_kernel_tree(pristine_tree(kernel), target)


def pristine_package(tree):
    """(package, installed version) when tree is the cached unpack of a
    --kernel package, else (None, None): the cover letter names the
    Debian package only for those."""
    for k, (pkg, _) in KERNELS.items():
        if Path(tree).resolve() == (cache_dir() / pkg).resolve():
            return pkg, installed_version(k)
    return None, None


def require_tools(*tools):
    """Install (as root) or name the package of each missing program."""
    from . import deps
    known = dict(deps.TESTS)
    deps.ensure([(t, known.get(t, t)) for t in tools])
