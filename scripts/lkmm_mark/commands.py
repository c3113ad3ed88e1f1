# SPDX-License-Identifier: GPL-2.0-only
"""The analysis and its plan (analyse(), get_plan(), plan_dict()), and the
sub-commands facts, report and plan.  Imports nothing that imports it:
cli.py dispatches bench, series, rewrite and run (the main job), which
use the plan from here."""
import collections
import json
import os
import threading

from . import cachelock, evidence
from . import facts as facts_mod
from . import factcheck
from . import policy as policy_mod
from .analysis import Analysis, Source
from .tree import ensure_tree, kernel_series, UserError, require_tools


def analyse(args, tree=None, check_tree=True):
    """The analysis of the target.  Python's cyclic garbage collector is
    off while it runs: the tokens, facts and states are a million small
    objects that live until the plan is written, and the collector's
    passes over them cost a tenth of the run; nothing here makes garbage
    cycles worth collecting."""
    import gc
    was = gc.isenabled()
    gc.disable()
    try:
        return _analyse(args, tree, check_tree)
    finally:
        if was:
            gc.enable()


def _analyse(args, tree=None, check_tree=True):
    require_tools("spatch")
    if tree is None:
        tree = ensure_tree(args.tree, args.target, getattr(args, "kernel", None)) \
            if check_tree else args.tree
    # the facts as they hold for the tree's version (overrides.py)
    P = policy_mod.load(args.policies, policy_mod.subsystem_of(args.target),
                        kernel_series(tree))
    job = facts_mod.start(str(tree), args.target, args.jobs, not args.no_cache)
    files = facts_mod.source_files(str(tree), args.target)
    # read and tokenize the sources while spatch runs, in a thread that
    # shares the CPUs with it: at a lower priority (it was niced) it got
    # nothing until spatch ended and then ran on one core for 2.4 s while
    # the other idled
    box = {}
    spatch_running = isinstance(job, facts_mod.Running)

    def read_sources():
        try:
            src = box["src"] = Source(str(tree), files)
            # the facts checked against the code before anything uses them
            box["stale"] = factcheck.check(P, tree, src,
                                           getattr(args, "allow_stale_facts", False))
            if spatch_running:
                # the source-only part of the call graph too, while the
                # main thread only waits for spatch.  (A child forked
                # beside the analysis, as with cached facts below, costs
                # the analysis a copy of each page it writes while the
                # child lives; eight alternating cold runs: 10.9 s against
                # 11.7 s, medians.)
                pre = Analysis(str(tree), args.target, [], P, files, src=src)
                scan = pre.source_scan()
                box["scan"] = lambda: scan
                pre.warm_source_caches()
                # and what run_flow() and contexts.py ask of the sources
                # alone (callgraph.py function_call_context(),
                # contexts.py entry_points())
                box["ctx"] = pre.all_call_contexts()
                box["entries"] = pre.entry_points()
                box["tokmemo"] = pre.member_token_facts()
                box["accrecs"] = pre.accessor_records()
                pre.warm_function_caches()
                box["caches"] = {n: getattr(pre, n) for n in pre.SOURCE_CACHES}
        except BaseException as e:      # re-raised in the caller
            box["err"] = e

    t = threading.Thread(target=read_sources, daemon=True)
    t.start()
    try:
        t.join()
        if "err" in box:
            if spatch_running:
                job.cancel()
            raise box["err"]
        recs, cached = job.result()
    finally:
        t.join()
    src = box["src"]
    stale = box["stale"]
    A = Analysis(str(tree), args.target, recs, P, files, src=src)
    if "ctx" in box:
        A.call_contexts, A._entries = box["ctx"], box["entries"]
        A._tokmemo, A._accrecs = box["tokmemo"], box["accrecs"]
        for name, cache in box["caches"].items():
            setattr(A, name, cache)
    A.run(scan=box.get("scan") or _scan_beside(A))
    A.cached = cached
    A.stale_facts = stale
    return A


def _fork(work):
    """Run work() in a forked child that exits when it is done: the
    child's pid, or None when fork is not available (then nothing ran)."""
    try:
        pid = os.fork()
    except (AttributeError, OSError):
        return None
    if pid == 0:
        code = 1
        try:
            work()
            code = 0
        finally:
            os._exit(code)
    return pid


