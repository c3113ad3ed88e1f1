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


class DeclaredPhases(unittest.TestCase):
    def test_the_phase_is_what_keeps_the_finish_plain(self):
        """Fixture declared_phases without its policies/ 'phases' entry:
        the finish's loads and the truncation's locked store are marked
        again, so the entry, not some other rule, keeps them plain."""
        d = FIXTURES / "declared_phases"
        A = analyse_fixture(d, policies="{}")
        got = {(a.fn, a.field, a.line): a.action for a in A.accesses
               if a.struct == "oext" and a.field != "tree"}
        for (fn, field, line), action in sorted(got.items()):
            if fn in ("oext_finish", "oext_file_end", "oext_release", "oext_csum"):
                self.assertEqual(action, "READ_ONCE", (fn, field, line))
            if fn == "oext_truncate":
                self.assertEqual(action, "WRITE_ONCE", (fn, field, line))
        with_phase = {(a.fn, a.field, a.line): a.action for a in analyse_fixture(d).accesses
                      if a.struct == "oext" and a.field != "tree"}
        self.assertEqual(set(with_phase), set(got))
        self.assertEqual({k for k, v in with_phase.items() if v != "none"},
                         {k for k, v in got.items() if v != "none" and
                          k[0] not in ("oext_finish", "oext_file_end", "oext_release",
                                       "oext_truncate", "oext_csum")})

    def test_each_order_cites_its_own_declaration(self):
        """Two orders declared for one struct: a load each makes unraced
        quotes its own entry only."""
        A = analyse_fixture(FIXTURES / "declared_phases")
        why = {a.fn: a.reason for a in A.accesses
               if a.struct == "oext" and a.field == "start" and
               a.fn in ("oext_finish", "oext_csum")}
        from lkmm_mark.analysis import PHASE_TAG
        for r in why.values():
            self.assertIn(PHASE_TAG, r)      # what series.py counts
        self.assertIn("before oext_csum()", why["oext_csum"])
        self.assertNotIn("oext_finish", why["oext_csum"])
        self.assertIn("before oext_finish()", why["oext_finish"])
        self.assertNotIn("oext_csum", why["oext_finish"])


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
