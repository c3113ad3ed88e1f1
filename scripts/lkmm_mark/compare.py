# SPDX-License-Identifier: GPL-2.0-only
"""compare: what became of the 6.1 findings in another kernel version.

Every site the 6.1 plan flags (test code aside) is looked up in the plan
of the other version (--against, default 6.12) by its field and its
function, since line numbers move: the accesses to struct.field that the
function of the same name makes there.  A group (field, function) is

- fixed upstream: the function now marks them (READ_ONCE(), WRITE_ONCE(),
  data_race(), an atomic op), directly or through a helper it calls whose
  body makes the marked access (an accessor such as foo_get_generation()),
  and none is
  flagged;
- partly fixed: some marked so, some still flagged;
- still flagged: the analysis of that version flags them (directly or in
  such a helper);
- plain, not flagged: accesses there, plain, with another verdict (the
  rule that most of them got is shown);
- access gone: the function makes no access to the field any more;
- function gone: no function of that name is left;
- field gone: the struct has no such field any more.

The table counts 6.1 sites and fields per class; --fields lists every
6.1 field with its classes.  Reads the two plans (cached) and the other
version's sources for the calls each function makes.
"""
import collections
import re
import types

from .target import default_target
from .tree import ensure_tree, kernel_version

CLASSES = ["fixed upstream", "partly fixed", "still flagged", "plain, not flagged",
           "access gone", "function gone", "field gone"]
MARKED = ("marked", "atomic")
_VIA = re.compile(r"in the body of (\w+)\(\)")


def _plan(kernel, args):
    from .commands import get_plan
    target = getattr(args, "target", None) or default_target()
    tree = ensure_tree(None, target, kernel)
    ns = types.SimpleNamespace(tree=None, kernel=kernel, target=target, jobs=args.jobs,
                               no_cache=False, policies=None, allow_stale_facts=False)
    return tree, get_plan(ns, tree)


def flagged_groups(plan):
    """(struct.field, function) -> the 6.1 sites flagged there."""
    out = collections.defaultdict(list)
    for s in plan["sites"]:
        if s["action"] != "none" and not s["test_code"]:
            out[("%s.%s" % (s["struct"], s["field"]), s["function"])].append(s)
    return out


class Index:
    """The other version's plan by field and function, and the calls its
    functions make."""

    def __init__(self, plan, src):
        self.by = collections.defaultdict(list)
        self.fields = set(plan["fields"])
        self.functions = set()
        self.src = src
        for s in plan["sites"]:
            if s["test_code"]:
                continue
            name = "%s.%s" % (s["struct"], s["field"])
            self.by[(name, s["function"])].append(s)
            self.fields.add(name)
            self.functions.add(s["function"])
        self.functions.update(src.by_name)

    def calls(self, fn):
        """Names fn calls (every definition of that name)."""
        out = set()
        for f in self.src.by_name.get(fn, ()):
            toks = self.src.toks[f.file]
            for k in range(f.body_start + 1, f.body_end):
                if toks[k].kind == "id" and toks[k + 1].text == "(":
                    out.add(toks[k].text)
        return out

    def _accessors(self, field, fn):
        """The helpers fn calls that only ever access field marked (an
        accessor: foo_get_generation()), when fn has no access of
        its own to field."""
        out = []
        for h in sorted(self.calls(fn)):
            hs = self.by.get((field, h), ())
            if hs and all(s["access"] in MARKED for s in hs):
                out.append(h)
        return out

    def verdicts(self, field, fn):
        """(marked, flagged, plain rules, helpers) of fn's accesses to field;
        an access the analysis reports in a helper's body ('via-accessor')
        counts as that helper's accesses to field do, and a function with
        none of its own counts the accessors it calls."""
        direct, helpers = [], set()
        for s in self.by.get((field, fn), ()):
            m = _VIA.search(s["reason"] or "") if s["rule"] == "via-accessor" else None
            if m:
                helpers.add(m.group(1))
            else:
                direct.append(s)
        if not direct and not helpers:
            helpers.update(self._accessors(field, fn))
        sites = direct + [s for h in sorted(helpers) for s in self.by.get((field, h), ())]
        marked = sum(1 for s in sites if s["access"] in MARKED)
        flagged = sum(1 for s in sites if s["access"] not in MARKED and s["action"] != "none")
        rules = [s["rule"] for s in sites if s["access"] not in MARKED and s["action"] == "none"]
        return marked, flagged, rules, helpers


def classify(idx, field, fn):
    """(class, detail) of the 6.1 group (field, fn) in the other version."""
    marked, flagged, rules, helpers = idx.verdicts(field, fn)
    via = " (through %s)" % ", ".join(h + "()" for h in sorted(helpers)) if helpers else ""
    if marked and not flagged:
        return "fixed upstream", via
    if marked:
        return "partly fixed", via
    if flagged:
        return "still flagged", via
    if rules:
        return "plain, not flagged", collections.Counter(rules).most_common(1)[0][0]
    if field not in idx.fields:
        return "field gone", ""
    if fn in idx.functions:
        return "access gone", ""
    return "function gone", ""


def compare(plan61, idx):
    """[(field, fn, 6.1 sites, class, detail)], sorted."""
    out = []
    for (field, fn), ss in sorted(flagged_groups(plan61).items()):
        c, detail = classify(idx, field, fn)
        out.append((field, fn, len(ss), c, detail))
    return out


def summary(rows, kv61, kv, flagged_new):
    per = collections.Counter()
    fields = collections.defaultdict(set)
    for field, fn, n, c, _ in rows:
        per[c] += n
        fields[c].add(field)
    total = sum(per.values())
    out = ["| %s finding, in %s | sites | fields |" % (kv61, kv), "|---|---|---|"]
    for c in CLASSES:
        out.append("| %s | %d | %d |" % (c, per[c], len(fields[c])))
    out.append("| all 6.1 flagged sites | %d | %d |" % (
        total, len({r[0] for r in rows})))
    out.append("")
    out.append("%s flags %d sites (test code aside)." % (kv, flagged_new))
    return out


def field_table(rows):
    """Per 6.1 field: its sites per class (columns CLASSES)."""
    per = collections.defaultdict(collections.Counter)
    for field, fn, n, c, _ in rows:
        per[field][c] += n
    out = ["| field | 6.1 sites | " + " | ".join(CLASSES) + " |",
           "|---|---|" + "---|" * len(CLASSES)]
    for field in sorted(per):
        cnt = per[field]
        out.append("| %s | %d | %s |" % (field, sum(cnt.values()), " | ".join(
            str(cnt[c]) if cnt[c] else "" for c in CLASSES)))
    return out


def group_lines(rows):
    return ["%s %s() [%d]: %s%s" % (field, fn, n, c, (" " + d if d.startswith(" ") else
                                                      " (%s)" % d) if d else "")
            for field, fn, n, c, d in rows]


def run(args):
    from .analysis import Source
    from . import facts as facts_mod
    t61, p61 = _plan("6.1", args)
    tree, p = _plan(args.against, args)
    src = Source(str(tree), facts_mod.source_files(str(tree), getattr(args, "target", None) or default_target()))
    rows = compare(p61, Index(p, src))
    flagged_new = sum(1 for s in p["sites"] if s["action"] != "none" and not s["test_code"])
    kv61, kv = "Linux " + kernel_version(t61), "Linux " + kernel_version(tree)
    lines = summary(rows, kv61, kv, flagged_new)
    if args.fields:
        lines += [""] + field_table(rows)
    if args.groups:
        lines += [""] + group_lines(rows)
    print("\n".join(lines))
    return 0
