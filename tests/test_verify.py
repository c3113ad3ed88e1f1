# SPDX-License-Identifier: GPL-2.0-only
"""The verify runner must fail, with a clear message, when the guest is broken.

The boot tests reuse the cached pristine kernel (qemu-test/config base flavour)
and build it through the same cached function as `lkmm-mark verify` when it is
missing, so they never skip in CI.  Each boot is short: the guest init has
modes pass/fail/crash/hang (kernel command line lkmm.mode=), and a kernel
panic is provoked with rdinit=/nonexistent.

Set LKMM_MARK_SKIP_QEMU_TESTS=1 to skip the boot tests (parsing tests still run).
"""
import os
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

from lkmm_mark import verify  # noqa: E402

SKIP_QEMU = os.environ.get("LKMM_MARK_SKIP_QEMU_TESTS") == "1"
# The cache as the user (or CI) set it when the tests were loaded: other tests
# may point LKMM_MARK_CACHE at a temporary directory while they run, and the
# kernel built by `lkmm-mark verify` must be reused, not rebuilt there.
_CACHE_ENV = os.environ.get("LKMM_MARK_CACHE")
_kernel = {}


def kernel_and_initrd():
    if "bz" not in _kernel:
        saved = os.environ.get("LKMM_MARK_CACHE")
        if _CACHE_ENV is None:
            os.environ.pop("LKMM_MARK_CACHE", None)
        else:
            os.environ["LKMM_MARK_CACHE"] = _CACHE_ENV
        try:
            b = verify.ensure_pristine_kernel()
            _kernel["bz"] = b["bzimage"]
            _kernel["initrd"] = verify.build_initramfs()
        finally:
            if saved is None:
                os.environ.pop("LKMM_MARK_CACHE", None)
            else:
                os.environ["LKMM_MARK_CACHE"] = saved
    return _kernel["bz"], _kernel["initrd"]


