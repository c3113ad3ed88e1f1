# SPDX-License-Identifier: GPL-2.0-only
"""console: saved console logs (qemu-test/results/) re-scanned give the
verdicts their runs gave; markers and splats of synthetic logs."""
import subprocess
import sys
import unittest

from vkernel_lib import RESULTS, SCRIPTS
from lkmm_mark import console

ENOSPC = RESULTS / "enospc-abort-patched-base-console.log"
KCSAN_T = RESULTS / "kcsan-20261204-075256-T-current-both-patched-console.log"


class SavedLogs(unittest.TestCase):
    def test_enospc_abort_is_a_failure_with_its_splats(self):
        r = console.from_log(ENOSPC)
        self.assertFalse(r.ok())
        self.assertTrue(r.done.startswith("FAIL: stress-write stress-fsync"), r.done)
        self.assertEqual(r.stress_seconds, 62)
        self.assertEqual([k for k, _, _ in r.unexpected], ["WARNING", "btrfs", "WARNING"])
        self.assertIn("fs/btrfs/inode.c:3381 btrfs_finish_ordered_io", r.unexpected[0][1])
        self.assertIn("failed to run delayed ref", r.unexpected[1][1])
        self.assertEqual(r.steps["btrfs-check"], "PASS")
        self.assertEqual(r.steps["verify"], "FAIL")
        self.assertEqual(r.ops["verified"], "657 files verified, 14 bad")
        self.assertTrue(r.failure().startswith("kernel WARNING splat on the console"))
        # the context of a splat: the lines that follow it
        self.assertIn("btrfs_finish_ordered_io", r.unexpected[0][2])
        self.assertEqual(len(r.unexpected[0][2].splitlines()), 25)

    def test_kcsan_run_passes_with_its_reports_expected(self):
        r = console.from_log(KCSAN_T, console.KCSAN_EXPECTED)
        self.assertTrue(r.ok(), r.failure())
        self.assertEqual([k for k, _, _ in r.splats], ["KCSAN"])
        self.assertEqual(r.kcsan_stats["setup_watchpoints"], "21837340")
        self.assertEqual(r.stress_seconds, 1333)
        # the same log without KCSAN expected: its report is a splat
        r = console.from_log(KCSAN_T)
        self.assertFalse(r.ok())
        self.assertEqual([k for k, _, _ in r.unexpected], ["KCSAN"])

    def test_standalone(self):
        def run(*args):
            return subprocess.run([sys.executable, "-m", "lkmm_mark.console"] + list(args),
                                  cwd=str(SCRIPTS), capture_output=True, text=True)
        r = run(str(ENOSPC))
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("splats: 3 (WARNING 2, btrfs 1), unexpected 3", r.stdout)
        self.assertIn("verdict: kernel WARNING splat on the console: [   64.086762] WARNING",
                      r.stdout)
        r = run("--kcsan", str(KCSAN_T))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("verdict: PASS", r.stdout)
        self.assertIn("kcsan: enabled=1", r.stdout)
        self.assertEqual(run("--help").returncode, 0)


class Synthetic(unittest.TestCase):
    def test_scan_console(self):
        text = ("[    1.0] ok\n[    2.0] WARNING: CPU: 0 PID: 1 at fs/btrfs/x.c:1 f+0x1/0x2\n"
                "[    3.0] BUG: KCSAN: data-race in a / b\n@@LKMM step x PASS\n")
        splats, unexp = console.scan_console(text, expected=[r"BUG: KCSAN"])
        self.assertEqual([k for k, _, _ in splats], ["WARNING", "KCSAN"])
        self.assertEqual([k for k, _, _ in unexp], ["WARNING"])

    def test_marker_lines_are_not_splats(self):
        splats, _ = console.scan_console("@@LKMM step x FAIL BUG: nothing\n")
        self.assertEqual(splats, [])

    def test_markers(self):
        res = console.GuestResult()
        res.console = ("x @@LKMM step mkfs PASS\n@@LKMM ops write 12 files 3\n"
                       "@@LKMM step verify FAIL rc=1\n@@LKMM DONE FAIL: verify\n")
        console.parse_markers(res)
        self.assertEqual(res.steps, {"mkfs": "PASS", "verify": "FAIL"})
        self.assertEqual(res.ops["write"], "12 files 3")
        self.assertFalse(res.ok())
        self.assertIn("verify", res.failure())

    def test_no_done_marker(self):
        res = console.GuestResult()
        res.console = "@@LKMM step mkfs PASS\n"
        console.analyse(res)
        self.assertIn("without the completion marker", res.failure())


if __name__ == "__main__":
    unittest.main()
