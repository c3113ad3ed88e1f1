# SPDX-License-Identifier: GPL-2.0-only
"""Fixture held_member edited: without the fact (it names another member)
lookup()'s store through cur and leaf_ops()'s read look unlocked and race
with the locked read and store; with cur also handed to a release call,
cur is no longer only a held object, and its store races again
(heldobjects.py is what kept them apart, not another rule)."""
import unittest

from test_fixtures import analyse_edited


def _ops(A):
    return {a.fn: (a.action, a.rule) for a in A.accesses if a.field == "ops"}


class HeldMembers(unittest.TestCase):
    def test_without_the_fact(self):
        A, _ = analyse_edited(self, "held_member", "policies.json", '"member": "blk.bp"',
                              '"member": "blk.blkno"')
        got = _ops(A)
        self.assertEqual(got["lookup"], ("WRITE_ONCE", "unlocked-write"))
        self.assertEqual(got["leaf_ops"][0], "READ_ONCE")
        self.assertEqual(got["buf_check"], ("READ_ONCE", "racing-locked-read"))

    def test_local_handed_to_a_release(self):
        A, _ = analyse_edited(self, "held_member", "lookup.c", "\t\tcur->ops = &data_ops;\n",
                              "\t\tcur->ops = &data_ops;\n\t\tbuf_unlock(cur);\n")
        got = _ops(A)
        self.assertEqual(got["lookup"], ("WRITE_ONCE", "unlocked-write"))
        # leaf_ops() still holds the lock, and races with that store
        self.assertEqual(got["leaf_ops"], ("READ_ONCE", "racing-locked-read"))


if __name__ == "__main__":
    unittest.main()
