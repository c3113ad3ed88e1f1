# SPDX-License-Identifier: GPL-2.0-only
"""values.py: the constants an enum field holds, and the branches none of
them takes (tests/fixtures/enum_values)."""
import sys
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "scripts"))

from lkmm_mark import csrc  # noqa: E402
from lkmm_mark.values import enum_constants  # noqa: E402
from test_fixtures import analyse_edited  # noqa: E402
from fixture_lib import site_lines  # noqa: E402


def _rule(A, line, field="policy"):
    return [s for s in site_lines(A) if s.startswith("policy.c:%d:" % line) and
            " fsd.%s " % field in s]


class EnumValues(unittest.TestCase):
    def test_enumerators_numbered(self):
        out = {}
        enum_constants(csrc.tokenize("enum a { X, Y = 4, Z, W = Y, V = (2), };\n"
                                     "enum { P = n, Q };"), out)
        self.assertEqual(out, {"X": 0, "Y": 4, "Z": 5, "W": 4, "V": 2})

    def test_second_value_makes_the_stores_live(self):
        """With a second policy both stores can run (as mode's do, which
        has two values and races)."""
        A, _ = analyse_edited(self, "enum_values", "policy.c", "\tPOL_PID,\n",
                              "\tPOL_PID,\n\tPOL_RR,\n")
        for line in (51, 93):
            self.assertNotIn("dead-code", _rule(A, line)[0])
        base = site_lines(analyse_edited(self, "enum_values", "policy.c", "", "")[0])
        self.assertIn("policy.c:68:9-13: mode_store fsd.mode WRITE_ONCE (locked-write)", base)

    def test_copy_into_the_struct_holds_anything(self):
        """A struct filled by memcpy() from bytes may hold any value: the
        default arm may run."""
        A, _ = analyse_edited(self, "enum_values", "policy.c", "int policy_show(",
                              "void fsd_load(struct fsd *fsd, const u8 *buf)\n{\n"
                              "\tmemcpy(fsd, buf, 64);\n}\n\nint policy_show(")
        self.assertNotIn("dead-code", _rule(A, 92)[0])

    def test_copy_from_its_own_kind_keeps_the_values(self):
        A, _ = analyse_edited(self, "enum_values", "policy.c", "int policy_show(",
                              "void fsd_dup(struct fsd *to, struct fsd *from)\n{\n"
                              "\tmemcpy(to, from, sizeof(*to));\n}\n\nint policy_show(")
        self.assertIn("(dead-code)", _rule(A, 92)[0])


if __name__ == "__main__":
    unittest.main()
