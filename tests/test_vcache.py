# SPDX-License-Identifier: GPL-2.0-only
"""Cache safety: two runs of one cached step at once, and a step killed
half-way, never leave an entry that is corrupt or taken as complete.

Each test points LKMM_MARK_CACHE at a temporary directory and runs the real
stage code in child processes: the initramfs build, the tree copies, and the
kernel build step driven through vbuild.build_kernel on a tiny fake kernel
tree (a Makefile that writes a bzImage slowly, and logs each make's start
and end so that two makes in one O= directory show).
"""
import fcntl
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

from vkernel_lib import SCRIPTS
from lkmm_mark.initramfs import read_cpio
from lkmm_mark.target import verify_spec
from lkmm_mark.vtrees import tree_hash

FAKE_MAKEFILE = """\
O ?= .
.PHONY: tinyconfig olddefconfig bzImage
tinyconfig:
\t@mkdir -p $(O) && echo CONFIG_TINY=y > $(O)/.config
olddefconfig:
\t@true
bzImage:
\t@echo "start" >> "$$FAKE_LOG"
\t@mkdir -p $(O)/arch/x86/boot $(O)/fs/btrfs
\t@echo partial > $(O)/arch/x86/boot/bzImage
\t@exec sleep $${FAKE_SLEEP:-0}
\t@echo "../fs/btrfs/x.c:1:2: warning: fake warning"
\t@touch $(O)/fs/btrfs/x.o
\t@cp $(O)/.config $(O)/arch/x86/boot/bzImage
\t@echo "end" >> "$$FAKE_LOG"
"""
# what the fake build's bzImage holds: the fragments in merge order (base,
# the target subsystem's from policies/, debug)
MERGED_A = "CONFIG_TINY=y\nCONFIG_BASE=y\n" + verify_spec().kernel_config.read_text() + \
    "CONFIG_DEBUG_A=y\n"
FAKE_MERGE = """#!/bin/sh
# merge_config.sh -m -O OUT OUT/.config FRAGMENT...
out=$3; shift 4; cat "$@" >> "$out/.config"
"""
BUILD_DRIVER = """
import sys
from pathlib import Path
from lkmm_mark import vbuild
vbuild.CONFIG_DIR = Path(sys.argv[1])
b = vbuild.build_kernel(Path(sys.argv[2]), "base", "fake-tree-key")
print("RESULT", b["cached"], len(b["warnings"]))
"""
SEED_DRIVER = """
import sys
from pathlib import Path
from lkmm_mark import vbuild
vbuild.CONFIG_DIR = Path(sys.argv[1])
b = vbuild.build_kernel(Path(sys.argv[2]), "base", "fake-patched-key",
                        seed_from=Path(sys.argv[3]))
print("RESULT", b["cached"], len(b["warnings"]))
"""
FAKE_QEMU = """#!/bin/sh
echo start >> "$FAKE_LOG"
for a in "$@"; do
    case "$a" in file=*) f=${a#file=}; f=${f%%,*}; [ -f "$f" ] || echo "no $f" >> "$FAKE_LOG";; esac
done
sleep 2
echo "@@LKMM step mkfs PASS"
echo "@@LKMM DONE PASS"
echo end >> "$FAKE_LOG"
"""
QEMU_DRIVER = """
from lkmm_mark import boot
res = boot.stress_guest("/nonexistent/bzImage", None, 5, 1, "same-tag")
print("RESULT", res.done, res.steps["mkfs"])
"""
TREE_DRIVER = """
import sys
from pathlib import Path
from lkmm_mark import vtrees
base = Path(sys.argv[1])
if len(sys.argv) > 2:
    patches = sorted(Path(sys.argv[2]).glob("*.patch"))
    pristine, bh = vtrees.prepare_pristine(base)
    t, key = vtrees.prepare_patched(base, bh, patches)
else:
    t, key = vtrees.prepare_pristine(base)
print("RESULT", t, key)
"""


class CacheTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.tmp = Path(self._tmp.name)
        self.cache = self.tmp / "cache"
        self.cache.mkdir()
        self.n = 0

    def tearDown(self):
        self._tmp.cleanup()

    def env(self, **extra):
        e = dict(os.environ, LKMM_MARK_CACHE=str(self.cache), PYTHONPATH=str(SCRIPTS))
        e.update({k: str(v) for k, v in extra.items()})
        return e

    def spawn(self, args, **extra):
        """A child run: (Popen, stdout path, stderr path)."""
        self.n += 1
        out, err = self.tmp / ("out%d" % self.n), self.tmp / ("err%d" % self.n)
        with open(out, "w") as fo, open(err, "w") as fe:
            p = subprocess.Popen([sys.executable] + args, stdout=fo, stderr=fe,
                                 env=self.env(**extra), cwd=str(SCRIPTS))
        return p, out, err

    def finish(self, run, timeout=120):
        p, out, err = run
        self.assertEqual(p.wait(timeout), 0, err.read_text())
        return out.read_text(), err.read_text()

    def hold(self, name):
        """Another run's exclusive lock on name (as cachelock.locked() takes it)."""
        (self.cache / "locks").mkdir(exist_ok=True)
        fd = os.open(str(self.cache / "locks" / (name + ".lock")), os.O_RDWR | os.O_CREAT)
        fcntl.flock(fd, fcntl.LOCK_EX)
        return fd

    def wait_for(self, paths, text, timeout=60):
        t0 = time.time()
        while not all(text in p.read_text() for p in paths):
            self.assertLess(time.time() - t0, timeout, "no %r in %s" % (
                text, [p.read_text() for p in paths]))
            time.sleep(0.05)

    # ---- fake kernel tree and config fragments

    def fake_kernel(self):
        src = self.tmp / "src"
        (src / "scripts/kconfig").mkdir(parents=True)
        (src / "Makefile").write_text(FAKE_MAKEFILE)
        merge = src / "scripts/kconfig/merge_config.sh"
        merge.write_text(FAKE_MERGE)
        merge.chmod(0o755)
        self.cfg = self.tmp / "config"
        self.cfg.mkdir()
        (self.cfg / "base.config").write_text("CONFIG_BASE=y\n")
        self.set_config("A")
        return src

    def set_config(self, which):
        (self.cfg / "debug.config").write_text("CONFIG_DEBUG_%s=y\n" % which)

    def build(self, src, sleep=0):
        return self.spawn(["-c", BUILD_DRIVER, str(self.cfg), str(src)], FAKE_SLEEP=sleep,
                          FAKE_LOG=self.tmp / "makes.log")

    def fake_base(self, nfiles=200):
        base = self.tmp / "base"
        for i in range(nfiles):
            d = base / ("fs/btrfs" if i % 2 else "include/linux")
            d.mkdir(parents=True, exist_ok=True)
            (d / ("f%04d.c" % i)).write_text("int f%d;\n" % i)
        (base / "Makefile").write_text("# fake\n")
        return base


