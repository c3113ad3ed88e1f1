# SPDX-License-Identifier: GPL-2.0-only
"""Stage 1: run cocci/facts.cocci over the target with spatch, cache by content."""
import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import cachelock
from .tree import UserError, cache_dir, log, require_tools

REPO = Path(__file__).resolve().parents[2]
FACTS_COCCI = REPO / "cocci" / "facts.cocci"
KINDS_COCCI = REPO / "cocci" / "kinds.cocci"   # the SmPL reference of kinds.py
MACROS = REPO / "cocci" / "lkmm-macros.h"
FACTS_ISO = REPO / "cocci" / "facts.iso"     # no isomorphisms (its comment says why)


def source_files(tree, target):
    base = Path(tree) / target
    files = sorted(str(p.relative_to(tree)) for p in base.rglob("*")
                   if p.suffix in (".c", ".h") and p.is_file())
    return files


def spatch_version():
    out = subprocess.run(["spatch", "--version"], capture_output=True, text=True)
    return out.stdout.split("\n")[0]


def content_hash(tree, files, extra=()):
    h = hashlib.sha256()
    for x in extra:
        h.update(x.encode() if isinstance(x, str) else x)
    for f in files:
        h.update(f.encode() + b"\0")
        with open(os.path.join(tree, f), "rb") as fh:
            h.update(hashlib.sha256(fh.read()).digest())
    return h.hexdigest()


def spatch_args(tree, target, jobs, cocci=FACTS_COCCI, groups=None):
    """groups: a --file-groups file to read the files from instead of
    --dir (write_groups())."""
    args = ["spatch", "--very-quiet", "--sp-file", str(cocci)]
    args += ["--file-groups", groups] if groups else ["--dir", target]
    args += ["--no-includes", "--include-headers", "-I", target, "-I", "include",
            "--timeout", "120"]
    if MACROS.exists():
        args += ["--macro-file", str(MACROS)]
    if cocci == FACTS_COCCI:
        args += ["--iso-file", str(FACTS_ISO)]
    if sys.executable:
        # the facts script runs in the driver's interpreter, not in
        # whatever 'python3' comes first in PATH (spatch's default: a
        # pyenv shim costs 0.5 s per spatch start)
        args += ["--python", sys.executable]
    if jobs > 1:
        args += ["--jobs", str(jobs), "--chunksize", "1"]
    return args


def write_groups(tree, files, path):
    """The files for spatch --file-groups, one per group, largest first:
    the workers of --jobs take them in that order, so the pass does not
    end with one worker on a large file while the other has nothing
    left (with --dir's order the two workers of the first target finished 0.7 s
    apart, with this one within 10 ms; the same facts)."""
    sized = sorted(files, key=lambda f: (-os.path.getsize(os.path.join(tree, f)), f))
    with open(path, "w") as out:
        out.write("".join(f + "\n\n" for f in sized))
    return path


def facts_key(tree, target, files=None, cocci=FACTS_COCCI):
    """Content hash of everything the facts pass reads."""
    files = files if files is not None else source_files(tree, target)
    return content_hash(tree, files, [b"jsonl-cache-2", cocci.read_bytes(),
                                      FACTS_ISO.read_bytes() if cocci == FACTS_COCCI else b"",
                                      MACROS.read_bytes() if MACROS.exists() else b"",
                                      spatch_version(), target])


def run(tree, target, jobs=0, use_cache=True, cocci=FACTS_COCCI):
    """Access facts for every file under target: (records, from_cache)."""
    return start(tree, target, jobs, use_cache, cocci).result()


def _parse_lines(lines):
    """Records of spatch's JSON lines (one parse of them all), duplicates
    (the same fact from two workers) dropped, sorted: (records, lines)."""
    lines = [x for x in (y.strip() for y in lines) if x]
    try:
        recs = json.loads("[" + ",".join(lines) + "]")
    except ValueError:
        # a line cut short (a worker killed by its timeout): one at a time
        recs, ok = [], []
        for x in lines:
            try:
                recs.append(json.loads(x))
                ok.append(x)
            except ValueError:
                pass
        lines = ok
    out = {}
    for rec, line in zip(recs, lines):
        k = (rec["k"], rec["file"], rec["line"], rec["col"], rec["eline"], rec["ecol"],
             rec.get("macro"), rec.get("name"))
        if k not in out:
            out[k] = (rec, line)
    keep = sorted(out.values(), key=lambda x: (x[0]["file"], x[0]["line"], x[0]["col"],
                                               x[0]["eline"], x[0]["ecol"], x[0]["k"]))
    return [x[0] for x in keep], [x[1] for x in keep]


