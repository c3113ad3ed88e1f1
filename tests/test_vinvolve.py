# SPDX-License-Identifier: GPL-2.0-only
"""involve: what the series changes, and whether a KCSAN race involves it."""
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from vkernel_lib import SCRIPTS
from lkmm_mark import involve


class SeriesChanges(unittest.TestCase):
    def test_marked_fields(self):
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            p = Path(d) / "0001-x.patch"
            p.write_text("--- a/fs/btrfs/x.c\n+++ b/fs/btrfs/x.c\n"
                         "@@ -1,2 +1,2 @@ static int foo(struct a *a)\n"
                         "-\tif (a->b->count)\n+\tif (READ_ONCE(a->b->count))\n"
                         "+\tWRITE_ONCE(fs_info->flags, 1);\n")
            fields, funcs = involve.marked_fields([p])
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
            ch = involve.series_changes(a, b, [p])
        self.assertEqual(ch["fields"], {"full"})
        self.assertIn(3, ch["old"]["fs/btrfs/x.c"])
        self.assertNotIn(5, ch["old"]["fs/btrfs/x.c"])
        self.assertIn(4, ch["new"]["fs/btrfs/x.c"])

        def rep(locs, fields):
            return dict(accesses=[dict(locs=locs, fields=fields, where="w")])
        # a pristine report at the changed line, a patched one on the marked field
        self.assertTrue(involve.involvement(rep([("fs/btrfs/x.c", 3)], []), ch, "old"))
        self.assertTrue(involve.involvement(rep([("fs/btrfs/y.c", 9)], ["full"]), ch, "new"))
        # the unchanged line reading another field
        self.assertEqual(involve.involvement(rep([("fs/btrfs/x.c", 5)], ["size"]), ch, "old"), [])
        # an inlined-into line that the series changed counts too
        self.assertTrue(involve.involvement(
            rep([("include/linux/fs.h", 1), ("fs/btrfs/x.c", 4)], []), ch, "new"))

    def test_standalone(self):
        with tempfile.TemporaryDirectory() as d:
            p = Path(d) / "0001-x.patch"
            p.write_text("--- a/fs/btrfs/x.c\n+++ b/fs/btrfs/x.c\n"
                         "@@ -1,2 +1,2 @@ static int foo(struct a *a)\n"
                         "+\tWRITE_ONCE(fs_info->flags, 1);\n")
            r = subprocess.run([sys.executable, "-m", "lkmm_mark.involve", str(p)],
                               cwd=str(SCRIPTS), capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.splitlines(), ["fields (1): flags", "functions (1): foo"])

    def test_plan_loader_gives_struct_fields(self):
        with tempfile.TemporaryDirectory() as d:
            a, b = Path(d) / "a", Path(d) / "b"
            for t in (a, b):
                (t / "fs/btrfs").mkdir(parents=True)
            (a / "fs/btrfs/x.c").write_text("x\ns->full = 1;\n")
            (b / "fs/btrfs/x.c").write_text("x\nWRITE_ONCE(s->full, 1);\n")
            p = Path(d) / "0001-x.patch"
            p.write_text(subprocess.run(["diff", "-u", "a/fs/btrfs/x.c", "b/fs/btrfs/x.c"],
                                        cwd=d, capture_output=True, text=True).stdout)
            seen = []

            def loader(tree):
                seen.append(tree)
                return dict(sites=[dict(file="fs/btrfs/x.c", line=2, struct="s", field="full",
                                        action="write_once")])
            ch = involve.series_changes(a, b, [p], plan_tree=a, plan_loader=loader)
            none = involve.series_changes(a, b, [p], plan_tree=a)
        self.assertEqual(seen, [a])
        self.assertEqual(ch["marked_sf"], {"s.full"})
        self.assertEqual(ch["at"], {("fs/btrfs/x.c", 2): {"s.full"}})
        self.assertIsNone(none["marked_sf"])            # no loader: field names only


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
        self.assertEqual(involve.involvement(d, self._changes(), "old"), [])

    def test_marked_struct_field_involved(self):
        why = involve.involvement(self._race(("fs/btrfs/a.c", 40)), self._changes(), "old")
        self.assertEqual(why, ["field ordered.flags (marked by the series) at fs/btrfs/a.c:40"])

    def test_patched_lines_mapped_back(self):
        # line 41 of the patched file is line 40 of the pristine one (the
        # series added a line at 10); faddr2line's o-kcsan/../ path is normalised
        why = involve.involvement(self._race(("/x/o-kcsan/../fs/btrfs/a.c", 41)),
                                 self._changes(), "new")
        self.assertEqual(why, ["field ordered.flags (marked by the series) at fs/btrfs/a.c:41"])

    def test_changed_line_involved(self):
        why = involve.involvement(self._race(("fs/btrfs/a.c", 11)), self._changes(), "new")
        self.assertIn("site fs/btrfs/a.c:11 changed by the series", why)

    def test_name_only_without_plan_site(self):
        why = involve.involvement(self._race(("fs/btrfs/b.c", 5)), self._changes(), "old")
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
        self.assertEqual(involve.involvement(d, ch, "old"), [])
        self.assertIn("fs_info.last_trans_committed", d["field_mismatch"])
        # the same field on both lines (among others): matched
        ch["at"][("fs/btrfs/a.c", 50)] = {"ordered.flags", "fs_info.x"}
        why = involve.involvement(d, ch, "old")
        self.assertIn("field ordered.flags (marked by the series) at fs/btrfs/a.c:10", why)
        self.assertNotIn("field_mismatch", d)

    def test_disjoint_fields_resolved_nearby(self):
        ch = self._changes()
        # the store that KCSAN puts on line 50 is at 46, an unmarked field
        # the reader's line 60 also names: not involved
        ch["at"][("fs/btrfs/a.c", 46)] = {"fs_info.last_trans_committed"}
        ch["at"][("fs/btrfs/a.c", 50)] = {"ordered.flags2"}
        ch["at"][("fs/btrfs/a.c", 60)] = {"fs_info.last_trans_committed"}
        self.assertEqual(involve.involvement(self._two(60, 50), ch, "old"), [])
        # a load in a loop body that KCSAN puts on the loop head (63 ->
        # 60): the marked field both sides have within a few lines
        ch["at"][("fs/btrfs/a.c", 60)] = {"space.groups"}
        ch["at"][("fs/btrfs/a.c", 63)] = {"ordered.flags"}
        ch["at"][("fs/btrfs/a.c", 50)] = {"ordered.flags"}
        d = self._two(60, 50)
        why = involve.involvement(d, ch, "old")
        self.assertEqual(len(why), 1)
        self.assertIn("ordered.flags (marked by the series), the field both", why[0])
        self.assertEqual(d["field_window"], "ordered.flags")

    def test_to_old(self):
        h = [(10, 1, 10, 2), (20, 0, 22, 3), (30, 2, 33, 0)]
        self.assertEqual([involve.to_old(h, n) for n in (5, 12, 21, 25, 33, 34)],
                         [5, 11, 20, 21, 29, 32])


if __name__ == "__main__":
    unittest.main()
