# SPDX-License-Identifier: GPL-2.0-only
"""The null_handle fixture's braced early exit, 'if (!trans) { ...;
return; }', undone: without its return, or with a goto out of the block
to a label past it, release()'s load is reached with a NULL handle and
races with commit()'s store (flagargs.py test_ranges(), _block_returns())."""
import unittest

from fixture_lib import pair_lines
from test_fixtures import analyse_edited

_BASE = ["null.c:48:10: search_leaf fs4.running paired with commit() at null.c:118",
         "null.c:100:10: walk fs4.running paired with commit() at null.c:118",
         "null.c:118:5: commit fs4.running paired with search_leaf() at null.c:48"]


class ExitBlockTests(unittest.TestCase):
    def test_no_return(self):
        A, _ = analyse_edited(self, "null_handle", "null.c",
                              "\t\treturn;\n\t}\n\tuse(fs->running);",
                              "\t}\n\tuse(fs->running);")
        self.assertEqual(pair_lines(A), _BASE + [
            "null.c:130:9: release fs4.running paired with commit() at null.c:118"])

    def test_goto_out_of_block(self):
        A, _ = analyse_edited(self, "null_handle", "null.c",
                              "\t\tuse(NULL);\n\t\treturn;\n\t}\n\tuse(fs->running);",
                              "\t\tif (fs)\n\t\t\tgoto out;\n\t\treturn;\n\t}\nout:\n"
                              "\tuse(fs->running);")
        self.assertEqual(pair_lines(A), _BASE + [
            "null.c:133:9: release fs4.running paired with commit() at null.c:118"])


if __name__ == "__main__":
    unittest.main()
