# SPDX-License-Identifier: GPL-2.0-only
"""Whether a KCSAN data race involves what the series marks.

series_changes() reads what the series changes from the two trees on disk
(the lines it rewrites, the fields it wraps in READ_ONCE/WRITE_ONCE/
data_race, with an analysis plan the struct.fields of those sites);
involvement() says why a distinct race (kcsan.summarise_kcsan) touches them.
The analysis plan comes from the caller (plan_loader): this stage does not
run the analysis itself.

Standalone: python3 -m lkmm_mark.involve PATCH...
prints the field names and functions the patches mark.
"""
import argparse
import re
import subprocess
import sys
from pathlib import Path

from .base import UserError, log
from .kcsan import FIELD_RE
from .target import verify_spec
from .vtrees import patched_files


def _marked_arg(line, m):
    """The argument of the READ_ONCE/WRITE_ONCE/data_race( at match m."""
    depth, arg = 1, ""
    for ch in line[m.end():]:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                break
        elif ch == "," and depth == 1 and m.group(1) == "WRITE_ONCE":
            break
        arg += ch
    return arg


def marked_fields(patches):
    """Field names the series wraps in READ_ONCE/WRITE_ONCE/data_race, per function."""
    fields = set()
    funcs = set()
    for p in patches:
        fn = None
        for line in p.read_text(errors="replace").splitlines():
            if line.startswith("@@"):
                m = re.search(r"@@[^@]*@@.*?(\w+)\s*\(", line)
                fn = m.group(1) if m else None
            elif line.startswith("+") and not line.startswith("+++"):
                for m in re.finditer(r"(READ_ONCE|WRITE_ONCE|data_race)\s*\(", line):
                    arg = _marked_arg(line, m)
                    names = FIELD_RE.findall(arg)
                    if names:
                        fields.add(names[-1])
                    elif re.fullmatch(r"\s*\w+\s*", arg):
                        fields.add(arg.strip())
                    if fn:
                        funcs.add(fn)
    return fields, funcs


