# SPDX-License-Identifier: GPL-2.0-only
"""verify stage 'kcsan' (verify --kcsan): KCSAN kernels of both trees, the
same stress on each, reports compared.

Builds the kcsan flavour (vbuild), boots it (boot), parses and summarises the
reports (kcsan), says which races involve the series (involve), and writes
qemu-test/results/kcsan-<time>[-tag].{txt,json} and the console logs; the
results are written under their lock, each file under a temporary name and
renamed into place, the .json (what a later --kcsan-remap or
`python3 -m lkmm_mark.kcsan` reads) last.

Standalone: python3 -m lkmm_mark.vkcsan [--plan PLAN.json] [verify's --kcsan-* options]
the stage alone, as `lkmm-mark verify --kcsan-only`; the races are matched
to the series through the plan of `lkmm-mark plan --json PLAN.json` when
given (verify loads it itself), else by field names only.
"""
import gzip
import json
import sys
import time
from pathlib import Path

from .base import UserError, log
from .boot import detect_accel, stress_guest
from .cachelock import locked, write_atomic
from .console import KCSAN_EXPECTED
from .initramfs import build_initramfs
from .involve import involvement, series_changes
from .kcsan import groups, parse_kcsan, report, run_subsystem, summarise_kcsan, with_pcs
from .target import verify_spec
from .vbuild import build_kernel
from .vcommon import RESULTS_DIR, results_dir

# Defaults of `verify --kcsan` (the tuning that found the most races here, see
# qemu-test/README.md); the scope None is the target's subsystem (its name).
KCSAN_DEFAULTS = dict(kcsan_secs=900, kcsan_smp=4, kcsan_params="skip_watch:50", kcsan_scope=None,
                      kcsan_profile="kcsan")


def settings(opts, secs):
    """The run's parameters from verify's options and defaults."""
    spec = verify_spec()
    scope = opts["kcsan_scope"] or KCSAN_DEFAULTS["kcsan_scope"] or spec.subsystem
    return dict(
        target=spec.target, scope=scope, flavor="kcsanall" if scope == "all" else "kcsan",
        kernels=["pristine", "patched"] if opts["kcsan_kernels"] == "both"
        else [opts["kcsan_kernels"]],
        secs=opts["kcsan_secs"] or max(secs, KCSAN_DEFAULTS["kcsan_secs"]),
        smp=opts["kcsan_smp"] or KCSAN_DEFAULTS["kcsan_smp"],
        params=opts["kcsan_params"] if opts["kcsan_params"] is not None
        else KCSAN_DEFAULTS["kcsan_params"],
        profile=opts["kcsan_profile"] or KCSAN_DEFAULTS["kcsan_profile"],
        tag=opts["kcsan_tag"])


def _runs(trees, s, changes):
    """Build and boot each kernel; {name: dict(res, reports, distinct)}."""
    builds = {}
    builds["pristine"] = build_kernel(trees["pristine"], s["flavor"], trees["bh"])
    if "patched" in s["kernels"]:
        builds["patched"] = build_kernel(trees["patched"], s["flavor"], trees["ph"],
                                         seed_from=builds["pristine"]["out"])
    initrd = build_initramfs()
    s["accel"] = detect_accel(builds["pristine"]["bzimage"])
    results = {}
    for name in s["kernels"]:
        b = builds[name]
        res = stress_guest(b["bzimage"], initrd, s["secs"], s["smp"], name + "-kcsan",
                           s["params"], expected=KCSAN_EXPECTED, accel=s["accel"],
                           profile=s["profile"])
        reps = parse_kcsan(res.console)
        summ = summarise_kcsan(reps, b["out"], trees[name], b["out"] / "vmlinux", s["target"])
        for d in summ:
            d["involves"] = involvement(d, changes, "old" if name == "pristine" else "new")
        results[name] = dict(res=res, reports=reps, distinct=summ)
    return results


def _summary(r, sub):
    """A kernel's counts in the results: the races in the target under its
    subsystem's name."""
    res = r["res"]
    return {"reports": len(r["reports"]), "distinct": len(r["distinct"]),
            sub: len([d for d in r["distinct"] if d[sub]]),
            "qemu_seconds": round(res.seconds), "stress_seconds": res.stress_seconds,
            "done": res.done, "kcsan_stats": res.kcsan_stats}


