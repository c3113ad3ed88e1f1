# SPDX-License-Identifier: GPL-2.0-only
"""Fixture alone_context edited: with foo_fill_super() no life-cycle
function (the replay functions still are, by their pattern, but now a
function that runs beside others calls them), or with an ioctl also
calling foo_replay_items() (a live caller: the replay then runs beside
everything, like an object's constructor a lookup calls), the store only
the replay's ->commit method reaches races with the ioctl's locked load
and stores (contexts.py _alone_calls() is what kept them apart, not
another rule)."""
import unittest

from test_fixtures import analyse_edited


def _count(A):
    return {(a.fn, "fsi.lock" in a.held): (a.action, a.rule)
            for a in A.accesses if a.field == "count"}


class AloneContext(unittest.TestCase):
    def _racing(self, got):
        self.assertEqual(got[("count_add", False)], ("WRITE_ONCE", "unlocked-write"))
        self.assertEqual(got[("foo_ioctl_reset", True)], ("WRITE_ONCE", "locked-write"))
        self.assertEqual(got[("foo_ioctl_peek", True)], ("READ_ONCE", "racing-locked-read"))

    def test_mount_not_life_cycle(self):
        A, _ = analyse_edited(self, "alone_context", "policies.json", '["foo_fill_super"]',
                              '[]')
        self._racing(_count(A))

    def test_live_caller_of_the_replay(self):
        A, _ = analyse_edited(self, "alone_context", "replay.c",
                              "long foo_ioctl_reset(struct fsi *fs)\n",
                              "long foo_ioctl_replay(struct fsi *fs)\n{\n"
                              "\treturn foo_replay_items(fs, &foo_replay_ops, 2);\n}\n\n"
                              "long foo_ioctl_reset(struct fsi *fs)\n")
        self._racing(_count(A))


if __name__ == "__main__":
    unittest.main()