class _Done:
    def __init__(self, recs):
        self.recs = recs

    def result(self):
        return self.recs, True


class Running:
    """A facts pass running in the background (spatch works while the
    caller reads the sources)."""

    def __init__(self, tree, target, files, jobs, cfile, cocci, lock=None):
        self.lock = lock                # the cache entry's, released with the result
        self.tmp = tempfile.mkdtemp(prefix="lkmm-facts-")
        self.target = target
        self.cfile = cfile
        env = dict(os.environ, LKMM_FACTS_DIR=self.tmp)
        log("spatch %s over %s (%d files, %d jobs)" % (
            "facts pass" if cocci == FACTS_COCCI else cocci.name, target, len(files), jobs))
        self.t0 = time.time()
        self.err = tempfile.TemporaryFile(mode="w+")
        try:
            groups = write_groups(tree, files, os.path.join(self.tmp, "groups")) \
                if jobs > 1 else None
            self.proc = subprocess.Popen(spatch_args(tree, target, jobs, cocci, groups),
                                         cwd=tree, env=env,
                                         stdout=subprocess.DEVNULL, stderr=self.err, text=True)
        except BaseException:
            shutil.rmtree(self.tmp, ignore_errors=True)
            cachelock.release_fd(self.lock)
            raise

    def cancel(self):
        """Stop spatch and forget its output (the caller found bad input)."""
        self.proc.kill()
        self.proc.wait()
        self.err.close()
        shutil.rmtree(self.tmp, ignore_errors=True)
        cachelock.release_fd(self.lock)

    def result(self):
        try:
            rc = self.proc.wait()
            if rc != 0:
                self.err.seek(0)
                last = (self.err.read().strip().splitlines() or ["(no output)"])[-1]
                raise UserError("spatch failed (exit %d): %s" % (rc, last))
            lines = []
            for fn in sorted(glob.glob(os.path.join(self.tmp, "*.jsonl"))):
                with open(fn) as f:
                    lines += f.read().split("\n")
            recs, lines = _parse_lines(lines)
            log("facts pass done in %.1f s: %d records" % (time.time() - self.t0, len(recs)))
            self.cfile.parent.mkdir(parents=True, exist_ok=True)
            tmpf = self.cfile.with_suffix(".tmp%d" % os.getpid())
            # the worker's own JSON lines, deduplicated and sorted: no
            # second encoding of 45 000 records
            with open(tmpf, "w") as f:
                f.write("\n".join(lines))
            os.replace(tmpf, self.cfile)
            return recs, False
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self.err.close()
            shutil.rmtree(self.tmp, ignore_errors=True)
            cachelock.release_fd(self.lock)
            self.lock = None


def start(tree, target, jobs=0, use_cache=True, cocci=FACTS_COCCI):
    """Start the facts pass; .result() gives (records, from_cache)."""
    require_tools("spatch")
    files = source_files(tree, target)
    if not files:
        raise UserError("%s/%s: no .c or .h files" % (tree, target))
    jobs = jobs or os.cpu_count() or 1
    key = facts_key(tree, target, files, cocci)
    cfile = cache_dir() / "facts" / (key + ".json")
    if use_cache and cfile.exists():
        return _Done(_read_cache(cfile))
    # one facts pass per key at a time: a second run waits for the first
    # and reads what it wrote (the file itself is written whole or not at
    # all: os.replace())
    lock = cachelock.acquire("facts-" + key[:24], "the facts pass over " + target)
    if use_cache and cfile.exists():
        cachelock.release_fd(lock)
        return _Done(_read_cache(cfile))
    return Running(tree, target, files, jobs, cfile, cocci, lock)


def _read_cache(cfile):
    with open(cfile) as f:
        return _parse_lines(f.read().split("\n"))[0]
