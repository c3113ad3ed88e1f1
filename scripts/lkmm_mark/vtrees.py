# SPDX-License-Identifier: GPL-2.0-only
"""verify stage 'trees': the pristine tree and a patched copy in the cache.

<cache>/verify/src/pristine is a hard-linked copy (cp -al) of the base tree,
<cache>/verify/src/patched the same plus the series (patch(1) breaks the
links of the files it changes).  Each is made under a temporary name,
renamed into place and stamped last, under its lock; a run that uses a tree
holds it shared, so that no other run replaces it meanwhile.

Standalone: python3 -m lkmm_mark.vtrees [--tree T] [--patches DIR]
prints the two trees and their content keys.
"""
import argparse
import hashlib
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

from .base import UserError
from .cachelock import child_kwargs, ensure, remove_stamp, stamp_ok, write_stamp
from .vcommon import REPO, h, progress, vdir

# Top-level entries of a kernel tree that the tree hash covers (anything else
# there, e.g. a tool's scratch directory, neither invalidates nor enters it).
KERNEL_TOP = {"Documentation", "LICENSES", "arch", "block", "certs", "crypto", "drivers",
              "fs", "include", "init", "io_uring", "ipc", "kernel", "lib", "mm", "net",
              "rust", "samples", "scripts", "security", "sound", "tools", "usr", "virt",
              "COPYING", "CREDITS", "Kbuild", "Kconfig", "MAINTAINERS", "Makefile", "README"}


def tree_hash(root):
    """Cheap content identity of a tree: relative path, size, mtime of every file.

    At the top level only the kernel's own entries (KERNEL_TOP) count: the
    build dirs o-* and other tools' scratch files and directories do not."""
    m = hashlib.sha256()
    root = str(root)
    stack = [root]
    while stack:
        d = stack.pop()
        try:
            entries = sorted(os.scandir(d), key=lambda e: e.name)
        except OSError:
            continue
        for e in entries:
            if d == root and e.name not in KERNEL_TOP:
                continue
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            rel = os.path.relpath(e.path, root)
            if stat.S_ISDIR(st.st_mode):
                stack.append(e.path)
            else:
                m.update(("%s %d %d\n" % (rel, st.st_size, st.st_mtime_ns)).encode())
    return m.hexdigest()


def list_patches(pdir):
    if pdir is None:
        d = REPO / "patches"        # 6.1's: verify and bisect name other versions' dirs
        if not d.is_dir():
            return []
    else:
        d = Path(pdir)
        if not d.is_dir():
            raise UserError("%s: no such directory" % pdir)
    out = []
    for p in sorted(d.glob("*.patch")):
        text = p.read_text(errors="replace")
        if "\n--- " not in text and not text.startswith("--- "):
            continue            # cover letter: no diff
        out.append(p)
    return out


def patched_files(patch):
    files = []
    for line in patch.read_text(errors="replace").splitlines():
        if line.startswith("+++ "):
            name = line[4:].split("\t")[0].strip()
            if name != "/dev/null":
                files.append(name[2:] if name.startswith("b/") else name)
    return files


def copy_tree(src, tmp):
    """cp -al src tmp (cp -a where hard links fail); tmp must not exist."""
    r = subprocess.run(["cp", "-al", str(src), str(tmp)], stderr=subprocess.DEVNULL,
                       **child_kwargs())
    if r.returncode != 0:
        if tmp.exists():
            shutil.rmtree(tmp)
        r = subprocess.run(["cp", "-a", str(src), str(tmp)], **child_kwargs())
        if r.returncode != 0:
            raise UserError("cannot copy %s to %s" % (src, tmp))
    return tmp


def apply_patch(tree, patch, base):
    """patch -p1 into tree; None, or why it failed.  Raises UserError when
    patch(1) wrote through a hard link into base."""
    r = subprocess.run(["patch", "-p1", "-s", "-N", "--no-backup-if-mismatch",
                        "-d", str(tree), "-i", str(patch)], capture_output=True, text=True,
                       **child_kwargs())
    if r.returncode != 0:
        msg = (r.stdout + r.stderr).strip().splitlines()
        return msg[-1] if msg else "?"
    # patch(1) writes a new file and renames it: the hard link to the
    # pristine file must be broken, never written through.
    for f in patched_files(patch):
        a, b = Path(base) / f, Path(tree) / f
        if a.exists() and b.exists() and a.stat().st_ino == b.stat().st_ino:
            raise UserError("patching %s wrote through a hard link" % f)
    return None


def replace_tree(dest, base, fill=None):
    """dest becomes a copy of base (then fill(tmp)): made beside it under a
    temporary name and renamed into place.  The caller holds dest's lock
    exclusively and has removed its stamp."""
    for old in dest.parent.glob(dest.name + ".tmp*"):
        shutil.rmtree(old)                  # left by a killed run
    tmp = dest.with_name(dest.name + ".tmp%d" % os.getpid())
    copy_tree(base, tmp)
    try:
        if fill:
            fill(tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if dest.exists():
        shutil.rmtree(dest)
    tmp.rename(dest)


def _tree_entry(name, key, make):
    """The tree <cache>/verify/src/<name> with content key, held shared."""
    tree = vdir() / "src" / name
    stamp = tree.with_name(name + ".stamp")

    def complete():
        return tree.is_dir() and stamp_ok(stamp, key)

    def remake():
        remove_stamp(stamp)
        make(tree)
        write_stamp(stamp, key)
    ensure("src-" + name, "the %s tree %s" % (name, tree), complete, remake)
    return tree


def prepare_pristine(base):
    """Hard-linked copy of base at <cache>/verify/src/pristine; returns (path, hash).

    The pristine and patched copies sit at the same depth, so builds in
    <src>/o-<flavor> use identical relative paths (srctree=..) and ccache hits
    across the two trees for every file the series leaves alone.
    """
    (vdir() / "src").mkdir(parents=True, exist_ok=True)
    progress("hashing base tree %s" % base)
    bh = tree_hash(base)

    def make(tree):
        progress("copying pristine tree into %s" % tree)
        replace_tree(tree, base)
    return _tree_entry("pristine", bh, make), bh


def prepare_patched(base, bh, patches):
    """<cache>/verify/src/patched: base + patches (hard links broken where patched)."""
    ph = h(bh, *[p.read_bytes() for p in patches])

    def fill(tmp):
        for p in patches:
            err = apply_patch(tmp, p, base)
            if err:
                raise UserError("%s does not apply: %s" % (p.name, err))

    def make(tree):
        progress("making patched tree (%d patches) in %s" % (len(patches), tree))
        replace_tree(tree, base, fill)
    return _tree_entry("patched", ph, make), ph


def main(argv=None):
    from .tree import ensure_tree
    from .vcommon import use_base
    ap = argparse.ArgumentParser(prog="python3 -m lkmm_mark.vtrees", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tree", help="base kernel tree (default: cached linux-source-6.1)")
    ap.add_argument("--patches", help="series directory (default: patches/)")
    ap.add_argument("--pristine-only", action="store_true")
    args = ap.parse_args(argv)
    try:
        base = ensure_tree(args.tree)
        use_base(base)
        pristine, bh = prepare_pristine(base)
        print("pristine %s %s" % (pristine, bh))
        if not args.pristine_only:
            patches = list_patches(args.patches)
            patched, ph = prepare_patched(base, bh, patches)
            print("patched %s %s (%d patches)" % (patched, ph, len(patches)))
    except UserError as e:
        print("lkmm-mark: error: %s" % e, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
