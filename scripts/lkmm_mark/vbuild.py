# SPDX-License-Identifier: GPL-2.0-only
"""verify stage 'build': the kernel of a cached tree, O=<tree>/o-<flavour>.

tinyconfig + qemu-test/config/*.config and the target subsystem's fragment
(policies/<subsystem>/verify.json), W=1, ccache; the target's warnings
are kept beside the build (lkmm-warnings.txt).  A build directory is an
entry of the cache: made under its lock, its stamp (.lkmm-stamp, the build
key) removed before make starts and written after it succeeded, so a build
killed half-way is taken up again (make continues from what is there) and
never taken as complete.  A run holds the build shared while it uses it.

Standalone: python3 -m lkmm_mark.vbuild [--tree T] [--flavor base] [--patched]
builds (or finds cached) the pristine (or patched) kernel and prints it.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from .base import UserError, cache_dir
from .cachelock import child_kwargs, ensure, remove_stamp, stamp_ok, write_atomic, write_stamp
from .target import verify_spec
from .vcommon import CONFIG_DIR, BuildError, config_fragments, ensure_host_tools, file_hash, \
    h, nproc, progress, use_base, vdir
from .vdiag import parse_diagnostics

FLAVORS = {
    "base": ["base.config", "debug.config"],
    "kcsan": ["base.config", "kcsan.config"],
    "kcsanall": ["base.config", "kcsan.config"],
}
# Extra make variables per flavour (part of the build key).  "kcsan" instruments
# the target only: KCSAN_SANITIZE is given on the command line as a recursive
# variable, evaluated per directory by scripts/Makefile.lib, so every other
# object is built without -fsanitize=thread.  Each watchpoint is then set up on
# an access of the target (inline helpers from headers included, as they are
# compiled into its objects), the guest runs faster, and kernfs/VFS/block races
# no longer take the reports.  "kcsanall" is the whole kernel (KCSAN's default).
FLAVOR_MAKE_ARGS = {
    "kcsan": ["KCSAN_SANITIZE=$(if $(filter {t} {t}/%,$(obj)),y,n)"],
}


def flavor_make_args(flavor):
    """FLAVOR_MAKE_ARGS of a flavour, for the target verify works on."""
    t = verify_spec().target
    return [a.replace("{t}", t) for a in FLAVOR_MAKE_ARGS.get(flavor, [])]


def fragments(flavor):
    """The config fragments of a flavour, in merge order: base.config, the
    target subsystem's (verify.json's kernel_config), the flavour's own;
    each common one followed by its version override (config_fragments())."""
    names = FLAVORS[flavor]
    return config_fragments(names[:1], CONFIG_DIR) + [verify_spec().kernel_config] + \
        config_fragments(names[1:], CONFIG_DIR)
# A fixed, valid date for the kernel's version string and the initramfs
# timestamps: the same bytes on every build (reproducible builds), and no
# "date: invalid date" from the scripts that parse it.
BUILD_TIMESTAMP = "Thu Jan  1 00:00:00 UTC 2026"
# What the kernel's version string is made of (part of the build key): a
# fixed build number too, not one more at every build of a directory.
KBUILD_ENV = dict(KBUILD_BUILD_TIMESTAMP=BUILD_TIMESTAMP, KBUILD_BUILD_USER="lkmm",
                  KBUILD_BUILD_HOST="verify", KBUILD_BUILD_VERSION="1")


def build_env():
    env = dict(os.environ)
    env.update(CCACHE_DIR=str(cache_dir() / "ccache"), CCACHE_BASEDIR=str(vdir() / "src"),
               CCACHE_NOHASHDIR="1", CCACHE_MAXSIZE=env.get("CCACHE_MAXSIZE", "8G"),
               LC_ALL="C", **KBUILD_ENV)
    return env


def make_args(out, *extra):
    return ["make", "-C", str(out.parent), "O=" + out.name, "-j%d" % (nproc() + 1),
            "CC=ccache gcc", "W=1"] + list(extra)


def run_logged(cmd, logfile, what, env):
    """Run cmd, output to logfile, a progress line every 60 s.  The child
    holds this run's cache locks with it (cachelock.child_kwargs)."""
    t0 = time.time()
    with open(logfile, "w") as f:
        p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, **child_kwargs())
        last = t0
        while p.poll() is None:
            time.sleep(1)
            if time.time() - last >= 60:
                last = time.time()
                try:
                    n = sum(1 for _ in open(logfile, errors="replace"))
                except OSError:
                    n = 0
                progress("%s: %d s, %d log lines" % (what, last - t0, n))
    return p.returncode, time.time() - t0


