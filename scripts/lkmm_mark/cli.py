# SPDX-License-Identifier: GPL-2.0-only
"""Command-line driver.  Each sub-command is one stage or a chain of stages."""
import argparse
import sys

from .tree import UserError


KERNEL_HELP = "base kernel: Debian linux-source-6.1 (default) or -6.12, cached; the " \
    "series directory follows it (patches/, patches/6.12/)"


def _kernel(p):
    # checked in main(): an unknown version is a one-line error
    p.add_argument("--kernel", metavar="{6.1,6.12}", help=KERNEL_HELP)


def _target(p):
    p.add_argument("--target", default=None,
                   help="the target whose series and subsystem (policies/<subsystem>/"
                   "verify.json) to use (default: policies/policies.json's default_target; "
                   "its series is patches/<subsystem>/)")


def _common(p):
    p.add_argument("--tree", help="kernel tree (default: the cached tree of --kernel)")
    _kernel(p)
    p.add_argument("--target", default=None,
                   help="directory to analyse (default: policies/policies.json's default_target)")
    p.add_argument("--policies", help="policies directory (default: the repository's policies/)")
    p.add_argument("--jobs", "-j", type=int, default=0, help="spatch workers (default: nproc)")
    p.add_argument("--no-cache", action="store_true", help="ignore cached facts")
    p.add_argument("--allow-stale-facts", action="store_true",
                   help="a policies/ name the tree lacks is a warning, not an error "
                   "(for trees of other versions)")


def build_parser():
    ap = argparse.ArgumentParser(prog="lkmm-mark", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)

    p = sub.add_parser("provision", help="install and unpack linux-source-6.1 (or --kernel "
                       "6.12) into the cache")
    p.add_argument("--tree")
    _kernel(p)

    p = sub.add_parser("facts", help="run the spatch facts pass, write JSON")
    _common(p)
    p.add_argument("--out", "-o", required=True)

    p = sub.add_parser("report", help="coccicheck-style lines for sites that need a mark")
    _common(p)
    p.add_argument("--all", action="store_true", help="also list sites whose action is none")
    p.add_argument("--include-tests", action="store_true",
                   help="report the target's test code (policies/ test_dirs) in the main list")
    p.add_argument("--tier", choices=("confirmed", "paired", "lockset-only"),
                   help="only the sites of one tier: 'confirmed' (KCSAN saw the race), "
                   "'paired' (a racing pair shown) or 'lockset-only' (candidates: a "
                   "lockset but no pair; not in the series)")

    p = sub.add_parser("plan", help="every verdict, as JSON")
    _common(p)
    p.add_argument("--json", required=True, metavar="FILE")

    p = sub.add_parser("run", help="the main job: report, series into patches/, git am "
                       "check, then verify (build, sparse, boot, stress)")
    _common(p)
    p.add_argument("--out", default=None, help="series directory (default: patches/, "
                   "patches/6.12/ for --kernel 6.12)")
    p.add_argument("--signoff", help="'Name <email>' (default: git config)")
    p.add_argument("--stress-seconds", type=int, default=60)
    p.add_argument("--no-verify", action="store_true", help="stop after the series")

    p = sub.add_parser("series", help="write the git format-patch series")
    _common(p)
    p.add_argument("--out", default=None, help="output directory (default: patches/, "
                   "patches/6.12/ for --kernel 6.12)")
    p.add_argument("--signoff", help="'Name <email>' (default: git config)")
    p.add_argument("--check", action="store_true",
                   help="do not write; fail if the committed series would change")
    p.add_argument("--style", choices=("default", "helpers"), default="default",
                   help="'helpers': a field with several marked sites gets static inline "
                   "get/set accessors next to its struct and a comment naming its lock, "
                   "and its sites call them (default output directory: patches/helpers/)")

    p = sub.add_parser("rewrite", help="apply the plan to a copy of the tree (or --in-place)")
    _common(p)
    p.add_argument("--out", help="directory for the rewritten copy of the target")
    p.add_argument("--in-place", action="store_true", help="modify the given --tree itself")

    p = sub.add_parser("verify", help="build, sparse, boot and stress the series in QEMU")
    p.add_argument("--tree")
    _kernel(p)
    _target(p)
    p.add_argument("--patches", default=None)
    p.add_argument("--kcsan", action="store_true")
    p.add_argument("--stress-seconds", type=int, default=None)
    p.add_argument("rest", nargs=argparse.REMAINDER)

    p = sub.add_parser("bisect", help="build the target after each patch of the series")
    p.add_argument("--tree")
    _kernel(p)
    _target(p)
    p.add_argument("--patches", default=None, help="series directory (default: patches/)")

    p = sub.add_parser("am", help="git am the series onto a scratch copy of the pristine tree")
    p.add_argument("--tree")
    _kernel(p)
    _target(p)
    p.add_argument("--patches", default=None, help="series directory (default: patches/)")

    p = sub.add_parser("compare", help="what became of the 6.1 findings in another "
                       "kernel version: fixed upstream, still flagged, or gone")
    p.add_argument("--against", default="6.12", metavar="{6.12}",
                   help="the other version (default 6.12)")
    p.add_argument("--fields", action="store_true", help="also a table per 6.1 field")
    p.add_argument("--groups", action="store_true",
                   help="also one line per 6.1 field and function, with its class")
    p.add_argument("--jobs", "-j", type=int, default=0, help="spatch workers (default: nproc)")

    p = sub.add_parser("bench", help="time the analysis against spatch --parse-c")
    _common(p)
    p.add_argument("--runs", type=int, default=1, metavar="N",
                   help="N rounds of parse, cold and re-run; the ratio's median is the result")
    return ap


