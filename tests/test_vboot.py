# SPDX-License-Identifier: GPL-2.0-only
"""The boot stage must fail, with a clear message, when the guest is broken.

The boot tests reuse the cached pristine kernel (qemu-test/config base flavour)
and build it through the same cached function as `lkmm-mark verify` when it is
missing, so they never skip in CI.  Each boot is short: the guest init has
modes pass/fail/crash/hang (kernel command line lkmm.mode=), and a kernel
panic is provoked with rdinit=/nonexistent.

Set LKMM_MARK_SKIP_QEMU_TESTS=1 to skip the boot tests.
"""
import subprocess
import sys
import unittest

from vkernel_lib import SCRIPTS, SKIP_QEMU, kernel_and_initrd
from lkmm_mark import boot as vboot


def boot(append, timeout=240, initrd=True, expected=()):
    bz, ird = kernel_and_initrd()
    return vboot.run_guest(bz, ird if initrd else None, append, smp=2, mem=1024,
                           timeout=timeout, expected=expected, echo=False)


@unittest.skipIf(SKIP_QEMU, "LKMM_MARK_SKIP_QEMU_TESTS=1")
class BrokenGuestTest(unittest.TestCase):
    def test_good_guest_passes(self):
        r = boot("lkmm.mode=pass")
        self.assertTrue(r.ok(), r.failure())
        self.assertIsNone(r.failure())
        self.assertEqual(r.done, "PASS")

    def test_kernel_panic_is_detected(self):
        # no init at all: the kernel panics (VFS: unable to mount root fs)
        r = boot("rdinit=/nonexistent root=/dev/nonexistent", initrd=False)
        self.assertFalse(r.ok())
        self.assertFalse(r.timed_out, "panic=-1 with -no-reboot must end QEMU")
        msg = r.failure()
        self.assertIn("panic", msg)
        self.assertIn("Kernel panic", msg)

    def test_crash_in_guest_is_detected(self):
        # init triggers a crash through sysrq: Oops/panic splat on the console
        r = boot("lkmm.mode=crash")
        self.assertFalse(r.ok())
        self.assertIsNone(r.done)
        kinds = {k for k, _, _ in r.unexpected}
        self.assertTrue(kinds & {"panic", "Oops", "BUG"}, kinds)
        self.assertIn("splat", r.failure())
        self.assertIn("sysrq", r.failure().lower())

    def test_init_reporting_failure_is_detected(self):
        r = boot("lkmm.mode=fail")
        self.assertFalse(r.ok())
        self.assertFalse(r.timed_out)
        self.assertTrue(r.done.startswith("FAIL"), r.done)
        self.assertIn("guest reported failure", r.failure())
        self.assertIn("deliberate-failure", r.failure())

    def test_hang_is_detected_by_timeout(self):
        r = boot("lkmm.mode=hang", timeout=45)
        self.assertTrue(r.timed_out)
        self.assertFalse(r.ok())
        msg = r.failure()
        self.assertIn("timed out", msg)
        self.assertIn("console tail", msg)
        # the tail shows how far the guest got
        self.assertIn("@@LKMM init mode=hang", msg)

    def test_expected_splat_is_tolerated(self):
        r = boot("lkmm.mode=crash", expected=[r"sysrq", r"Kernel panic", r"Oops",
                                               r"BUG: ", r"kernel BUG"])
        self.assertEqual(r.unexpected, [])
        self.assertTrue(r.splats)
        self.assertFalse(r.ok())        # still no completion marker



@unittest.skipIf(SKIP_QEMU, "LKMM_MARK_SKIP_QEMU_TESTS=1")
class StandaloneBootTest(unittest.TestCase):
    def test_module_boots_the_cached_kernel(self):
        bz, _ = kernel_and_initrd()
        r = subprocess.run([sys.executable, "-m", "lkmm_mark.boot", "--kernel", str(bz),
                            "--mode", "fail", "--timeout", "240"], cwd=str(SCRIPTS),
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("done: FAIL", r.stdout)
        self.assertIn("verdict: guest reported failure: deliberate-failure", r.stdout)


if __name__ == "__main__":
    unittest.main()
