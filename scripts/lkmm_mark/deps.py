# SPDX-License-Identifier: GPL-2.0-only
"""Host dependencies: every program the tool runs, and the Debian package
that provides it.  `ensure()` installs what is missing with apt-get when
run as root; otherwise it fails with the one apt-get line to run.

All installs of all runs go through one lock file in the cache, so two
runs that both find coccinelle missing install it once, one after the
other (apt's own lock would make the second one fail).
"""
import os
import shutil
import subprocess

from .base import UserError, log
from .target import verify_spec

# What each command needs: a program name (looked up in PATH) or an
# absolute path, with its package.  VERIFY gets the programs of the target
# subsystem's guest workload (policies/<subsystem>/verify.json) after busybox.
ANALYSIS = [("spatch", "coccinelle"), ("python3", "python3")]
SERIES = [("git", "git"), ("perl", "perl"), ("patch", "patch")]
VERIFY = [
    ("make", "make"), ("gcc", "gcc"), ("flex", "flex"), ("bison", "bison"), ("bc", "bc"),
    ("patch", "patch"), ("sparse", "sparse"), ("ccache", "ccache"),
    ("qemu-system-x86_64", "qemu-system-x86"), ("perl", "perl"),
    ("/usr/include/libelf.h", "libelf-dev"), ("/usr/include/openssl/ssl.h", "libssl-dev"),
    ("/usr/lib/x86_64-linux-gnu/libc.a", "libc6-dev"),
    ("/bin/busybox", "busybox-static")] + verify_spec().host_tools + [
    ("/usr/bin/stress-ng", "stress-ng"),
    ("/usr/bin/fio", "fio"), ("ldd", "libc-bin"), ("cpio", "cpio"),
    ("diff", "diffutils"), ("xz", "xz-utils"),
]
# Everything the test command needs (it builds and boots a kernel too).
TESTS = ANALYSIS + SERIES + VERIFY


def present(tool):
    return os.path.exists(tool) if tool.startswith("/") else shutil.which(tool) is not None


def missing(tools):
    out = []
    for tool, pkg in tools:
        if not present(tool) and pkg not in out:
            out.append(pkg)
    return out


def apt_command(pkgs):
    return "apt-get install -y --no-install-recommends " + " ".join(pkgs)


def apt_install(pkgs, why=""):
    """Install Debian packages (exact 'name=version' specs allowed), one
    run at a time; UserError with the command to run when not root.
    why: what is missing, for the message ('spatch not found')."""
    if not pkgs:
        return
    why = why or "missing " + " ".join(pkgs)
    if os.geteuid() != 0:
        raise UserError("%s; run as root: %s" % (why, apt_command(pkgs)))
    if shutil.which("apt-get") is None:
        raise UserError("%s, and apt-get is not in PATH to install %s"
                        % (why, " ".join(pkgs)))
    from .cachelock import locked
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    with locked("apt", "installing packages"):
        still = [p for p in pkgs if not _installed(p)]
        if not still:
            return
        log("installing %s with apt-get" % " ".join(still))
        opts = ["-o", "DPkg::Lock::Timeout=600"]
        subprocess.run(["apt-get"] + opts + ["update", "-q"], env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        r = subprocess.run(["apt-get"] + opts + ["install", "-y", "-q",
                                                 "--no-install-recommends"] + still,
                           env=env, stdout=subprocess.DEVNULL)
    if r.returncode != 0:
        raise UserError("%s; apt-get install %s failed" % (why, " ".join(still)))


def _installed(spec):
    name, _, ver = spec.partition("=")
    try:
        r = subprocess.run(["dpkg-query", "-W", "-f=${Status} ${Version}", name],
                           capture_output=True, text=True)
    except FileNotFoundError:
        return False
    st = r.stdout.strip()
    return r.returncode == 0 and st.startswith("install ok installed") and \
        (not ver or st.endswith(" " + ver))


def ensure(tools, why=""):
    """Make every (tool, package) of tools present."""
    gone = [t for t, _ in tools if not present(t)]
    if not gone:
        return
    what = "%s not found%s" % (", ".join(gone), " (" + why + ")" if why else "")
    apt_install(missing(tools), what)
    gone = [t for t, _ in tools if not present(t)]
    if gone:
        raise UserError("%s not found after apt-get install" % ", ".join(gone))
