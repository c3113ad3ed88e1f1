# SPDX-License-Identifier: GPL-2.0-only
"""verify: build, sparse-check, boot and stress the series in QEMU.

Stages (each prints progress; the long ones are cached by content hash):

  trees      the pristine tree and a patched copy (cp -al + patch) in the cache
  build      tinyconfig + qemu-test/config/*.config, O= builds with ccache, W=1;
             fs/btrfs warnings of both trees compared
  sparse     make C=2 fs/btrfs/ on both trees, normalised diagnostics compared
  initramfs  busybox-static, btrfs-progs, stress-ng, fio + qemu-test/guest/
  boot       the patched kernel under QEMU (KVM when it works, else TCG), raid1
             btrfs over two virtio disks, stress, remount and data check,
             btrfs check; console scanned for splats
  kcsan      (--kcsan) KCSAN kernels of both trees, same stress, reports compared

The summary table at the end has one row per check; exit status 0 only if
every check passed.
"""
import collections
import gzip
import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from .tree import UserError, cache_dir, ensure_tree, log

REPO = Path(__file__).resolve().parents[2]
QTEST = REPO / "qemu-test"
CONFIG_DIR = QTEST / "config"
GUEST_DIR = QTEST / "guest"
RESULTS_DIR = QTEST / "results"

FLAVORS = {
    "base": ["base.config", "debug.config"],
    "kcsan": ["base.config", "kcsan.config"],
    "kcsanall": ["base.config", "kcsan.config"],
}
# Extra make variables per flavour (part of the build key).  "kcsan" instruments
# fs/btrfs only: KCSAN_SANITIZE is given on the command line as a recursive
# variable, evaluated per directory by scripts/Makefile.lib, so every other
# object is built without -fsanitize=thread.  Each watchpoint is then set up on
# a btrfs access (inline helpers from headers included, as they are compiled
# into the btrfs objects), the guest runs faster, and kernfs/VFS/block races
# no longer take the reports.  "kcsanall" is the whole kernel (KCSAN's default).
FLAVOR_MAKE_ARGS = {
    "kcsan": ["KCSAN_SANITIZE=$(if $(filter fs/btrfs fs/btrfs/%,$(obj)),y,n)"],
}
# Top-level entries of a kernel tree that the tree hash covers (anything else
# there, e.g. a tool's scratch directory, neither invalidates nor enters it).
KERNEL_TOP = {"Documentation", "LICENSES", "arch", "block", "certs", "crypto", "drivers",
              "fs", "include", "init", "io_uring", "ipc", "kernel", "lib", "mm", "net",
              "rust", "samples", "scripts", "security", "sound", "tools", "usr", "virt",
              "COPYING", "CREDITS", "Kbuild", "Kconfig", "MAINTAINERS", "Makefile", "README"}

GUEST_BINARIES = ["/usr/bin/btrfs", "/usr/sbin/mkfs.btrfs", "/usr/bin/stress-ng", "/usr/bin/fio"]

MARK = "@@LKMM"
# A fixed, valid date for the kernel's version string and the initramfs
# timestamps: the same bytes on every build (reproducible builds), and no
# "date: invalid date" from the scripts that parse it.
BUILD_TIMESTAMP = "Thu Jan  1 00:00:00 UTC 2026"


def vdir():
    return cache_dir() / "verify"


def progress(msg):
    log("verify: " + msg)


def nproc():
    return os.cpu_count() or 2


# --------------------------------------------------------------------------
# host packages

def ensure_host_tools():
    from . import deps
    deps.ensure(deps.VERIFY, "verification")


# --------------------------------------------------------------------------
# hashing

def _h(*parts):
    h = hashlib.sha256()
    for p in parts:
        h.update(p if isinstance(p, bytes) else str(p).encode())
        h.update(b"\0")
    return h.hexdigest()


def tree_hash(root):
    """Cheap content identity of a tree: relative path, size, mtime of every file.

    At the top level only the kernel's own entries (KERNEL_TOP) count: the
    build dirs o-* and other tools' scratch files and directories do not."""
    h = hashlib.sha256()
    root = str(root)
    stack = [root]
    while stack:
        d = stack.pop()
        try:
            entries = sorted(os.scandir(d), key=lambda e: e.name)
        except OSError:
            continue
        for e in entries:
            if d == root and e.name not in KERNEL_TOP:
                continue
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            rel = os.path.relpath(e.path, root)
            if stat.S_ISDIR(st.st_mode):
                stack.append(e.path)
            else:
                h.update(("%s %d %d\n" % (rel, st.st_size, st.st_mtime_ns)).encode())
    return h.hexdigest()


def file_hash(paths):
    h = hashlib.sha256()
    for p in paths:
        h.update(str(p).encode() + b"\0")
        h.update(Path(p).read_bytes())
    return h.hexdigest()


# --------------------------------------------------------------------------
# trees

def list_patches(pdir):
    if pdir is None:
        d = REPO / "patches"
        if not d.is_dir():
            return []
    else:
        d = Path(pdir)
        if not d.is_dir():
            raise UserError("%s: no such directory" % pdir)
    out = []
    for p in sorted(d.glob("*.patch")):
        text = p.read_text(errors="replace")
        if "\n--- " not in text and not text.startswith("--- "):
            continue            # cover letter: no diff
        out.append(p)
    return out


def patched_files(patch):
    files = []
    for line in patch.read_text(errors="replace").splitlines():
        if line.startswith("+++ "):
            name = line[4:].split("\t")[0].strip()
            if name != "/dev/null":
                files.append(name[2:] if name.startswith("b/") else name)
    return files


def _copy_tree(src, dest):
    tmp = Path(str(dest) + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    r = subprocess.run(["cp", "-al", str(src), str(tmp)], stderr=subprocess.DEVNULL)
    if r.returncode != 0:
        if tmp.exists():
            shutil.rmtree(tmp)
        r = subprocess.run(["cp", "-a", str(src), str(tmp)])
        if r.returncode != 0:
            raise UserError("cannot copy %s to %s" % (src, tmp))
    return tmp


def prepare_pristine(base):
    """Hard-linked copy of base at <cache>/verify/src/pristine; returns (path, hash).

    The pristine and patched copies sit at the same depth, so builds in
    <src>/o-<flavor> use identical relative paths (srctree=..) and ccache hits
    across the two trees for every file the series leaves alone.
    """
    vs = vdir() / "src"
    vs.mkdir(parents=True, exist_ok=True)
    progress("hashing base tree %s" % base)
    bh = tree_hash(base)
    pristine = vs / "pristine"
    stamp = vs / "pristine.stamp"
    if not (pristine.is_dir() and stamp.exists() and stamp.read_text().strip() == bh):
        progress("copying pristine tree into %s" % pristine)
        if pristine.exists():
            shutil.rmtree(pristine)
        _copy_tree(base, pristine).rename(pristine)
        stamp.write_text(bh + "\n")
    return pristine, bh


def prepare_patched(base, bh, patches):
    """<cache>/verify/src/patched: base + patches (hard links broken where patched)."""
    vs = vdir() / "src"
    ph = _h(bh, *[p.read_bytes() for p in patches])
    patched = vs / "patched"
    stamp = vs / "patched.stamp"
    if not (patched.is_dir() and stamp.exists() and stamp.read_text().strip() == ph):
        progress("making patched tree (%d patches) in %s" % (len(patches), patched))
        if patched.exists():
            shutil.rmtree(patched)
        tmp = _copy_tree(base, patched)
        for p in patches:
            r = subprocess.run(["patch", "-p1", "-s", "-N", "--no-backup-if-mismatch",
                                "-d", str(tmp), "-i", str(p)],
                               capture_output=True, text=True)
            if r.returncode != 0:
                shutil.rmtree(tmp)
                msg = (r.stdout + r.stderr).strip().splitlines()
                raise UserError("%s does not apply: %s" % (p.name, msg[-1] if msg else "?"))
            # patch(1) writes a new file and renames it: the hard link to the
            # pristine file must be broken, never written through.
            for f in patched_files(p):
                a, b = Path(base) / f, tmp / f
                if a.exists() and b.exists() and a.stat().st_ino == b.stat().st_ino:
                    shutil.rmtree(tmp)
                    raise UserError("patching %s wrote through a hard link" % f)
        tmp.rename(patched)
        stamp.write_text(ph + "\n")
    return patched, ph


def ensure_pristine_kernel(tree=None, flavor="base"):
    """The cached pristine kernel (built if missing): used by the unit tests."""
    ensure_host_tools()
    base = ensure_tree(tree)
    pristine, bh = prepare_pristine(base)
    return build_kernel(pristine, flavor, bh)


# --------------------------------------------------------------------------
# kernel builds

def _env():
    env = dict(os.environ)
    env.update(CCACHE_DIR=str(cache_dir() / "ccache"), CCACHE_BASEDIR=str(vdir() / "src"),
               CCACHE_NOHASHDIR="1", CCACHE_MAXSIZE=env.get("CCACHE_MAXSIZE", "8G"),
               KBUILD_BUILD_TIMESTAMP=BUILD_TIMESTAMP, KBUILD_BUILD_USER="lkmm",
               KBUILD_BUILD_HOST="verify", LC_ALL="C")
    return env


def _make_args(out, *extra):
    return ["make", "-C", str(out.parent), "O=" + out.name, "-j%d" % (nproc() + 1),
            "CC=ccache gcc", "W=1"] + list(extra)


def _run_logged(cmd, logfile, what, env):
    """Run cmd, output to logfile, a progress line every 60 s."""
    t0 = time.time()
    with open(logfile, "w") as f:
        p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env)
        last = t0
        while p.poll() is None:
            time.sleep(1)
            if time.time() - last >= 60:
                last = time.time()
                try:
                    n = sum(1 for _ in open(logfile, errors="replace"))
                except OSError:
                    n = 0
                progress("%s: %d s, %d log lines" % (what, last - t0, n))
    return p.returncode, time.time() - t0


