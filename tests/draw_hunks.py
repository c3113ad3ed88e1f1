#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Draw a uniform random sample of the hunks of a patch series, for a hand
review of what a maintainer would read.

    python3 tests/draw_hunks.py [PATCH_DIR] --seed S --n N

PATCH_DIR defaults to patches/.  Every '@@' hunk of every numbered patch
(the cover letter has none) is a candidate, in patch order then file
order; random.Random(seed).sample() draws n of them: uniform over hunks,
the same draw for the same series and seed.  Each drawn hunk is printed
whole, with its number in the draw, its patch and file.
"""
import argparse
import random
import sys
from pathlib import Path


def hunks(pdir):
    """[(patch name, file, hunk text)] of the series in pdir."""
    out = []
    for p in sorted(Path(pdir).glob("[0-9][0-9][0-9][0-9]-*.patch")):
        if p.name.startswith("0000-"):
            continue
        cur_file, cur = None, None
        for ln in p.read_text().splitlines():
            if ln.startswith("diff --git "):
                if cur:
                    out.append((p.name, cur_file, "\n".join(cur)))
                cur_file, cur = ln.split(" b/", 1)[-1], None
            elif ln.startswith("@@"):
                if cur:
                    out.append((p.name, cur_file, "\n".join(cur)))
                cur = [ln]
            elif cur is not None:
                if ln.startswith("-- ") or ln == "--":
                    out.append((p.name, cur_file, "\n".join(cur)))
                    cur = None
                else:
                    cur.append(ln)
        if cur:
            out.append((p.name, cur_file, "\n".join(cur)))
    return out


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pdir", nargs="?", default=str(Path(__file__).resolve().parent.parent /
                                                   "patches"))
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--n", type=int, required=True)
    args = ap.parse_args(argv)
    hs = hunks(args.pdir)
    if args.n > len(hs):
        print("draw_hunks: only %d hunks" % len(hs), file=sys.stderr)
        return 2
    drawn = random.Random(args.seed).sample(range(len(hs)), args.n)
    print("# %d of %d hunks, seed %d" % (args.n, len(hs), args.seed))
    for i, k in enumerate(drawn, 1):
        name, f, text = hs[k]
        print("\n## hunk %d: %s, %s\n%s" % (i, name, f, text))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
