#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Run every test under tests/ and end with 'N passed, N failed'."""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


class Result(unittest.TextTestResult):
    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.passed = 0

    def addSuccess(self, test):
        super().addSuccess(test)
        self.passed += 1


def install():
    """What the tests use, installed as the main job installs it (apt as
    root; otherwise one line naming the apt-get command): so that this
    command works on a fresh machine before anything else has run."""
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "scripts"))
    from lkmm_mark import deps
    from lkmm_mark.base import UserError
    try:
        deps.ensure(deps.TESTS, "the tests")
    except UserError as e:
        print("tests: %s" % e)
        print("0 passed, 1 failed")
        sys.exit(1)


def main(argv):
    install()
    # one or more file patterns (test_series.py test_cli.py); all by default
    suite = unittest.TestSuite()
    for pattern in argv or ["test_*.py"]:
        suite.addTests(unittest.defaultTestLoader.discover(HERE, pattern=pattern,
                                                           top_level_dir=HERE))
    runner = unittest.TextTestRunner(verbosity=2, resultclass=Result, stream=sys.stdout)
    res = runner.run(suite)
    failed = len(res.failures) + len(res.errors)
    skipped = len(res.skipped)
    line = "%d passed, %d failed" % (res.passed, failed)
    if skipped:
        line += ", %d skipped" % skipped
    print(line)
    return 0 if failed == 0 and res.testsRun > 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
