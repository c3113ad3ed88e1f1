# SPDX-License-Identifier: GPL-2.0-only
"""Stage 5b: the words of the series: each patch's subject and message,
and the cover letter.

A message says, in short sentences, which field the patch is about, who
stores it under which lock, who loads it without the lock, where, and in
which contexts they run (the racing pair of pairs.py), then what the
patch does.  Where a committed `verify --kcsan` run saw one of its races
on the pristine kernel (evidence.py), the message quotes that report,
trimmed as upstream patches do.  Then the rules applied and the sites by
function, for the reviewer who checks each hunk.

Reads the plan and the groups series.py made; returns text.
"""
import collections
import textwrap

from .evidence import site_reports, trimmed
from .races import PHASE_TAG
from .target import seed_citation, subsystem_of

ARTICLE = ('"Calibrating your fear of big bad optimizing compilers" (LWN, '
           '2019-10-11, https://lwn.net/Articles/799218/)')
# Cited by title and short id (policies/policies.json's "seed"); checkpatch's
# "commit <id>" check needs a git tree that has the commit, which the Debian
# source package is not.
SEED = seed_citation()
RULE_ORDER = ["locked-write", "unlocked-write", "unlocked-read", "racing-locked-read",
              "locked-read", "refetch-after-lock", "diagnostic-read", "owner-read"]
ACTION_ORDER = ["READ_ONCE", "WRITE_ONCE", "data_race"]
TIERS = ["confirmed", "paired"]


def wrap(text, width=72, indent=""):
    return textwrap.fill(text, width=width, subsequent_indent=indent,
                         break_long_words=False, break_on_hyphens=False)


def plural(n, w):
    return "%d %s%s" % (n, w, "" if n == 1 else ("es" if w.endswith("ss") else "s"))


def short(f, target):
    """A file of the target relative to it."""
    t = target.rstrip("/") + "/"
    return f[len(t):] if f.startswith(t) else f


def tier_of(g):
    """The best tier of a group's sites."""
    tiers = {s.get("tier") for s in g["sites"]}
    return next((t for t in TIERS if t in tiers), "paired")


# ---------------------------------------------------------------- subject

def subject(g, target):
    st, sub = g["struct"], subsystem_of(target)
    if g.get("parts"):
        cands = ["%s: annotate data races around %s fields" % (sub, st),
                 "%s: annotate racy accesses to %s" % (sub, st)]
    else:
        names = [n.split(".", 1)[1] for n in g["fields"]]
        one = "%s::%s" % (st, names[0]) if len(names) == 1 else \
            "%s::{%s}" % (st, ",".join(names))
        cands = ["%s: annotate data races around %s" % (sub, one),
                 "%s: annotate racy accesses to %s" % (sub, one),
                 "%s: annotate data races around %s fields" % (sub, st),
                 "%s: annotate racy %s fields" % (sub, st)]
    for c in cands:
        if len(c) <= 75:
            return c
    return cands[-1][:75]


# ---------------------------------------------------------------- message

def message(g, plan, texts, reports, extra=None, left=(), seen=None):
    """extra: a paragraph after what the patch does (the accessor style's);
    left: the (file, line, column) of the planned sites the series leaves
    for a human."""
    paras = [pair_paragraph(g, f, reports, plan["target"]) for f in g["fields"]]
    paras = [p for p in paras if p]
    paras.append(wrap(what_it_does(g, plan)))
    if extra:
        paras.append(extra)
    quoted = kcsan_quotes(g, reports)
    if quoted:
        paras.append("KCSAN saw %s on the pristine kernel:\n\n%s" % (
            "this race" if len(quoted) == 1 else "these races", "\n\n".join(quoted)))
    paras += other_races(g, plan, reports, {s["kcsan"] for s in g["sites"] if s.get("kcsan")},
                         left, seen)
    if g.get("parts"):
        paras.append(wrap("The fields are in one patch because they share lines "
                          "that get a data_race() (checkpatch wants its comment "
                          "right above the line)."))
    paras.append(rules_paragraph(g, plan, texts))
    paras.append(pairs_paragraph(g))
    paras.append(sites_paragraph(g, plan["target"]))
    return "\n\n".join(paras)


