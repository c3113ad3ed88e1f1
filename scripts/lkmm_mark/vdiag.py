# SPDX-License-Identifier: GPL-2.0-only
"""Compiler and sparse diagnostics of a build log, normalised so that the
pristine and the patched tree's logs compare: 'file: kind: message', the
file relative to the tree, line numbers dropped, sparse's continuation lines
('   expected ...', '   got ...') appended.

Standalone: python3 -m lkmm_mark.vdiag [--only DIR/] LOG [NEWER_LOG]
prints the diagnostics of LOG, or with two logs those NEWER_LOG adds.
"""
import argparse
import collections
import re
import sys

WARN_RE = re.compile(r"^(?P<file>[^\s:]+):(?P<line>\d+):(?:(?P<col>\d+):)?\s*"
                     r"(?P<kind>warning|error):\s*(?P<msg>.*)$")


def norm_path(p):
    p = p.strip()
    while p.startswith("../"):
        p = p[3:]
    m = re.search(r"/(?:pristine|patched)/(?!o-)(.*)$", p)
    if m and p.startswith("/"):
        p = m.group(1)
    return p


def parse_diagnostics(text, only_prefix=None):
    """Normalised diagnostics: 'file: kind: message[ | continuation...]'."""
    out = []
    cur = None
    for line in text.splitlines():
        m = WARN_RE.match(line)
        if m:
            if cur:
                out.append(cur)
            f = norm_path(m.group("file"))
            msg = re.sub(r"\s+", " ", m.group("msg").strip())
            cur = None
            if only_prefix and not f.startswith(only_prefix):
                continue
            cur = "%s: %s: %s" % (f, m.group("kind"), msg)
        elif cur and re.match(r"^\s{3,}\S", line) and not re.match(r"^\s+\d+ \|", line) \
                and "|" not in line[:12]:
            # sparse continuation ("   expected ...", "   got ...")
            cur += " | " + re.sub(r"\s+", " ", line.strip())
        else:
            if cur:
                out.append(cur)
            cur = None
    if cur:
        out.append(cur)
    return sorted(out)


def new_items(before, after):
    c = collections.Counter(after)
    c.subtract(collections.Counter(before))
    return sorted(k for k, v in c.items() for _ in range(max(v, 0)))


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m lkmm_mark.vdiag", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", metavar="PREFIX", help="only files under PREFIX (e.g. fs/foofs/)")
    ap.add_argument("log")
    ap.add_argument("newer", nargs="?")
    args = ap.parse_args(argv)

    def read(p):
        with open(p, errors="replace") as f:
            return parse_diagnostics(f.read(), args.only)
    a = read(args.log)
    out = new_items(a, read(args.newer)) if args.newer else a
    for d in out:
        print(d)
    return 1 if args.newer and out else 0


if __name__ == "__main__":
    sys.exit(main())
