# SPDX-License-Identifier: GPL-2.0-only
"""verify stage 'sparse': make C=2 <target>/ in a kernel build directory.

The normalised diagnostics are kept beside the build (lkmm-sparse.txt),
stamped with the build's key; sparse runs in the build directory, so under
the build's lock (exclusive while make runs, stamp written last).

Standalone: python3 -m lkmm_mark.vsparse [--tree T] [--patched]
sparse on the cached pristine (or patched) base kernel; prints the diagnostics.
"""
import argparse
import sys

from .base import UserError
from .cachelock import ensure, remove_stamp, stamp_ok, write_atomic, write_stamp
from .target import verify_spec
from .vbuild import build_env, make_args, run_logged
from .vcommon import BuildError, h, progress
from .vdiag import parse_diagnostics


def _sparse(out, key):
    """make C=2 <target>/ in out (the caller holds its lock exclusively)."""
    stamp = out / ".lkmm-sparse-stamp"
    remove_stamp(stamp)
    target = verify_spec().target + "/"
    progress("sparse: make C=2 %s in %s" % (target, out))
    rc, secs = run_logged(make_args(out, "C=2", target), out / "lkmm-sparse.log",
                          "sparse", build_env())
    text = (out / "lkmm-sparse.log").read_text(errors="replace")
    if rc != 0:
        raise BuildError("make C=2 %s failed in %s:\n%s"
                         % (target, out, "\n".join(text.splitlines()[-15:])))
    diags = parse_diagnostics(text)
    write_atomic(out / "lkmm-sparse.txt", "".join(d + "\n" for d in diags))
    write_stamp(stamp, key)
    progress("sparse: %d diagnostics in %.0f s" % (len(diags), secs))
    return diags


def run_sparse(build, src_key):
    """Sparse diagnostics of a build (vbuild.build_kernel's dict), cached."""
    out = build["out"]
    key = h(src_key, (out / ".lkmm-stamp").read_text(), "C=2")
    sfile = out / "lkmm-sparse.txt"
    made = []

    def complete():
        return stamp_ok(out / ".lkmm-sparse-stamp", key) and sfile.exists()

    def make():
        made[:] = [_sparse(out, key)]
    ensure("build" + str(out), "the kernel build in %s (sparse)" % out, complete, make)
    return made[0] if made else sfile.read_text().splitlines()


def main(argv=None):
    from .tree import ensure_tree
    from .vcommon import use_base
    from .vbuild import build_kernel
    from .vcommon import ensure_host_tools
    from .vtrees import list_patches, prepare_patched, prepare_pristine
    ap = argparse.ArgumentParser(prog="python3 -m lkmm_mark.vsparse", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tree", help="base kernel tree (default: cached linux-source-6.1)")
    ap.add_argument("--patched", action="store_true", help="the patched tree's build")
    ap.add_argument("--patches", help="series directory (default: patches/)")
    args = ap.parse_args(argv)
    try:
        ensure_host_tools()
        base = ensure_tree(args.tree)
        use_base(base)
        src, key = prepare_pristine(base)
        b = build_kernel(src, "base", key)
        if args.patched:
            seed = b["out"]
            src, key = prepare_patched(base, key, list_patches(args.patches))
            b = build_kernel(src, "base", key, seed_from=seed)
        diags = run_sparse(b, key)
    except (UserError, BuildError) as e:
        print("lkmm-mark: error: %s" % e, file=sys.stderr)
        return 2 if isinstance(e, UserError) else 1
    for d in diags:
        print(d)
    return 0


if __name__ == "__main__":
    sys.exit(main())