def _who(s, held_ok=True):
    locks = [h.split(" (", 1)[0] for h in s.get("locks_held", ())]
    locks = [x[:-2] if x.endswith(":r") else x for x in locks
             if "{" not in x and x != "irqs-off" and not x.startswith("?")]
    return "under %s" % locks[0].replace(".", "::") if locks else "without a lock"


def _representative(sites, field):
    """The site whose pair the message states: a confirmed one first,
    then a load whose counterpart is a store."""
    mine = [s for s in sites if "%s.%s" % (s["struct"], s["field"]) == field and
            s.get("counterpart") and s["rule"] != "owner-read"]
    mine.sort(key=lambda s: (s.get("tier") != "confirmed", s["access"] not in ("read",),
                             s["file"], s["line"]))
    return mine[0] if mine else None


def pair_paragraph(g, field, reports, target):
    s = _representative(g["sites"], field)
    if s is None:
        return None
    c = dict(s["counterpart"], contexts=None)
    ctx = s.get("contexts") or ["?", "?"]
    other = _kcsan_other(s, reports, g["sites"])
    if other is not None:
        # the pair KCSAN saw, when its other access is a site of the patch
        c = {"function": other["function"], "file": other["file"], "line": other["line"],
             "access": other["access"]}
        ctx = [ctx[0], (other.get("contexts") or ["?"])[0]]
    name = field.replace(".", "::")
    here = "%s() at %s:%d" % (s["function"], short(s["file"], target), s["line"])
    there = "%s() at %s:%d" % (c["function"], short(c["file"], target), c["line"])
    verb = {"read": "loads", "write": "stores", "rmw": "updates"}
    if s["access"] == "read":
        text = "%s is changed by %s while %s loads it %s. The two run at the same " \
            "time: the load in %s, the store in %s." % (
                name, there, here, _who(s), ctx[0], ctx[1])
    else:
        text = "%s %s %s %s, while %s %s it. The two run at the same time: this " \
            "in %s, that in %s." % (here, verb.get(s["access"], "stores"), name, _who(s),
                                    there, verb.get(c["access"], "loads"), ctx[0], ctx[1])
    return wrap(text)


def _kcsan_other(s, reports, sites):
    """The site of the patch at the other access of the KCSAN report that
    confirms s, or None."""
    r = reports.get(s.get("kcsan") or "")
    if r is None:
        return None
    for a in r["accesses"]:
        for p, ln in a.get("locs", ()):
            for x in sites:
                if x is not s and x["line"] == ln and p.endswith(x["file"]) and \
                        x["field"] == s["field"] and x["line"] != s["line"]:
                    return x
    return None


def what_it_does(g, plan):
    acts = collections.Counter(s["action"] for s in g["sites"] if s["rule"] != "owner-read")
    parts = []
    for a, what, tail in (("READ_ONCE", "racy load", ""), ("WRITE_ONCE", "store", ""),
                          ("data_race", "load", " used only in a diagnostic")):
        if acts[a]:
            n = acts[a]
            if n > 1 and tail:
                tail = " used only in diagnostics"
            parts.append("the %s%s with %s()" % (plural(n, what) if n > 1 else what, tail, a))
    plain = sum(1 for s in plan["sites"] if not s["test_code"] and s["rule"] == "locked-read"
                and "%s.%s" % (s["struct"], s["field"]) in g["fields"])
    text = "Mark " + ", ".join(parts[:-1]) + (" and " if len(parts) > 1 else "") + \
        parts[-1] + "." if parts else "Mark the racy accesses."
    if plain:
        text += " The %s under the lock every store holds %s plain." % (
            plural(plain, "load") if plain > 1 else "load", "stay" if plain > 1 else "stays")
    return text


def kcsan_quotes(g, reports):
    keys = []
    for s in g["sites"]:
        k = s.get("kcsan")
        if k and k in reports and k not in keys:
            keys.append(k)
    return [trimmed(reports[k]) for k in keys]


