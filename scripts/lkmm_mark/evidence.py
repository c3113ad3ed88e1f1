# SPDX-License-Identifier: GPL-2.0-only
"""KCSAN evidence: the races the committed `verify --kcsan` runs observed
on the pristine kernel (qemu-test/results/kcsan-*.json, run*-kcsan-*.json;
those of another kernel version in qemu-test/results/<version>/, of
another subsystem in qemu-test/results/<subsystem>/), matched
to the plan's sites by file and line.

A marked site that KCSAN saw racing is in the tier 'confirmed' (above
'paired', the racing pair the analysis shows, and 'lockset-only', the
candidates).  The series puts the patches with confirmed sites first and
quotes the report, trimmed to its title, the two accesses and their top
frames, as upstream data-race patches do.

Reads the result files only; the plan's sites get "tier": "confirmed" and
"kcsan": the report's key.  An access counts where its source line is in
the target (the plan's; the default one without).
"""
import json
import re
from pathlib import Path

from .target import default_target

RESULTS = Path(__file__).resolve().parents[2] / "qemu-test" / "results"


def results_of(tree, results=RESULTS, target=None):
    """The committed results that speak of tree's code and the target's
    subsystem: a line number of one version says nothing about another,
    and a run of another subsystem's workload saw other races.  6.1 (and
    a tree without a version) reads results/, any other version
    results/<version>/; a target other than the default one the
    subdirectory of its subsystem (results/foofs/), as `verify --target`
    writes them."""
    from .target import is_default_target, subsystem_of
    from .tree import kernel_series
    series = kernel_series(tree)
    d = Path(results) if series in (None, "6.1") else Path(results) / series
    return d if target is None or is_default_target(target) else d / subsystem_of(target)


def _loc(target):
    return re.compile(r"(%s/[\w./-]+\.[ch])$" % re.escape(target.rstrip("/")))


def _norm(path, target=None):
    """'<target>/x.c' of a path from a report (absolute build paths too)."""
    m = _loc(target or default_target()).search(path.replace("\\", "/"))
    return m.group(1) if m else None


def pristine_reports(results=RESULTS, target=None):
    """{key: report} of every distinct pristine report with an access in
    the target, keyed 'title' (the first result file, in name order, that
    has it); each report gains "run": its file (_run_name()), and "target"."""
    out = {}
    target = target or default_target()
    for f in sorted(Path(results).glob("*.json")):
        try:
            d = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        for r in d.get("pristine") or []:
            if not isinstance(r, dict) or not r.get("accesses") or r["title"] in out:
                continue
            locs = [(_norm(p, target), ln) for a in r["accesses"] for p, ln in a.get("locs", ())]
            if any(p for p, _ in locs):
                out[r["title"]] = dict(r, run=_run_name(f, results), target=target)
    return out


def _run_name(f, results):
    """The result file as the series cites it: its path under
    qemu-test/results/ (foofs/kcsan-....json), or its name when results
    is elsewhere."""
    try:
        return Path(f).resolve().relative_to(RESULTS.resolve()).as_posix()
    except ValueError:
        return Path(f).name


def by_location(reports, target=None):
    """(file, line) -> [report key] of every access of the reports in the target."""
    idx = {}
    for key, r in sorted(reports.items()):
        for a in r["accesses"]:
            for p, ln in a.get("locs", ()):
                p = _norm(p, target)
                if p:
                    idx.setdefault((p, ln), [])
                    if key not in idx[(p, ln)]:
                        idx[(p, ln)].append(key)
    return idx


def _statement_lines(tree, path, line, cache):
    """The lines of the statement that starts at path:line (it goes on
    while a parenthesis it opened is open), or just that line."""
    if path not in cache:
        try:
            cache[path] = (Path(tree) / path).read_text(errors="replace").split("\n")
        except OSError:
            cache[path] = None
    text = cache[path]
    if not text or not 0 < line <= len(text):
        return range(line, line + 1)
    depth, end = 0, line
    while end <= len(text):
        src = text[end - 1].split("//")[0]
        depth += src.count("(") - src.count(")")
        if depth <= 0 or end - line > 10:
            break
        end += 1
    return range(line, end + 1)


