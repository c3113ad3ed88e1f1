# SPDX-License-Identifier: GPL-2.0-only
"""KCSAN reports of a guest's console: parsed, resolved to source lines
(scripts/faddr2line on the kernel's vmlinux), merged into distinct data
races (those in the target flagged), and the comparison report of a KCSAN
run (qemu-test/results/kcsan-*.txt) written from its results (the *.json).

A race of the target is flagged under the key named after its subsystem
(policies/<subsystem>/, "in <subsystem>" in the report), one that has the
target in a call stack under "via_<subsystem>"; a run records its target
(the default target for runs saved before it did).

Standalone: python3 -m lkmm_mark.kcsan FILE...
  a results file (*.json): prints its report again, as verify --kcsan wrote it;
  a console log (*-console.log[.gz]): the distinct data races in it (with
  --build O_DIR, the kernel build it ran, resolved to source lines).
"""
import argparse
import collections
import json
import re
import subprocess
import sys
from pathlib import Path

from .console import read_log
from .summary import table
from .target import default_target, subsystem_of
from .vdiag import norm_path

KCSAN_SEP = re.compile(r"^={20,}\s*$")
ACCESS_RE = re.compile(r"^(?:race at unknown origin, with )?(?P<type>read|write|read-write)"
                       r"(?P<marked> \(marked\))?(?P<reordered> \(reordered\))? to "
                       r"(?P<addr>0x[0-9a-f]+|\S+) of (?P<size>\d+) bytes"
                       r" by (?P<who>.*?) on cpu (?P<cpu>\d+):")
FRAME_RE = re.compile(r"^\s*(?P<fn>[A-Za-z_][\w.]*)\+0x[0-9a-f]+/0x[0-9a-f]+")
FIELD_RE = re.compile(r"(?:->|\.)\s*([A-Za-z_]\w*)")


def _strip_ts(line):
    return re.sub(r"^\[\s*\d+\.\d+\]\s?", "", line)


def _parse_report(lines, i, title):
    """One report from its title line's successor; returns (report, next i)."""
    rep = dict(title=re.sub(r"\+0x[0-9a-f]+/0x[0-9a-f]+", "", title).strip(),
               accesses=[], value=None)
    cur = None
    while i < len(lines) and not KCSAN_SEP.match(lines[i]) and \
            not lines[i].startswith("BUG: KCSAN:"):
        ln = lines[i]
        a = ACCESS_RE.match(ln.strip())
        if a:
            cur = dict(type=a.group("type"), marked=bool(a.group("marked")),
                       reordered=bool(a.group("reordered")),
                       size=int(a.group("size")), frames=[], raw=[])
            rep["accesses"].append(cur)
        elif ln.strip().startswith("value changed:"):
            rep["value"] = ln.strip()
            cur = None
        elif cur is not None:
            f = FRAME_RE.match(ln)
            if f and len(cur["frames"]) < 8:
                cur["frames"].append(f.group("fn"))
                cur["raw"].append(ln.strip())
            elif not ln.strip():
                cur = None
        i += 1
    return rep, i


def parse_kcsan(text):
    lines = [_strip_ts(x) for x in text.splitlines()]
    reports = []
    i = 0
    while i < len(lines):
        m = re.match(r"BUG: KCSAN: (.*)$", lines[i])
        if not m:
            i += 1
            continue
        rep, i = _parse_report(lines, i + 1, m.group(1))
        reports.append(rep)
    return reports


def target_functions(out, target):
    """Text symbols of the target (from its built-in.a)."""
    a = out / target / "built-in.a"
    if not a.exists():
        return set()
    r = subprocess.run(["nm", "--defined-only", str(a)], capture_output=True, text=True)
    return {x.split()[-1] for x in r.stdout.splitlines() if len(x.split()) == 3
            and x.split()[1] in "tTW"}


def resolve_lines(vmlinux, src, frames_raw):
    """func+off/size -> 'file:line' via scripts/faddr2line (needs DEBUG_INFO)."""
    if not frames_raw:
        return {}
    fa = src / "scripts/faddr2line"
    r = subprocess.run([str(fa), str(vmlinux)] + sorted(set(frames_raw)), capture_output=True,
                       text=True, cwd=str(src))
    res = {}
    cur = None
    for line in r.stdout.splitlines():
        m = re.match(r"^(\S+\+0x[0-9a-f]+/0x[0-9a-f]+):?$", line.strip())
        if m:
            cur = m.group(1)
            continue
        m = re.match(r"^(?:\S+ )?(?:at|\()?\s*(\S+?):(\d+)", line.strip().split(" at ")[-1])
        if cur and m:
            # innermost first, then the "(inlined by)" callers
            res.setdefault(cur, []).append((norm_path(m.group(1)), int(m.group(2))))
    return res


