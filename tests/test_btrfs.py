# SPDX-License-Identifier: GPL-2.0-only
"""Whole-fs/btrfs tests on Debian's linux-source-6.1 (provisioned into the
cache by lkmm_mark.tree): the re-marking test and known verdicts."""
import os
import unittest

from fixture_lib import REPO, Analysis, facts_mod, policy_mod  # noqa: F401
from lkmm_mark.tree import ensure_tree, cache_dir
from lkmm_mark.commands import plan_dict
from remark_lib import make_scratch, score

TARGET = "fs/btrfs"
_plans = {}


def plan_of(tree):
    if tree not in _plans:
        P = policy_mod.load()
        recs, _ = facts_mod.run(tree, TARGET, 0, True)
        A = Analysis(tree, TARGET, recs, P, facts_mod.source_files(tree, TARGET)).run()
        _plans[tree] = plan_dict(A)
    return _plans[tree]


class BtrfsTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        os.environ.pop("LKMM_MARK_CACHE", None)
        cls.tree = str(ensure_tree())

    def test_remarking(self):
        """Strip the tree's own READ_ONCE/WRITE_ONCE/data_race marks; the
        analysis must ask for a mark at no fewer than 80% of them."""
        scratch = str(cache_dir() / "remark-scratch")
        stripped = make_scratch(self.tree, TARGET, scratch)
        self.assertGreaterEqual(len(stripped), 40)
        found, same, rows = score(stripped, plan_of(scratch)["sites"])
        pct = 100.0 * found / len(stripped)
        print("\nre-marking: %d marks stripped, %d asked for again (%.0f%%), "
              "%d with the same macro as upstream" % (len(stripped), found, pct, same))
        for r in rows:
            if not r[4]:
                print("  missed: %s:%d %s(%s)" % (r[0], r[1], r[2], r[3]))
        self.assertGreaterEqual(found * 100, len(stripped) * 80)

    def test_teardown_warn_on_not_flagged(self):
        """btrfs_release_global_block_rsv()'s WARN_ON(rsv.reserved) reads run
        at teardown and must not be flagged."""
        sites = [s for s in plan_of(self.tree)["sites"]
                 if s["function"] == "btrfs_release_global_block_rsv"
                 and s["field"] in ("reserved", "size")]
        self.assertGreaterEqual(len(sites), 8)
        for s in sites:
            self.assertEqual(s["action"], "none", s)
            self.assertEqual(s["rule"], "lifecycle", s)

    def test_dead_and_test_only_code_not_flagged(self):
        """Hand review 2026-12-02 #20/#40 and #6: code that is never compiled
        (SCRAMBLE_DELAYED_REFS is #undef'd in extent-tree.c), a function with
        no caller (btrfs_cond_migrate_bytes()) and one only the self-tests
        call (btrfs_verify_qgroup_counts()) are neither races nor evidence."""
        sites = plan_of(self.tree)["sites"]
        rules = {}
        for s in sites:
            if s["function"] in ("btrfs_cond_migrate_bytes", "btrfs_verify_qgroup_counts") \
                    and s["rule"] != "not-markable":
                rules.setdefault(s["function"], set()).add(s["rule"])
        self.assertEqual(rules.get("btrfs_cond_migrate_bytes"), {"dead-code"})
        # the self-tests run from module init, so the verifier they call is
        # test-only or, through init_btrfs_fs(), lifecycle: either way not evidence
        self.assertTrue(rules.get("btrfs_verify_qgroup_counts"))
        self.assertLessEqual(rules["btrfs_verify_qgroup_counts"], {"test-only", "lifecycle"})
        scramble = [s for s in sites if s["file"].endswith("extent-tree.c")
                    and s["function"] == "btrfs_run_delayed_refs"
                    and s["field"] == "run_delayed_start"]
        self.assertTrue(scramble)
        for s in scramble:
            self.assertEqual(s["rule"], "dead-code", s)

    def test_private_by_argument(self):
        """Hand review 2026-12-02 #15/#21/#44: the backref iterator allocated
        by build_backref_tree() and the fresh extent map filled by
        btrfs_extent_item_to_extent_map() are private to their helpers."""
        sites = plan_of(self.tree)["sites"]
        for fn, st in (("btrfs_backref_iter_start", "btrfs_backref_iter"),
                       ("btrfs_extent_item_to_extent_map", "extent_map")):
            got = [s for s in sites if s["function"] == fn and s["struct"] == st]
            self.assertTrue(got, fn)
            for s in got:
                self.assertEqual(s["action"], "none", s)

    def test_reviewed_false_positives_stay_fixed(self):
        """False positives of the hand reviews that a general rule fixed
        (tests/hand-review.md): they must stay unflagged."""
        sites = plan_of(self.tree)["sites"]
        fixed = [
            ("relocation.c", 945, "btrfs_fs_info.reloc_ctl", "locked-in-every-caller"),
            ("block-group.c", 2975, "btrfs_block_group.cache_generation",
             "locked-in-every-caller"),
            ("scrub.c", 2274, "scrub_bio.logical", "no-lock-evidence"),       # lock tie
            ("raid56.c", 1890, "btrfs_raid_bio.failb", "no-lock-evidence"),   # lock tie
            ("file-item.c", 425, "btrfs_bio.csum", "no-lock-evidence"),       # handed over
            ("tree-log.c", 7170, "btrfs_inode.last_unlink_trans", "locked-read"),  # VFS lock
            ("qgroup.c", 1386, "btrfs_qgroup.excl", "locked-write-unraced"),
            ("disk-io.c", 4383, "btrfs_device.commit_bytes_used", "locked-in-every-caller"),
            ("scrub.c", 4072, "btrfs_dev_replace.cursor_left", "always-locked"),  # owner
            ("dev-replace.c", 1056, "btrfs_dev_replace.cursor_left", "owner-read"),
            ("zstd.c", 330, "workspace.req_level", "always-locked"),   # declared owner
            ("zstd.c", 388, "workspace.req_level", "owner-read"),
            # call-graph precision (fixture callgraph_names): log replay's
            # callback runs only inside btrfs_recover_log_trees(); a
            # parameter named do_chunk_alloc no longer hides its callers
            ("tree-log.c", 816, "btrfs_root.log_root", "lifecycle"),
            ("tree-log.c", 1925, "btrfs_root.log_root", "lifecycle"),
            ("block-group.c", 4002, "btrfs_fs_devices.rw_devices", "locked-read"),
            # the declared life cycle of an ordered extent (policies/
            # 'phases', fixture declared_phases): the finish reads what
            # the split and the truncation stored before it
            ("inode.c", 3367, "btrfs_ordered_extent.disk_num_bytes",
             "unraced-in-every-context"),
            ("inode.c", 3317, "btrfs_ordered_extent.truncated_len", "unraced-in-every-context"),
            ("ordered-data.c", 290, "btrfs_ordered_extent.truncated_len",
             "locked-write-unraced"),
            ("file-item.c", 705, "btrfs_ordered_extent.file_offset",
             "unraced-in-every-context"),
            # ... and its submitting task, the only one that splits it
            ("inode.c", 2688, "btrfs_ordered_extent.disk_num_bytes", "owner-read"),
            # the object's teardown (policies/kernel.json 'teardown_ops'):
            # ->evict_inode's store races with no lookup of a live inode
            ("delayed-inode.c", 75, "btrfs_inode.delayed_node", "locked-read"),
            ("delayed-inode.c", 1298, "btrfs_inode.delayed_node", "lockset-only"),
        ]
        for f, line, field, rule in fixed:
            got = [(s["action"], s["rule"]) for s in sites if s["file"] == "fs/btrfs/" + f and
                   s["line"] == line and "%s.%s" % (s["struct"], s["field"]) == field]
            self.assertTrue(got, (f, line, field))
            self.assertIn(("none", rule), got, (f, line, field))

    def test_ordered_extent_races_outside_the_declared_order_stay_flagged(self):
        """The declared life cycle and submitter of an ordered extent take
        out the finish's and the submitter's loads only: the split's
        stores and other tasks' loads (hand review #70, #73) stay marked."""
        sites = plan_of(self.tree)["sites"]
        want = [("ordered-data.c", 1151, "file_offset", "WRITE_ONCE"),
                ("ordered-data.c", 1153, "num_bytes", "WRITE_ONCE"),
                ("ordered-data.c", 1154, "disk_num_bytes", "WRITE_ONCE"),
                ("ordered-data.c", 664, "disk_num_bytes", "READ_ONCE"),
                ("ordered-data.c", 745, "file_offset", "READ_ONCE"),
                ("ordered-data.c", 746, "num_bytes", "READ_ONCE")]
        for f, line, field, action in want:
            got = [s["action"] for s in sites if s["file"] == "fs/btrfs/" + f and
                   s["line"] == line and s["struct"] == "btrfs_ordered_extent" and
                   s["field"] == field]
            self.assertEqual(got, [action], (f, line, field))

    # Accesses of the data races KCSAN reported on the pristine kernel
    # (qemu-test/results/kcsan-*.txt, README "KCSAN races on pristine"):
    # each must stay flagged, with the macro the race calls for.
    KCSAN_SITES = [
        ("sysfs.c", 1148, "btrfs_fs_info.generation", "READ_ONCE"),          # run R
        ("sysfs.c", 680, "btrfs_block_group.used", "READ_ONCE"),
        ("block-group.c", 3474, "btrfs_block_group.used", "WRITE_ONCE"),
        ("ioctl.c", 3925, "btrfs_block_group.used", "READ_ONCE"),
        ("super.c", 2357, "btrfs_space_info.disk_used", "READ_ONCE"),
        ("block-group.c", 3478, "btrfs_space_info.disk_used", "WRITE_ONCE"),
        ("transaction.c", 708, "btrfs_transaction.state", "READ_ONCE"),
        ("transaction.c", 536, "btrfs_transaction.state", "READ_ONCE"),
        ("props.c", 315, "btrfs_inode.flags", "WRITE_ONCE"),
        ("ioctl.c", 373, "btrfs_inode.flags", "WRITE_ONCE"),
        ("ioctl.c", 131, "btrfs_inode.flags", "READ_ONCE"),
        ("inode.c", 10325, "btrfs_inode.flags", "WRITE_ONCE"),
        ("inode.c", 9265, "btrfs_inode.ro_flags", "READ_ONCE"),
        ("sysfs.c", 490, "btrfs_discard_ctl.discard_extent_bytes", "READ_ONCE"),
        ("sysfs.c", 468, "btrfs_discard_ctl.discard_bitmap_bytes", "READ_ONCE"),
        ("disk-io.c", 1327, "btrfs_root.log_transid", "WRITE_ONCE"),
        ("transaction.h", 181, "btrfs_root.log_transid", "READ_ONCE"),
        ("tree-log.c", 3023, "btrfs_root.log_transid", "WRITE_ONCE"),
        ("transaction.c", 2179, "btrfs_commit_stats.total_commit_dur", "WRITE_ONCE"),
        ("sysfs.c", 1001, "btrfs_commit_stats.max_commit_dur", "READ_ONCE"),
        ("transaction.c", 428, "btrfs_root.last_trans", "WRITE_ONCE"),
        ("transaction.c", 501, "btrfs_root.last_trans", "READ_ONCE"),
        ("extent-tree.c", 4205, "btrfs_space_info.max_extent_size", "READ_ONCE"),
        ("extent-tree.c", 2162, "btrfs_delayed_ref_root.num_heads_ready", "READ_ONCE"),
        ("inode.c", 4236, "btrfs_inode.disk_i_size", "READ_ONCE"),
        ("block-group.c", 749, "btrfs_block_group.cached", "WRITE_ONCE"),
        ("transaction.c", 2565, "btrfs_fs_info.last_trans_committed", "WRITE_ONCE"),  # R
        ("transaction.c", 914, "btrfs_fs_info.last_trans_committed", "READ_ONCE"),
        ("file.c", 1738, "btrfs_fs_info.last_trans_committed", "READ_ONCE"),
        ("disk-io.c", 209, "btrfs_fs_info.last_trans_committed", "READ_ONCE"),  # N
        ("super.c", 1087, "btrfs_fs_info.commit_interval", "WRITE_ONCE"),  # run S
        ("disk-io.c", 1879, "btrfs_fs_info.commit_interval", "READ_ONCE"),
        ("ioctl.c", 3777, "btrfs_fs_info.generation", "READ_ONCE"),
    ]

    def test_kcsan_races_flagged(self):
        """The accesses of the races KCSAN observed stay flagged (a rule
        change that drops one is a false negative KCSAN has shown real)."""
        sites = plan_of(self.tree)["sites"]
        for f, line, field, macro in self.KCSAN_SITES:
            got = [s["action"] for s in sites if s["file"] == "fs/btrfs/" + f and
                   s["line"] == line and "%s.%s" % (s["struct"], s["field"]) == field]
            self.assertIn(macro, got, (f, line, field))

    def test_kcsan_races_in_macro_bodies_flagged(self):
        """KCSAN saw remount's store to mount_opt against /proc/mounts'
        btrfs_show_options(), and resize's store to a device's total_bytes
        against statfs: both go through macro bodies (btrfs_test_opt(),
        the accessors BTRFS_DEVICE_GETSET_FUNCS() generates), reported
        once in the body, with the racing calls named."""
        sites = plan_of(self.tree)["sites"]
        body = [s for s in sites if s["file"] == "fs/btrfs/ctree.h" and
                s["function"] == "btrfs_test_opt" and s["action"] != "none"]
        self.assertEqual([(s["field"], s["action"], s["tier"]) for s in body],
                         [("mount_opt", "READ_ONCE", "paired")])
        calls = {s["function"] for s in sites if s.get("via") and
                 s["via"]["call"] == "btrfs_test_opt" and s["rule"] == "via-accessor"}
        self.assertIn("btrfs_show_options", calls)
        stores = {s["function"] for s in sites if s.get("via") and s["field"] == "mount_opt"
                  and s["rule"] == "via-accessor" and s["access"] != "read"}
        self.assertIn("btrfs_parse_options", stores)
        dev = {(s["function"], s["action"]) for s in sites if s["file"] == "fs/btrfs/volumes.h"
               and s["action"] != "none"}
        self.assertIn("WRITE_ONCE", {a for f, a in dev if f.startswith("btrfs_device_set_")})
        self.assertIn("READ_ONCE", {a for f, a in dev if f.startswith("btrfs_device_get_")})
        resize = {(s["function"], s["via"]["call"]) for s in sites if s.get("via") and
                  s["rule"] == "via-accessor" and s["field"] == "total_bytes"}
        self.assertIn(("btrfs_grow_device", "btrfs_device_set_total_bytes"), resize)
        statfs = [(s["action"], s["tier"]) for s in sites if s["file"] == "fs/btrfs/super.c"
                  and s["function"] == "btrfs_calc_avail_data_space"
                  and s["field"] == "total_bytes"]
        self.assertEqual(statfs, [("READ_ONCE", "paired")])

    def test_every_marked_site_has_a_racing_pair(self):
        """Every site the plan marks names its counterpart and both
        contexts; the lockset-only candidates are not marked."""
        for s in plan_of(self.tree)["sites"]:
            if s["action"] == "none" or s["test_code"]:
                continue
            self.assertEqual(s.get("tier"), "paired", s)
            self.assertTrue(s.get("counterpart"), s)
            self.assertEqual(len(s.get("contexts") or ()), 2, s)
            c = s["counterpart"]
            self.assertIn("%s() at %s:%d" % (c["function"], c["file"].rsplit("/", 1)[-1],
                                             c["line"]), s["reason"])

    def test_not_analysed_listed(self):
        na = plan_of(self.tree)["not_analysed"]
        names = {x["function"] for x in na}
        self.assertLessEqual(len(na), 5)
        self.assertIn("btrfs_ioctl_ino_to_path", names)

    def test_every_site_has_rule_and_reason(self):
        p = plan_of(self.tree)
        rules = {r["id"] for r in policy_mod.load().rules.values()}
        for s in p["sites"]:
            self.assertIn(s["rule"], rules, s)
            self.assertTrue(s["reason"], s)
            for k in ("file", "line", "column", "function", "struct", "field",
                      "access", "action"):
                self.assertIn(k, s)

    def test_hand_review_is_current(self):
        """tests/hand-review.md reviews the uniform draw its header names
        (seed and size, tests/draw_sample.py) of the flagged sites of the
        current plan, row for row, and its summary counts its own rows."""
        import random
        import re
        import sys
        sys.path.insert(0, str(REPO / "tests"))
        from draw_sample import flagged
        text = (REPO / "tests" / "hand-review.md").read_text()
        m = re.search(r"--seed (\d+) --n (\d+)", text)
        self.assertIsNotNone(m, "the review names its draw")
        seed, n = int(m.group(1)), int(m.group(2))
        rows = re.findall(r"^\| (\d+) \| ([\w\-./]+:\d+) \| (\w+) \| ([\w.]+) \| "
                          r"(\w+) \((\S+)\) \| (TRUE|FALSE) \| (right|wrong) \|",
                          text, re.M)
        sites = flagged(plan_of(self.tree))
        drawn = random.Random(seed).sample(range(len(sites)), n)
        want = [(str(i + 1), "%s:%d" % (sites[k]["file"][9:], sites[k]["line"]),
                 sites[k]["function"], "%s.%s" % (sites[k]["struct"], sites[k]["field"]),
                 sites[k]["action"], sites[k]["rule"]) for i, k in enumerate(drawn)]
        self.assertGreaterEqual(len(rows), 60)
        self.assertEqual([r[:6] for r in rows], want,
                         "the flagged set changed: the review no longer fits the plan")
        tp = sum(1 for r in rows if r[6] == "TRUE")
        self.assertIn("**TRUE: %d of %d**" % (tp, len(rows)), text)
        right = sum(1 for r in rows if r[6] == "TRUE" and r[7] == "right")
        self.assertIn("**named counterpart right: %d of %d true sites**" % (right, tp), text)
