# SPDX-License-Identifier: GPL-2.0-only
"""kcsan: the saved KCSAN runs (qemu-test/results/kcsan-*) re-parsed from
their console logs give the counts their results recorded, and their
reports are written again, line for line, from their results files."""
import json
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from vkernel_lib import RESULTS, SCRIPTS
from lkmm_mark import kcsan

NOWHERE = Path("/nonexistent")


def runs():
    """(results file, its run) of every saved run with a kernels list."""
    for j in sorted(RESULTS.glob("kcsan-*.json")):
        run = json.loads(j.read_text())
        if "kernels" in run:
            yield j, run


class SavedRuns(unittest.TestCase):
    def test_fixtures_present(self):
        self.assertGreaterEqual(len(list(runs())), 20)

    def test_console_logs_reparsed(self):
        """Reports and distinct races of every saved console log (without the
        kernel build: titles only) are those of its results file."""
        n = 0
        for j, run in runs():
            for name in run["kernels"]:
                log = j.with_name(j.stem + "-%s-console.log" % name)
                reps = kcsan.parse_kcsan(log.read_text(errors="replace"))
                summ = kcsan.summarise_kcsan(reps, NOWHERE, NOWHERE, NOWHERE / "vmlinux")
                s = run["summary"][name]
                self.assertEqual(len(reps), s["reports"], (j.name, name))
                # a run saved before one-sided reports were merged: with_pcs()
                # merges its list as summarise_kcsan() does
                want = kcsan.with_pcs(run[name], log)
                self.assertEqual(sorted(d["title"] for d in summ),
                                 sorted(d["title"] for d in want), (j.name, name))
                self.assertEqual(sum(d["count"] for d in summ),
                                 sum(d["count"] for d in want), (j.name, name))
                n += 1
        self.assertGreaterEqual(n, 25)

    def test_reports_written_again(self):
        """report(results) is the saved .txt (the 'series:' line's count of
        changed lines was not kept in the results before)."""
        same = 0
        for j, run in runs():
            if "profile" not in run:
                continue                # the first runs: an older report format
            want = j.with_suffix(".txt").read_text().rstrip("\n").splitlines()
            got = kcsan.report(run).splitlines()
            self.assertEqual(len(got), len(want), j.name)
            for a, b in zip(got, want):
                if b.startswith("series: "):
                    self.assertEqual(a.rsplit(",", 1)[0], b.rsplit(",", 1)[0], j.name)
                else:
                    self.assertEqual(a, b, j.name)
            same += 1
        self.assertGreaterEqual(same, 17)

    def test_latest_run(self):
        run = json.loads((RESULTS / "kcsan-20261204-075256-T-current-both.json").read_text())
        g = kcsan.groups(run)
        self.assertEqual((len(g["pb"]), len(g["addressed"]), len(g["unaddressed"]),
                          len(g["fixed"]), len(g["left"])), (15, 13, 2, 13, 0))
        text = kcsan.report(run)
        self.assertIn("| pristine | 48      | 15                  | 15       |", text)
        self.assertIn("seen on pristine, not addressed by the series: 2", text)

    def test_standalone(self):
        j = RESULTS / "kcsan-20261204-052529-S-final-both.json"
        r = subprocess.run([sys.executable, "-m", "lkmm_mark.kcsan", str(j)],
                           cwd=str(SCRIPTS), capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        want = j.with_suffix(".txt").read_text()
        self.assertEqual([x for x in r.stdout.splitlines() if not x.startswith("series:")],
                         [x for x in want.splitlines() if not x.startswith("series:")])
        log = RESULTS / "kcsan-20261204-075256-T-current-both-pristine-console.log"
        r = subprocess.run([sys.executable, "-m", "lkmm_mark.kcsan", str(log)],
                           cwd=str(SCRIPTS), capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("48 reports, 15 distinct data races", r.stdout)
        self.assertIn("data-race in btrfs_fileattr_get / prop_compression_apply  (x6)",
                      r.stdout)
        r = subprocess.run([sys.executable, "-m", "lkmm_mark.kcsan", str(RESULTS / "nope.json")],
                           cwd=str(SCRIPTS), capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("not a KCSAN results file", r.stderr)


class Synthetic(unittest.TestCase):
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
        reps = kcsan.parse_kcsan(text)
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
        reps = kcsan.parse_kcsan(text)
        self.assertEqual(len(reps), 3)
        self.assertTrue(reps[2]["accesses"][0]["reordered"])
        with tempfile.TemporaryDirectory() as d:
            summ = kcsan.summarise_kcsan(reps, Path(d), Path(d), Path(d) / "vmlinux")
        titles = [x["title"] for x in summ]
        # the one-sided report at the reader's very instruction is that race;
        # one at an instruction of no two-sided report stays a race of its own
        self.assertEqual(titles, ["data-race in btrfs_ioctl / btrfs_update_block_group",
                                  "data-race in btrfs_sync_file"])
        self.assertEqual(summ[0]["count"], 2)
        self.assertEqual(len(summ[0]["unknown_origin"]), 1)
        self.assertTrue(summ[1]["reordered"])



if __name__ == "__main__":
    unittest.main()


class EvidenceField(unittest.TestCase):
    """A KCSAN report confirms a site only when it can be about the site's
    field: a merged store can put the report's line one statement off
    (the commit stores the transaction's state, then the running
    transaction, under one lock; the report names the second line but the
    reader waits on the state)."""
    SRC = """void commit(struct fsi *fs, struct trans *t)
{
	spin_lock(&fs->lock);
	t->state = 2;
	fs->running = NULL;
	spin_unlock(&fs->lock);
	fs->last_committed = t->transid;
	/*
	 * a comment between two stores
	 */
	t->state = 3;
}

void waiter(struct fsi *fs, struct trans *t)
{
	wait_event(fs->wait,
		   t->state >= 2);
	x = 0;
	if (x <= fs->last_committed)
		return;
}
"""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        d = Path(self.tmp.name) / "fs" / "foo"
        d.mkdir(parents=True)
        (d / "t.c").write_text(self.SRC)

    def tearDown(self):
        self.tmp.cleanup()

    def _site(self, line, struct, field, action="WRITE_ONCE"):
        return {"file": "fs/foo/t.c", "line": line, "struct": struct, "field": field,
                "action": action, "tier": "paired"}

    def _report(self, title, w, r):
        return {title: {"title": title, "accesses": [
            {"type": "write", "locs": [["fs/foo/t.c", w]]},
            {"type": "read", "locs": [["fs/foo/t.c", r]]}]}}

    def test_the_member_both_accesses_have_near_them(self):
        from lkmm_mark import evidence
        plan = {"target": "fs/foo", "sites": [
            self._site(4, "trans", "state"), self._site(5, "fsi", "running"),
            self._site(7, "fsi", "last_committed"), self._site(11, "trans", "state"),
            self._site(16, "fsi", "wait", "none"), self._site(17, "trans", "state", "READ_ONCE"),
            self._site(19, "fsi", "last_committed", "READ_ONCE")]}
        reports = self._report("commit / waiter", 5, 16)
        reports.update(self._report("commit / waiter 2", 11, 19))
        seen = evidence.site_reports(plan, reports, self.tmp.name)
        # the waiter's statement (lines 16-17) reads the state, which the
        # line before the running store stores: not the running pointer
        self.assertNotIn(("fs/foo/t.c", 5, "fsi", "running"), seen)
        self.assertNotIn(("fs/foo/t.c", 16, "fsi", "wait"), seen)
        # past a comment, the store of last_committed is the code line
        # before the state's: the report is about it, not the state
        self.assertEqual(seen[("fs/foo/t.c", 19, "fsi", "last_committed")],
                         ["commit / waiter 2"])
        self.assertNotIn(("fs/foo/t.c", 11, "trans", "state"), seen)
        # without the source the comment hides the store before it, and
        # nothing is common: the line decides
        seen = evidence.site_reports(plan, reports)
        self.assertIn(("fs/foo/t.c", 11, "trans", "state"), seen)
        self.assertNotIn(("fs/foo/t.c", 5, "fsi", "running"), seen)