def series_changes(pristine, patched, patches, plan_tree=None, plan_loader=None):
    """What the series changes, from the two trees on disk (the whole series at once).

    Returns dict(old={file: {line}}, new={file: {line}}, fields={name}, funcs={name}):
    the pristine lines the series removes or rewrites, the patched lines it adds,
    the field names it wraps in READ_ONCE/WRITE_ONCE/data_race (marked_fields)
    and the functions its hunks are in; with plan_tree (the base tree the
    series is for), also the struct.fields of its accesses and of the marked
    ones, from that tree's analysis plan (plan_loader(tree))."""
    old, new, hunks = {}, {}, {}
    files = sorted({f for p in patches for f in patched_files(p)})
    for f in files:
        a, b = Path(pristine) / f, Path(patched) / f
        if not a.exists() or not b.exists():
            continue
        r = subprocess.run(["diff", "-U0", str(a), str(b)], capture_output=True, text=True)
        for m in re.finditer(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@", r.stdout, re.M):
            o0, on = int(m.group(1)), int(m.group(2) or 1)
            n0, nn = int(m.group(3)), int(m.group(4) or 1)
            old.setdefault(f, set()).update(range(o0, o0 + on))
            new.setdefault(f, set()).update(range(n0, n0 + nn))
            hunks.setdefault(f, []).append((o0, on, n0, nn))
    fields, funcs = marked_fields(patches)
    at, marked_sf = plan_fields(plan_tree, old, plan_loader) if plan_tree is not None \
        else ({}, None)
    return dict(old=old, new=new, fields=fields, funcs=funcs, hunks=hunks, at=at,
                marked_sf=marked_sf)


def plan_fields(tree, old, plan_loader):
    """From the analysis plan of the pristine tree: (file, line) -> the
    struct.field names of the accesses on that line, and the struct.fields
    the series marks (flagged sites on the lines it changes).  ({}, None)
    when there is no plan (the report then matches field names only)."""
    if plan_loader is None:
        log("no analysis plan for the KCSAN mapping (no plan loader given): "
            "matching field names only")
        return {}, None
    try:
        d = plan_loader(Path(tree))
    except (UserError, OSError) as e:
        log("no analysis plan for the KCSAN mapping (%s): matching field names only" % e)
        return {}, None
    at, marked = {}, set()
    for x in d["sites"]:
        sf = "%s.%s" % (x["struct"], x["field"])
        at.setdefault((x["file"], x["line"]), set()).add(sf)
        if x["action"] != "none" and x["line"] in old.get(x["file"], ()):
            marked.add(sf)
    return at, marked


def norm(f):
    """<target>/x.c from the paths faddr2line prints (o-kcsan/../<target>/x.c)."""
    i = f.find(verify_spec().target + "/")
    return f[i:] if i >= 0 else f


def to_old(hunks, n):
    """The pristine line of line n of a patched file (diff -U0 hunks)."""
    off = 0
    for o0, on, n0, nn in hunks:
        # a count of 0 (pure insertion or deletion) puts the start on the
        # line before the change
        nnext = n0 + nn if nn else n0 + 1
        if n < (n0 if nn else n0 + 1):
            break
        if n < nnext:
            return o0 + min(n - n0, max(on - 1, 0)) if on else o0
        off = (o0 + on if on else o0 + 1) - nnext
    return n + off


# lines around a KCSAN access line searched for the raced field when the
# two access lines name different fields
FIELD_WINDOW = 5


def access_fields(a, changes, side, window=0):
    """The struct.fields of the plan's sites on the access's innermost line
    (or the line it is inlined into), or within `window` lines of it;
    empty without a plan."""
    if changes.get("marked_sf") is None:
        return set()
    for f, n in a.get("locs", [])[:2]:
        f = norm(f)
        o = n if side == "old" else to_old(changes.get("hunks", {}).get(f, []), n)
        sf = set()
        for x in range(o - window, o + window + 1):
            sf |= changes["at"].get((f, x), set())
        if sf:
            return sf
    return set()


def _nearby(d, changes, side, known):
    """Both sides of one data race access one field: when the lines KCSAN
    gives name disjoint fields, one of them is off (a store attributed to
    the next statement, a load in a loop body put on the loop head); the
    field both sides have within a few lines is the one that raced."""
    near = [access_fields(a, changes, side, window=FIELD_WINDOW) for a in d["accesses"]]
    kn = [x for x in near if x]
    common = set.intersection(*kn) if len(kn) >= 2 else set()
    if not common:
        d["field_mismatch"] = " vs ".join(",".join(sorted(x)) for x in known)
        return []
    d["field_window"] = ",".join(sorted(common))
    hit = common & changes["marked_sf"]
    return ["field %s (marked by the series), the field both access lines have within "
            "%d lines" % (",".join(sorted(hit)), FIELD_WINDOW)] if hit else []


def involvement(d, changes, side):
    """Why a distinct report involves what the series marks ([] if it does not).

    side is "old" for reports from the pristine kernel (pristine line numbers),
    "new" for the patched kernel.  A report is involved when one of its access
    sites (the innermost source line or a line it is inlined into) is a line the
    series changes, or when a field named on an access's innermost line is one
    the series marks."""
    why = []
    lines = changes[side]
    sfs = [access_fields(a, changes, side) for a in d["accesses"]]
    known = [x for x in sfs if x]
    common = set.intersection(*known) if len(known) >= 2 else None
    d.pop("field_mismatch", None)
    d.pop("field_window", None)
    if common is not None and not common:
        return _nearby(d, changes, side, known)
    for a, sf in zip(d["accesses"], sfs):
        for f, n in a.get("locs", []):
            f = norm(f)
            if n in lines.get(f, ()):
                why.append("site %s:%d changed by the series" % (f, n))
                break
        # the struct.field of the access, from the plan's sites on its line
        # (or the line it is inlined into): a field of another struct with
        # the same name is not involved; of the fields on both lines, the
        # ones they share
        if sf and common:
            sf = sf & common
        if sf:
            hit = sorted(sf & changes["marked_sf"])
            if hit:
                why.append("field %s (marked by the series) at %s" % (",".join(hit),
                                                                      norm(a["where"])))
        else:
            hit = sorted(set(a.get("fields", [])) & changes["fields"])
            if hit:
                why.append("field named %s (marked by the series in some struct) at %s"
                           % (",".join(hit), norm(a["where"])))
    return why


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m lkmm_mark.involve", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("patches", nargs="+", metavar="PATCH")
    args = ap.parse_args(argv)
    fields, funcs = marked_fields([Path(p) for p in args.patches])
    print("fields (%d): %s" % (len(fields), " ".join(sorted(fields))))
    print("functions (%d): %s" % (len(funcs), " ".join(sorted(funcs))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