def config_options(path):
    opts = {}
    for line in Path(path).read_text().splitlines():
        m = re.match(r"(CONFIG_\w+)=(.*)", line)
        if m:
            opts[m.group(1)] = m.group(2)
        m = re.match(r"# (CONFIG_\w+) is not set", line)
        if m:
            opts[m.group(1)] = "n"
    return opts


def _frag_name(f):
    """A fragment as the progress line names it: below qemu-test/config/
    (a version's own: '6.12/base.config'), else the file's name."""
    try:
        return str(Path(f).relative_to(CONFIG_DIR))
    except ValueError:
        return Path(f).name


def configure(out, flavor, env):
    """.config of out from the flavour's fragments (the caller holds out's lock)."""
    frags = fragments(flavor)
    key = file_hash(frags)
    stamp = out / ".lkmm-config"
    if stamp_ok(stamp, key) and (out / ".config").exists():
        return key
    progress("configuring %s (tinyconfig + %s)" % (out, " ".join(_frag_name(f) for f in frags)))
    out.mkdir(parents=True, exist_ok=True)
    remove_stamp(stamp)
    src = out.parent
    for cmd in (["make", "-C", str(src), "O=" + out.name, "tinyconfig"],
                [str(src / "scripts/kconfig/merge_config.sh"), "-m", "-O", str(out),
                 str(out / ".config")] + [str(f) for f in frags],
                ["make", "-C", str(src), "O=" + out.name, "olddefconfig"]):
        r = subprocess.run(cmd, cwd=str(src), env=env, capture_output=True, text=True,
                           **child_kwargs())
        if r.returncode != 0:
            raise UserError("config step failed: %s: %s" % (" ".join(cmd[:3]), r.stderr[-300:]))
    have = config_options(out / ".config")
    want = {}
    for f in frags:                         # a version's override wins
        want.update(config_options(f))
    lost = []
    for k, v in want.items():
        if k == "CONFIG_INITRAMFS_SOURCE":
            continue
        if have.get(k, "n") != v:
            lost.append("%s=%s (got %s)" % (k, v, have.get(k, "unset")))
    if lost:
        raise UserError("config fragment options did not survive olddefconfig: " + ", ".join(lost))
    write_stamp(stamp, key)
    return key


def build_key(src_key, flavor):
    cfg = file_hash(fragments(flavor))
    gccv = subprocess.run(["gcc", "--version"], capture_output=True, text=True).stdout
    return h(src_key, cfg, gccv, "W=1", flavor, *flavor_make_args(flavor),
             *sorted("%s=%s" % kv for kv in KBUILD_ENV.items()))


def _seed(out, seed_from):
    """A first build of a tree starts from a copy of another tree's build
    (make then rebuilds what differs): copied under a temporary name."""
    for old in out.parent.glob(out.name + ".tmp*"):
        shutil.rmtree(old)                  # left by a killed run
    if seed_from is None or out.exists() or not (seed_from / ".lkmm-stamp").exists():
        return
    progress("seeding %s from %s" % (out, seed_from))
    tmp = out.with_name(out.name + ".tmp%d" % os.getpid())
    r = subprocess.run(["cp", "-a", str(seed_from), str(tmp)], **child_kwargs())
    if r.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        raise UserError("cannot copy %s" % seed_from)
    (tmp / ".lkmm-stamp").unlink()
    tmp.rename(out)