def config_options(path):
    opts = {}
    for line in Path(path).read_text().splitlines():
        m = re.match(r"(CONFIG_\w+)=(.*)", line)
        if m:
            opts[m.group(1)] = m.group(2)
        m = re.match(r"# (CONFIG_\w+) is not set", line)
        if m:
            opts[m.group(1)] = "n"
    return opts


def configure(out, flavor, env):
    frags = [CONFIG_DIR / f for f in FLAVORS[flavor]]
    key = file_hash(frags)
    stamp = out / ".lkmm-config"
    if stamp.exists() and stamp.read_text().strip() == key and (out / ".config").exists():
        return key
    progress("configuring %s (tinyconfig + %s)" % (out, " ".join(f.name for f in frags)))
    out.mkdir(parents=True, exist_ok=True)
    src = out.parent
    for cmd in (["make", "-C", str(src), "O=" + out.name, "tinyconfig"],
                [str(src / "scripts/kconfig/merge_config.sh"), "-m", "-O", str(out),
                 str(out / ".config")] + [str(f) for f in frags],
                ["make", "-C", str(src), "O=" + out.name, "olddefconfig"]):
        r = subprocess.run(cmd, cwd=str(src), env=env, capture_output=True, text=True)
        if r.returncode != 0:
            raise UserError("config step failed: %s: %s" % (" ".join(cmd[:3]), r.stderr[-300:]))
    have = config_options(out / ".config")
    lost = []
    for f in frags:
        for k, v in config_options(f).items():
            if k == "CONFIG_INITRAMFS_SOURCE":
                continue
            if have.get(k, "n") != v:
                lost.append("%s=%s (got %s)" % (k, v, have.get(k, "unset")))
    if lost:
        raise UserError("config fragment options did not survive olddefconfig: " + ", ".join(lost))
    stamp.write_text(key + "\n")
    return key


WARN_RE = re.compile(r"^(?P<file>[^\s:]+):(?P<line>\d+):(?:(?P<col>\d+):)?\s*"
                     r"(?P<kind>warning|error):\s*(?P<msg>.*)$")


def _norm_path(p):
    p = p.strip()
    while p.startswith("../"):
        p = p[3:]
    m = re.search(r"/(?:pristine|patched)/(?!o-)(.*)$", p)
    if m and p.startswith("/"):
        p = m.group(1)
    return p


def parse_diagnostics(text, only_prefix=None):
    """Normalised diagnostics: 'file: kind: message[ | continuation...]'."""
    out = []
    cur = None
    for line in text.splitlines():
        m = WARN_RE.match(line)
        if m:
            if cur:
                out.append(cur)
            f = _norm_path(m.group("file"))
            msg = re.sub(r"\s+", " ", m.group("msg").strip())
            cur = None
            if only_prefix and not f.startswith(only_prefix):
                continue
            cur = "%s: %s: %s" % (f, m.group("kind"), msg)
        elif cur and re.match(r"^\s{3,}\S", line) and not re.match(r"^\s+\d+ \|", line) \
                and "|" not in line[:12]:
            # sparse continuation ("   expected ...", "   got ...")
            cur += " | " + re.sub(r"\s+", " ", line.strip())
        else:
            if cur:
                out.append(cur)
            cur = None
    if cur:
        out.append(cur)
    return sorted(out)


def build_kernel(src, flavor, src_key, seed_from=None):
    """O=<src>/o-<flavor> build; returns dict(out, bzimage, warnings, seconds, cached)."""
    env = _env()
    out = src / ("o-" + flavor)
    if seed_from is not None and not out.exists() and (seed_from / ".lkmm-stamp").exists():
        progress("seeding %s from %s" % (out, seed_from))
        r = subprocess.run(["cp", "-a", str(seed_from), str(out)])
        if r.returncode != 0:
            raise UserError("cannot copy %s" % seed_from)
        (out / ".lkmm-stamp").unlink()
    cfg = configure(out, flavor, env)
    gccv = subprocess.run(["gcc", "--version"], capture_output=True, text=True).stdout
    margs = FLAVOR_MAKE_ARGS.get(flavor, [])
    key = _h(src_key, cfg, gccv, "W=1", flavor, *margs)
    stamp = out / ".lkmm-stamp"
    bz = out / "arch/x86/boot/bzImage"
    wfile = out / "lkmm-warnings.txt"
    if stamp.exists() and stamp.read_text().strip() == key and bz.exists() and wfile.exists():
        progress("%s: kernel up to date (cached)" % out)
        return dict(out=out, bzimage=bz, warnings=wfile.read_text().splitlines(),
                    seconds=0.0, cached=True)
    # Recompile fs/btrfs every time the build runs so that its warnings are
    # complete (ccache replays them for unchanged files).
    for p in (out / "fs/btrfs").rglob("*.o") if (out / "fs/btrfs").exists() else []:
        p.unlink()
    progress("building %s kernel in %s (log: %s)" % (flavor, out, out / "lkmm-build.log"))
    targets = ["bzImage"] + margs
    rc, secs = _run_logged(_make_args(out, *targets), out / "lkmm-build.log",
                           "build %s/%s" % (src.name, flavor), env)
    text = (out / "lkmm-build.log").read_text(errors="replace")
    if rc != 0:
        tail = "\n".join(text.splitlines()[-25:])
        raise BuildError("%s build failed (%s/lkmm-build.log):\n%s" % (src.name, out, tail))
    warnings = parse_diagnostics(text, "fs/btrfs/")
    wfile.write_text("".join(w + "\n" for w in warnings))
    stamp.write_text(key + "\n")
    progress("%s/%s built in %.0f s, %d fs/btrfs warnings" % (src.name, flavor, secs,
                                                             len(warnings)))
    return dict(out=out, bzimage=bz, warnings=warnings, seconds=secs, cached=False)


class BuildError(Exception):
    pass


def run_sparse(build, src_key):
    out = build["out"]
    key = _h(src_key, (out / ".lkmm-stamp").read_text(), "C=2")
    stamp = out / ".lkmm-sparse-stamp"
    sfile = out / "lkmm-sparse.txt"
    if stamp.exists() and stamp.read_text().strip() == key and sfile.exists():
        return sfile.read_text().splitlines()
    progress("sparse: make C=2 fs/btrfs/ in %s" % out)
    rc, secs = _run_logged(_make_args(out, "C=2", "fs/btrfs/"), out / "lkmm-sparse.log",
                           "sparse", _env())
    text = (out / "lkmm-sparse.log").read_text(errors="replace")
    if rc != 0:
        raise BuildError("make C=2 fs/btrfs/ failed in %s:\n%s"
                         % (out, "\n".join(text.splitlines()[-15:])))
    diags = [d for d in parse_diagnostics(text)]
    sfile.write_text("".join(d + "\n" for d in diags))
    stamp.write_text(key + "\n")
    progress("sparse: %d diagnostics in %.0f s" % (len(diags), secs))
    return diags


