# SPDX-License-Identifier: GPL-2.0-only
"""Fixture tests: each tests/fixtures/<name>/ holds small C files, an
optional policies.json, and expected.sites listing every verdict
(file:line:col-col: function struct.field action (rule)).  Coccinelle-test
style: the analysis must reproduce the expected file exactly."""
import difflib
import unittest
from pathlib import Path

from fixture_lib import analyse_fixture, site_lines

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def _make(d):
    def test(self):
        want = (d / "expected.sites").read_text().splitlines()
        got = site_lines(analyse_fixture(d))
        if got != want:
            diff = "\n".join(difflib.unified_diff(want, got, "expected", "got", lineterm=""))
            self.fail("verdicts differ for %s:\n%s" % (d.name, diff))
    return test


class FixtureTests(unittest.TestCase):
    pass


for _d in sorted(FIXTURES.iterdir()):
    if (_d / "expected.sites").exists():
        setattr(FixtureTests, "test_" + _d.name, _make(_d))


class RuleCoverage(unittest.TestCase):
    def test_every_rule_has_a_fixture(self):
        """Every rule and exclusion of policies/policies.json is the verdict
        of at least one site in some fixture's expected.sites."""
        import json
        import re
        rules = json.loads((FIXTURES.parents[1] / "policies" / "policies.json").read_text())
        ids = [r["id"] for r in rules["rules"]]
        used = set()
        for f in FIXTURES.glob("*/expected.sites"):
            used.update(re.findall(r"\(([a-z-]+)\)\s*$", f.read_text(), re.M))
        self.assertEqual([i for i in ids if i not in used], [],
                         "rules no fixture exercises")
        self.assertEqual(sorted(used - set(ids)), [], "verdict rules policies.json lacks")