def _make(src, out, flavor, key, seed_from):
    """Configure and build out (the caller holds its lock exclusively)."""
    env = build_env()
    _seed(out, seed_from)
    stamp = out / ".lkmm-stamp"
    remove_stamp(stamp)                     # not complete until written again
    configure(out, flavor, env)
    # Recompile the target every time the build runs so that its warnings
    # are complete (ccache replays them for unchanged files).
    target = verify_spec().target
    for p in (out / target).rglob("*.o") if (out / target).exists() else []:
        p.unlink()
    progress("building %s kernel in %s (log: %s)" % (flavor, out, out / "lkmm-build.log"))
    targets = ["bzImage"] + flavor_make_args(flavor)
    rc, secs = run_logged(make_args(out, *targets), out / "lkmm-build.log",
                          "build %s/%s" % (src.name, flavor), env)
    text = (out / "lkmm-build.log").read_text(errors="replace")
    if rc != 0:
        tail = "\n".join(text.splitlines()[-25:])
        raise BuildError("%s build failed (%s/lkmm-build.log):\n%s" % (src.name, out, tail))
    warnings = parse_diagnostics(text, target + "/")
    write_atomic(out / "lkmm-warnings.txt", "".join(w + "\n" for w in warnings))
    write_stamp(stamp, key)
    progress("%s/%s built in %.0f s, %d %s warnings" % (src.name, flavor, secs,
                                                       len(warnings), target))
    return dict(out=out, bzimage=out / "arch/x86/boot/bzImage", warnings=warnings,
                seconds=secs, cached=False)


def build_kernel(src, flavor, src_key, seed_from=None):
    """O=<src>/o-<flavor> build; returns dict(out, bzimage, warnings, seconds, cached).

    The caller holds src (vtrees); the build stays held shared by this process."""
    out = src / ("o-" + flavor)
    key = build_key(src_key, flavor)
    bz = out / "arch/x86/boot/bzImage"
    wfile = out / "lkmm-warnings.txt"
    made = {}

    def complete():
        return stamp_ok(out / ".lkmm-stamp", key) and bz.exists() and wfile.exists()

    def make():
        made.update(_make(src, out, flavor, key, seed_from))
    ensure("build" + str(out), "the %s kernel build in %s" % (flavor, out), complete, make)
    if made:
        return made
    progress("%s: kernel up to date (cached)" % out)
    return dict(out=out, bzimage=bz, warnings=wfile.read_text().splitlines(),
                seconds=0.0, cached=True)


def ensure_pristine_kernel(tree=None, flavor="base"):
    """The cached pristine kernel (built if missing): used by the unit tests."""
    from .tree import ensure_tree
    from .vtrees import prepare_pristine
    ensure_host_tools()
    base = ensure_tree(tree)
    use_base(base)
    pristine, bh = prepare_pristine(base)
    return build_kernel(pristine, flavor, bh)


def main(argv=None):
    from .tree import ensure_tree
    from .vtrees import list_patches, prepare_patched, prepare_pristine
    ap = argparse.ArgumentParser(prog="python3 -m lkmm_mark.vbuild", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tree", help="base kernel tree (default: cached linux-source-6.1)")
    ap.add_argument("--flavor", default="base", choices=sorted(FLAVORS))
    ap.add_argument("--patched", action="store_true", help="also build the patched tree")
    ap.add_argument("--patches", help="series directory (default: patches/)")
    args = ap.parse_args(argv)
    try:
        ensure_host_tools()
        base = ensure_tree(args.tree)
        use_base(base)
        pristine, bh = prepare_pristine(base)
        builds = [build_kernel(pristine, args.flavor, bh)]
        if args.patched:
            patched, ph = prepare_patched(base, bh, list_patches(args.patches))
            builds.append(build_kernel(patched, args.flavor, ph, seed_from=builds[0]["out"]))
    except (UserError, BuildError) as e:
        print("lkmm-mark: error: %s" % e, file=sys.stderr)
        return 2 if isinstance(e, UserError) else 1
    for b in builds:
        print("%s %s (%d %s warnings)" % (b["bzimage"], "cached" if b["cached"] else
                                          "built in %.0f s" % b["seconds"],
                                          len(b["warnings"]), verify_spec().target))
    return 0


if __name__ == "__main__":
    sys.exit(main())