def new_items(before, after):
    c = collections.Counter(after)
    c.subtract(collections.Counter(before))
    return sorted(k for k, v in c.items() for _ in range(max(v, 0)))


# --------------------------------------------------------------------------
# initramfs

def _ldd(path):
    r = subprocess.run(["ldd", path], capture_output=True, text=True)
    libs = []
    for line in r.stdout.splitlines():
        m = re.search(r"(/\S+) \(0x", line)
        if m:
            libs.append(m.group(1))
    return libs


class Cpio:
    """newc writer (stdlib only)."""

    def __init__(self, f):
        self.f = f
        self.ino = 1000
        self.seen = set()

    def _hdr(self, name, mode, size, nlink=1, rmaj=0, rmin=0):
        self.ino += 1
        name_b = name.encode() + b"\0"
        hdr = "070701" + "".join("%08X" % v for v in (
            self.ino, mode, 0, 0, nlink, 0, size, 0, 0, rmaj, rmin, len(name_b), 0))
        self.f.write(hdr.encode() + name_b)
        self._pad()

    def _pad(self):
        n = (4 - self.f.tell() % 4) % 4
        self.f.write(b"\0" * n)

    def dirs(self, name):
        parts = name.strip("/").split("/")[:-1]
        for i in range(1, len(parts) + 1):
            d = "/".join(parts[:i])
            if d not in self.seen:
                self.seen.add(d)
                self._hdr(d, 0o40755, 0, nlink=2)

    def dir(self, name):
        self.dirs(name + "/x")

    def file(self, name, data, mode=0o100755):
        name = name.strip("/")
        if name in self.seen:
            return
        self.dirs(name)
        self.seen.add(name)
        self._hdr(name, mode, len(data))
        self.f.write(data)
        self._pad()

    def symlink(self, name, target):
        name = name.strip("/")
        if name in self.seen:
            return
        self.dirs(name)
        self.seen.add(name)
        t = target.encode()
        self._hdr(name, 0o120777, len(t))
        self.f.write(t)
        self._pad()

    def chardev(self, name, maj, mnr):
        name = name.strip("/")
        self.dirs(name)
        self.seen.add(name)
        self._hdr(name, 0o20600, 0, rmaj=maj, rmin=mnr)

    def close(self):
        self._hdr("TRAILER!!!", 0, 0)
        self.f.write(b"\0" * ((512 - self.f.tell() % 512) % 512))


def build_initramfs():
    guest_src = [GUEST_DIR / "init", GUEST_DIR / "lkstress.c"]
    bins = GUEST_BINARIES + ["/bin/busybox"]
    libs = sorted({lib for b in GUEST_BINARIES for lib in _ldd(b)})
    ident = [file_hash(guest_src)]
    for p in bins + libs:
        st = os.stat(p)
        ident.append("%s %d %d" % (p, st.st_size, st.st_mtime_ns))
    key = _h(*ident)[:16]
    d = vdir() / "initramfs"
    d.mkdir(parents=True, exist_ok=True)
    img = d / ("initramfs-%s.cpio" % key)
    if img.exists():
        progress("initramfs up to date (%s)" % img.name)
        return img
    progress("building initramfs %s" % img.name)
    lk = d / "lkstress"
    r = subprocess.run(["gcc", "-static", "-O2", "-pthread", "-Wall", "-o", str(lk),
                        str(GUEST_DIR / "lkstress.c")], capture_output=True, text=True)
    if r.returncode != 0:
        raise BuildError("lkstress.c does not compile:\n" + r.stderr[-2000:])
    for old in d.glob("initramfs-*.cpio"):
        old.unlink()
    tmp = img.with_suffix(".tmp")
    with open(tmp, "wb") as f:
        c = Cpio(f)
        for x in ("dev", "proc", "sys", "run", "tmp", "mnt", "root", "etc", "bin", "sbin",
                  "usr/bin", "usr/sbin", "lib64", "lib/x86_64-linux-gnu"):
            c.dir(x)
        c.chardev("dev/console", 5, 1)
        c.chardev("dev/null", 1, 3)
        c.file("init", (GUEST_DIR / "init").read_bytes())
        c.file("bin/lkstress", lk.read_bytes())
        for b in GUEST_BINARIES:
            c.file(b, Path(b).read_bytes())
        for lib in libs:
            c.file(lib, Path(os.path.realpath(lib)).read_bytes())
        c.file("bin/busybox", Path("/bin/busybox").read_bytes())
        applets = subprocess.run(["/bin/busybox", "--list-full"], capture_output=True,
                                 text=True).stdout.split()
        for a in applets:
            c.symlink(a, "/bin/busybox")
        c.file("etc/passwd", b"root:x:0:0:root:/root:/bin/sh\n", 0o100644)
        c.file("etc/group", b"root:x:0:\n", 0o100644)
        c.close()
    tmp.rename(img)
    progress("initramfs %s: %.0f MB" % (img.name, img.stat().st_size / 1e6))
    return img


# --------------------------------------------------------------------------
# QEMU

SPLAT_PATTERNS = [
    ("BUG", re.compile(r"\bBUG: (?!KCSAN)")),
    ("KCSAN", re.compile(r"BUG: KCSAN: ")),
    ("WARNING", re.compile(r"\bWARNING: ")),
    ("Oops", re.compile(r"\bOops\b|general protection fault|kernel BUG at")),
    ("panic", re.compile(r"Kernel panic - not syncing")),
    ("lockdep", re.compile(r"possible (?:circular|recursive) locking|inconsistent lock state|"
                           r"turning off the locking correctness validator|"
                           r"suspicious RCU usage|INFO: lockdep")),
    ("hung", re.compile(r"INFO: task .* blocked for more than|soft lockup|rcu_sched self-detected"
                        r"|rcu: INFO: rcu_.* stall")),
    ("btrfs", re.compile(r"BTRFS (?:critical|error|emergency|alert)")),
    ("UBSAN", re.compile(r"UBSAN: ")),
]

_accel_cache = {}


def detect_accel(bzimage):
    """'kvm' if a tiny KVM boot actually runs here, else 'tcg'."""
    forced = os.environ.get("LKMM_MARK_ACCEL")
    if forced in ("kvm", "tcg"):
        return forced
    if "accel" in _accel_cache:
        return _accel_cache["accel"]
    accel = "tcg"
    why = "/dev/kvm not usable"
    if os.path.exists("/dev/kvm") and os.access("/dev/kvm", os.R_OK | os.W_OK):
        cmd = ["qemu-system-x86_64", "-accel", "kvm", "-cpu", "host", "-m", "256",
               "-nodefaults", "-display", "none", "-no-reboot", "-serial", "stdio",
               "-kernel", str(bzimage), "-append",
               "console=ttyS0 rdinit=/nonexistent root=/dev/nonexistent panic=-1"]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
            ok = r.returncode == 0 and "Kernel panic" in r.stdout
            why = "tiny KVM boot %s" % ("reached the panic" if ok else
                                         "failed: " + (r.stderr.strip().splitlines() or
                                                       ["rc %d" % r.returncode])[-1])
            if ok:
                accel = "kvm"
        except subprocess.TimeoutExpired:
            why = "tiny KVM boot timed out"
    progress("accelerator: %s (%s)" % (accel, why))
    _accel_cache["accel"] = accel
    return accel


