# SPDX-License-Identifier: GPL-2.0-only
"""Benchmark: whole analysis of the target against spatch --parse-c, same run."""
import os
import resource
import subprocess
import sys
import time

from .tree import ensure_tree, require_tools


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
    from .commands import get_plan
    require_tools("spatch")
    tree = ensure_tree(args.tree, args.target)

    def parse():
        subprocess.run(["spatch", "--parse-c", args.target], cwd=tree,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def cold():
        args.no_cache = True
        get_plan(args, tree)

    def warm():
        args.no_cache = False
        get_plan(args, tree)

    p = _timed(parse)
    c = _timed(cold)
    w = _timed(warm)
    print("%-34s %8s %8s" % ("step (%s, %d cores)" % (args.target, os.cpu_count()), "wall s", "cpu s"))
    print("%-34s %8.1f %8.1f" % ("spatch --parse-c", p[0], p[1]))
    print("%-34s %8.1f %8.1f" % ("analysis, cold (facts + inference)", c[0], c[1]))
    print("%-34s %8.1f %8.1f" % ("analysis, re-run, nothing changed", w[0], w[1]))
    print("ratio cold/parse (wall): %.1fx (target <= 3x); re-run %.1f s (target < 2 s)"
          % (c[0] / p[0], w[0]))
    return 0
