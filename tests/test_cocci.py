# SPDX-License-Identifier: GPL-2.0-only
"""cocci/access_marking.cocci run by plain spatch (as under coccicheck)
gives the driver's verdicts; patch mode rewrites exactly the planned sites."""
import json
import os
import re
import subprocess
import tempfile
import unittest
from pathlib import Path

from fixture_lib import REPO, make_tree, make_policies, policy_mod, facts_mod, Analysis, TARGET
from lkmm_mark.commands import plan_dict, report_lines

RULE = REPO / "cocci" / "access_marking.cocci"
SEED = Path(__file__).resolve().parent / "fixtures" / "seed_eb_locking"


class CocciRule(unittest.TestCase):
    def run_mode(self, fixture, mode):
        with tempfile.TemporaryDirectory() as tmp:
            tree = make_tree(fixture, tmp)
            P = policy_mod.load(make_policies(fixture, tmp))
            recs, _ = facts_mod.run(str(tree), TARGET, 1, use_cache=False)
            A = Analysis(str(tree), TARGET, recs, P,
                         facts_mod.source_files(str(tree), TARGET)).run()
            plan = Path(tmp) / "plan.json"
            plan.write_text(json.dumps(plan_dict(A)))
            r = subprocess.run(["spatch", "--very-quiet", "--sp-file", str(RULE), "-D", mode,
                                "--dir", TARGET, "--no-includes", "--include-headers"],
                               cwd=tree, capture_output=True, text=True,
                               env=dict(os.environ, LKMM_PLAN=str(plan)))
            self.assertEqual(r.returncode, 0, r.stderr)
            return A, r.stdout

    def test_report_matches_driver(self):
        A, out = self.run_mode(SEED, "report")
        got = sorted(set(l for l in out.splitlines() if l.strip()))
        want = sorted(report_lines(A))
        self.assertEqual(len(want), 11)
        self.assertEqual(got, want)

    def test_patch_mode_seed_commit(self):
        A, out = self.run_mode(SEED, "patch")
        added = [l for l in out.splitlines() if l.startswith("+") and not l.startswith("+++")]
        self.assertEqual(sum(l.count("READ_ONCE(eb->blocking_writers)") for l in added), 9)
        self.assertEqual(sum(l.count("WRITE_ONCE(eb->blocking_writers, ") for l in added), 2)
        self.assertFalse([l for l in added if re.search(r"READ_ONCE\([^)]*\)\s*=[^=]", l)])
        self.assertFalse([l for l in added if "ONCE(READ_ONCE" in l or "ONCE(WRITE_ONCE" in l])
        # the owner reads stay plain
        self.assertNotIn("int blockers = READ_ONCE", out)