class GuestResult:
    def __init__(self):
        self.console = ""
        self.timed_out = False
        self.rc = None
        self.seconds = 0.0
        self.accel = None
        self.steps = collections.OrderedDict()
        self.ops = {}
        self.done = None          # "PASS" / "FAIL..." / None
        self.splats = []          # (kind, line, context)
        self.unexpected = []
        self.stress_seconds = None
        self.kcsan_stats = {}     # /sys/kernel/debug/kcsan counters after the stress
        self.cmd = []

    def tail(self, n=40):
        return "\n".join(self.console.splitlines()[-n:])

    def ok(self):
        return (not self.timed_out and self.done == "PASS" and not self.unexpected
                and all(v == "PASS" for v in self.steps.values()))

    def failure(self):
        """One clear sentence on why the guest failed (None if it passed)."""
        if self.timed_out:
            return "guest timed out after %.0f s (hang?); console tail:\n%s" % (
                self.seconds, self.tail())
        if self.unexpected:
            k, line, _ = self.unexpected[0]
            return "kernel %s splat on the console: %s (%d unexpected splat(s))" % (
                k, line.strip(), len(self.unexpected))
        if self.done is None:
            return "guest exited (rc %s) without the completion marker; console tail:\n%s" % (
                self.rc, self.tail())
        bad = [k for k, v in self.steps.items() if v != "PASS"]
        if bad or self.done != "PASS":
            return "guest reported failure: %s" % (", ".join(bad) or self.done)
        return None


def scan_console(text, expected=()):
    """All splats as (kind, line, context); those not matching expected regexes separately."""
    lines = text.splitlines()
    splats, unexpected = [], []
    exp = [re.compile(e) for e in expected]
    for i, line in enumerate(lines):
        if MARK in line:
            continue
        for kind, rx in SPLAT_PATTERNS:
            if rx.search(line):
                ctx = "\n".join(lines[i:i + 25])
                splats.append((kind, line, ctx))
                if not any(e.search(line) for e in exp):
                    unexpected.append((kind, line, ctx))
                break
    return splats, unexpected


def parse_markers(res):
    for line in res.console.splitlines():
        i = line.find(MARK + " ")
        if i < 0:
            continue
        words = line[i + len(MARK) + 1:].split()
        if not words:
            continue
        if words[0] == "step" and len(words) >= 3:
            res.steps[words[1]] = words[2]
        elif words[0] == "ops" and len(words) >= 2:
            res.ops[words[1]] = " ".join(words[2:])
        elif words[0] == "DONE" and len(words) >= 2:
            res.done = " ".join(words[1:])
        elif words[0] == "verified" and len(words) >= 4:
            res.ops["verified"] = "%s files verified, %s bad" % (words[1], words[3])
        elif words[0] == "kcsan-stats":
            res.kcsan_stats = dict(w.split("=", 1) for w in words[1:] if "=" in w)
        elif words[0] == "stress" and len(words) >= 3 and words[1] == "seconds":
            res.stress_seconds = int(words[2]) if words[2].isdigit() else None


def run_guest(bzimage, initrd, append="", disks=(), smp=2, mem=2048, timeout=600,
              expected=(), console_log=None, accel=None, echo=True):
    res = GuestResult()
    accel = accel or detect_accel(bzimage)
    res.accel = accel
    cmd = ["qemu-system-x86_64", "-m", str(mem), "-smp", str(smp), "-nodefaults",
           "-display", "none", "-no-reboot", "-serial", "stdio", "-monitor", "none",
           "-kernel", str(bzimage),
           "-append", "console=ttyS0 loglevel=5 panic=-1 oops=panic " + append]
    if accel == "kvm":
        cmd[1:1] = ["-accel", "kvm", "-cpu", "host"]
    else:
        cmd[1:1] = ["-accel", "tcg,thread=multi", "-cpu", "max"]
    if initrd:
        cmd += ["-initrd", str(initrd)]
    for d in disks:
        cmd += ["-drive", "file=%s,if=virtio,format=raw,cache=unsafe,discard=unmap" % d]
    res.cmd = cmd
    chunks = []
    t0 = time.time()
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT)
    logf = open(console_log, "w") if console_log else None

    def reader():
        for raw in iter(p.stdout.readline, b""):
            line = raw.decode("utf-8", "replace").replace("\r", "")
            chunks.append(line)
            if logf:
                logf.write(line)
                logf.flush()
            if echo and MARK in line:
                progress("guest: " + line[line.find(MARK):].strip())

    th = threading.Thread(target=reader, daemon=True)
    th.start()
    try:
        p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        res.timed_out = True
        p.kill()
        p.wait()
    th.join(10)
    p.stdout.close()
    if logf:
        logf.close()
    res.seconds = time.time() - t0
    res.rc = p.returncode
    res.console = "".join(chunks)
    parse_markers(res)
    res.splats, res.unexpected = scan_console(res.console, expected)
    return res


def make_disks(d, n=2, size=8 << 30, first=0):
    d.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(first, first + n):
        p = d / ("disk%d.img" % i)
        if p.exists():
            p.unlink()
        with open(p, "wb") as f:
            f.truncate(size)
        paths.append(p)
    return paths


def stress_guest(bzimage, initrd, secs, smp, tag, kcsan_params="", expected=(), accel=None,
                 profile="full"):
    run = vdir() / "run" / tag
    if run.exists():
        shutil.rmtree(run)
    disks = make_disks(run)
    if profile == "kcsan":
        # /dev/vdc: the second, otherwise idle file system of `lkstress commit`
        disks += make_disks(run, n=1, size=2 << 30, first=2)
    append = "lkmm.mode=stress lkmm.secs=%d lkmm.profile=%s" % (secs, profile)
    if kcsan_params:
        append += " lkmm.kcsan=" + kcsan_params
    accel = accel or detect_accel(bzimage)
    # boot + mkfs + stress + remount/verify/scrub/check; TCG is slow, KCSAN slower.
    timeout = 300 + secs * 2 + (600 if accel == "tcg" else 0)
    progress("booting %s (%s, %d vCPUs, %d s stress, timeout %d s, console %s)"
             % (tag, accel, smp, secs, timeout, run / "console.log"))
    res = run_guest(bzimage, initrd, append, disks, smp=smp, timeout=timeout,
                    expected=expected, console_log=run / "console.log", accel=accel)
    for d in disks:
        d.unlink()
    return res


# --------------------------------------------------------------------------
# KCSAN

KCSAN_SEP = re.compile(r"^={20,}\s*$")
ACCESS_RE = re.compile(r"^(?:race at unknown origin, with )?(?P<type>read|write|read-write)(?P<marked> \(marked\))?"
                       r"(?P<reordered> \(reordered\))? to (?P<addr>0x[0-9a-f]+|\S+) of (?P<size>\d+) bytes"
                       r" by (?P<who>.*?) on cpu (?P<cpu>\d+):")
FRAME_RE = re.compile(r"^\s*(?P<fn>[A-Za-z_][\w.]*)\+0x[0-9a-f]+/0x[0-9a-f]+")


def _strip_ts(line):
    return re.sub(r"^\[\s*\d+\.\d+\]\s?", "", line)


def parse_kcsan(text):
    lines = [_strip_ts(x) for x in text.splitlines()]
    reports = []
    i = 0
    while i < len(lines):
        m = re.match(r"BUG: KCSAN: (.*)$", lines[i])
        if not m:
            i += 1
            continue
        rep = dict(title=re.sub(r"\+0x[0-9a-f]+/0x[0-9a-f]+", "", m.group(1)).strip(),
                   accesses=[], value=None)
        i += 1
        cur = None
        while i < len(lines) and not KCSAN_SEP.match(lines[i]) and \
                not lines[i].startswith("BUG: KCSAN:"):
            ln = lines[i]
            a = ACCESS_RE.match(ln.strip())
            if a:
                cur = dict(type=a.group("type"), marked=bool(a.group("marked")),
                           reordered=bool(a.group("reordered")),
                           size=int(a.group("size")), frames=[], raw=[])
                rep["accesses"].append(cur)
            elif ln.strip().startswith("value changed:"):
                rep["value"] = ln.strip()
                cur = None
            elif cur is not None:
                f = FRAME_RE.match(ln)
                if f and len(cur["frames"]) < 8:
                    cur["frames"].append(f.group("fn"))
                    cur["raw"].append(ln.strip())
                elif not ln.strip():
                    cur = None
            i += 1
        reports.append(rep)
    return reports