def _scan_beside(A):
    """Start A.source_scan() in a forked child, which runs on the other
    core while this process builds the accesses and the lock flow (with
    cached facts: there is no spatch run to scan beside); the callable
    returned waits for its result.  None (scan in process) when fork is
    not available."""
    import pickle
    r, w = os.pipe()

    def work():
        os.close(r)
        data = pickle.dumps(A.source_scan(), protocol=pickle.HIGHEST_PROTOCOL)
        with os.fdopen(w, "wb") as out:
            out.write(data)
    pid = _fork(work)
    os.close(w)
    if pid is None:
        os.close(r)
        return None

    def wait():
        with os.fdopen(r, "rb") as inp:
            data = inp.read()
        _, status = os.waitpid(pid, 0)
        if status != 0 or not data:
            return A.source_scan()                  # the child failed: do it here
        return pickle.loads(data)
    return wait


def _plan_key(args, tree):
    """Hash of everything a plan depends on: the facts pass inputs (the
    sources), the policies, and the analysis code itself."""
    import hashlib
    from pathlib import Path
    h = hashlib.sha256()
    files = facts_mod.source_files(str(tree), args.target)
    if not files:
        raise UserError("%s/%s: no .c or .h files" % (tree, args.target))
    h.update(facts_mod.facts_key(str(tree), args.target, files).encode())
    h.update(str(Path(tree).resolve()).encode() + b"\0" + args.target.encode())
    here = Path(__file__).resolve().parent
    pol = Path(args.policies) if args.policies else here.parents[1] / "policies"
    # the analysis code as this process loaded it (_CODE, read when the
    # module was imported): a file edited during a run does not give the
    # plan of the old code the new code's key
    h.update(_CODE)
    for p in sorted(pol.rglob("*.json")):
        h.update(p.name.encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


def _code_digest():
    import hashlib
    from pathlib import Path
    h = hashlib.sha256()
    for p in sorted(Path(__file__).resolve().parent.glob("*.py")):
        h.update(p.name.encode() + b"\0" + p.read_bytes())
    return h.digest()


_CODE = _code_digest()


def get_plan(args, tree=None):
    """The plan dict, cached by content hash (a re-run with nothing changed
    only hashes the sources and loads the JSON)."""
    from .tree import cache_dir
    require_tools("spatch")
    if tree is None:
        tree = ensure_tree(args.tree, args.target, getattr(args, "kernel", None))
    _wait_writers()
    key = _plan_key(args, tree)
    cfile = cache_dir() / "plans" / (key + ".json")
    import gc
    was = gc.isenabled()
    # as in analyse(): json.load() and plan_dict() make half a million
    # objects and no cycles
    gc.disable()
    lock = None
    try:
        if not args.no_cache and not cfile.exists():
            # one analysis per plan at a time: a second run waits and reads
            # the first one's plan (the writer forked below holds the lock
            # too, until the file is in place)
            lock = cachelock.acquire("plan-" + key[:24], "the analysis of " + args.target)
        if not args.no_cache and cfile.exists():
            with open(cfile) as f:
                d = json.load(f)
            _stale_again(d, args)
            evidence.confirm(d, evidence.results_of(tree, target=args.target), tree)
            return d
        A = analyse(args, tree=tree)
        d = plan_dict(A)
        cfile.parent.mkdir(parents=True, exist_ok=True)
        _write_behind(cfile, d)
        # the races KCSAN saw (committed results of this kernel version):
        # not in the cached plan, which does not depend on them
        evidence.confirm(d, evidence.results_of(tree, target=args.target), tree)
    finally:
        cachelock.release_fd(lock)
        if was:
            # The analysis and the plan go to the collector's permanent
            # generation first (they hold no garbage cycles: a collection
            # after an analysis finds a handful of objects).  Its first
            # pass would otherwise visit two million objects and write to
            # every page the plan-cache writer just forked shares: 1.6 s
            # at the command's first allocations after a cold analysis,
            # half of it system time.
            gc.freeze()
            gc.enable()
    # Freeing the analysis here, with the writer just forked, would copy
    # every page its million objects share with the writer (a second and
    # more); it lives until the process ends, which the command line
    # does without freeing anything (scripts/lkmm-mark).
    _KEEP[:] = [A]
    return d


_KEEP = []


def _stale_again(d, args):
    """A cached plan made with --allow-stale-facts: the same warnings, or
    the error when the flag is not given this time."""
    from .tree import log
    stale = d.get("stale_facts") or []
    if stale and not getattr(args, "allow_stale_facts", False):
        raise UserError("stale fact: %s (%d in all; --allow-stale-facts makes this "
                        "a warning)" % (stale[0], len(stale)))
    for x in stale:
        log("warning: stale fact: " + x)


_WRITERS = []


def _write_cache(cfile, d):
    tmp = cfile.with_suffix(".tmp%d" % os.getpid())
    # one encoding, one write: json.dump() writes each small chunk
    # separately and takes three times as long for this 14 MB plan
    text = json.dumps(d)
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, cfile)          # readers see the whole file or none