def _near(a, plan_at, tree, cache):
    """The struct members the plan has accesses of in the statements of
    a report's access a (each place it gives, the inlined callers'
    too) and on the code line either side."""
    out = set()
    for p, ln in a.get("locs", ()):
        p = _norm(p, plan_at[0])
        if p is None:
            continue
        lines = _statement_lines(tree, p, ln, cache) if tree is not None else [ln]
        lo, hi = lines[0] - 1, lines[-1] + 1
        text = cache.get(p) or []
        # the code line either side, past blank and comment lines
        while 0 < lo <= len(text) and lines[0] - lo < 10 and _no_code(text[lo - 1]):
            lo -= 1
        while 0 < hi <= len(text) and hi - lines[-1] < 10 and _no_code(text[hi - 1]):
            hi += 1
        for x in range(lo, hi + 1):
            out |= plan_at[1].get((p, x), set())
    return out


def _no_code(line):
    t = line.strip()
    return not t or t.startswith(("/*", "*", "//"))


def _same_field(r, s, plan_at, tree, cache):
    """Report r can be a race on site s's field: the members the plan
    has near both of its accesses (_near()) are none in common, or s's
    among them.  A KCSAN line can be a line or two off when the
    compiler merges stores under one lock (a commit's store of the
    transaction's state and its store of the running transaction,
    line after line): the member both accesses have near them is the
    one the report is about."""
    if len(r["accesses"]) < 2:
        return True
    common = _near(r["accesses"][0], plan_at, tree, cache) & \
        _near(r["accesses"][1], plan_at, tree, cache)
    return not common or (s["struct"], s["field"]) in common


def site_reports(plan, reports, tree=None):
    """{(file, line, struct, field): [report key]} of the plan's sites:
    the reports with an access at the site's line that can be about its
    field (_same_field(); statements read from the tree, when given)."""
    idx = by_location(reports, plan.get("target"))
    at = {}
    for s in plan["sites"]:
        at.setdefault((s["file"], s["line"]), set()).add((s["struct"], s["field"]))
    plan_at = (plan.get("target"), at)
    cache = {}
    out = {}
    for s in plan["sites"]:
        keys = [k for k in idx.get((s["file"], s["line"]), ())
                if _same_field(reports[k], s, plan_at, tree, cache)]
        if keys:
            out[(s["file"], s["line"], s["struct"], s["field"])] = keys
    return out


def confirm(plan, results=RESULTS, tree=None):
    """Sites of the plan that KCSAN saw racing (site_reports()): tier
    'confirmed' and the report's key; returns the reports used."""
    reports = pristine_reports(results, plan.get("target"))
    seen = site_reports(plan, reports, tree)
    used = {}
    for s in plan["sites"]:
        keys = seen.get((s["file"], s["line"], s["struct"], s["field"]))
        if not keys or s["action"] == "none" or s.get("tier") != "paired":
            continue
        s["tier"] = "confirmed"
        s["kcsan"] = keys[0]
        used[keys[0]] = reports[keys[0]]
    return used


def trimmed(r, frames=3):
    """The report as a patch quotes it: title, each access with its place
    (in the report's target) and top frames, the result file."""
    lines = ["BUG: KCSAN: %s" % r["title"], ""]
    target = (r.get("target") or default_target()).rstrip("/")
    at = re.compile(r"%s/[\w./-]+\.[ch]:\d+" % re.escape(target))
    for a in r["accesses"][:2]:
        where = a.get("where", "?")
        m = at.search(where.split(" (in ")[-1])
        lines.append("%s at %s:" % (a.get("type", "access"), m.group(0) if m else where))
        for fr in a.get("frames", [])[:frames]:
            lines.append(" %s" % fr)
        lines.append("")
    lines.append("(lkmm-mark verify --kcsan on the pristine kernel,")
    lines.append(" qemu-test/results/%s)" % r["run"])
    return "\n".join(lines)
