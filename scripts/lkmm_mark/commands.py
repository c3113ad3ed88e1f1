# SPDX-License-Identifier: GPL-2.0-only
"""Sub-commands: facts, report, plan, bench (series and rewrite live in series.py)."""
import json
import os
import sys
import time

from . import facts as facts_mod
from . import policy as policy_mod
from .analysis import Analysis
from .tree import ensure_tree, UserError, require_tools


def analyse(args, tree=None, check_tree=True):
    require_tools("spatch")
    P = policy_mod.load(args.policies)
    if tree is None:
        tree = ensure_tree(args.tree, args.target) if check_tree else args.tree
    recs, cached = facts_mod.run(str(tree), args.target, args.jobs, not args.no_cache)
    files = facts_mod.source_files(str(tree), args.target)
    A = Analysis(str(tree), args.target, recs, P, files).run()
    A.cached = cached
    return A


def report_lines(A, include_all=False, tests=False):
    out = []
    for a in A.accesses:
        if a.test != tests:
            continue
        if a.action == "none" and not include_all:
            continue
        out.append("%s:%d:%d-%d: %s: %s (%s)" % (a.file, a.line, a.col, a.ecol,
                                                a.action, a.reason, a.rule))
    return out


def cmd_facts(args):
    tree = ensure_tree(args.tree, args.target)
    recs, cached = facts_mod.run(str(tree), args.target, args.jobs, not args.no_cache)
    with open(args.out, "w") as f:
        json.dump(recs, f, indent=0)
    print("%d facts%s -> %s" % (len(recs), " (cached)" if cached else "", args.out))
    return 0


def cmd_report(args):
    A = analyse(args)
    lines = report_lines(A, args.all, tests=False)
    for l in lines:
        print(l)
    tl = report_lines(A, args.all, tests=True)
    counts = {}
    for a in A.accesses:
        if not a.test and a.action != "none":
            counts[a.action] = counts.get(a.action, 0) + 1
    print("# %d sites need a mark: %s" % (len(lines), ", ".join(
        "%s %d" % kv for kv in sorted(counts.items()))))
    if tl:
        print("# test code (%s/tests), reported separately:" % args.target)
        for l in tl:
            print(l)
    print("# functions not analysed (spatch could not parse them): %d" % len(A.not_analysed))
    for f, line, name in A.not_analysed:
        print("%s:%d: %s()" % (f, line, name))
    return 0


def plan_dict(A):
    sites = [a.as_dict() for a in A.accesses]
    annotate_rewrite(A.tree, sites)
    fields = {}
    for k, v in sorted(A.fields.items()):
        d = dict(v)
        ls = d.pop("lock_site", None)
        d["lock_site"] = ls.where() if ls else None
        d["owner"] = v["owner"]["reason"] if v.get("owner") else None
        d["marked"] = ["%s() at %s" % (m.fn, m.where()) for m in v.get("marked", [])]
        d["handler"] = v["handler"]["reason"] if v.get("handler") else None
        fields[k] = d
    return {"target": A.target, "sites": sites, "fields": fields,
            "not_analysed": [{"file": f, "line": l, "function": n} for f, l, n in A.not_analysed]}


def annotate_rewrite(tree, sites):
    """Each planned site gets "rewrite": null when the rewrite (series and
    cocci patch mode) handles it, or why it is left for a human (a store
    inside an expression, a BUG_ON() line, a line that would pass 100
    columns); "nested": true marks a load whose base is itself rewritten
    (READ_ONCE(READ_ONCE(a->b)->c)), which only the series rewriter does."""
    from . import rewrite, series
    planned = series.select_sites({"sites": sites})
    byf = {}
    for s in planned:
        byf.setdefault(s["file"], []).append(s)
    why = {}
    nested = set()
    comments = series.load_comments()
    for f, ss in byf.items():
        try:
            with open(os.path.join(tree, f), encoding="utf-8", errors="surrogateescape") as fh:
                src = fh.read()
        except OSError:
            continue
        E, app, sk = rewrite.plan_file_edits(src, ss, comments)
        why.update(sk)
        nested.update(rewrite.nested_outer(E, app))
    for s in sites:
        if s["action"] != "none":
            k = (s["file"], s["line"], s["column"])
            s["rewrite"] = why.get(k)
            if k in nested:
                s["nested"] = True


def cmd_plan(args):
    A = analyse(args)
    d = plan_dict(A)
    with open(args.json, "w") as f:
        json.dump(d, f, indent=1, sort_keys=True)
        f.write("\n")
    n = sum(1 for s in d["sites"] if s["action"] != "none" and not s["test_code"])
    print("%d verdicts, %d need a mark -> %s" % (len(d["sites"]), n, args.json))
    return 0


def cmd_bench(args):
    from .bench import run
    return run(args)


def cmd_series(args):
    from .series import cmd_series as f
    return f(args)


def cmd_rewrite(args):
    from .series import cmd_rewrite as f
    return f(args)