def other_races(g, plan, reports, quoted, left=(), seen=None):
    """The other races KCSAN saw on the pristine kernel at a site of one of
    the patch's fields, so that every race seen on a marked field is in its
    patch: one at a read-modify-write no mark fixes (a lost update: it
    needs the lock every other store holds, and the cover letter lists
    it), quoted and said to be left alone; the rest listed by title, with
    the site and what the patch does there.  quoted: the report keys the
    message quotes already (it gains those quoted here); left: as for
    message(); seen: evidence.site_reports() of the plan (computed
    without the tree's statements when not given)."""
    fields = set(g["fields"])
    at = {}
    for s in plan["sites"]:
        if "%s.%s" % (s["struct"], s["field"]) in fields and not s["test_code"]:
            at.setdefault((s["file"], s["line"]), []).append(s)
    if seen is None:
        seen = site_reports(plan, reports)
    found = sorted((s["rule"] != "lost-update", loc, i, k)
                   for loc, sites in at.items() for i, s in enumerate(sites)
                   for k in seen.get(loc + (s["struct"], s["field"]), ()))
    out, listed = [], []
    for _, loc, i, k in found:
        if k in quoted:
            continue
        quoted.add(k)
        s = at[loc][i]
        where = "%s:%d" % (short(loc[0], plan["target"]), loc[1])
        if s["rule"] == "lost-update":
            out.append(wrap(
                "KCSAN also saw a race at the read-modify-write of %s in %s() at %s. It "
                "is a lost update, which no mark fixes: it needs the lock the other "
                "stores hold, and the cover letter lists it. This patch leaves it as "
                "it is." % (s["field"], s["function"], where)) + "\n\n" + trimmed(reports[k]))
        else:
            listed.append(wrap("- %s: %s() at %s, %s." % (
                k, s["function"], where, _done_there(s, g, left, plan["target"])),
                indent="  "))
    if listed:
        out.append("KCSAN reported %s on %s on the pristine kernel:\n\n%s" % (
            "another race" if len(listed) == 1 else "%d more races" % len(listed),
            "this field" if len(fields) == 1 else "these fields", "\n".join(listed)))
    return out


def _done_there(s, g, left, target):
    """What the patch does at a plan site s of one of its fields."""
    if any((x["file"], x["line"], x["field"]) == (s["file"], s["line"], s["field"])
           for x in g["sites"]):
        return "marked here"
    v = s.get("via") or {}
    if s["rule"] == "via-accessor" and v:
        return "through %s() (%s:%d), %s" % (
            v["call"], short(v["file"], target), v["line"],
            "whose body the cover letter leaves for a human to mark"
            if (v["file"], v["line"], v["column"]) in left else "marked in the series")
    if s["rule"] == "already-marked":
        return "marked already"
    return "left plain by this series (%s)" % s["rule"]


def rules_paragraph(g, plan, texts):
    cnt = collections.Counter(s["rule"] for s in g["sites"])
    lines = []
    for r in RULE_ORDER:
        if r == "locked-read" or not cnt[r]:
            continue
        if r == "owner-read":
            lines.append("- owner-thread read: %s left plain, with a comment"
                         % plural(cnt[r], "read"))
            continue
        t = "read only for a diagnostic uses data_race()" if r == "diagnostic-read" \
            else texts.get(r, r)
        lines.append("- %s (%s)" % (t, plural(cnt[r], "site")))
    mine = [s for s in plan["sites"] if not s["test_code"] and s["action"] == "none" and
            "%s.%s" % (s["struct"], s["field"]) in g["fields"]]
    owner = sum(1 for s in mine if s["rule"] == "owner-read") - cnt["owner-read"]
    phase = sum(1 for s in mine if PHASE_TAG in (s.get("reason") or ""))
    if owner > 0:
        lines.append("- read by the task that owns the field (declared in lkmm-mark's "
                     "policies/ 'owners'): %s left plain" % plural(owner, "read"))
    if phase:
        lines.append("- ordered with every conflicting access by the object's life cycle "
                     "(declared in lkmm-mark's policies/ 'phases'): %s left plain"
                     % plural(phase, "access"))
    return wrap("The marks follow the access-marking policies of %s and the "
                "locked/unlocked rules of %s:" % (ARTICLE, SEED)) + "\n\n" + \
        "\n".join(wrap(line, indent="  ") for line in lines)