def btrfs_functions(out):
    """Text symbols of fs/btrfs (from its built-in.a)."""
    a = out / "fs/btrfs/built-in.a"
    if not a.exists():
        return set()
    r = subprocess.run(["nm", "--defined-only", str(a)], capture_output=True, text=True)
    return {x.split()[-1] for x in r.stdout.splitlines() if len(x.split()) == 3
            and x.split()[1] in "tTW"}


def resolve_lines(vmlinux, src, frames_raw):
    """func+off/size -> 'file:line' via scripts/faddr2line (needs DEBUG_INFO)."""
    if not frames_raw:
        return {}
    fa = src / "scripts/faddr2line"
    r = subprocess.run([str(fa), str(vmlinux)] + sorted(set(frames_raw)), capture_output=True,
                       text=True, cwd=str(src))
    res = {}
    cur = None
    for line in r.stdout.splitlines():
        m = re.match(r"^(\S+\+0x[0-9a-f]+/0x[0-9a-f]+):?$", line.strip())
        if m:
            cur = m.group(1)
            continue
        m = re.match(r"^(?:\S+ )?(?:at|\()?\s*(\S+?):(\d+)", line.strip().split(" at ")[-1])
        if cur and m:
            # innermost first, then the "(inlined by)" callers
            res.setdefault(cur, []).append((_norm_path(m.group(1)), int(m.group(2))))
    return res


FIELD_RE = re.compile(r"(?:->|\.)\s*([A-Za-z_]\w*)")


def marked_fields(patches):
    """Field names the series wraps in READ_ONCE/WRITE_ONCE/data_race, per function."""
    fields = set()
    funcs = set()
    for p in patches:
        fn = None
        for line in p.read_text(errors="replace").splitlines():
            if line.startswith("@@"):
                m = re.search(r"@@[^@]*@@.*?(\w+)\s*\(", line)
                fn = m.group(1) if m else None
            elif line.startswith("+") and not line.startswith("+++"):
                for m in re.finditer(r"(READ_ONCE|WRITE_ONCE|data_race)\s*\(", line):
                    seg = line[m.end():]
                    depth, arg = 1, ""
                    for ch in seg:
                        if ch == "(":
                            depth += 1
                        elif ch == ")":
                            depth -= 1
                            if depth == 0:
                                break
                        elif ch == "," and depth == 1 and m.group(1) == "WRITE_ONCE":
                            break
                        arg += ch
                    names = FIELD_RE.findall(arg)
                    if names:
                        fields.add(names[-1])
                    elif re.fullmatch(r"\s*\w+\s*", arg):
                        fields.add(arg.strip())
                    if fn:
                        funcs.add(fn)
    return fields, funcs


