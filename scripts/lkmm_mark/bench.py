# SPDX-License-Identifier: GPL-2.0-only
"""Benchmark: whole analysis of the target against spatch --parse-c, same run."""
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
        p, c, w = _timed(parse), cold_then_cached(), _timed(warm)
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
            # peak resident sizes of one analysis (a later round builds
            # its analysis while the previous one is still alive, so the
            # first round's are the figures):
            # this process, and the largest child (a spatch worker or a
            # forked helper); ru_maxrss is in KiB on Linux
            me = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            kid = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
            print("peak RSS: analysis %.0f MiB, largest child process %.0f MiB" % (me, kid))
    if runs > 1:
        ratios = sorted(c[0] / p[0] for p, c, _ in rows)
        print("%d rounds: ratio cold/parse %s; median %.1fx (target <= 3x); "
              "re-run median %.1f s (target < 2 s)"
              % (runs, ", ".join("%.1fx" % r for r in ratios), statistics.median(ratios),
                 statistics.median(w[0] for _, _, w in rows)))
    return 0
