# SPDX-License-Identifier: GPL-2.0-only
"""forksplit.py: a loop run half in a forked child gives what the loop
gives in one process, references between the objects included, and a
child that fails costs time, not answers."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "scripts"))
from lkmm_mark.forksplit import by_group, fork_map, split_loop   # noqa: E402


class Obj:
    __slots__ = ("n", "group", "pair", "why", "pid")

    def __init__(self, n):
        self.n, self.group = n, n % 5


def _objs():
    return [Obj(n) for n in range(40)]


def _body(objs):
    def body(o):
        # a reference to another object of the list, a new value, the
        # process that did the work
        o.pair = objs[(o.n + 7) % len(objs)]
        o.why = ("paired with", o.n + 7, [o.group])
        o.pid = os.getpid()
    return body


class SplitLoop(unittest.TestCase):
    def test_same_as_one_loop(self):
        one = _objs()
        for o in one:
            _body(one)(o)
        two = _objs()
        split_loop(two, _body(two), by_group(two, lambda o: o.group))
        for a, b in zip(one, two):
            self.assertEqual(b.why, a.why)
            # the counterpart is the object of this list, not a copy
            self.assertIs(b.pair, two[a.pair.n])
        # and half of the work was done in another process
        self.assertEqual(len({o.pid for o in two}), 2)

    def test_failing_child(self):
        objs = _objs()
        me = os.getpid()

        def body(o):
            if os.getpid() != me:
                raise RuntimeError("the child fails")
            _body(objs)(o)
        split_loop(objs, body, lambda o: o.n % 2)
        self.assertTrue(all(o.pid == me and o.pair is objs[(o.n + 7) % 40] for o in objs))


class NoFork(unittest.TestCase):
    """Where fork() fails, both loops run wholly in this process."""
    def setUp(self):
        self.fork = os.fork

        def failing():
            raise OSError("no fork here")
        os.fork = failing

    def tearDown(self):
        os.fork = self.fork

    def test_split_loop(self):
        objs = _objs()
        split_loop(objs, _body(objs), lambda o: o.n % 2)
        self.assertTrue(all(o.pid == os.getpid() and o.pair is objs[(o.n + 7) % 40]
                            for o in objs))

    def test_fork_map(self):
        self.assertEqual(fork_map(list(range(10)), lambda x: (x, os.getpid()), lambda x: x % 2),
                         [(x, os.getpid()) for x in range(10)])


class ForkMap(unittest.TestCase):
    def test_same_as_map(self):
        items = list(range(100))
        got = fork_map(items, lambda x: (x * x, str(x)), by_group(items, lambda x: x % 3))
        self.assertEqual(got, [(x * x, str(x)) for x in items])

    def test_failing_child(self):
        me = os.getpid()

        def fn(x):
            if os.getpid() != me:
                os._exit(3)
            return -x
        self.assertEqual(fork_map(list(range(10)), fn, lambda x: x > 4),
                         [-x for x in range(10)])

    def test_by_group_balances(self):
        items = ["a"] * 6 + ["b"] * 3 + ["c"] * 3 + ["d"]
        child = by_group(items, lambda x: x)
        side = {g: child(g) for g in "abcd"}
        # the largest group alone on one side, the others on the other
        self.assertEqual(side["b"], side["c"])
        self.assertNotEqual(side["a"], side["b"])
        self.assertEqual(sum(1 for x in items if child(x)) in (6, 7), True)


if __name__ == "__main__":
    unittest.main()
