# SPDX-License-Identifier: GPL-2.0-only
"""Fixture deref_nonnull edited: with chunk_alloc()'s load of tp->mount
made conditional, inside a macro's parentheses, or past a label a goto
before it jumps to, chunk_alloc() may pass chunk_init() a NULL
transaction as far as the code shows, its unlocked call reaches the
NULL branch, and the store there races with the locked load and stores
(flagargs.py deref_before() is what kept that call out, not another
rule)."""
import unittest

from test_fixtures import analyse_edited


def _flags(A):
    return {a.fn: (a.action, a.rule) for a in A.accesses if a.field == "flags"}


class DerefNonNull(unittest.TestCase):
    def _racing(self, old, new):
        A, _ = analyse_edited(self, "deref_nonnull", "deref.c", old, new)
        got = _flags(A)
        self.assertEqual(got["chunk_init"], ("WRITE_ONCE", "unlocked-write"))
        self.assertEqual(got["chunk_peek"], ("READ_ONCE", "racing-locked-read"))

    def test_conditional_load(self):
        self._racing("\tmp = tp->mount;\n", "\tmp = tp ? tp->mount : NULL;\n")

    def test_load_in_a_macro(self):
        self._racing("\tmp = tp->mount;\n", "\tmp = NULL;\n\tASSERT(tp->mount);\n")

    def test_label_jumped_to_past_the_load(self):
        self._racing("\tmp = tp->mount;\n\tif (!mp)\n\t\treturn -EINVAL;\n",
                     "\tif (c)\n\t\tgoto init;\n\tmp = tp->mount;\n\tif (!mp)\n"
                     "\t\treturn -EINVAL;\ninit:\n")


if __name__ == "__main__":
    unittest.main()