class ConcurrentRuns(CacheTest):
    def test_initramfs_built_once(self):
        held = self.hold("initramfs")           # a third run is making it
        a = self.spawn(["-m", "lkmm_mark.initramfs"])
        b = self.spawn(["-m", "lkmm_mark.initramfs"])
        self.wait_for([a[2], b[2]], "waiting for the initramfs")
        os.close(held)
        (oa, ea), (ob, eb) = self.finish(a), self.finish(b)
        self.assertEqual(oa, ob)                # the same image, complete
        built = [e for e in (ea, eb) if "verify: building initramfs" in e]
        self.assertEqual(len(built), 1, ea + eb)
        self.assertIn("initramfs up to date", eb if built[0] is ea else ea)
        d = self.cache / "verify/initramfs"
        imgs = sorted(d.glob("initramfs-*"))
        self.assertEqual(len(imgs), 1, imgs)    # no temporary file left
        data = imgs[0].read_bytes()
        names = [n for n, _, _ in read_cpio(data)]
        for n in ("init", "bin/lkstress", "bin/busybox", "usr/bin/btrfs", "dev/console"):
            self.assertIn(n, names)
        # identical to one built alone
        self.cache = self.tmp / "cache2"
        self.finish(self.spawn(["-m", "lkmm_mark.initramfs"]))
        alone = next((self.cache / "verify/initramfs").glob("initramfs-*.cpio"))
        self.assertEqual(alone.name, imgs[0].name)
        self.assertTrue(alone.read_bytes() == data, "concurrent build differs")

    def test_kernel_build_runs_once(self):
        src = self.fake_kernel()
        a = self.build(src, sleep=3)
        time.sleep(0.3)
        b = self.build(src, sleep=3)
        (oa, ea), (ob, eb) = self.finish(a), self.finish(b)
        self.assertEqual(sorted([oa, ob]), ["RESULT False 1\n", "RESULT True 1\n"], ea + eb)
        waited = eb if "RESULT True" in ob else ea
        self.assertIn("waiting for the base kernel build in %s/o-base" % src, waited)
        self.assertIn("kernel up to date (cached)", waited)
        self.assertEqual((self.tmp / "makes.log").read_text(), "start\nend\n")
        bz = (src / "o-base/arch/x86/boot/bzImage").read_text()
        self.assertEqual(bz, MERGED_A)

    def test_tree_copied_once(self):
        base = self.fake_base()
        held = self.hold("src-pristine")
        a = self.spawn(["-c", TREE_DRIVER, str(base)])
        b = self.spawn(["-c", TREE_DRIVER, str(base)])
        self.wait_for([a[2], b[2]], "waiting for the pristine tree")
        os.close(held)
        (oa, ea), (ob, eb) = self.finish(a), self.finish(b)
        self.assertEqual(oa, ob)
        self.assertEqual((ea + eb).count("copying pristine tree"), 1, ea + eb)
        t = self.cache / "verify/src/pristine"
        self.assertEqual(oa.split(), ["RESULT", str(t), tree_hash(base)])
        self.assertEqual(tree_hash(t), tree_hash(base))
        self.assertEqual((self.cache / "verify/src/pristine.stamp").read_text().strip(),
                         tree_hash(base))
        self.assertEqual(sorted(p.name for p in t.parent.iterdir()),
                         ["pristine", "pristine.stamp"])


    def test_qemu_run_directory_used_by_one_run(self):
        fakebin = self.tmp / "bin"
        fakebin.mkdir()
        q = fakebin / "qemu-system-x86_64"
        q.write_text(FAKE_QEMU)
        q.chmod(0o755)
        env = dict(PATH="%s:%s" % (fakebin, os.environ["PATH"]), LKMM_MARK_ACCEL="tcg",
                   FAKE_LOG=self.tmp / "qemu.log")
        a = self.spawn(["-c", QEMU_DRIVER], **env)
        time.sleep(0.3)
        b = self.spawn(["-c", QEMU_DRIVER], **env)
        (oa, ea), (ob, eb) = self.finish(a), self.finish(b)
        self.assertEqual([oa, ob], ["RESULT PASS PASS\n"] * 2)
        self.assertEqual((ea + eb).count("waiting for the QEMU run directory"), 1, ea + eb)
        # one QEMU at a time in the directory, with its disks there
        self.assertEqual((self.tmp / "qemu.log").read_text(), "start\nend\nstart\nend\n")
        run = self.cache / "verify/run/same-tag"
        self.assertEqual(sorted(p.name for p in run.iterdir()), ["console.log"])
        self.assertIn("@@LKMM DONE PASS", (run / "console.log").read_text())

    def test_kcsan_results_never_share_a_name(self):
        from lkmm_mark import vkcsan
        from lkmm_mark.console import GuestResult
        os.environ["LKMM_MARK_CACHE"] = str(self.cache)
        saved = vkcsan.RESULTS_DIR
        vkcsan.RESULTS_DIR = self.tmp / "results"
        try:
            res = GuestResult()
            res.console = "@@LKMM DONE PASS\n"
            results = {"pristine": dict(res=res)}
            run = dict(kernels=["pristine"])
            names = [vkcsan.write_results(run, "report", results, "t") for _ in range(2)]
        finally:
            vkcsan.RESULTS_DIR = saved
            os.environ.pop("LKMM_MARK_CACHE")
        self.assertNotEqual(names[0], names[1])
        files = sorted(p.name for p in (self.tmp / "results").iterdir())
        self.assertEqual(files, sorted("kcsan-%s%s" % (n, x) for n in names
                                       for x in (".json", ".txt", "-pristine-console.log")))


