# SPDX-License-Identifier: GPL-2.0-only
"""verify: build, sparse-check, boot and stress the series in QEMU.

Stages (each prints progress; the long ones are cached by content hash), one
module each, every one runnable alone (python3 -m lkmm_mark.<module> --help):

  trees      vtrees     the pristine tree and a patched copy (cp -al + patch)
  build      vbuild     tinyconfig + qemu-test/config/*.config + the target's
                        fragment, O= builds with ccache, W=1; the target's
                        warnings of both trees compared (vdiag)
  sparse     vsparse    make C=2 <target>/ on both trees, diagnostics compared
  initramfs  initramfs  busybox-static, stress-ng, fio, the target's programs +
                        its guest workload (qemu-test/guest/)
  boot       boot       the patched kernel under QEMU (KVM when it works, else
                        TCG), the guest workload: file systems on two virtio
                        disks, stress, remount and data check, the file
                        system's check; console scanned (console)
  kcsan      vkcsan     (--kcsan) KCSAN kernels of both trees, same stress,
                        reports parsed and compared (kcsan, involve)

The target is the default one; what verify needs to know about its
subsystem is policies/<subsystem>/verify.json (target.py).  The summary
table (summary) at the end has one row per check; exit status 0
only if every check passed.  Every cache entry the stages write is locked
(cachelock): a second run waits for it, with one line saying so.
"""
import sys
import time
from pathlib import Path

from .base import UserError
from .boot import detect_accel, stress_guest
from .initramfs import build_initramfs
from .summary import check_table, guest_rows, result_row, secs as _secs
from .vcover import coverage_row
from .target import verify_spec
from .tree import ensure_tree, patches_dir
from .vbuild import build_kernel
from .vcommon import BuildError, ensure_host_tools, progress, use_base
from .vdiag import new_items
from .vkcsan import kcsan_compare, kcsan_remap
from .voptions import parse_rest
from .vsparse import run_sparse
from .vtrees import list_patches, prepare_patched, prepare_pristine


class Rows:
    """The summary table's rows; ok until a row fails."""

    def __init__(self):
        self.rows = []
        self.ok = True

    def add(self, name, ok, detail):
        self.rows.append(result_row(name, ok, detail))
        if ok is False:
            self.ok = False

    def failed(self):
        return any(r[1] == "FAIL" for r in self.rows)

    def table(self):
        return check_table(self.rows)


def build_stage(t, patches, rows):
    """Both base kernels and their warnings; (b0, b1), or None if a build failed."""
    try:
        b0 = build_kernel(t["pristine"], "base", t["bh"])
        b1 = build_kernel(t["patched"], "base", t["ph"], seed_from=b0["out"])
    except BuildError as e:
        print(str(e), file=sys.stderr)
        rows.add("build", False, str(e).splitlines()[0])
        return None
    rows.add("build", True, "pristine %s, patched %s (%d patches)" % (
        "cached" if b0["cached"] else _secs(b0["seconds"]),
        "cached" if b1["cached"] else _secs(b1["seconds"]), len(patches)))
    neww = new_items(b0["warnings"], b1["warnings"])
    for w in neww:
        print("new warning: " + w, file=sys.stderr)
    rows.add("warnings (W=1 %s)" % verify_spec().target, not neww,
             "pristine %d, patched %d, new %d" % (len(b0["warnings"]), len(b1["warnings"]),
                                                 len(neww)))
    return b0, b1


def sparse_stage(t, b0, b1, rows):
    try:
        s0 = run_sparse(b0, t["bh"])
        s1 = run_sparse(b1, t["ph"])
        news = new_items(s0, s1)
        for w in news:
            print("new sparse diagnostic: " + w, file=sys.stderr)
        rows.add("sparse (C=2 %s)" % verify_spec().target, not news,
                 "before %d, after %d, new %d" % (len(s0), len(s1), len(news)))
    except BuildError as e:
        print(str(e), file=sys.stderr)
        rows.add("sparse (C=2 %s)" % verify_spec().target, False, str(e).splitlines()[0])


def boot_stage(b1, opts, secs, rows):
    initrd = build_initramfs()
    accel = detect_accel(b1["bzimage"])
    smp = opts["smp"] or 4          # more vCPUs than host cores: more interleavings
    res = stress_guest(b1["bzimage"], initrd, secs, smp, "patched-base", accel=accel)
    for r in guest_rows(res, accel, smp):
        rows.add(*r)
    verdict = res.failure()
    if verdict:
        print("verify: " + verdict, file=sys.stderr)
    if not res.ok() and not rows.failed():
        rows.add("guest", False, verdict.splitlines()[0] if verdict else "failed")
    if res.unexpected:
        for k, line, ctx in res.unexpected[:5]:
            print("---- %s splat:\n%s" % (k, ctx), file=sys.stderr)


def kcsan_stage(t, patches, opts, secs, rows, plan_loader):
    try:
        rows.add(*kcsan_compare(t, patches, opts, secs, plan_loader))
    except BuildError as e:
        print(str(e), file=sys.stderr)
        rows.add("KCSAN", False, str(e).splitlines()[0])


def main(args, plan_loader=None):
    """`lkmm-mark verify`.  plan_loader(tree) -> the analysis plan of the base
    tree, for the KCSAN stage's mapping of races to the series (the command
    line passes it; without one, races are matched by field names only)."""
    t_start = time.time()
    opts = parse_rest(getattr(args, "rest", None))
    secs = args.stress_seconds if args.stress_seconds is not None else 60
    if secs < 5:
        raise UserError("--stress-seconds must be at least 5")
    ensure_host_tools()
    kernel = getattr(args, "kernel", None)
    base = ensure_tree(args.tree, kernel=kernel)
    use_base(base)
    pdir = args.patches or patches_dir(kernel, getattr(args, "target", None))
    patches = list_patches(pdir)
    rows = Rows()
    progress("%d patches from %s" % (len(patches), pdir))
    pristine, bh = prepare_pristine(base)
    patched, ph = prepare_patched(base, bh, patches)
    t = dict(base=base, pristine=pristine, patched=patched, bh=bh, ph=ph)
    if opts["kcsan_remap"]:
        return kcsan_remap(Path(opts["kcsan_remap"]), t, patches, plan_loader)
    if not opts["kcsan_only"]:
        built = build_stage(t, patches, rows)
        if built is None:
            print(rows.table())
            return 1
        row, left = coverage_row(patches, t["pristine"], t["patched"], built[1]["out"])
        rows.add(*row)
        for f, ln, why in left:
            print("compiled out by this config: %s:%d (%s)" % (f, ln, why), file=sys.stderr)
        sparse_stage(t, built[0], built[1], rows)
        if not opts["skip_boot"]:
            boot_stage(built[1], opts, secs, rows)
    if args.kcsan or opts["kcsan_only"]:
        kcsan_stage(t, patches, opts, secs, rows, plan_loader)
    rows.add("total", rows.ok, "%s wall" % _secs(time.time() - t_start))
    print(rows.table())
    return 0 if rows.ok else 1


def _standalone(argv=None):
    import argparse
    ap = argparse.ArgumentParser(prog="python3 -m lkmm_mark.verify", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tree")
    ap.add_argument("--kernel", default=None)
    ap.add_argument("--patches", default=None)
    ap.add_argument("--kcsan", action="store_true")
    ap.add_argument("--stress-seconds", type=int, default=None)
    ap.add_argument("rest", nargs=argparse.REMAINDER)
    args = ap.parse_args(argv)
    try:
        return main(args)
    except UserError as e:
        print("lkmm-mark: error: %s" % e, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(_standalone())
