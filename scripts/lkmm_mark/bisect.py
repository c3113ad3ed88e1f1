# SPDX-License-Identifier: GPL-2.0-only
"""Bisectability: after each patch of the series, fs/btrfs still builds.

Uses the verification stage's pristine build (qemu-test config, W=1,
ccache): a copy of the pristine tree gets the patches one at a time, and
after each one `make fs/btrfs/` rebuilds exactly the objects whose sources
or headers changed (kbuild's dependency files).  The result is cached by
the content hash of the patches.
"""
import shutil
import subprocess
import time
from pathlib import Path

from . import verify as V
from .tree import UserError, ensure_tree


def run(patch_dir, tree=None):
    V.ensure_host_tools()
    patches = V.list_patches(Path(patch_dir))
    if not patches:
        raise UserError("%s has no patches" % patch_dir)
    base = ensure_tree(tree)
    pristine, bh = V.prepare_pristine(base)
    b0 = V.build_kernel(pristine, "base", bh)
    key = V._h(bh, *[p.read_bytes() for p in patches])
    res_file = V.vdir() / "bisect.result"
    if res_file.exists() and res_file.read_text().splitlines()[0] == key:
        V.progress("bisect: cached result for these %d patches" % len(patches))
        print("\n".join(res_file.read_text().splitlines()[1:]))
        return 0 if "FAIL" not in res_file.read_text() else 1
    work = V.vdir() / "src" / "bisect"
    if work.exists():
        shutil.rmtree(work)
    V._copy_tree(pristine, work).rename(work)
    out = work / b0["out"].name
    r = subprocess.run(["cp", "-a", str(b0["out"]), str(out)])
    if r.returncode != 0:
        raise UserError("cannot copy %s" % b0["out"])
    env = V._env()
    lines = []
    failed = 0
    t0 = time.time()
    for n, p in enumerate(patches, 1):
        r = subprocess.run(["patch", "-p1", "-s", "-N", "--no-backup-if-mismatch",
                            "-d", str(work), "-i", str(p)], capture_output=True, text=True)
        if r.returncode != 0:
            lines.append("%s FAIL does not apply" % p.name)
            failed += 1
            break
        for f in V.patched_files(p):
            a, b = Path(pristine) / f, work / f
            if a.exists() and b.exists() and a.stat().st_ino == b.stat().st_ino:
                raise UserError("patching %s wrote through a hard link" % f)
        log = out / ("lkmm-bisect-%04d.log" % n)
        rc, secs = V._run_logged(V._make_args(out, "fs/btrfs/"), log,
                                 "bisect %d/%d" % (n, len(patches)), env)
        text = log.read_text(errors="replace")
        built = sum(1 for l in text.splitlines() if l.strip().startswith("CC "))
        if rc != 0:
            err = [l for l in text.splitlines() if "error:" in l][:1]
            lines.append("%s FAIL %s" % (p.name, err[0] if err else "make failed"))
            failed += 1
        else:
            lines.append("%s ok %d objects rebuilt, %.0f s" % (p.name, built, secs))
        V.progress("bisect %d/%d %s" % (n, len(patches), lines[-1]))
    lines.append("bisect: %d of %d patches build fs/btrfs on their own (%.0f s)"
                 % (len(patches) - failed, len(patches), time.time() - t0))
    res_file.write_text(key + "\n" + "\n".join(lines) + "\n")
    print("\n".join(lines))
    shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0