def results_dict(s, patches, changes, results):
    """What results/kcsan-*.json holds (and kcsan.report() reads)."""
    kernels = s["kernels"]
    sub = run_subsystem(s)
    run = dict(
        seconds=s["secs"], smp=s["smp"], accel=s["accel"], params=s["params"],
        scope=s["scope"], kernels=kernels, profile=s["profile"],
        patches=[p.name for p in patches],
        summary={n: _summary(results[n], sub) for n in kernels},
        pristine=results.get("pristine", {}).get("distinct"),
        patched=results.get("patched", {}).get("distinct"),
        marked_fields=sorted(changes["fields"]),
        changed_lines=sum(len(v) for v in changes["new"].values()), target=s["target"])
    g = groups(run)
    run.update(leftover=[d["title"] for d in g["left"]],
               addressed=[d["title"] for d in g["addressed"]],
               unaddressed=[d["title"] for d in g["unaddressed"]],
               ops={n: results[n]["res"].ops for n in kernels})
    return run


def keep_log(text, dest):
    """A console log into results/: as is below 1 MB, gzipped otherwise."""
    data = text.encode()
    if len(data) >= 1 << 20:
        dest = Path(str(dest) + ".gz")
        data = gzip.compress(data, 9)
    tmp = dest.with_name(dest.name + ".tmp")
    tmp.write_bytes(data)
    tmp.rename(dest)
    return dest.name


def write_results(run, text, results, tag):
    """results/kcsan-<time>[-tag].*: a name no other run has taken, the logs
    and the report first, the .json last; returns the <time>[-tag] part."""
    rdir = results_dir(RESULTS_DIR)
    rdir.mkdir(parents=True, exist_ok=True)
    with locked("results" + str(rdir), "the KCSAN results in %s" % rdir):
        stamp = time.strftime("%Y%m%d-%H%M%S") + ("-" + tag if tag else "")
        while list(rdir.glob("kcsan-%s.*" % stamp)):
            time.sleep(1)               # another run's, this second
            stamp = time.strftime("%Y%m%d-%H%M%S") + ("-" + tag if tag else "")
        for name in run["kernels"]:
            keep_log(results[name]["res"].console,
                     rdir / ("kcsan-%s-%s-console.log" % (stamp, name)))
        write_atomic(rdir / ("kcsan-%s.txt" % stamp), text + "\n")
        write_atomic(rdir / ("kcsan-%s.json" % stamp), json.dumps(run, indent=1) + "\n")
    return stamp


def _verdict(run, results, stamp):
    kernels = run["kernels"]
    g = groups(run)
    bad = [n for n in kernels if results[n]["res"].done is None or results[n]["res"].timed_out]
    # KCSAN reports are expected; other splats are not, on either kernel.
    unexp = [n for n in kernels if results[n]["res"].unexpected]
    for n in unexp:
        for k, line, ctx in results[n]["res"].unexpected[:3]:
            print("---- %s: %s splat:\n%s" % (n, k, ctx), file=sys.stderr)
    ok = not bad and not g["left"] and not unexp
    sub = run_subsystem(run)
    detail = "%s races: %s (results/kcsan-%s.txt)" % (sub, ", ".join(
        "%s %d" % (n, run["summary"][n][sub]) for n in kernels), stamp)
    if "patched" in results:
        detail += "; on patched involving the series %d" % len(g["left"])
    if "pristine" in results:
        detail += "; pristine not addressed %d" % len(g["unaddressed"])
    if bad:
        detail += "; guest did not complete: " + ",".join(bad)
    if unexp:
        detail += "; other splats on: " + ",".join(unexp)
    return "KCSAN", ok, detail


def kcsan_compare(trees, patches, opts, secs, plan_loader=None):
    """The KCSAN check: (row name, ok, detail).  trees: dict(base, pristine,
    patched, bh, ph) from vtrees."""
    s = settings(opts, secs)
    changes = series_changes(trees["pristine"], trees["patched"], patches,
                             plan_tree=trees["base"], plan_loader=plan_loader)
    results = _runs(trees, s, changes)
    run = results_dict(s, patches, changes, results)
    text = report(run)
    print(text)
    stamp = write_results(run, text, results, s["tag"])
    return _verdict(run, results, stamp)