class KilledRuns(CacheTest):
    def kill_when(self, run, ready, timeout=60):
        t0 = time.time()
        while not ready():
            self.assertIsNone(run[0].poll(), "finished before it was killed: " +
                              run[2].read_text())
            self.assertLess(time.time() - t0, timeout)
            time.sleep(0.01)
        run[0].send_signal(signal.SIGKILL)
        run[0].wait()

    def test_killed_build_is_not_taken_as_complete(self):
        src = self.fake_kernel()
        out, _ = self.finish(self.build(src))
        self.assertEqual(out, "RESULT False 1\n")
        # another configuration: the build starts over and is killed half-way
        self.set_config("B")
        bz = src / "o-base/arch/x86/boot/bzImage"
        run = self.build(src, sleep=30)
        self.kill_when(run, lambda: bz.read_text() == "partial\n")
        # back to the first configuration: what is there is half of B's build
        self.set_config("A")
        out, err = self.finish(self.build(src))
        self.assertEqual(out, "RESULT False 1\n", err)
        self.assertNotIn("up to date", err)
        self.assertIn("configuring %s/o-base" % src, err)
        self.assertEqual(bz.read_text(), MERGED_A)
        # the killed make did not run on after its run died
        log = (self.tmp / "makes.log").read_text()
        self.assertEqual(log, "start\nend\nstart\nstart\nend\n")

    def test_killed_seed_copy_is_redone(self):
        src = self.fake_kernel()
        self.finish(self.build(src))
        seed = src / "o-base"
        for i in range(3000):                   # a build directory worth copying
            (seed / ("obj%04d.o" % i)).write_text("x" * 2000)
        src2 = self.tmp / "src2"
        src2.mkdir()
        for f in ("Makefile", "scripts"):
            os.symlink(src / f, src2 / f)
        run = self.spawn(["-c", SEED_DRIVER, str(self.cfg), str(src2), str(seed)],
                         FAKE_LOG=self.tmp / "makes.log")
        self.kill_when(run, lambda: list(src2.glob("o-base.tmp*")))
        self.assertFalse((src2 / "o-base").exists())
        out, err = self.finish(self.spawn(["-c", SEED_DRIVER, str(self.cfg), str(src2),
                                           str(seed)], FAKE_LOG=self.tmp / "makes.log"))
        self.assertEqual(out, "RESULT False 1\n", err)
        self.assertIn("seeding %s/o-base" % src2, err)
        self.assertEqual(sorted(p.name for p in src2.iterdir()), ["Makefile", "o-base", "scripts"])
        self.assertEqual(len(list((src2 / "o-base").glob("obj*.o"))), 3000)
        self.assertEqual((src2 / "o-base/arch/x86/boot/bzImage").read_text(),
                         MERGED_A)

    def test_killed_patched_copy_is_redone(self):
        base = self.fake_base(nfiles=20)
        pdir = self.tmp / "patches"
        pdir.mkdir()
        for i in range(300):
            (pdir / ("%04d-new.patch" % i)).write_text(
                "--- /dev/null\n+++ b/fs/btrfs/new%04d.c\n@@ -0,0 +1 @@\n+int n%d;\n" % (i, i))
        srcdir = self.cache / "verify/src"
        run = self.spawn(["-c", TREE_DRIVER, str(base), str(pdir)])

        def half_patched():
            tmp = list(srcdir.glob("patched.tmp*"))
            return tmp and len(list((tmp[0] / "fs/btrfs").glob("new*.c"))) >= 20
        self.kill_when(run, half_patched)
        self.assertFalse((srcdir / "patched.stamp").exists())
        out, err = self.finish(self.spawn(["-c", TREE_DRIVER, str(base), str(pdir)]))
        self.assertIn("making patched tree (300 patches)", err)
        t = srcdir / "patched"
        self.assertEqual(len(list((t / "fs/btrfs").glob("new*.c"))), 300)
        self.assertEqual((t / "fs/btrfs/new0299.c").read_text(), "int n299;\n")
        self.assertEqual(out.split()[1:], [str(t), (srcdir / "patched.stamp").read_text().strip()])
        self.assertEqual(sorted(p.name for p in srcdir.iterdir()),
                         ["patched", "patched.stamp", "pristine", "pristine.stamp"])


if __name__ == "__main__":
    unittest.main()