def pairs_paragraph(g, most=6):
    """The distinct racing pairs of the patch, one line each."""
    seen = []
    for s in g["sites"]:
        c = s.get("counterpart")
        if not c or s["rule"] == "owner-read":
            continue
        k = ("%s()" % s["function"], "%s()" % c["function"])
        if k not in seen:
            seen.append(k)
    lines = [("  %s against %s" if len(k[0]) + len(k[1]) < 62 else "  %s\n    against %s")
             % k for k in seen[:most]]
    if len(seen) > most:
        lines.append("  and %d more" % (len(seen) - most))
    return "Racing pairs (site against counterpart; lkmm-mark's plan has one for\n" \
        "every hunk):\n\n" + "\n".join(lines)


def sites_paragraph(g, target):
    per_fn = collections.OrderedDict()
    for s in g["sites"]:
        k = (short(s["file"], target), s["function"])
        per_fn.setdefault(k, collections.Counter())[
            "owner read, plain" if s["rule"] == "owner-read" else s["rule"]] += 1
    sl = []
    for (f, fn), c in per_fn.items():
        what = ", ".join("%s%s" % (r, " x%d" % n if n > 1 else "") for r, n in
                         sorted(c.items(), key=lambda x: RULE_ORDER.index(x[0])
                                if x[0] in RULE_ORDER else 99))
        sl.append(wrap("%s %s(): %s" % (f, fn, what), indent="    "))
    return "Sites, by function:\n\n" + "\n".join(sl)


# ----------------------------------------------------------- cover letter

def cover_text(plan, groups, skipped, cps, base, texts, extra=None, series_line=None):
    """extra: a paragraph after the counts, series_line: the command that
    writes the series (the accessor style's)."""
    return "\n\n".join(cover_intro(plan, groups, base) + [cover_counts(groups, texts)] +
                       ([extra] if extra else []) + cover_leftovers(plan, skipped, cps) + [
        "Reproduce with lkmm-mark:\n" +
        (series_line or "  scripts/lkmm-mark series        # writes patches/") + "\n"
        "  scripts/lkmm-mark report        # the same sites, one line each\n"
        "  scripts/lkmm-mark plan --json plan.json   # every verdict, why"])


def cover_intro(plan, groups, base):
    tiers = collections.Counter(tier_of(g) for g in groups)
    cand = sum(1 for s in plan["sites"] if s["rule"] == "lockset-only" and not s["test_code"])
    return [
        wrap("This series marks the plain accesses to shared fields of %s "
             "that race, as the access-marking policies of the Linux kernel memory "
             "model ask (%s), following the locked/unlocked rules of %s."
             % (plan["target"], ARTICLE, SEED)),
        "Base: %s, %s.\nThe patches apply with git am, in order." % (base, plan["target"]),
        wrap("Each patch covers one field, or the fields of one struct protected by "
             "the same lock, and names the racing pair behind each kind of hunk: a "
             "store and a load (or two stores) of the field that can run at the "
             "same time, with their functions and contexts, computed from the "
             "code: the locks and pseudo-locks held at each access and by every "
             "caller, and the declared protocols (exclusive operations, the "
             "transaction's writers, state guards, life-cycle orders). A site "
             "whose only evidence is a lockset is not in the series."),
        wrap("Tiers: %d patches are confirmed (KCSAN saw one of their races on the "
             "pristine kernel; their messages quote the report), %d are paired (the "
             "analysis shows a racing pair). They come in that order, so the head "
             "of the series can be taken alone. %d lockset-only candidates are left "
             "out (lkmm-mark report --tier lockset-only)." % (
                 tiers["confirmed"], tiers["paired"], cand)),
        wrap("Review every hunk: the analysis has known false-positive classes "
             "(protocols it has no fact for, paths it cannot tell apart, different "
             "objects of one type); lkmm-mark's hand review lists them.")]


