# SPDX-License-Identifier: GPL-2.0-only
"""verify stage 'initramfs': the guest's root file system, a newc cpio.

busybox-static, stress-ng, fio and the target subsystem's programs with
their libraries, the guest workload's init and lkstress (compiled static)
from the directory policies/<subsystem>/verify.json names (qemu-test/guest/),
and qemu-test/guest/lib.sh, which every init sources.  The image is named by
the content key of all of it (<cache>/verify/initramfs/initramfs-KEY.cpio),
written under a temporary name and renamed into place, under the entry's
lock; a run that boots it holds it shared (older images are removed only by
a run that holds it alone).

Standalone: python3 -m lkmm_mark.initramfs   builds (or finds) it, prints it.
"""
import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

from .cachelock import child_kwargs, ensure
from .target import verify_spec
from .vcommon import BuildError, file_hash, h, progress, vdir

# the subsystem's programs (verify.json's guest_binaries) come first
GENERIC_BINARIES = ["/usr/bin/stress-ng", "/usr/bin/fio"]
# what every guest init sources ('. /lib/lkmm.sh'): modes, markers, jobs
GUEST_LIB = Path(__file__).resolve().parents[2] / "qemu-test" / "guest" / "lib.sh"


def guest_binaries():
    return verify_spec().guest_binaries + GENERIC_BINARIES


def guest_dir():
    return verify_spec().guest_dir


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


def read_cpio(data):
    """[(name, mode, size)] of a newc archive up to its trailer; ValueError
    when it is cut short (used by the tests and --check)."""
    out, off = [], 0
    while True:
        if data[off:off + 6] != b"070701":
            raise ValueError("no newc header at offset %d" % off)
        f = [int(data[off + 6 + 8 * i:off + 14 + 8 * i], 16) for i in range(13)]
        namesize, size, mode = f[11], f[6], f[1]
        name = data[off + 110:off + 110 + namesize - 1].decode()
        off = (off + 110 + namesize + 3) & ~3
        if name == "TRAILER!!!":
            return out
        if off + size > len(data):
            raise ValueError("%s: cut short" % name)
        out.append((name, mode, size))
        off = (off + size + 3) & ~3


def _write_image(tmp, lk, libs):
    with open(tmp, "wb") as f:
        c = Cpio(f)
        for x in ("dev", "proc", "sys", "run", "tmp", "mnt", "root", "etc", "bin", "sbin",
                  "usr/bin", "usr/sbin", "lib64", "lib/x86_64-linux-gnu"):
            c.dir(x)
        c.chardev("dev/console", 5, 1)
        c.chardev("dev/null", 1, 3)
        c.file("init", (guest_dir() / "init").read_bytes())
        c.file("lib/lkmm.sh", GUEST_LIB.read_bytes(), 0o100644)
        c.file("bin/lkstress", lk.read_bytes())
        for b in guest_binaries():
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


def _make(d, img, libs):
    """Build img (the caller holds the initramfs lock exclusively)."""
    progress("building initramfs %s" % img.name)
    lk = d / "lkstress"
    r = subprocess.run(["gcc", "-static", "-O2", "-pthread", "-Wall", "-o", str(lk),
                        str(guest_dir() / "lkstress.c")], capture_output=True, text=True,
                       **child_kwargs())
    if r.returncode != 0:
        raise BuildError("lkstress.c does not compile:\n" + r.stderr[-2000:])
    for old in list(d.glob("initramfs-*.cpio")) + list(d.glob("initramfs-*.tmp*")):
        old.unlink()
    tmp = img.with_suffix(".tmp%d" % os.getpid())
    _write_image(tmp, lk, libs)
    tmp.rename(img)
    progress("initramfs %s: %.0f MB" % (img.name, img.stat().st_size / 1e6))


def build_initramfs():
    guest_src = [guest_dir() / "init", GUEST_LIB, guest_dir() / "lkstress.c"]
    bins = guest_binaries() + ["/bin/busybox"]
    libs = sorted({lib for b in guest_binaries() for lib in _ldd(b)})
    ident = [file_hash(guest_src)]
    for p in bins + libs:
        st = os.stat(p)
        ident.append("%s %d %d" % (p, st.st_size, st.st_mtime_ns))
    key = h(*ident)[:16]
    d = vdir() / "initramfs"
    d.mkdir(parents=True, exist_ok=True)
    img = d / ("initramfs-%s.cpio" % key)
    made = []

    def make():
        _make(d, img, libs)
        made.append(img)
    ensure("initramfs", "the initramfs %s" % d, img.exists, make)
    if not made:
        progress("initramfs up to date (%s)" % img.name)
    return img


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m lkmm_mark.initramfs", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--list", action="store_true", help="list the archive's files")
    args = ap.parse_args(argv)
    try:
        img = build_initramfs()
        entries = read_cpio(img.read_bytes())
    except (BuildError, ValueError, OSError) as e:
        print("lkmm-mark: error: %s" % e, file=sys.stderr)
        return 1
    if args.list:
        for name, mode, size in entries:
            print("%06o %9d %s" % (mode, size, name))
    print("%s: %d entries, %d bytes" % (img, len(entries), img.stat().st_size))
    return 0


if __name__ == "__main__":
    sys.exit(main())
