# SPDX-License-Identifier: GPL-2.0-only
"""Whole-fs/btrfs tests on Debian's linux-source-6.1 (provisioned into the
cache by lkmm_mark.tree): the re-marking test and known verdicts."""
import os
import tempfile
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
        """tests/hand-review.md reviews the sample the drawing script it
        quotes gives on the current plan (one median site of every k-th
        flagged field), and its summary counts its own rows."""
        import collections
        import re
        text = (REPO / "tests" / "hand-review.md").read_text()
        rows = re.findall(r"^\| (\d+) \| ([\w\-./]+:\d+) \| (\w+) \| ([\w.]+) \| "
                          r"(\w+) \((\S+)\) \| (TP|FP) \|", text, re.M)
        fl = [x for x in plan_of(self.tree)["sites"]
              if x["action"] != "none" and not x["test_code"]]
        by = collections.defaultdict(list)
        for x in fl:
            by[x["struct"] + "." + x["field"]].append(x)
        fields = sorted(by)
        k = -(-len(fields) // 50)
        want = []
        for i, f in enumerate(fields[::k]):
            s = sorted(by[f], key=lambda x: (x["file"], x["line"], x["column"]))
            x = s[len(s) // 2]
            want.append((str(i + 1), "%s:%d" % (x["file"][9:], x["line"]), x["function"], f,
                         x["action"], x["rule"]))
        self.assertGreaterEqual(len(rows), 40)
        self.assertEqual([r[:6] for r in rows], want,
                         "the flagged set changed: redraw and re-read the hand review")
        tp = sum(1 for r in rows if r[6] == "TP")
        self.assertIn("**TP: %d**" % tp, text)
        self.assertIn("**FP: %d**" % (len(rows) - tp), text)