def boot(append, timeout=240, initrd=True, expected=()):
    bz, ird = kernel_and_initrd()
    return verify.run_guest(bz, ird if initrd else None, append, smp=2, mem=1024,
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


class ParsingTest(unittest.TestCase):
    def test_diagnostics_normalised_and_compared(self):
        a = ("../fs/btrfs/ctree.c:12:3: warning: symbol 'x' was not declared\n"
             "/root/.cache/lkmm-mark/verify/src/pristine/fs/btrfs/a.c:5:1: warning: bad\n"
             "   expected int\n   got long\n")
        b = ("../fs/btrfs/ctree.c:99:3: warning: symbol 'x' was not declared\n"
             "/root/.cache/lkmm-mark/verify/src/patched/fs/btrfs/a.c:7:1: warning: bad\n"
             "   expected int\n   got long\n"
             "../fs/btrfs/new.c:1:1: warning: fresh\n")
        da, db = verify.parse_diagnostics(a), verify.parse_diagnostics(b)
        self.assertIn("fs/btrfs/a.c: warning: bad | expected int | got long", da)
        self.assertEqual(verify.new_items(da, db), ["fs/btrfs/new.c: warning: fresh"])
        self.assertEqual(verify.new_items(db, da), [])

    def test_scan_console(self):
        text = ("[    1.0] ok\n[    2.0] WARNING: CPU: 0 PID: 1 at fs/btrfs/x.c:1 f+0x1/0x2\n"
                "[    3.0] BUG: KCSAN: data-race in a / b\n@@LKMM step x PASS\n")
        splats, unexp = verify.scan_console(text, expected=[r"BUG: KCSAN"])
        self.assertEqual([k for k, _, _ in splats], ["WARNING", "KCSAN"])
        self.assertEqual([k for k, _, _ in unexp], ["WARNING"])

    def test_parse_kcsan(self):
        text = """[   10.1] ==================================================================
[   10.1] BUG: KCSAN: data-race in btrfs_foo / btrfs_bar
[   10.1]
[   10.1] write to 0xffff888003a1c0e8 of 8 bytes by task 88 on cpu 1:
[   10.1]  btrfs_bar+0x2a/0x60
[   10.1]  btrfs_commit_transaction+0x11/0x900
[   10.1]
[   10.1] read (marked) to 0xffff888003a1c0e8 of 8 bytes by task 90 on cpu 0:
[   10.1]  btrfs_foo+0x10/0x30
[   10.1]  vfs_fsync_range+0x1/0x2
[   10.1]
[   10.1] value changed: 0x0 -> 0x1
[   10.1]
[   10.1] Reported by Kernel Concurrency Sanitizer on:
[   10.1] ==================================================================
"""
        reps = verify.parse_kcsan(text)
        self.assertEqual(len(reps), 1)
        r = reps[0]
        self.assertEqual(r["title"], "data-race in btrfs_foo / btrfs_bar")
        self.assertEqual([(a["type"], a["marked"]) for a in r["accesses"]],
                         [("write", False), ("read", True)])
        self.assertEqual(r["accesses"][0]["frames"], ["btrfs_bar", "btrfs_commit_transaction"])

    def test_unknown_origin_merged_by_instruction(self):
        def rep(title, *acc):
            lines = ["BUG: KCSAN: " + title, ""]
            for head, frame in acc:
                lines += [head, " " + frame, " vfs_ioctl+0x16/0x23", ""]
            return "\n".join(lines + ["Reported by Kernel Concurrency Sanitizer on:",
                                      "=" * 40]) + "\n"
        text = "=" * 40 + "\n" + rep(
            "data-race in btrfs_ioctl",
            ("race at unknown origin, with read to 0xff1 of 8 bytes by task 129 on cpu 2:",
             "btrfs_ioctl+0x16c4/0x3b77")) + rep(
            "data-race in btrfs_ioctl / btrfs_update_block_group",
            ("write to 0xff1 of 8 bytes by task 1 on cpu 0:", "btrfs_update_block_group+0x1/0x9"),
            ("read to 0xff1 of 8 bytes by task 2 on cpu 1:", "btrfs_ioctl+0x16c4/0x3b77")) + rep(
            "data-race in btrfs_sync_file",
            ("race at unknown origin, with read (reordered) to 0xff2 of 4 bytes by task 3 on cpu 1:",
             "btrfs_sync_file+0x10/0x99"))
        reps = verify.parse_kcsan(text)
        self.assertEqual(len(reps), 3)
        self.assertTrue(reps[2]["accesses"][0]["reordered"])
        with tempfile.TemporaryDirectory() as d:
            summ = verify.summarise_kcsan(reps, Path(d), Path(d), Path(d) / "vmlinux")
        titles = [x["title"] for x in summ]
        # the one-sided report at the reader's very instruction is that race;
        # one at an instruction of no two-sided report stays a race of its own
        self.assertEqual(titles, ["data-race in btrfs_ioctl / btrfs_update_block_group",
                                  "data-race in btrfs_sync_file"])
        self.assertEqual(summ[0]["count"], 2)
        self.assertEqual(len(summ[0]["unknown_origin"]), 1)
        self.assertTrue(summ[1]["reordered"])

    def test_markers(self):
        res = verify.GuestResult()
        res.console = ("x @@LKMM step mkfs PASS\n@@LKMM ops write 12 files 3\n"
                       "@@LKMM step verify FAIL rc=1\n@@LKMM DONE FAIL: verify\n")
        verify.parse_markers(res)
        self.assertEqual(res.steps, {"mkfs": "PASS", "verify": "FAIL"})
        self.assertEqual(res.ops["write"], "12 files 3")
        self.assertFalse(res.ok())
        self.assertIn("verify", res.failure())

    def test_marked_fields(self):
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            p = Path(d) / "0001-x.patch"
            p.write_text("--- a/fs/btrfs/x.c\n+++ b/fs/btrfs/x.c\n"
                         "@@ -1,2 +1,2 @@ static int foo(struct a *a)\n"
                         "-\tif (a->b->count)\n+\tif (READ_ONCE(a->b->count))\n"
                         "+\tWRITE_ONCE(fs_info->flags, 1);\n")
            fields, funcs = verify.marked_fields([p])
        self.assertEqual(fields, {"count", "flags"})
        self.assertEqual(funcs, {"foo"})

    def test_series_changes_and_involvement(self):
        import subprocess
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            a, b = Path(d) / "a", Path(d) / "b"
            for t in (a, b):
                (t / "fs/btrfs").mkdir(parents=True)
            old = ["int f(struct s *s)", "{", "\tif (s->full)", "\t\treturn 1;",
                   "\treturn s->size;", "}"]
            new = list(old)
            new[2] = "\tif (READ_ONCE(s->full))"
            new.insert(0, "/* shifted */")
            (a / "fs/btrfs/x.c").write_text("\n".join(old) + "\n")
            (b / "fs/btrfs/x.c").write_text("\n".join(new) + "\n")
            diff = subprocess.run(["diff", "-u", "a/fs/btrfs/x.c", "b/fs/btrfs/x.c"], cwd=d,
                                  capture_output=True, text=True).stdout
            p = Path(d) / "0001-x.patch"
            p.write_text(diff)
            ch = verify.series_changes(a, b, [p])
        self.assertEqual(ch["fields"], {"full"})
        self.assertIn(3, ch["old"]["fs/btrfs/x.c"])
        self.assertNotIn(5, ch["old"]["fs/btrfs/x.c"])
        self.assertIn(4, ch["new"]["fs/btrfs/x.c"])

        def rep(locs, fields):
            return dict(accesses=[dict(locs=locs, fields=fields, where="w")])
        # a pristine report at the changed line, a patched one on the marked field
        self.assertTrue(verify.involvement(rep([("fs/btrfs/x.c", 3)], []), ch, "old"))
        self.assertTrue(verify.involvement(rep([("fs/btrfs/y.c", 9)], ["full"]), ch, "new"))
        # the unchanged line reading another field
        self.assertEqual(verify.involvement(rep([("fs/btrfs/x.c", 5)], ["size"]), ch, "old"), [])
        # an inlined-into line that the series changed counts too
        self.assertTrue(verify.involvement(
            rep([("include/linux/fs.h", 1), ("fs/btrfs/x.c", 4)], []), ch, "new"))

    def test_parse_rest(self):
        o = verify.parse_rest(["--", "--kcsan-only", "--kcsan-kernels", "pristine",
                               "--kcsan-params", "skip_watch:500", "--kcsan-seconds", "60"])
        self.assertTrue(o["kcsan_only"])
        self.assertEqual((o["kcsan_kernels"], o["kcsan_params"], o["kcsan_secs"]),
                         ("pristine", "skip_watch:500", 60))
        with self.assertRaises(verify.UserError):
            verify.parse_rest(["--kcsan-scope", "everything"])
        with self.assertRaises(verify.UserError):
            verify.parse_rest(["--smp", "x"])


if __name__ == "__main__":
    unittest.main()


class KcsanMappingTest(unittest.TestCase):
    """A KCSAN race involves the series only through the struct.field the
    series marks, not through another struct's field of the same name."""

    def _changes(self):
        return dict(
            old={"fs/btrfs/a.c": {10}}, new={"fs/btrfs/a.c": {10, 11}},
            hunks={"fs/btrfs/a.c": [(10, 1, 10, 2)]},
            fields={"flags"},
            at={("fs/btrfs/a.c", 10): {"ordered.flags"},
                ("fs/btrfs/a.c", 30): {"inode.flags"},
                ("fs/btrfs/a.c", 40): {"ordered.flags"}},
            marked_sf={"ordered.flags"})

    def _race(self, *locs):
        return dict(accesses=[dict(locs=[list(x) for x in locs], fields=["flags"],
                                   where="%s:%d" % locs[0])])

    def test_other_struct_same_name_not_involved(self):
        d = self._race(("fs/btrfs/a.c", 30))
        self.assertEqual(verify.involvement(d, self._changes(), "old"), [])

    def test_marked_struct_field_involved(self):
        why = verify.involvement(self._race(("fs/btrfs/a.c", 40)), self._changes(), "old")
        self.assertEqual(why, ["field ordered.flags (marked by the series) at fs/btrfs/a.c:40"])

    def test_patched_lines_mapped_back(self):
        # line 41 of the patched file is line 40 of the pristine one (the
        # series added a line at 10); faddr2line's o-kcsan/../ path is normalised
        why = verify.involvement(self._race(("/x/o-kcsan/../fs/btrfs/a.c", 41)),
                                 self._changes(), "new")
        self.assertEqual(why, ["field ordered.flags (marked by the series) at fs/btrfs/a.c:41"])

    def test_changed_line_involved(self):
        why = verify.involvement(self._race(("fs/btrfs/a.c", 11)), self._changes(), "new")
        self.assertIn("site fs/btrfs/a.c:11 changed by the series", why)

    def test_name_only_without_plan_site(self):
        why = verify.involvement(self._race(("fs/btrfs/b.c", 5)), self._changes(), "old")
        self.assertEqual(len(why), 1)
        self.assertIn("field named flags", why[0])

    def _two(self, l1, l2):
        return dict(accesses=[dict(locs=[["fs/btrfs/a.c", l1]], fields=["x"],
                                   where="fs/btrfs/a.c:%d" % l1),
                              dict(locs=[["fs/btrfs/a.c", l2]], fields=["y"],
                                   where="fs/btrfs/a.c:%d" % l2)])

    def test_disjoint_fields_not_involved(self):
        # KCSAN's line for a store can be the next statement: here the two
        # lines name different fields, and nothing nearby is common
        ch = self._changes()
        ch["at"][("fs/btrfs/a.c", 50)] = {"fs_info.last_trans_committed"}
        d = self._two(10, 50)
        self.assertEqual(verify.involvement(d, ch, "old"), [])
        self.assertIn("fs_info.last_trans_committed", d["field_mismatch"])
        # the same field on both lines (among others): matched
        ch["at"][("fs/btrfs/a.c", 50)] = {"ordered.flags", "fs_info.x"}
        why = verify.involvement(d, ch, "old")
        self.assertIn("field ordered.flags (marked by the series) at fs/btrfs/a.c:10", why)
        self.assertNotIn("field_mismatch", d)

    def test_disjoint_fields_resolved_nearby(self):
        ch = self._changes()
        # the store that KCSAN puts on line 50 is at 46, an unmarked field
        # the reader's line 60 also names: not involved
        ch["at"][("fs/btrfs/a.c", 46)] = {"fs_info.last_trans_committed"}
        ch["at"][("fs/btrfs/a.c", 50)] = {"ordered.flags2"}
        ch["at"][("fs/btrfs/a.c", 60)] = {"fs_info.last_trans_committed"}
        self.assertEqual(verify.involvement(self._two(60, 50), ch, "old"), [])
        # a load in a loop body that KCSAN puts on the loop head (63 ->
        # 60): the marked field both sides have within a few lines
        ch["at"][("fs/btrfs/a.c", 60)] = {"space.groups"}
        ch["at"][("fs/btrfs/a.c", 63)] = {"ordered.flags"}
        ch["at"][("fs/btrfs/a.c", 50)] = {"ordered.flags"}
        d = self._two(60, 50)
        why = verify.involvement(d, ch, "old")
        self.assertEqual(len(why), 1)
        self.assertIn("ordered.flags (marked by the series), the field both", why[0])
        self.assertEqual(d["field_window"], "ordered.flags")

    def test_to_old(self):
        h = [(10, 1, 10, 2), (20, 0, 22, 3), (30, 2, 33, 0)]
        self.assertEqual([verify._to_old(h, n) for n in (5, 12, 21, 25, 33, 34)],
                         [5, 11, 20, 21, 29, 32])
