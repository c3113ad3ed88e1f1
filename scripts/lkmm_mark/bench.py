# SPDX-License-Identifier: GPL-2.0-only
"""Benchmark: whole analysis of the target against spatch --parse-c, same run."""
import json
import os
import resource
import statistics
import subprocess
import time

from .tree import UserError, ensure_tree, require_tools


def _timed(fn):
    c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    s0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.time()
    fn()
    wall = time.time() - t0
    c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    s1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (c1.ru_utime - c0.ru_utime + c1.ru_stime - c0.ru_stime +
           s1.ru_utime - s0.ru_utime + s1.ru_stime - s0.ru_stime)
    return wall, cpu


def _in_child(fn):
    """fn() in a forked child, as a command runs it: in a process of its
    own, with none of the memory an earlier round left behind (a second
    analysis in one process ran a third slower); its result, or fn()'s in
    this process where fork is not available."""
    try:
        r, w = os.pipe()
        pid = os.fork()
    except (AttributeError, OSError):
        return fn()
    if pid == 0:
        code = 1
        try:
            os.close(r)
            with os.fdopen(w, "w") as f:
                json.dump(fn(), f)
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    with os.fdopen(r) as f:
        text = f.read()
    _, status = os.waitpid(pid, 0)
    if status != 0 or not text:
        raise UserError("bench: a round failed (exit status %d)" % status)
    return [tuple(x) for x in json.loads(text)]


def _peak_rss():
    """(this process, its largest child) peak resident sizes in MiB
    (ru_maxrss is in KiB on Linux)."""
    me = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    kid = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return me, kid


def run(args):
    from .commands import get_plan, _wait_writers
    require_tools("spatch")
    runs = args.runs
    if runs < 1:
        raise UserError("--runs must be at least 1")
    tree = ensure_tree(args.tree, args.target, args.kernel)

    def parse():
        subprocess.run(["spatch", "--parse-c", args.target], cwd=tree,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def cold():
        args.no_cache = True
        get_plan(args, tree)

    def warm():
        args.no_cache = False
        get_plan(args, tree)

    def cold_then_cached():
        r = _timed(cold)
        # the cold run's plan cache is written by a forked child after the
        # plan is returned (commands._write_behind()); a re-run is a new
        # command started after it, so the timed re-run starts when the
        # file is there
        _wait_writers()
        return r

    head = "%-34s %8s %8s" % ("step (%s, %d cores)" % (args.target, os.cpu_count()),
                              "wall s", "cpu s")
    rows = []
    # the three steps of a round run back to back, so that a host whose
    # speed drifts slows a round's parse and its analysis alike
    for i in range(runs):
        p, c, w, rss = _in_child(lambda: (_timed(parse), cold_then_cached(), _timed(warm),
                                          _peak_rss()))
        rows.append((p, c, w))
        if runs > 1:
            print("round %d of %d" % (i + 1, runs))
        print(head)
        print("%-34s %8.1f %8.1f" % ("spatch --parse-c", p[0], p[1]))
        print("%-34s %8.1f %8.1f" % ("analysis, cold (facts + inference)", c[0], c[1]))
        print("%-34s %8.1f %8.1f" % ("analysis, re-run, nothing changed", w[0], w[1]))
        print("ratio cold/parse (wall): %.1fx (target <= 3x); re-run %.1f s (target < 2 s)"
              % (c[0] / p[0], w[0]))
        if i == 0:
            # peak resident sizes of one round's process (the analysis)
            # and of its largest child (a spatch worker or a forked helper)
            print("peak RSS: analysis %.0f MiB, largest child process %.0f MiB" % rss)
    if runs > 1:
        ratios = sorted(c[0] / p[0] for p, c, _ in rows)
        print("%d rounds: ratio cold/parse %s; median %.1fx (target <= 3x); "
              "re-run median %.1f s (target < 2 s)"
              % (runs, ", ".join("%.1fx" % r for r in ratios), statistics.median(ratios),
                 statistics.median(w[0] for _, _, w in rows)))
    return 0
