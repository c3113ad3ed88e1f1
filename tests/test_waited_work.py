# SPDX-License-Identifier: GPL-2.0-only
"""The waited_work fixture with something between the queue and the wait,
or after the worker's complete(): the on-stack work item then runs beside
its task, with none of its locks, and read_count()'s load races with the
locked stores (waitedwork.py)."""
import unittest

from fixture_lib import pair_lines
from test_fixtures import analyse_edited

_RACING = ["split.c:26:12: read_count fs_x.count paired with reset() at split.c:62",
           "split.c:62:5: reset fs_x.count paired with read_count() at split.c:26",
           "split.c:69:5: set_count fs_x.count paired with read_count() at split.c:26"]


class WaitedWorkTests(unittest.TestCase):
    def test_not_waited_at_once(self):
        A, _ = analyse_edited(self, "waited_work", "split.c",
                              "\twait_for_completion(&done);\n",
                              "\tmsleep(1);\n\twait_for_completion(&done);\n")
        self.assertEqual(pair_lines(A), _RACING)

    def test_work_after_signal(self):
        A, _ = analyse_edited(self, "waited_work", "split.c",
                              "\tcomplete(args->done);\n",
                              "\tcomplete(args->done);\n\tmsleep(1);\n")
        self.assertEqual(pair_lines(A), _RACING)


if __name__ == "__main__":
    unittest.main()