def _remap_group(name, lst, changes, side, sub):
    out = []
    for d in lst:
        d["involves"] = involvement(d, changes, side)
    inv = [d for d in lst if d["involves"]]
    out.append("\n%s: %d distinct %s races" % (name, len(lst), sub))
    for title, g in (("involve the series", inv),
                     ("do not involve the series", [d for d in lst if not d["involves"]])):
        out.append("  %s: %d" % (title, len(g)))
        for d in g:
            out.append("    %s  (x%d)%s" % (d["title"], d["count"], "  [%s]" % "; ".join(
                d["involves"]) if d["involves"] else ""))
            for u in d["unknown_origin"]:
                out.append("      counted here, one-sided at the same instruction: " + u)
            if d.get("field_mismatch"):
                out.append("      note: the two access lines name different fields (%s): "
                           "one line is off, not matched to the series" % d["field_mismatch"])
    return out


def kcsan_remap(path, trees, patches, plan_loader=None):
    """Map the races of a saved KCSAN run (results/kcsan-*.json) onto the
    series in patches/ now: which pristine races it addresses, which do not
    involve it, and (when the run had a patched kernel built from this same
    series) the leftovers.  Written beside the run as *-remap.txt."""
    try:
        run = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise UserError("%s: not a KCSAN results file: %s" % (path, e))
    changes = series_changes(trees["pristine"], trees["patched"], patches,
                             plan_tree=trees["base"], plan_loader=plan_loader)
    same = run.get("patches") == [p.name for p in patches]
    out = ["remap of %s onto %d patches (%s the run's series)" % (
        path.name, len(patches), "the same as" if same else "not")]
    sub = run_subsystem(run)
    for name, side in (("pristine", "old"), ("patched", "new")):
        lst = [d for d in (run.get(name) or []) if d.get(sub)]
        if not lst:
            continue
        lst = with_pcs(lst, path.with_name(path.stem + "-%s-console.log" % name))
        if name == "patched" and not same:
            out.append("\npatched: built from another series, not remapped")
            continue
        out += _remap_group(name, lst, changes, side, sub)
    text = "\n".join(out)
    print(text)
    dst = path.with_name(path.stem + "-remap.txt")
    write_atomic(dst, text + "\n")
    log("written %s" % dst)
    return 0


def main(argv=None):
    import argparse
    from .tree import ensure_tree
    from .vcommon import use_base
    from .vcommon import BuildError, ensure_host_tools
    from .voptions import parse_rest
    from .vtrees import list_patches, prepare_patched, prepare_pristine
    ap = argparse.ArgumentParser(prog="python3 -m lkmm_mark.vkcsan", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tree", help="base kernel tree (default: cached linux-source-6.1)")
    ap.add_argument("--patches", help="series directory (default: patches/)")
    ap.add_argument("--plan", metavar="PLAN.json", help="`lkmm-mark plan --json` of the base tree")
    ap.add_argument("rest", nargs=argparse.REMAINDER,
                    help="--kcsan-seconds N, --kcsan-kernels both|pristine|patched, ...")
    args = ap.parse_args(argv)
    try:
        opts = parse_rest(args.rest)
        ensure_host_tools()
        base = ensure_tree(args.tree)
        use_base(base)
        patches = list_patches(args.patches)
        pristine, bh = prepare_pristine(base)
        patched, ph = prepare_patched(base, bh, patches)
        trees = dict(base=base, pristine=pristine, patched=patched, bh=bh, ph=ph)
        loader = (lambda tree: json.loads(Path(args.plan).read_text())) if args.plan else None
        if opts["kcsan_remap"]:
            return kcsan_remap(Path(opts["kcsan_remap"]), trees, patches, loader)
        name, ok, detail = kcsan_compare(trees, patches, opts, 60, loader)
    except (UserError, BuildError) as e:
        print("lkmm-mark: error: %s" % e, file=sys.stderr)
        return 2 if isinstance(e, UserError) else 1
    print("%s: %s: %s" % (name, "PASS" if ok else "FAIL", detail))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