def _plan_loader(tree):
    """The (cached) analysis plan of a base tree: verify's KCSAN stage maps
    races to the series through the struct.fields of its sites."""
    import types
    from .commands import get_plan
    from .target import selected_target
    return get_plan(types.SimpleNamespace(tree=str(tree), target=selected_target(), jobs=0,
                                          no_cache=False, policies=None), tree)


def main(argv):
    args = build_parser().parse_args(argv)
    try:
        if getattr(args, "target", "") is None:
            from .target import default_target
            args.target = default_target()
        if args.cmd in ("verify", "bisect", "am"):
            # the subsystem these build and boot (policies/<subsystem>/verify.json)
            from .target import select_target
            select_target(args.target)
        from .tree import resolve_kernel
        args.kernel = resolve_kernel(getattr(args, "kernel", None), getattr(args, "tree", None))
        if args.cmd == "provision":
            from .tree import ensure_tree
            print(ensure_tree(args.tree, kernel=args.kernel))
            return 0
        if args.cmd == "bisect":
            from . import bisect
            from .tree import patches_dir
            return bisect.run(args.patches or patches_dir(args.kernel, args.target), args.tree,
                              args.kernel)
        if args.cmd == "am":
            from .series import cmd_am
            return cmd_am(args)
        if args.cmd in ("series", "rewrite"):
            from . import series
            return getattr(series, "cmd_" + args.cmd)(args)
        if args.cmd == "compare":
            from . import compare
            from .tree import check_kernel
            if check_kernel(args.against) == "6.1":
                raise UserError("--against: compare 6.1 with another version")
            return compare.run(args)
        if args.cmd == "bench":
            from . import bench
            return bench.run(args)
        if args.cmd == "run":
            return cmd_run(args)
        if args.cmd == "verify":
            from . import verify
            return verify.main(args, plan_loader=_plan_loader)
        from . import commands
        return getattr(commands, "cmd_" + args.cmd)(args)
    except UserError as e:
        print("lkmm-mark: error: %s" % e, file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def cmd_run(args):
    """Main job end to end: plan, series, git am on pristine, verify."""
    from . import series
    from .commands import get_plan
    from .tree import ensure_tree, log
    args.check = False
    args.in_place = False
    tree = ensure_tree(args.tree, args.target, args.kernel)
    d = get_plan(args, tree)
    n = sum(1 for s in d["sites"] if s["action"] != "none" and not s["test_code"])
    log("analysis: %d sites need a mark (%d functions not analysed)"
        % (n, len(d["not_analysed"])))
    rc = series.cmd_series(args)
    if rc != 0:
        return rc
    from .tree import patches_dir
    out = args.out or str(patches_dir(args.kernel, args.target))
    ok, msg = series.git_am(tree, out, args.target)
    print(msg if ok else "lkmm-mark: error: " + msg)
    if not ok:
        return 1
    if args.no_verify:
        return 0
    from . import verify
    vargs = argparse.Namespace(tree=args.tree, kernel=args.kernel, patches=out, kcsan=False,
                               stress_seconds=args.stress_seconds, rest=[])
    return verify.main(vargs, plan_loader=_plan_loader)
