# SPDX-License-Identifier: GPL-2.0-only
"""verify as a chain of small stages: its options, every stage runnable on
its own (--help), and the stages' shape (small modules and functions,
imports that only go down the chain).

The stages have their own tests: test_vboot (QEMU boots), test_vconsole,
test_vkcsan, test_vinvolve, test_vdiag, test_vsummary, test_vcache (the
cache's locks and stamps), test_vbuildlog (the pristine kernel's build log).
"""
import ast
import subprocess
import sys
import unittest
from pathlib import Path

from vkernel_lib import SCRIPTS
from lkmm_mark import verify
from lkmm_mark.base import UserError

STAGES = ["verify", "vcommon", "voptions", "vtrees", "vbuild", "vdiag", "vsparse", "initramfs",
          "boot", "console", "kcsan", "involve", "summary", "vkcsan", "bisect", "cachelock"]
RUNNABLE = ["verify", "vtrees", "vbuild", "vdiag", "vsparse", "initramfs", "boot", "console",
            "kcsan", "involve", "summary", "vkcsan"]


class Options(unittest.TestCase):
    def test_parse_rest(self):
        o = verify.parse_rest(["--", "--kcsan-only", "--kcsan-kernels", "pristine",
                               "--kcsan-params", "skip_watch:500", "--kcsan-seconds", "60"])
        self.assertTrue(o["kcsan_only"])
        self.assertEqual((o["kcsan_kernels"], o["kcsan_params"], o["kcsan_secs"]),
                         ("pristine", "skip_watch:500", 60))
        with self.assertRaises(UserError):
            verify.parse_rest(["--kcsan-scope", "everything"])
        with self.assertRaises(UserError):
            verify.parse_rest(["--smp", "x"])
        with self.assertRaises(UserError):
            verify.parse_rest(["--kcsan-seconds", "4"])
        with self.assertRaises(UserError):
            verify.parse_rest(["--smp"])


class Fragments(unittest.TestCase):
    def test_fragments_of_each_flavour_are_named(self):
        """Every flavour merges base.config, the target subsystem's fragment
        (outside qemu-test/config/) and its own, and the progress line can
        name each (a merge once crashed naming the subsystem's)."""
        from lkmm_mark import vbuild
        for flavor in vbuild.FLAVORS:
            frags = vbuild.fragments(flavor)
            self.assertEqual(frags[0].name, "base.config")
            self.assertTrue(all(Path(f).exists() for f in frags), frags)
            names = [vbuild._frag_name(f) for f in frags]
            self.assertIn("verify.config", names)
            self.assertEqual(names[-1], vbuild.FLAVORS[flavor][-1])


class Stages(unittest.TestCase):
    def test_each_stage_runs_alone(self):
        for m in RUNNABLE:
            r = subprocess.run([sys.executable, "-m", "lkmm_mark." + m, "--help"],
                               cwd=str(SCRIPTS), capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, m + ": " + r.stderr)
            self.assertIn("usage: python3 -m lkmm_mark." + m, r.stdout)

    def _imports(self, name):
        tree = ast.parse((SCRIPTS / "lkmm_mark" / (name + ".py")).read_text())
        out = set()
        for n in ast.walk(tree):
            if isinstance(n, ast.ImportFrom) and n.level >= 1:
                out.update([n.module.split(".")[0]] if n.module else [a.name for a in n.names])
        return tree, out

    def test_shape(self):
        for m in STAGES:
            src = (SCRIPTS / "lkmm_mark" / (m + ".py")).read_text()
            self.assertLessEqual(src.count("\n"), 400, m)
            tree, _ = self._imports(m)
            for n in ast.walk(tree):
                if isinstance(n, ast.FunctionDef):
                    self.assertLessEqual(n.end_lineno - n.lineno + 1, 60, "%s.%s" % (m, n.name))

    def test_stages_call_down_only(self):
        deps = {m: self._imports(m)[1] for m in STAGES}
        up = {"commands", "series", "cli", "analysis", "bench"}
        for m, d in deps.items():
            self.assertFalse(d & up, "%s imports %s" % (m, d & up))

        def reach(a, seen):
            for b in deps.get(a, ()):
                if b not in seen:
                    seen.add(b)
                    reach(b, seen)
            return seen
        for m in STAGES:
            self.assertNotIn(m, reach(m, set()), "%s is in an import cycle" % m)


