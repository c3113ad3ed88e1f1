# SPDX-License-Identifier: GPL-2.0-only
"""summary: verify's table, and its guest rows from a saved console log."""
import subprocess
import sys
import unittest

from vkernel_lib import RESULTS, SCRIPTS
from lkmm_mark import console, summary

ENOSPC = RESULTS / "enospc-abort-patched-base-console.log"
KCSAN_T = RESULTS / "kcsan-20261204-075256-T-current-both-patched-console.log"


class Rows(unittest.TestCase):
    def test_failed_run(self):
        res = console.from_log(ENOSPC)
        res.seconds = 88.4
        rows = summary.guest_rows(res, "tcg", 4)
        self.assertEqual([(n, ok) for n, ok, _ in rows],
                         [("boot (tcg, 4 vCPUs)", False), ("stress", False),
                          ("data check", False), ("btrfs check", True)])
        self.assertTrue(rows[0][2].startswith("88 s in QEMU; 3 unexpected splat(s): [   64.0"))
        self.assertIn("FAILED: stress-write,stress-fsync,", rows[1][2])
        self.assertEqual(rows[2][2], "FAILED: verify")

    def test_passed_run(self):
        res = console.from_log(KCSAN_T, console.KCSAN_EXPECTED)
        res.seconds = 1364
        rows = summary.guest_rows(res, "tcg", 4)
        self.assertTrue(all(ok for _, ok, _ in rows), rows)
        self.assertEqual(rows[2][2], "194 files verified, 0 bad after remount; scrub clean")
        self.assertTrue(rows[1][2].startswith("1333 s, 14 jobs: commit 7866923, dropcaches 2"))

    def test_table(self):
        t = summary.check_table([summary.result_row("build", True, "x"),
                                 summary.result_row("boot", False, "longer detail"),
                                 summary.result_row("n/a", None, "")])
        self.assertEqual(t.splitlines(), [
            "+-------+--------+---------------+",
            "| check | result | detail        |",
            "+-------+--------+---------------+",
            "| build | PASS   | x             |",
            "| boot  | FAIL   | longer detail |",
            "| n/a   | -      |               |",
            "+-------+--------+---------------+"])
        self.assertEqual(summary.secs(125), "2m05s")

    def test_standalone(self):
        r = subprocess.run([sys.executable, "-m", "lkmm_mark.summary", str(ENOSPC)],
                           cwd=str(SCRIPTS), capture_output=True, text=True)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("| boot (tcg, 4 vCPUs) | FAIL   | ? s in QEMU; 3 unexpected", r.stdout)
        self.assertIn("| btrfs check         | PASS   | PASS", r.stdout)


if __name__ == "__main__":
    unittest.main()