def _access(a, lines, src):
    """One access of a report, with its resolved lines, their text and fields."""
    locs = lines.get(a["raw"][0], []) if a["raw"] else []
    texts = []
    for f, n in locs[:2]:
        try:
            texts.append((src / f).read_text(errors="replace").splitlines()[n - 1])
        except (OSError, IndexError):
            texts.append("")
    # the field accessed is named on the innermost line, or, when that is
    # an inline helper's line without one (div_u64(), i_size_read()...),
    # on the line it is inlined into
    afields = []
    for t in texts[:2]:
        afields = sorted(set(FIELD_RE.findall(t)))
        if afields:
            break
    where = "%s:%d" % locs[0] if locs else "?"
    if len(locs) > 1:
        where += " (in %s:%d)" % locs[-1]
    return dict(type=a["type"] + (" (marked)" if a["marked"] else ""),
                frames=a["frames"][:3], where=where, locs=[list(x) for x in locs],
                fields=afields, line=texts[0].strip() if texts else "")


def _distinct(rep, lines, src, tfn, target):
    acc = [_access(a, lines, src) for a in rep["accesses"]]
    sub = subsystem_of(target)
    # a race of the target: an access whose own function (top frame) is in
    # the target, or whose source line (innermost or inlined-into) is
    inside = any(a["frames"] and a["frames"][0] in tfn for a in rep["accesses"]) or \
        any(target + "/" in a["where"] for a in acc) or sub in rep["title"]
    via = inside or any(f in tfn for a in rep["accesses"] for f in a["frames"])
    d = dict(title=rep["title"])
    d[sub], d["via_" + sub] = inside, via
    return dict(d, count=1, accesses=acc,
                fields=sorted({f for a in acc for f in a["fields"]}),
                tops=[a["frames"][0] for a in rep["accesses"] if a["frames"]],
                value=rep["value"],
                pcs=[a["raw"][0].split()[0] if a["raw"] else None for a in rep["accesses"]],
                reordered=any(a.get("reordered") for a in rep["accesses"]),
                unknown_origin=[])


def summarise_kcsan(reports, out, src, vmlinux, target=None):
    """Distinct data-race reports with resolved lines and fields, those in
    the target (the default one without) flagged."""
    target = (target or default_target()).rstrip("/")
    tfn = target_functions(out, target)
    raws = [r for rep in reports for a in rep["accesses"] for r in a["raw"][:1]]
    lines = resolve_lines(vmlinux, src, raws) if vmlinux.exists() else {}
    distinct = collections.OrderedDict()
    for rep in reports:
        if not rep["title"].startswith("data-race"):
            continue
        if rep["title"] in distinct:
            distinct[rep["title"]]["count"] += 1
        else:
            distinct[rep["title"]] = _distinct(rep, lines, src, tfn, target)
    return merge_unknown_origin(list(distinct.values()))


def merge_unknown_origin(distinct):
    """A one-sided report ("race at unknown origin": the watched value changed,
    the other access was not seen) at the very instruction of an access of a
    two-sided report of the same run is that race seen from one side; it is
    counted there, not as a race of its own."""
    pcs = {}
    for d in distinct:
        if len(d["accesses"]) > 1:
            for pc in d["pcs"]:
                if pc:
                    pcs.setdefault(pc, d)
    out = []
    for d in distinct:
        two = pcs.get(d["pcs"][0]) if len(d["accesses"]) == 1 and d["pcs"][0] else None
        if two is not None:
            two["count"] += d["count"]
            two["unknown_origin"].append("%s x%d at %s" % (d["title"], d["count"], d["pcs"][0]))
        else:
            out.append(d)
    return out


def with_pcs(lst, console):
    """Results files written before the instruction addresses were kept: take
    them from the saved console log, then merge one-sided reports."""
    if all("pcs" in d for d in lst):
        return lst
    pcs = {}
    if console.exists():
        for rep in parse_kcsan(console.read_text(errors="replace")):
            pcs.setdefault(rep["title"], [a["raw"][0].split()[0] if a["raw"] else None
                                          for a in rep["accesses"]])
    for d in lst:
        d.setdefault("pcs", pcs.get(d["title"], [None] * len(d["accesses"])))
        d.setdefault("unknown_origin", [])
    return merge_unknown_origin(lst)


def race_lines(d):
    """A distinct race as the report lists it: title, then one line an access."""
    out = ["  %s  (x%d)%s" % (d["title"], d["count"], "  [%s]" % "; ".join(
        d["involves"]) if d.get("involves") else "")]
    for a in d["accesses"]:
        out.append("     %-18s %-40s %s  %s" % (a["type"], " < ".join(a["frames"]),
                                               a["where"], a["line"][:80]))
    for u in d.get("unknown_origin", []):
        out.append("     counted here, one-sided at the same instruction: " + u)
    if d.get("reordered") and not d.get("involves"):
        out.append("     note: an access is \"(reordered)\": check with faddr2line "
                   "whether it moved past a release KCSAN does not see")
    if d.get("field_mismatch"):
        out.append("     note: the two access lines name different fields (%s): "
                   "one line is off, so the race is not matched to the series"
                   % d["field_mismatch"])
    return out


