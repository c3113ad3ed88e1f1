#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Draw a uniform random sample of the flagged sites of a plan, for a hand
review of precision.

    python3 tests/draw_sample.py PLAN.json --seed S --n N [--tier T]

PLAN.json is `scripts/lkmm-mark plan --json PLAN.json`.  Flagged: every
site outside the target's tests whose action is a mark (READ_ONCE,
WRITE_ONCE, data_race), optionally only those of one tier.  The sites are
sorted by (file, line, column) and drawn with random.Random(seed).sample():
uniform over sites, not one per field, the same draw for the same plan and
seed.  One line per drawn site: its number in the draw, the report line.
"""
import argparse
import json
import random
import sys


def flagged(plan, tier=None):
    out = [s for s in plan["sites"] if s["action"] != "none" and not s["test_code"]
           and (tier is None or s.get("tier") == tier)]
    return sorted(out, key=lambda s: (s["file"], s["line"], s["column"]))


def line(s):
    return "%s:%d:%d-%d: %s: %s (%s)" % (s["file"], s["line"], s["column"], s["end_column"],
                                         s["action"], s["reason"], s["rule"])


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("plan")
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--n", type=int, required=True)
    ap.add_argument("--tier", default=None)
    args = ap.parse_args(argv)
    with open(args.plan) as f:
        plan = json.load(f)
    sites = flagged(plan, args.tier)
    if args.n > len(sites):
        print("draw_sample: only %d flagged sites" % len(sites), file=sys.stderr)
        return 2
    drawn = random.Random(args.seed).sample(range(len(sites)), args.n)
    print("# %d of %d flagged sites, seed %d" % (args.n, len(sites), args.seed))
    for i, k in enumerate(drawn, 1):
        print("%d\t%s" % (i, line(sites[k])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
