# SPDX-License-Identifier: GPL-2.0-only
"""compare: each class of what became of a 6.1 finding in another version,
on two small made-up plans and the other version's source."""
import tempfile
import unittest
from pathlib import Path

import fixture_lib  # noqa: F401 (sys.path)
from lkmm_mark import compare
from lkmm_mark.analysis import Source

NEW_C = """
u64 get_gen(struct fsi *f) { return READ_ONCE(f->gen); }
int show(struct fsi *f) { return get_gen(f); }
int locked(struct fsi *f) { return f->gen; }
int flagged(struct fsi *f) { return f->gen; }
int both(struct fsi *f) { return READ_ONCE(f->gen) + f->gen; }
int other(struct fsi *f) { return f->size; }
"""


def site(fn, field="gen", action="none", access="read", rule="plain", reason="", test=False):
    return {"struct": "fsi", "field": field, "function": fn, "action": action,
            "access": access, "rule": rule, "reason": reason, "test_code": test}


OLD = {"sites": [site(fn, action="READ_ONCE", rule="unlocked-read") for fn in (
    "show", "locked", "flagged", "both", "other", "gone_fn")] +
    [site("show", field="old_field", action="READ_ONCE"),
     site("flagged", action="READ_ONCE", test=True)], "fields": {}}
NEW = {"sites": [
    site("get_gen", access="marked", rule="already-marked"),
    site("locked", rule="locked-read"),
    site("flagged", action="READ_ONCE", rule="unlocked-read"),
    site("both", access="marked", rule="already-marked"),
    site("both", action="READ_ONCE", rule="unlocked-read"),
    site("other", field="size", rule="read-only")], "fields": {"fsi.gen": {}}}


class Classes(unittest.TestCase):
    def test_each_class(self):
        with tempfile.TemporaryDirectory() as d:
            (Path(d) / "fs/btrfs").mkdir(parents=True)
            (Path(d) / "fs/btrfs/new.c").write_text(NEW_C)
            idx = compare.Index(NEW, Source(d, ["fs/btrfs/new.c"]))
            got = {(f, fn): (c, detail) for f, fn, n, c, detail in compare.compare(OLD, idx)}
        self.assertEqual(got, {
            ("fsi.gen", "show"): ("fixed upstream", " (through get_gen())"),
            ("fsi.gen", "locked"): ("plain, not flagged", "locked-read"),
            ("fsi.gen", "flagged"): ("still flagged", ""),
            ("fsi.gen", "both"): ("partly fixed", ""),
            ("fsi.gen", "other"): ("access gone", ""),
            ("fsi.gen", "gone_fn"): ("function gone", ""),
            ("fsi.old_field", "show"): ("field gone", "")})

    def test_summary_counts_sites_and_fields(self):
        rows = [("a.x", "f", 2, "fixed upstream", ""), ("a.x", "g", 1, "still flagged", ""),
                ("a.y", "f", 3, "still flagged", "")]
        text = "\n".join(compare.summary(rows, "6.1.1", "6.12.1", 9))
        self.assertIn("| fixed upstream | 2 | 1 |", text)
        self.assertIn("| still flagged | 4 | 2 |", text)
        self.assertIn("| all 6.1 flagged sites | 6 | 2 |", text)
        self.assertIn("6.12.1 flags 9 sites", text)


if __name__ == "__main__":
    unittest.main()
