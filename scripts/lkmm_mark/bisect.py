# SPDX-License-Identifier: GPL-2.0-only
"""Bisectability: after each patch of the series, the target still builds.

Uses the verification stage's pristine build (qemu-test config, W=1,
ccache): a copy of the pristine tree gets the patches one at a time, and
after each one `make <target>/` rebuilds exactly the objects whose sources
or headers changed (kbuild's dependency files).  The result is cached by
the content hash of the patches.  The work directory and the result are
one cache entry under one lock: a second bisect waits, then finds the
result; the result is written whole (temporary name, renamed) at the end,
so a killed bisect leaves none.
"""
import shutil
import subprocess
import time
from pathlib import Path

from .base import UserError
from .cachelock import child_kwargs, locked, write_atomic
from .target import verify_spec
from .tree import ensure_tree
from .vbuild import build_env, build_kernel, make_args, run_logged
from .vcommon import ensure_host_tools, h, progress, use_base, vdir
from .vtrees import apply_patch, copy_tree, list_patches, prepare_pristine


def _cached(res_file, key):
    try:
        lines = res_file.read_text().splitlines()
    except OSError:
        return None
    return lines[1:] if lines and lines[0] == key else None


def _step(n, p, patches, work, pristine, out, env):
    """Apply patch n and build the target; (line, failed, stop)."""
    err = apply_patch(work, p, pristine)
    if err:
        return "%s FAIL does not apply" % p.name, True, True
    log = out / ("lkmm-bisect-%04d.log" % n)
    rc, secs = run_logged(make_args(out, verify_spec().target + "/"), log,
                          "bisect %d/%d" % (n, len(patches)), env)
    text = log.read_text(errors="replace")
    built = sum(1 for ln in text.splitlines() if ln.strip().startswith("CC "))
    if rc != 0:
        err = [ln for ln in text.splitlines() if "error:" in ln][:1]
        return "%s FAIL %s" % (p.name, err[0] if err else "make failed"), True, False
    return "%s ok %d objects rebuilt, %.0f s" % (p.name, built, secs), False, False


def _bisect(patches, pristine, b0, key, res_file):
    """The bisect itself (the caller holds the bisect lock)."""
    work = vdir() / "src" / "bisect"
    if work.exists():
        shutil.rmtree(work)                 # a killed bisect's
    copy_tree(pristine, work)
    out = work / b0["out"].name
    r = subprocess.run(["cp", "-a", str(b0["out"]), str(out)], **child_kwargs())
    if r.returncode != 0:
        raise UserError("cannot copy %s" % b0["out"])
    env = build_env()
    lines = []
    failed = 0
    t0 = time.time()
    for n, p in enumerate(patches, 1):
        line, bad, stop = _step(n, p, patches, work, pristine, out, env)
        lines.append(line)
        failed += bad
        progress("bisect %d/%d %s" % (n, len(patches), line))
        if stop:
            break
    lines.append("bisect: %d of %d patches build %s on their own (%.0f s)"
                 % (len(patches) - failed, len(patches), verify_spec().target,
                    time.time() - t0))
    write_atomic(res_file, key + "\n" + "\n".join(lines) + "\n")
    shutil.rmtree(work, ignore_errors=True)
    return lines, failed


def run(patch_dir, tree=None, kernel=None):
    ensure_host_tools()
    # absolute: patch(1) -d opens a relative -i file in the tree it patches
    patches = list_patches(Path(patch_dir).resolve())
    if not patches:
        raise UserError("%s has no patches" % patch_dir)
    base = ensure_tree(tree, kernel=kernel)
    use_base(base)
    pristine, bh = prepare_pristine(base)
    b0 = build_kernel(pristine, "base", bh)
    key = h(bh, *[p.read_bytes() for p in patches])
    res_file = vdir() / "bisect.result"
    lines = _cached(res_file, key)
    if lines is None:
        with locked("bisect", "the bisect work directory %s" % (vdir() / "src" / "bisect")):
            lines = _cached(res_file, key)      # another run's, meanwhile
            if lines is None:
                lines, failed = _bisect(patches, pristine, b0, key, res_file)
                print("\n".join(lines))
                return 1 if failed else 0
    progress("bisect: cached result for these %d patches" % len(patches))
    print("\n".join(lines))
    return 0 if not any("FAIL" in ln for ln in lines) else 1