def explain(d, sub):
    """Why a leftover race on the patched kernel involves the series."""
    plain = [a for a in d["accesses"] if "(marked)" not in a["type"]]
    if not plain:
        return "both accesses marked (assert or reordered-access report)"
    if d.get("reordered"):
        return ("one access is \"(reordered)\" by KCSAN's weak-memory model: check with "
                "faddr2line whether it moved past a release KCSAN does not see "
                "(kernel/locking is not instrumented in the %s-only scope)" % sub)
    return "%s; still plain: %s" % ("; ".join(d["involves"]), "; ".join(
        "%s in %s at %s" % (a["type"], a["frames"][0] if a["frames"] else "?", a["where"])
        for a in plain))


def run_subsystem(run):
    """The subsystem a run's races were flagged for (its target's)."""
    return subsystem_of(run.get("target"))


def groups(run):
    """The races of a run (results dict) by what the series does to them."""
    sub = run_subsystem(run)

    def inside(name):
        return [d for d in run.get(name) or [] if d[sub]]
    pb, qb = inside("pristine"), inside("patched")
    has_patched = run.get("patched") is not None
    qtitles = {d["title"] for d in qb}
    addressed = [d for d in pb if d["involves"]]
    return dict(pb=pb, qb=qb, left=[d for d in qb if d["involves"]],
                unaddressed=[d for d in pb if not d["involves"]], addressed=addressed,
                fixed=[d for d in addressed if has_patched and d["title"] not in qtitles])


def _kernel_table(run, g):
    trows = []
    sub = run_subsystem(run)
    for name in run["kernels"]:
        s, ops = run["summary"][name], run["ops"][name]
        trows.append((name, s["reports"], s["distinct"], s[sub],
                      len([d for d in run[name] if d.get("via_" + sub)]),
                      len(g["left"]) if name == "patched" else len(g["addressed"]),
                      len(g["unaddressed"]) if name == "pristine" else "-",
                      "%d s" % s["qemu_seconds"], s["stress_seconds"] or "?",
                      (ops.get("write") or "?").split()[0],
                      s.get("kcsan_stats", {}).get("setup_watchpoints", "?")))
    return table(trows, ["kernel", "reports", "distinct data races", "in " + sub,
                         sub + " in call stack", "involve the series",
                         "not addressed", "QEMU", "stress s", "files written",
                         "watchpoints"])


def report(run):
    """The text of a KCSAN run's report (results/kcsan-*.txt) from its results."""
    g = groups(run)
    scope, sub = run["scope"], run_subsystem(run)
    lines = [_kernel_table(run, g),
             "KCSAN scope %s (flavour %s), guest profile %s, stress %d s per kernel, "
             "%d vCPUs, %s, kcsan params: %s" % (
                 scope, "kcsanall" if scope == "all" else "kcsan", run.get("profile", "full"),
                 run["seconds"], run["smp"], run["accel"], run["params"] or "build defaults"),
             "series: %d patches, %d marked field names, %s changed lines"
             % (len(run["patches"]), len(run["marked_fields"]), run.get("changed_lines", "?"))]
    if g["left"]:
        lines.append("\nleftovers explained:")
        for d in g["left"]:
            lines.append("  %s: %s" % (d["title"], explain(d, sub)))
    sections = [("all %s races on pristine" % sub, g["pb"]),
                ("seen on pristine, involve the series", g["addressed"]),
                ("seen on pristine, not addressed by the series", g["unaddressed"])]
    if run.get("patched") is not None:
        sections[1:1] = [("leftover on patched (involve a marked field or changed line)",
                          g["left"]),
                         ("seen on pristine, involve the series, gone on patched", g["fixed"])]
        sections.append(("all %s races on patched" % sub, g["qb"]))
    for title, lst in sections:
        lines.append("\n%s: %d" % (title, len(lst)))
        for d in lst:
            lines += race_lines(d)
    return "\n".join(lines)


def _console_summary(path, build):
    reps = parse_kcsan(read_log(path))
    out = Path(build) if build else Path("/nonexistent")
    summ = summarise_kcsan(reps, out, out.parent, out / "vmlinux")
    sub = subsystem_of()
    lines = ["%s: %d reports, %d distinct data races, %d in %s"
             % (path, len(reps), len(summ), len([d for d in summ if d[sub]]), sub)]
    for d in summ:
        lines += race_lines(d)
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m lkmm_mark.kcsan", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", metavar="FILE")
    ap.add_argument("--build", metavar="O_DIR",
                    help="the kernel build a console log is from (vmlinux, the target's "
                    "built-in.a)")
    args = ap.parse_args(argv)
    for i, f in enumerate(args.files):
        if i:
            print()
        if f.endswith(".json"):
            try:
                run = json.loads(Path(f).read_text())
                print(report(run))
            except (OSError, ValueError, KeyError, TypeError) as e:
                print("lkmm-mark: error: %s: not a KCSAN results file (%s)" % (f, e),
                      file=sys.stderr)
                return 2
        else:
            print(_console_summary(f, args.build))
    return 0


if __name__ == "__main__":
    sys.exit(main())