if __name__ == "__main__":
    unittest.main()


class OtherTargets(unittest.TestCase):
    """verify, bisect and am on another target (--target fs/ext4): its
    subsystem's verify.json, its series directory, its own build cache."""

    def tearDown(self):
        from lkmm_mark.target import select_target
        select_target(None)

    def test_the_ext4_description(self):
        from lkmm_mark.target import verify_spec
        s = verify_spec("fs/ext4")
        self.assertEqual(s.subsystem, "ext4")
        self.assertTrue(s.kernel_config.is_file())
        self.assertIn("CONFIG_EXT4_FS=y", s.kernel_config.read_text())
        init = s.guest_dir / "init"
        self.assertTrue(init.is_file() and (s.guest_dir / "lkstress.c").is_file())
        r = subprocess.run(["sh", "-n", str(init)], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        text = init.read_text()
        for marker in (". /lib/lkmm.sh", "step ext4-check e2fsck", "step verify ", "report_jobs"):
            self.assertIn(marker, text)
        self.assertTrue(s.console_errors.search("EXT4-fs error (device vda): ext4_foo: x"))
        self.assertFalse(s.console_errors.search("EXT4-fs (vda): mounted filesystem"))

    def test_the_xfs_description(self):
        """policies/xfs/verify.json: xfs built in with quotas, a guest that
        remounts between inode32 and inode64 (REMOUNT_A/B, which lib.sh's
        remounts() takes) and ends with xfs_repair -n."""
        from lkmm_mark.target import verify_spec
        s = verify_spec("fs/xfs")
        self.assertEqual(s.subsystem, "xfs")
        self.assertIn("CONFIG_XFS_FS=y", s.kernel_config.read_text())
        init = s.guest_dir / "init"
        r = subprocess.run(["sh", "-n", str(init)], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        text = init.read_text()
        for marker in (". /lib/lkmm.sh", "step xfs-check xfs_repair -n", "step verify ",
                       "REMOUNT_A=inode64", "report_jobs"):
            self.assertIn(marker, text)
        lib = (s.guest_dir.parent / "guest" / "lib.sh").read_text()
        self.assertIn("${REMOUNT_A:-commit=5}", lib)
        self.assertIn(("/usr/sbin/xfs_repair", "xfsprogs"), s.host_tools)
        self.assertTrue(s.console_errors.search(
            "XFS (vda): Corruption of in-memory data (0x8) detected"))
        self.assertTrue(s.console_errors.search("XFS: Assertion failed: x, file: y"))
        self.assertFalse(s.console_errors.search("XFS (vda): Mounting V5 Filesystem"))

    def test_selected_target_names_dirs(self):
        from lkmm_mark import vcommon
        from lkmm_mark.target import select_target, verify_spec
        from lkmm_mark.tree import patches_dir
        repo = Path(__file__).resolve().parents[1]
        self.assertEqual(patches_dir(None, "fs/ext4"), repo / "patches" / "ext4")
        self.assertEqual(patches_dir("6.12", "fs/ext4"), repo / "patches" / "6.12" / "ext4")
        self.assertEqual(patches_dir(None, None), repo / "patches")
        self.assertEqual(patches_dir(None, "fs/btrfs"), repo / "patches")
        default = vcommon.vdir().name
        select_target("fs/ext4")
        self.assertEqual(verify_spec().subsystem, "ext4")
        self.assertEqual(vcommon.vdir().name, default + "-ext4")
        self.assertEqual(vcommon.results_dir("/r").name, "ext4")
        select_target(None)
        self.assertEqual(vcommon.vdir().name, default)

    def test_a_target_without_description_is_one_line(self):
        r = subprocess.run([sys.executable, str(SCRIPTS / "lkmm-mark"), "am", "--target",
                            "fs/nosuchfs"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
