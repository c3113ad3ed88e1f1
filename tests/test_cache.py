# SPDX-License-Identifier: GPL-2.0-only
"""Cache safety: two runs of the same cached step at once, and a step killed
half-way, never leave an entry that is wrong or taken as complete.

The steps run in child processes against a temporary cache
(LKMM_MARK_CACHE).  The programs they call (tar, spatch) are wrapped by
scripts first in PATH that log each call and sleep, so that the two runs
overlap and a kill lands in the middle of the step.
"""
import os
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import unittest
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "fixtures" / "lock_forms"

# The child: one cached step, named by argv[1].
CHILD = r"""
import os, sys
sys.path.insert(0, os.environ["LKMM_REPO"] + "/scripts")
from pathlib import Path
from lkmm_mark import tree, facts
step = sys.argv[1]
if step == "unpack":
    tarball = Path(os.environ["FAKE_TARBALL"])
    tree.package_of = lambda kernel=None: ("linux-source-6.1", "1.0", tarball)
    tree.installed_version = lambda kernel=None: "1.0"
    d = tree.pristine_tree()
    print(sorted(p.name for p in d.iterdir()))
elif step == "facts":
    recs, cached = facts.run(os.environ["FAKE_TREE"], "fs/btrfs", 1)
    print(len(recs), cached)
"""


def wrapper(bindir, name, real, delay, log):
    """A script named name in bindir: logs its call, sleeps (unless asked
    for its version), runs real."""
    p = Path(bindir, name)
    p.write_text('#!/bin/sh\necho %s >> %s\n[ "$1" = --version ] || sleep %s\n'
                 'exec %s "$@"\n' % (name, log, delay, real))
    p.chmod(0o755)