def series_changes(pristine, patched, patches, plan_tree=None):
    """What the series changes, from the two trees on disk (the whole series at once).

    Returns dict(old={file: {line}}, new={file: {line}}, fields={name}, funcs={name}):
    the pristine lines the series removes or rewrites, the patched lines it adds,
    the field names it wraps in READ_ONCE/WRITE_ONCE/data_race (marked_fields)
    and the functions its hunks are in; with plan_tree (the base tree the
    series is for), also the struct.fields of its accesses and of the marked
    ones, from that tree's (cached) analysis plan."""
    old, new, hunks = {}, {}, {}
    files = sorted({f for p in patches for f in patched_files(p)})
    for f in files:
        a, b = Path(pristine) / f, Path(patched) / f
        if not a.exists() or not b.exists():
            continue
        r = subprocess.run(["diff", "-U0", str(a), str(b)], capture_output=True, text=True)
        for m in re.finditer(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@", r.stdout, re.M):
            o0, on = int(m.group(1)), int(m.group(2) or 1)
            n0, nn = int(m.group(3)), int(m.group(4) or 1)
            old.setdefault(f, set()).update(range(o0, o0 + on))
            new.setdefault(f, set()).update(range(n0, n0 + nn))
            hunks.setdefault(f, []).append((o0, on, n0, nn))
    fields, funcs = marked_fields(patches)
    at, marked_sf = plan_fields(plan_tree, old) if plan_tree is not None else ({}, None)
    return dict(old=old, new=new, fields=fields, funcs=funcs, hunks=hunks, at=at,
                marked_sf=marked_sf)


def plan_fields(tree, old):
    """From the analysis plan of the pristine tree: (file, line) -> the
    struct.field names of the accesses on that line, and the struct.fields
    the series marks (flagged sites on the lines it changes).  ({}, None)
    when there is no plan (the report then matches field names only)."""
    import types
    from .commands import get_plan
    try:
        d = get_plan(types.SimpleNamespace(tree=str(tree), target="fs/btrfs", jobs=0,
                                           no_cache=False, policies=None), Path(tree))
    except (UserError, OSError) as e:
        log("no analysis plan for the KCSAN mapping (%s): matching field names only" % e)
        return {}, None
    at, marked = {}, set()
    for x in d["sites"]:
        sf = "%s.%s" % (x["struct"], x["field"])
        at.setdefault((x["file"], x["line"]), set()).add(sf)
        if x["action"] != "none" and x["line"] in old.get(x["file"], ()):
            marked.add(sf)
    return at, marked


def _norm(f):
    """fs/btrfs/x.c from the paths faddr2line prints (o-kcsan/../fs/btrfs/x.c)."""
    i = f.find("fs/btrfs/")
    return f[i:] if i >= 0 else f


def _to_old(hunks, n):
    """The pristine line of line n of a patched file (diff -U0 hunks)."""
    off = 0
    for o0, on, n0, nn in hunks:
        # a count of 0 (pure insertion or deletion) puts the start on the
        # line before the change
        nnext = n0 + nn if nn else n0 + 1
        if n < (n0 if nn else n0 + 1):
            break
        if n < nnext:
            return o0 + min(n - n0, max(on - 1, 0)) if on else o0
        off = (o0 + on if on else o0 + 1) - nnext
    return n + off


# lines around a KCSAN access line searched for the raced field when the
# two access lines name different fields
FIELD_WINDOW = 5


def _access_fields(a, changes, side, window=0):
    """The struct.fields of the plan's sites on the access's innermost line
    (or the line it is inlined into), or within `window` lines of it;
    empty without a plan."""
    if changes.get("marked_sf") is None:
        return set()
    for f, n in a.get("locs", [])[:2]:
        f = _norm(f)
        o = n if side == "old" else _to_old(changes.get("hunks", {}).get(f, []), n)
        sf = set()
        for x in range(o - window, o + window + 1):
            sf |= changes["at"].get((f, x), set())
        if sf:
            return sf
    return set()


def involvement(d, changes, side):
    """Why a distinct report involves what the series marks ([] if it does not).

    side is "old" for reports from the pristine kernel (pristine line numbers),
    "new" for the patched kernel.  A report is involved when one of its access
    sites (the innermost source line or a line it is inlined into) is a line the
    series changes, or when a field named on an access's innermost line is one
    the series marks."""
    why = []
    lines = changes[side]
    sfs = [_access_fields(a, changes, side) for a in d["accesses"]]
    known = [x for x in sfs if x]
    common = set.intersection(*known) if len(known) >= 2 else None
    d.pop("field_mismatch", None)
    d.pop("field_window", None)
    if common is not None and not common:
        # both sides of one data race access one field: when the lines
        # KCSAN gives name disjoint fields, one of them is off (a store
        # attributed to the next statement, a load in a loop body put on
        # the loop head); the field both sides have within a few lines
        # is the one that raced
        near = [_access_fields(a, changes, side, window=FIELD_WINDOW) for a in d["accesses"]]
        kn = [x for x in near if x]
        common = set.intersection(*kn) if len(kn) >= 2 else set()
        if not common:
            d["field_mismatch"] = " vs ".join(",".join(sorted(x)) for x in known)
            return []
        d["field_window"] = ",".join(sorted(common))
        sfs = [x & common for x in near]
        why = ["field %s (marked by the series), the field both access lines have within "
               "%d lines" % (",".join(sorted(common & changes["marked_sf"])), FIELD_WINDOW)] \
            if common & changes["marked_sf"] else []
        return why
    for a, sf in zip(d["accesses"], sfs):
        for f, n in a.get("locs", []):
            f = _norm(f)
            if n in lines.get(f, ()):
                why.append("site %s:%d changed by the series" % (f, n))
                break
        # the struct.field of the access, from the plan's sites on its line
        # (or the line it is inlined into): a field of another struct with
        # the same name is not involved; of the fields on both lines, the
        # ones they share
        if sf and common:
            sf = sf & common
        if sf:
            hit = sorted(sf & changes["marked_sf"])
            if hit:
                why.append("field %s (marked by the series) at %s" % (",".join(hit),
                                                                      _norm(a["where"])))
        else:
            hit = sorted(set(a.get("fields", [])) & changes["fields"])
            if hit:
                why.append("field named %s (marked by the series in some struct) at %s"
                           % (",".join(hit), _norm(a["where"])))
    return why


def summarise_kcsan(reports, out, src, vmlinux):
    """Distinct data-race reports with resolved lines and fields, btrfs ones flagged."""
    bfn = btrfs_functions(out)
    raws = [r for rep in reports for a in rep["accesses"] for r in a["raw"][:1]]
    lines = resolve_lines(vmlinux, src, raws) if vmlinux.exists() else {}
    distinct = collections.OrderedDict()
    for rep in reports:
        if not rep["title"].startswith("data-race"):
            continue
        tops = [a["frames"][0] for a in rep["accesses"] if a["frames"]]
        key = rep["title"]
        if key in distinct:
            distinct[key]["count"] += 1
            continue
        acc = []
        fields = set()
        for a in rep["accesses"]:
            locs = lines.get(a["raw"][0], []) if a["raw"] else []
            texts = []
            for f, n in locs[:2]:
                try:
                    texts.append((src / f).read_text(errors="replace").splitlines()[n - 1])
                except (OSError, IndexError):
                    texts.append("")
            # the field accessed is named on the innermost line, or, when that is
            # an inline helper's line without one (div_u64(), i_size_read()...),
            # on the line it is inlined into
            afields = []
            for t in texts[:2]:
                afields = sorted(set(FIELD_RE.findall(t)))
                if afields:
                    break
            fields.update(afields)
            where = "%s:%d" % locs[0] if locs else "?"
            if len(locs) > 1:
                where += " (in %s:%d)" % locs[-1]
            acc.append(dict(type=a["type"] + (" (marked)" if a["marked"] else ""),
                            frames=a["frames"][:3], where=where, locs=[list(x) for x in locs],
                            fields=afields, line=texts[0].strip() if texts else ""))
        # a btrfs race: an access whose own function (top frame) is in fs/btrfs,
        # or whose source line (innermost or inlined-into) is
        in_btrfs = any(a["frames"] and a["frames"][0] in bfn for a in rep["accesses"]) or \
            any("fs/btrfs/" in a["where"] for a in acc) or "btrfs" in rep["title"]
        via_btrfs = in_btrfs or any(f in bfn for a in rep["accesses"] for f in a["frames"])
        distinct[key] = dict(title=key, btrfs=in_btrfs, via_btrfs=via_btrfs, count=1, accesses=acc,
                             fields=sorted(fields), tops=tops, value=rep["value"],
                             pcs=[a["raw"][0].split()[0] if a["raw"] else None
                                  for a in rep["accesses"]],
                             reordered=any(a.get("reordered") for a in rep["accesses"]),
                             unknown_origin=[])
    return _merge_unknown_origin(list(distinct.values()))


def _merge_unknown_origin(distinct):
    """A one-sided report ("race at unknown origin": the watched value changed,
    the other access was not seen) at the very instruction of an access of a
    two-sided report of the same run is that race seen from one side; it is
    counted there, not as a race of its own."""
    pcs = {}
    for d in distinct:
        if len(d["accesses"]) > 1:
            for pc in d["pcs"]:
                if pc:
                    pcs.setdefault(pc, d)
    out = []
    for d in distinct:
        two = pcs.get(d["pcs"][0]) if len(d["accesses"]) == 1 and d["pcs"][0] else None
        if two is not None:
            two["count"] += d["count"]
            two["unknown_origin"].append("%s x%d at %s" % (d["title"], d["count"], d["pcs"][0]))
        else:
            out.append(d)
    return out


# --------------------------------------------------------------------------
# summary

def table(rows, headers):
    w = [max(len(str(r[i])) for r in rows + [headers]) for i in range(len(headers))]
    sep = "+" + "+".join("-" * (x + 2) for x in w) + "+"
    out = [sep, "| " + " | ".join(str(h).ljust(w[i]) for i, h in enumerate(headers)) + " |", sep]
    for r in rows:
        out.append("| " + " | ".join(str(c).ljust(w[i]) for i, c in enumerate(r)) + " |")
    out.append(sep)
    return "\n".join(out)


def ops_summary(ops):
    """'write 403 files, fsync 441, ...' from the guest's ops markers."""
    parts = []
    for k, v in sorted(ops.items()):
        if k == "verified":
            continue
        w = v.split()
        if k == "stress-ng":
            n = sum(int(x.split("=")[1]) for x in w if "=" in x and x.split("=")[1].isdigit())
            parts.append("stress-ng %d bogo-ops" % n)
        elif k == "scrub" and len(w) >= 3:
            parts.append("scrub %s, balance %s%s" % (w[0], w[2], " (%s refused)" % w[4]
                                                     if len(w) >= 5 and w[4] != "0" else ""))
        elif w:
            parts.append("%s %s" % (k, w[0]))
    return ", ".join(parts)


def _secs(s):
    return "%dm%02ds" % (s // 60, s % 60)


# Defaults of `verify --kcsan` (the tuning that found the most btrfs races here,
# see qemu-test/README.md).
KCSAN_DEFAULTS = dict(kcsan_secs=900, kcsan_smp=4, kcsan_params="skip_watch:50", kcsan_scope="btrfs",
                      kcsan_profile="kcsan")


def parse_rest(rest):
    """Extra options after the documented ones (argparse REMAINDER)."""
    opts = dict(smp=None, kcsan_secs=None, kcsan_params=None, kcsan_smp=None, skip_boot=False,
                kcsan_scope=None, kcsan_kernels="both", kcsan_only=False, kcsan_tag="",
                kcsan_profile=None, kcsan_remap=None)
    numeric = ("--smp", "--kcsan-seconds", "--kcsan-smp")
    strings = {"--kcsan-params": None, "--kcsan-scope": ("btrfs", "all"),
               "--kcsan-profile": ("kcsan", "full"),
               "--kcsan-kernels": ("both", "pristine", "patched"), "--kcsan-tag": None,
               "--kcsan-remap": None}
    it = iter(rest or [])
    for a in it:
        if a == "--":
            continue
        if a in numeric or a in strings:
            try:
                v = next(it)
            except StopIteration:
                raise UserError("%s needs a value" % a)
            k = a[2:].replace("-", "_")
            if k == "kcsan_seconds":
                k = "kcsan_secs"
            if a in strings:
                if strings[a] and v not in strings[a]:
                    raise UserError("%s: one of %s, not %s" % (a, "|".join(strings[a]), v))
                opts[k] = v
            else:
                if not v.isdigit():
                    raise UserError("%s: not a number: %s" % (a, v))
                opts[k] = int(v)
        elif a == "--no-boot":
            opts["skip_boot"] = True
        elif a == "--kcsan-only":
            opts["kcsan_only"] = True
        else:
            raise UserError("unknown verify option: %s (known: --smp N, --kcsan-seconds N, "
                            "--kcsan-smp N, --kcsan-params k:v,..., --kcsan-scope btrfs|all, "
                            "--kcsan-profile kcsan|full, "
                            "--kcsan-kernels both|pristine|patched, --kcsan-only, "
                            "--kcsan-tag NAME, --kcsan-remap RESULTS.json, --no-boot)" % a)
    if opts["kcsan_secs"] is not None and opts["kcsan_secs"] < 5:
        raise UserError("--kcsan-seconds must be at least 5")
    return opts


def main(args):
    t_start = time.time()
    opts = parse_rest(getattr(args, "rest", None))
    secs = args.stress_seconds if args.stress_seconds is not None else 60
    if secs < 5:
        raise UserError("--stress-seconds must be at least 5")
    ensure_host_tools()
    base = ensure_tree(args.tree)
    patches = list_patches(args.patches)
    rows = []
    status = {"ok": True}

    def row(name, ok, detail):
        rows.append((name, "PASS" if ok else ("FAIL" if ok is False else "-"), detail))
        if ok is False:
            status["ok"] = False

    progress("%d patches from %s" % (len(patches), args.patches or (REPO / "patches")))
    pristine, bh = prepare_pristine(base)
    patched, ph = prepare_patched(base, bh, patches)

    if opts["kcsan_remap"]:
        return kcsan_remap(Path(opts["kcsan_remap"]), base, pristine, patched, patches)

    if not opts["kcsan_only"]:
        if not non_kcsan_stages(pristine, patched, bh, ph, patches, opts, secs, row, rows):
            print(table(rows, ["check", "result", "detail"]))
            return 1

    # ---- KCSAN
    if args.kcsan or opts["kcsan_only"]:
        try:
            row(*kcsan_compare(base, pristine, patched, bh, ph, patches, opts, secs))
        except BuildError as e:
            print(str(e), file=sys.stderr)
            row("KCSAN", False, str(e).splitlines()[0])
        if rows[-1][1] == "FAIL":
            status["ok"] = False

    row("total", status["ok"], "%s wall" % _secs(time.time() - t_start))
    print(table(rows, ["check", "result", "detail"]))
    return 0 if status["ok"] else 1


def non_kcsan_stages(pristine, patched, bh, ph, patches, opts, secs, row, rows):
    """build, warnings, sparse, boot + stress; False if the build failed."""
    # ---- build
    try:
        b0 = build_kernel(pristine, "base", bh)
        b1 = build_kernel(patched, "base", ph, seed_from=b0["out"])
    except BuildError as e:
        print(str(e), file=sys.stderr)
        row("build", False, str(e).splitlines()[0])
        return False
    row("build", True, "pristine %s, patched %s (%d patches)" % (
        "cached" if b0["cached"] else _secs(b0["seconds"]),
        "cached" if b1["cached"] else _secs(b1["seconds"]), len(patches)))
    neww = new_items(b0["warnings"], b1["warnings"])
    for w in neww:
        print("new warning: " + w, file=sys.stderr)
    row("warnings (W=1 fs/btrfs)", not neww, "pristine %d, patched %d, new %d" % (
        len(b0["warnings"]), len(b1["warnings"]), len(neww)))

    # ---- sparse
    try:
        s0 = run_sparse(b0, bh)
        s1 = run_sparse(b1, ph)
        news = new_items(s0, s1)
        for w in news:
            print("new sparse diagnostic: " + w, file=sys.stderr)
        row("sparse (C=2 fs/btrfs)", not news, "before %d, after %d, new %d" % (
            len(s0), len(s1), len(news)))
    except BuildError as e:
        print(str(e), file=sys.stderr)
        row("sparse (C=2 fs/btrfs)", False, str(e).splitlines()[0])

    # ---- boot + stress
    if not opts["skip_boot"]:
        initrd = build_initramfs()
        accel = detect_accel(b1["bzimage"])
        smp = opts["smp"] or 4          # more vCPUs than host cores: more interleavings
        res = stress_guest(b1["bzimage"], initrd, secs, smp, "patched-base", accel=accel)
        boot_ok = not res.timed_out and res.done is not None
        row("boot (%s, %d vCPUs)" % (accel, smp), boot_ok and not res.unexpected,
            "%.0f s in QEMU; %s" % (res.seconds, "no splats" if not res.unexpected else
                                    "%d unexpected splat(s): %s" % (
                                        len(res.unexpected), res.unexpected[0][1].strip()[:60])))
        stress_steps = [k for k in res.steps if k.startswith("stress-")]
        sbad = [k for k in stress_steps if res.steps[k] != "PASS"]
        row("stress", bool(stress_steps) and not sbad,
            "%s s, %d jobs: %s%s" % (res.stress_seconds, len(stress_steps),
                                     ops_summary(res.ops) or "no ops reported",
                                     (" FAILED: " + ",".join(sbad)) if sbad else ""))
        dsteps = ["umount", "remount", "verify", "final-scrub"]
        dbad = [k for k in dsteps if res.steps.get(k) != "PASS"]
        row("data check", not dbad, ("%s after remount; scrub clean" % res.ops.get(
            "verified", "?")) if not dbad else "FAILED: " + ",".join(dbad))
        row("btrfs check", res.steps.get("btrfs-check") == "PASS",
            res.steps.get("btrfs-check", "not run"))
        verdict = res.failure()
        if verdict:
            print("verify: " + verdict, file=sys.stderr)
        if not res.ok() and all(r[1] != "FAIL" for r in rows):
            row("guest", False, verdict.splitlines()[0] if verdict else "failed")
        if res.unexpected:
            for k, line, ctx in res.unexpected[:5]:
                print("---- %s splat:\n%s" % (k, ctx), file=sys.stderr)
    return True


def _keep_log(src, dest):
    """Console log into results/: as is below 1 MB, gzipped otherwise."""
    if not src.exists():
        return None
    if src.stat().st_size < 1 << 20:
        shutil.copy(src, dest)
        return dest.name
    gz = Path(str(dest) + ".gz")
    with open(src, "rb") as fi, gzip.open(gz, "wb", 9) as fo:
        shutil.copyfileobj(fi, fo)
    return gz.name


def _with_pcs(lst, console):
    """Results files written before the instruction addresses were kept: take
    them from the saved console log, then merge one-sided reports."""
    if all("pcs" in d for d in lst):
        return lst
    pcs = {}
    if console.exists():
        for rep in parse_kcsan(console.read_text(errors="replace")):
            pcs.setdefault(rep["title"], [a["raw"][0].split()[0] if a["raw"] else None
                                          for a in rep["accesses"]])
    for d in lst:
        d.setdefault("pcs", pcs.get(d["title"], [None] * len(d["accesses"])))
        d.setdefault("unknown_origin", [])
    return _merge_unknown_origin(lst)


def kcsan_remap(path, base, pristine, patched, patches):
    """Map the races of a saved KCSAN run (results/kcsan-*.json) onto the
    series in patches/ now: which pristine races it addresses, which do not
    involve it, and (when the run had a patched kernel built from this same
    series) the leftovers.  Written beside the run as *-remap.txt."""
    try:
        run = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise UserError("%s: not a KCSAN results file: %s" % (path, e))
    changes = series_changes(pristine, patched, patches, plan_tree=base)
    same = run.get("patches") == [p.name for p in patches]
    out = ["remap of %s onto %d patches (%s the run's series)" % (
        path.name, len(patches), "the same as" if same else "not")]
    for name, side in (("pristine", "old"), ("patched", "new")):
        lst = [d for d in (run.get(name) or []) if d.get("btrfs")]
        if not lst:
            continue
        lst = _with_pcs(lst, path.with_name(path.stem + "-%s-console.log" % name))
        if name == "patched" and not same:
            out.append("\npatched: built from another series, not remapped")
            continue
        for d in lst:
            d["involves"] = involvement(d, changes, side)
        inv = [d for d in lst if d["involves"]]
        groups = [("involve the series", inv),
                  ("do not involve the series", [d for d in lst if not d["involves"]])]
        out.append("\n%s: %d distinct btrfs races" % (name, len(lst)))
        for title, g in groups:
            out.append("  %s: %d" % (title, len(g)))
            for d in g:
                out.append("    %s  (x%d)%s" % (d["title"], d["count"], "  [%s]" % "; ".join(
                    d["involves"]) if d["involves"] else ""))
                for u in d["unknown_origin"]:
                    out.append("      counted here, one-sided at the same instruction: " + u)
                if d.get("field_mismatch"):
                    out.append("      note: the two access lines name different fields (%s): "
                               "one line is off, not matched to the series"
                               % d["field_mismatch"])
    text = "\n".join(out)
    print(text)
    dst = path.with_name(path.stem + "-remap.txt")
    dst.write_text(text + "\n")
    log("written %s" % dst)
    return 0


def kcsan_compare(base, pristine, patched, bh, ph, patches, opts, secs):
    scope = opts["kcsan_scope"] or KCSAN_DEFAULTS["kcsan_scope"]
    flavor = "kcsan" if scope == "btrfs" else "kcsanall"
    kernels = ["pristine", "patched"] if opts["kcsan_kernels"] == "both" else [opts["kcsan_kernels"]]
    builds = {}
    if "pristine" in kernels or "patched" in kernels:
        builds["pristine"] = build_kernel(pristine, flavor, bh)
    if "patched" in kernels:
        builds["patched"] = build_kernel(patched, flavor, ph, seed_from=builds["pristine"]["out"])
    initrd = build_initramfs()
    accel = detect_accel(builds["pristine"]["bzimage"])
    ksecs = opts["kcsan_secs"] or max(secs, KCSAN_DEFAULTS["kcsan_secs"])
    smp = opts["kcsan_smp"] or KCSAN_DEFAULTS["kcsan_smp"]
    params = opts["kcsan_params"] if opts["kcsan_params"] is not None \
        else KCSAN_DEFAULTS["kcsan_params"]
    profile = opts["kcsan_profile"] or KCSAN_DEFAULTS["kcsan_profile"]
    expected = [r"BUG: KCSAN: "]
    changes = series_changes(pristine, patched, patches, plan_tree=base)
    results = {}
    srcs = dict(pristine=pristine, patched=patched)
    for name in kernels:
        b = builds[name]
        res = stress_guest(b["bzimage"], initrd, ksecs, smp, name + "-kcsan", params,
                           expected=expected, accel=accel, profile=profile)
        reps = parse_kcsan(res.console)
        summ = summarise_kcsan(reps, b["out"], srcs[name], b["out"] / "vmlinux")
        for d in summ:
            d["involves"] = involvement(d, changes, "old" if name == "pristine" else "new")
        results[name] = dict(res=res, reports=reps, distinct=summ)

    def btrfs(name):
        return [d for d in results[name]["distinct"] if d["btrfs"]] if name in results else []

    pb, qb = btrfs("pristine"), btrfs("patched")
    left = [d for d in qb if d["involves"]]
    qtitles = {d["title"] for d in qb}
    unaddressed = [d for d in pb if not d["involves"]]
    addressed = [d for d in pb if d["involves"]]
    fixed = [d for d in addressed if "patched" in results and d["title"] not in qtitles]
    lines = []

    def via(name):
        return len([d for d in results[name]["distinct"] if d.get("via_btrfs")])

    trows = []
    for name in kernels:
        r = results[name]
        trows.append((name, len(r["reports"]), len(r["distinct"]), len(btrfs(name)), via(name),
                      len(left) if name == "patched" else len(addressed),
                      len(unaddressed) if name == "pristine" else "-",
                      "%.0f s" % r["res"].seconds, r["res"].stress_seconds or "?",
                      (r["res"].ops.get("write") or "?").split()[0],
                      r["res"].kcsan_stats.get("setup_watchpoints", "?")))
    lines.append(table(trows, ["kernel", "reports", "distinct data races", "in btrfs",
                               "btrfs in call stack", "involve the series",
                               "not addressed", "QEMU", "stress s", "files written",
                               "watchpoints"]))
    lines.append("KCSAN scope %s (flavour %s), guest profile %s, stress %d s per kernel, "
                 "%d vCPUs, %s, kcsan params: %s" % (scope, flavor, profile, ksecs, smp, accel,
                                                    params or "build defaults"))
    lines.append("series: %d patches, %d marked field names, %d changed lines"
                 % (len(patches), len(changes["fields"]),
                    sum(len(v) for v in changes["new"].values())))

    def explain(d):
        plain = [a for a in d["accesses"] if "(marked)" not in a["type"]]
        if not plain:
            return "both accesses marked (assert or reordered-access report)"
        if d.get("reordered"):
            return ("one access is \"(reordered)\" by KCSAN's weak-memory model: check with "
                    "faddr2line whether it moved past a release KCSAN does not see "
                    "(kernel/locking is not instrumented in the btrfs-only scope)")
        return "%s; still plain: %s" % ("; ".join(d["involves"]), "; ".join(
            "%s in %s at %s" % (a["type"], a["frames"][0] if a["frames"] else "?", a["where"])
            for a in plain))

    if left:
        lines.append("\nleftovers explained:")
        for d in left:
            lines.append("  %s: %s" % (d["title"], explain(d)))
    sections = [("all btrfs races on pristine", pb),
                ("seen on pristine, involve the series", addressed),
                ("seen on pristine, not addressed by the series", unaddressed)]
    if "patched" in results:
        sections[1:1] = [("leftover on patched (involve a marked field or changed line)", left),
                         ("seen on pristine, involve the series, gone on patched", fixed)]
        sections.append(("all btrfs races on patched", qb))
    for title, lst in sections:
        lines.append("\n%s: %d" % (title, len(lst)))
        for d in lst:
            lines.append("  %s  (x%d)%s" % (d["title"], d["count"], "  [%s]" % "; ".join(
                d["involves"]) if d.get("involves") else ""))
            for a in d["accesses"]:
                lines.append("     %-18s %-40s %s  %s" % (a["type"], " < ".join(a["frames"]),
                                                         a["where"], a["line"][:80]))
            for u in d.get("unknown_origin", []):
                lines.append("     counted here, one-sided at the same instruction: " + u)
            if d.get("reordered") and not d.get("involves"):
                lines.append("     note: an access is \"(reordered)\": check with faddr2line "
                             "whether it moved past a release KCSAN does not see")
            if d.get("field_mismatch"):
                lines.append("     note: the two access lines name different fields (%s): "
                             "one line is off, so the race is not matched to the series"
                             % d["field_mismatch"])
    text = "\n".join(lines)
    print(text)
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S") + ("-" + opts["kcsan_tag"] if opts["kcsan_tag"] else "")
    (RESULTS_DIR / ("kcsan-%s.txt" % stamp)).write_text(text + "\n")
    (RESULTS_DIR / ("kcsan-%s.json" % stamp)).write_text(json.dumps(dict(
        seconds=ksecs, smp=smp, accel=accel, params=params, scope=scope, kernels=kernels,
        profile=profile,
        patches=[p.name for p in patches],
        summary={n: dict(reports=len(results[n]["reports"]),
                         distinct=len(results[n]["distinct"]), btrfs=len(btrfs(n)),
                         qemu_seconds=round(results[n]["res"].seconds),
                         stress_seconds=results[n]["res"].stress_seconds,
                         done=results[n]["res"].done,
                         kcsan_stats=results[n]["res"].kcsan_stats) for n in kernels},
        pristine=results.get("pristine", {}).get("distinct"),
        patched=results.get("patched", {}).get("distinct"),
        marked_fields=sorted(changes["fields"]), leftover=[d["title"] for d in left],
        addressed=[d["title"] for d in addressed],
        unaddressed=[d["title"] for d in unaddressed],
        ops={n: results[n]["res"].ops for n in kernels},
    ), indent=1) + "\n")
    for name in kernels:
        _keep_log(vdir() / "run" / (name + "-kcsan") / "console.log",
                  RESULTS_DIR / ("kcsan-%s-%s-console.log" % (stamp, name)))
    bad = [n for n in kernels if results[n]["res"].done is None or results[n]["res"].timed_out]
    # KCSAN reports are expected; other splats are not, on either kernel.
    unexp = [n for n in kernels if results[n]["res"].unexpected]
    for n in unexp:
        for k, line, ctx in results[n]["res"].unexpected[:3]:
            print("---- %s: %s splat:\n%s" % (n, k, ctx), file=sys.stderr)
    ok = not bad and not left and not unexp
    detail = "btrfs races: %s (results/kcsan-%s.txt)" % (", ".join(
        "%s %d" % (n, len(btrfs(n))) for n in kernels), stamp)
    if "patched" in results:
        detail += "; on patched involving the series %d" % len(left)
    if "pristine" in results:
        detail += "; pristine not addressed %d" % len(unaddressed)
    if bad:
        detail += "; guest did not complete: " + ",".join(bad)
    if unexp:
        detail += "; other splats on: " + ",".join(unexp)
    return "KCSAN", ok, detail