def cover_counts(groups, texts):
    acts = collections.Counter()
    rules = collections.Counter()
    for g in groups:
        for s in g["sites"]:
            if s["rule"] != "owner-read":
                acts[s["action"]] += 1
                rules[s["rule"]] += 1
    tl = ["%d patches, %d sites:" % (len(groups), sum(acts.values()))]
    tl += ["  %-11s %d" % (a, acts[a]) for a in ACTION_ORDER if acts[a]]
    tl += ["", "Per rule:"]
    tl += [wrap("  %-19s %4d  %s" % (r, rules[r], texts.get(r, "")), indent=" " * 27)
           for r in RULE_ORDER if rules[r]]
    return "\n".join(tl)


def cover_leftovers(plan, skipped, cps):
    """What the series leaves to a human, and checkpatch's remarks."""
    paras, t = [], plan["target"]
    lost = sorted((x["file"], x["line"], x["column"], x["struct"], x["field"])
                  for x in plan["sites"] if x["rule"] == "lost-update" and not x["test_code"])
    if lost:
        paras.append(wrap(
            "Not in the series, for a human: read-modify-writes made without "
            "the lock that every other write of the field holds. An update "
            "made beside one under the lock is lost; that needs the lock, "
            "READ_ONCE()/WRITE_ONCE() would not fix it:") + "\n" + "\n".join(
            "  %s:%d:%d %s.%s" % (short(f, t), ln, c, st, fl) for f, ln, c, st, fl in lost))
    paras += _other_bugs(plan, t)
    na = plan.get("not_analysed", [])
    if na:
        paras.append("Functions not analysed:\n" + "\n".join(
            wrap("  %s:%d %s(): %s" % (short(x["file"], t), x["line"], x["function"],
                                       x.get("reason", "?")), indent="    ") for x in na))
    if skipped:
        paras.append("Planned sites not rewritten (left for a human):\n" + "\n".join(
            wrap("  %s:%d:%d: %s" % (short(k[0], t), k[1], k[2], why), indent="    ")
            for k, why in sorted(skipped.items())))
    if cps:
        paras.append(_checkpatch_summary(cps))
    return paras


_OTHER_BUGS = (
    ("double_fetches", "double fetches: a racy field tested, then loaded again in "
     "the code the test guards, so that a store between the loads makes the code use "
     "a value its test did not check; READ_ONCE() on each load would not make them "
     "equal. Fix: load once into a local, and test and use the local:",
     "tested here and loaded again at", "stored by"),
    ("two_step_stores", "two-step stores: a racy field stored, then stored again "
     "from its own value, so that a lockless reader can see the value in between; "
     "WRITE_ONCE() on each store would not hide it. Fix: compute into a local, store "
     "once:", "stored here and again from itself at", "loaded by"))


def _other_bugs(plan, t):
    """The double fetches and two-step stores (no mark fixes them): one
    paragraph each, a line per finding with its racing counterpart."""
    paras = []
    for key, text, verb, other in _OTHER_BUGS:
        found = sorted(plan.get(key, []), key=lambda x: (x["file"], x["line"]))
        if found:
            paras.append(wrap("Not in the series, for a human: " + text) + "\n" + "\n".join(
                wrap("  %s:%d %s.%s in %s(), %s %s; %s %s() at %s:%d" % (
                    short(x["file"], t), x["line"], x["struct"], x["field"], x["function"],
                    verb, ", ".join(str(y["line"]) for y in x["again"]), other,
                    x["counterpart"]["function"], short(x["counterpart"]["file"], t),
                    x["counterpart"]["line"]), indent="    ") for x in found))
    return paras


def _checkpatch_summary(cps):
    ne = sum(len(c["ERROR"]) for _, c in cps)
    nw = sum(len(c["WARNING"]) for _, c in cps)
    checks = collections.Counter()
    for _, c in cps:
        for x in c["CHECK"]:
            checks[x.split(":", 1)[0]] += 1
    t = "checkpatch.pl --strict: %d errors, %d warnings, %d checks" % (
        ne, nw, sum(checks.values()))
    if checks:
        t += ":\n" + "\n".join("  %s: %d" % kv for kv in sorted(checks.items()))
    return t