class CacheSafety(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="lkmm-cache-")
        d = Path(self.tmp.name)
        self.cache = d / "cache"
        self.bin = d / "bin"
        self.bin.mkdir()
        self.calls = d / "calls.log"
        self.child = d / "child.py"
        self.child.write_text(CHILD)
        # a small "linux-source" tarball
        src = d / "pkg" / "linux-source-6.1"
        (src / "fs").mkdir(parents=True)
        for i in range(50):
            (src / "fs" / ("f%d.c" % i)).write_text("int x%d;\n" % i * 200)
        self.tarball = d / "linux-source-6.1.tar.xz"
        with tarfile.open(self.tarball, "w:xz") as t:
            t.add(src, arcname="linux-source-6.1")
        # a fixture tree for the facts pass
        sys.path.insert(0, str(REPO / "tests"))
        import fixture_lib
        self.tree = fixture_lib.make_tree(FIXTURE, d)

    def tearDown(self):
        self.tmp.cleanup()

    def start(self, step):
        env = dict(os.environ, LKMM_REPO=str(REPO), LKMM_MARK_CACHE=str(self.cache),
                   FAKE_TARBALL=str(self.tarball), FAKE_TREE=str(self.tree),
                   PATH=str(self.bin) + os.pathsep + os.environ["PATH"])
        return subprocess.Popen([sys.executable, str(self.child), step], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def calls_of(self, name):
        if not self.calls.exists():
            return 0
        return sum(1 for x in self.calls.read_text().split() if x == name)

    def wait_for_call(self, name, n=1, timeout=60):
        t0 = time.time()
        while self.calls_of(name) < n:
            self.assertLess(time.time() - t0, timeout, "%s was never called" % name)
            time.sleep(0.05)

    def both(self, step, name, n=1):
        """Start the step, and a second one once the first has made its
        n-th call of name (inside the locked part)."""
        a = self.start(step)
        self.wait_for_call(name, n)
        b = self.start(step)
        oa, ea = a.communicate(timeout=300)
        ob, eb = b.communicate(timeout=300)
        self.assertEqual((a.returncode, b.returncode), (0, 0), ea + eb)
        return oa, ob, ea, eb

    # ------------------------------------------------------------ unpack
    def test_concurrent_unpack(self):
        wrapper(self.bin, "tar", "/bin/tar", 2, self.calls)
        oa, ob, ea, eb = self.both("unpack", "tar")
        self.assertEqual(oa, ob)
        self.assertIn("'fs'", oa)
        self.assertIn("waiting for the unpacked linux-source-6.1", eb)
        self.assertEqual(self.calls_of("tar"), 1, "the second run unpacked again")
        self.assertEqual(len(list((self.cache / "linux-source-6.1" / "fs").iterdir())), 50)

    def test_killed_unpack(self):
        wrapper(self.bin, "tar", "/bin/tar", 3, self.calls)
        a = self.start("unpack")
        self.wait_for_call("tar")
        a.send_signal(signal.SIGKILL)
        a.wait()
        # nothing a later run would take as complete
        self.assertFalse((self.cache / "linux-source-6.1.unpacked").exists())
        self.assertFalse((self.cache / "linux-source-6.1").exists())
        b = self.start("unpack")
        ob, eb = b.communicate(timeout=120)
        self.assertEqual(b.returncode, 0, eb)
        self.assertEqual(self.calls_of("tar"), 2)
        self.assertEqual(len(list((self.cache / "linux-source-6.1" / "fs").iterdir())), 50)
        self.assertEqual([p.name for p in self.cache.iterdir()
                          if p.name.startswith("linux-source-6.1.tmp")], [])

    # ------------------------------------------------------------- facts
    def spatch_wrapper(self, delay):
        real = subprocess.run(["sh", "-c", "command -v spatch"], capture_output=True,
                              text=True).stdout.strip()
        wrapper(self.bin, "spatch", real, delay, self.calls)

    def test_concurrent_facts_pass(self):
        self.spatch_wrapper(2)
        oa, ob, ea, eb = self.both("facts", "spatch", 2)
        self.assertIn("waiting for the facts pass over fs/btrfs", eb)
        self.assertEqual(oa.split()[0], ob.split()[0])
        self.assertEqual((oa.split()[1], ob.split()[1]), ("False", "True"))
        # spatch --version for the key, once per run; the pass itself once
        self.assertEqual(self.calls_of("spatch"), 3, self.calls.read_text())

    def test_killed_facts_pass(self):
        self.spatch_wrapper(2)
        a = self.start("facts")
        self.wait_for_call("spatch", 2)             # --version, then the pass
        a.send_signal(signal.SIGKILL)
        a.wait()
        self.assertEqual(list((self.cache / "facts").glob("*.json")), [])
        b = self.start("facts")
        ob, eb = b.communicate(timeout=120)
        self.assertEqual(b.returncode, 0, eb)
        self.assertEqual(ob.split()[1], "False")
        self.assertEqual(len(list((self.cache / "facts").glob("*.json"))), 1)


if __name__ == "__main__":
    unittest.main()


class PlanKeyCode(unittest.TestCase):
    """The plan's cache key hashes the analysis code as the process loaded
    it: a file edited while a run goes on does not give the old code's
    plan the new code's key (a run that started before the edit caches
    under the key of what it runs)."""

    def test_key_is_the_loaded_code(self):
        import argparse
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import fixture_lib
        from lkmm_mark import commands
        with tempfile.TemporaryDirectory(prefix="lkmm-key-") as d:
            tree = fixture_lib.make_tree(FIXTURE, d)
            args = argparse.Namespace(target=fixture_lib.TARGET, policies=None)
            k1 = commands._plan_key(args, tree)
            self.assertEqual(commands._plan_key(args, tree), k1)
            saved = commands._CODE
            try:
                commands._CODE = saved + b"edited"
                self.assertNotEqual(commands._plan_key(args, tree), k1)
            finally:
                commands._CODE = saved
            self.assertEqual(commands._plan_key(args, tree), k1)