def _write_behind(cfile, d):
    """Write the plan cache from a forked child, so that the caller has the
    plan at once; get_plan() in this process waits for it first.  In
    process when fork is not available."""
    pid = _fork(lambda: _write_cache(cfile, d))
    if pid is None:
        _write_cache(cfile, d)
    else:
        _WRITERS.append(pid)


def _wait_writers():
    while _WRITERS:
        try:
            os.waitpid(_WRITERS.pop(), 0)
        except ChildProcessError:
            pass


def plan_report_lines(d, include_all=False, tests=False, tier=None):
    """Report lines of the sites that need a mark (include_all: every
    site); tier 'lockset-only': the candidates instead, with the mark
    the lockset asked for."""
    out = []
    for s in d["sites"]:
        if s["test_code"] != tests:
            continue
        if tier == "lockset-only":
            if s["rule"] != "lockset-only":
                continue
            action = s["candidate"]
        elif tier is not None and s.get("tier") != tier:
            continue
        elif s["action"] == "none" and not include_all:
            continue
        else:
            action = s["action"]
        out.append("%s:%d:%d-%d: %s: %s (%s)" % (s["file"], s["line"], s["column"],
                                                s["end_column"], action, s["reason"],
                                                s.get("lockset_rule") or s["rule"]
                                                if tier == "lockset-only" else s["rule"]))
    return out


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
    tree = ensure_tree(args.tree, args.target, args.kernel)
    recs, cached = facts_mod.run(str(tree), args.target, args.jobs, not args.no_cache)
    with open(args.out, "w") as f:
        json.dump(recs, f, indent=0)
    print("%d facts%s -> %s" % (len(recs), " (cached)" if cached else "", args.out))
    return 0


def cmd_report(args):
    d = get_plan(args)
    tier = getattr(args, "tier", None)
    if tier is not None:
        for line in plan_report_lines(d, tests=False, tier=tier):
            print(line)
        return 0
    lines = plan_report_lines(d, args.all, tests=False)
    for line in lines:
        print(line)
    tl = plan_report_lines(d, args.all, tests=True)
    counts = {}
    for s in d["sites"]:
        if not s["test_code"] and s["action"] != "none":
            counts[s["action"]] = counts.get(s["action"], 0) + 1
    tiers = collections.Counter(s.get("tier") for s in d["sites"]
                                if not s["test_code"] and s["action"] != "none")
    print("# %d sites need a mark: %s; confirmed by KCSAN %d, paired %d" % (
        len(lines), ", ".join("%s %d" % kv for kv in sorted(counts.items())),
        tiers["confirmed"], tiers["paired"]))
    if tl:
        print("# test code (%s/tests), reported separately:" % args.target)
        for line in tl:
            print(line)
    cand = [s for s in d["sites"] if s["rule"] == "lockset-only" and not s["test_code"]]
    print("# lockset-only candidates (no racing pair found; not in the series; "
          "report --tier lockset-only lists them): %d" % len(cand))
    lost = [x for x in d["sites"] if x["rule"] == "lost-update" and not x["test_code"]]
    print("# lost updates (a read-modify-write without the lock every other write "
          "holds: needs the lock, no mark fixes it): %d" % len(lost))
    for x in sorted(lost, key=lambda x: (x["file"], x["line"], x["column"])):
        print("%s:%d:%d-%d: LOCK: %s (lost-update)" % (
            x["file"], x["line"], x["column"], x["end_column"], x["reason"]))
    for line in other_bug_lines(d):
        print(line)
    na = d["not_analysed"]
    print("# functions not analysed: %d" % len(na))
    for x in na:
        print("%s:%d: %s(): %s" % (x["file"], x["line"], x["function"], x["reason"]))
    return 0


