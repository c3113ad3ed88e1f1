# SPDX-License-Identifier: GPL-2.0-only
"""vdiag: build and sparse diagnostics normalised so two trees' logs compare."""
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from vkernel_lib import SCRIPTS
from lkmm_mark import vdiag

A = ("../fs/btrfs/ctree.c:12:3: warning: symbol 'x' was not declared\n"
     "/root/.cache/lkmm-mark/verify/src/pristine/fs/btrfs/a.c:5:1: warning: bad\n"
     "   expected int\n   got long\n")
B = ("../fs/btrfs/ctree.c:99:3: warning: symbol 'x' was not declared\n"
     "/root/.cache/lkmm-mark/verify/src/patched/fs/btrfs/a.c:7:1: warning: bad\n"
     "   expected int\n   got long\n"
     "../fs/btrfs/new.c:1:1: warning: fresh\n"
     "../kernel/sched/fair.c:5954:6: warning: no previous prototype for 'f'\n")


class Diagnostics(unittest.TestCase):
    def test_diagnostics_normalised_and_compared(self):
        da, db = vdiag.parse_diagnostics(A), vdiag.parse_diagnostics(B, "fs/btrfs/")
        self.assertIn("fs/btrfs/a.c: warning: bad | expected int | got long", da)
        self.assertEqual(vdiag.new_items(da, db), ["fs/btrfs/new.c: warning: fresh"])
        self.assertEqual(vdiag.new_items(db, da), [])

    def test_counts_matter(self):
        # a second instance of the same diagnostic is new
        self.assertEqual(vdiag.new_items(["a"], ["a", "a"]), ["a"])

    def test_build_dir_paths_kept(self):
        self.assertEqual(vdiag.norm_path("/x/verify/src/patched/o-base/fs/y.h"),
                         "/x/verify/src/patched/o-base/fs/y.h")
        self.assertEqual(vdiag.norm_path("../../fs/btrfs/z.c"), "fs/btrfs/z.c")

    def test_standalone(self):
        with tempfile.TemporaryDirectory() as d:
            a, b = Path(d) / "a.log", Path(d) / "b.log"
            a.write_text(A)
            b.write_text(B)
            r = subprocess.run([sys.executable, "-m", "lkmm_mark.vdiag", "--only", "fs/btrfs/",
                                str(a), str(b)], cwd=str(SCRIPTS), capture_output=True, text=True)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertEqual(r.stdout, "fs/btrfs/new.c: warning: fresh\n")


if __name__ == "__main__":
    unittest.main()
