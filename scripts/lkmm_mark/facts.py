# SPDX-License-Identifier: GPL-2.0-only
"""Stage 1: run cocci/facts.cocci over the target with spatch, cache by content."""
import glob
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from .tree import UserError, cache_dir, log, require_tools

REPO = Path(__file__).resolve().parents[2]
FACTS_COCCI = REPO / "cocci" / "facts.cocci"
MACROS = REPO / "cocci" / "lkmm-macros.h"


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


def spatch_args(tree, target, jobs):
    args = ["spatch", "--very-quiet", "--sp-file", str(FACTS_COCCI), "--dir", target,
            "--no-includes", "--include-headers", "-I", target, "-I", "include",
            "--timeout", "120"]
    if MACROS.exists():
        args += ["--macro-file", str(MACROS)]
    if jobs > 1:
        args += ["--jobs", str(jobs), "--chunksize", "1"]
    return args


def facts_key(tree, target, files=None):
    """Content hash of everything the facts pass reads."""
    files = files if files is not None else source_files(tree, target)
    return content_hash(tree, files, [FACTS_COCCI.read_bytes(),
                                      MACROS.read_bytes() if MACROS.exists() else b"",
                                      spatch_version(), target])


def run(tree, target, jobs=0, use_cache=True):
    """Access facts for every file under target: (records, from_cache)."""
    require_tools("spatch")
    files = source_files(tree, target)
    if not files:
        raise UserError("%s/%s: no .c or .h files" % (tree, target))
    jobs = jobs or os.cpu_count() or 1
    key = facts_key(tree, target, files)
    cdir = cache_dir() / "facts"
    cfile = cdir / (key + ".json")
    if use_cache and cfile.exists():
        with open(cfile) as f:
            return json.load(f), True
    tmp = tempfile.mkdtemp(prefix="lkmm-facts-")
    try:
        env = dict(os.environ, LKMM_FACTS_DIR=tmp)
        log("spatch facts pass over %s (%d files, %d jobs)" % (target, len(files), jobs))
        t0 = time.time()
        r = subprocess.run(spatch_args(tree, target, jobs), cwd=tree, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            last = (r.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise UserError("spatch failed (exit %d): %s" % (r.returncode, last))
        recs = []
        seen = set()
        for fn in sorted(glob.glob(os.path.join(tmp, "*.jsonl"))):
            with open(fn) as f:
                for line in f:
                    line = line.strip()
                    if not line:
                        continue
                    try:
                        rec = json.loads(line)
                    except ValueError:
                        continue
                    k = (rec["k"], rec["file"], rec["line"], rec["col"], rec["eline"],
                         rec["ecol"], rec.get("macro"), rec.get("name"))
                    if k in seen:
                        continue
                    seen.add(k)
                    recs.append(rec)
        recs.sort(key=lambda r: (r["file"], r["line"], r["col"], r["eline"], r["ecol"], r["k"]))
        log("facts pass done in %.1f s: %d records" % (time.time() - t0, len(recs)))
        cdir.mkdir(parents=True, exist_ok=True)
        tmpf = cfile.with_suffix(".tmp")
        with open(tmpf, "w") as f:
            json.dump(recs, f)
        tmpf.rename(cfile)
        return recs, False
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