# the plan's lists of bugs no mark fixes: (key, report heading, the fix's
# word in a report line, rule)
OTHER_BUGS = (
    ("double_fetches", "double fetches (a racy field tested, then loaded again in the code "
     "the test guards: load it once into a local; no mark fixes it)", "LOAD-ONCE",
     "double-fetch"),
    ("two_step_stores", "two-step stores (a racy field stored, then stored again from its "
     "own value: compute into a local, store once; no mark fixes it)", "STORE-ONCE",
     "two-step-store"))


def other_bug_lines(d):
    """The report's sections for the double fetches and two-step stores,
    one line per finding (coccicheck style)."""
    out = []
    for key, heading, word, rule in OTHER_BUGS:
        found = sorted(d.get(key, []), key=lambda x: (x["file"], x["line"], x["column"]))
        out.append("# %s: %d" % (heading, len(found)))
        out += ["%s:%d:%d-%d: %s: %s (%s)" % (x["file"], x["line"], x["column"],
                                             x["end_column"], word, x["reason"], rule)
                for x in found]
    return out


def plan_dict(A):
    sites = [a.as_dict() for a in A.accesses]
    for d, a in zip(sites, A.accesses):
        if d["action"] == "data_race":
            # the rewrite may load the value into a local of this type
            m = A.src.structs.get(a.struct, {}).get(a.field)
            d["field_type"] = m.type if m is not None and not m.array else None
    annotate_rewrite(A.tree, sites, A.src, A.double_fetches)
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
            # bugs no mark fixes, reported apart (doublefetch.py, twostep.py)
            "double_fetches": A.double_fetches, "two_step_stores": A.two_step_stores,
            "stale_facts": getattr(A, "stale_facts", []),
            "not_analysed": [{"file": f, "line": l, "function": n, "reason": why}
                             for f, l, n, why in A.not_analysed]}


def annotate_rewrite(tree, sites, src=None, double_fetches=()):
    """Each planned site gets "rewrite": null when the rewrite (series and
    cocci patch mode) handles it, or why it is left for a human (a store
    inside an expression, a BUG_ON() line, a line that would pass 100
    columns, a load of a double fetch); "nested": true marks a load whose
    base is itself rewritten (READ_ONCE(READ_ONCE(a->b)->c)), which only
    the series rewriter does."""
    from . import rewrite
    planned = rewrite.select_sites({"sites": sites, "double_fetches": double_fetches})
    byf = {}
    for s in planned:
        byf.setdefault(s["file"], []).append(s)
    why = {}
    nested = set()
    comments = rewrite.load_comments()
    discarding = rewrite.discarding_macros(tree, byf)
    typos = rewrite.checkpatch_typos(tree)
    for f, ss in byf.items():
        try:
            with open(os.path.join(tree, f), encoding="utf-8", errors="surrogateescape") as fh:
                text = fh.read()
        except OSError:
            continue
        # the analysis' tokens of the same text (read with errors="replace":
        # the same tokens unless the file has bytes that are not UTF-8)
        toks = src.toks.get(f) if src is not None and src.text.get(f) == text else None
        E, app, sk = rewrite.plan_file_edits(text, ss, comments, toks,
                                             src.pos.get(f) if toks is not None else None,
                                             discarding=discarding, typos=typos)
        why.update(sk)
        nested.update(rewrite.nested_outer(E, app))
    for s in sites:
        if s["action"] != "none":
            k = (s["file"], s["line"], s["column"])
            s["rewrite"] = why.get(k)
            if k in nested:
                s["nested"] = True


def cmd_plan(args):
    d = get_plan(args)
    text = json.dumps(d, indent=1, sort_keys=True)     # one write (_write_cache())
    with open(args.json, "w") as f:
        f.write(text + "\n")
    n = sum(1 for s in d["sites"] if s["action"] != "none" and not s["test_code"])
    print("%d verdicts, %d need a mark -> %s" % (len(d["sites"]), n, args.json))
    return 0
