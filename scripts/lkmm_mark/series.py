# SPDX-License-Identifier: GPL-2.0-only
"""Stage 5: the plan becomes a git format-patch series (and `rewrite`).

One patch per field, or per group of fields of one struct that share the
protecting lock.  The edits come from rewrite.py, computed once against
the pristine text; patch k is the difference between the tree with the
edits of patches 1..k-1 and 1..k.  Commits are made in a scratch git
repository in the cache with a fixed identity and date, and written with
`git format-patch --zero-commit`, so regenerating gives byte-identical
files.
"""
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from . import evidence, helperstyle, helpertext, rewrite
from .messages import ACTION_ORDER, TIERS, cover_text, message, subject, tier_of
from .rewrite import load_comments, select_sites
from .target import default_target, subsystem_of
from .tree import UserError, cache_dir, log, kernel_version, installed_version, \
    ensure_tree, package_of, patches_dir, pristine_package, require_tools

REPO = Path(__file__).resolve().parents[2]
DATE = "Thu, 1 Jan 2026 00:00:00 +0000"


def rule_texts(policies_dir=None):
    p = Path(policies_dir or REPO / "policies") / "policies.json"
    with open(p) as f:
        d = json.load(f)
    return {r["id"]: r["text"] for r in d["rules"]}


# ------------------------------------------------------------------ edits

def compute_edits(tree, sites, comments, locals_=True):
    """{file: Edits}, applied keys, {key: reason} for skipped sites;
    locals_=False keeps every data_race() in place (rewrite.plan_file_edits)."""
    byfile = collections.defaultdict(list)
    for s in sites:
        byfile[s["file"]].append(s)
    edits, applied, skipped = {}, set(), {}
    discarding = rewrite.discarding_macros(tree, byfile)
    typos = rewrite.checkpatch_typos(tree)
    for f in sorted(byfile):
        with open(Path(tree) / f, encoding="utf-8", errors="surrogateescape") as fh:
            src = fh.read()
        E, app, sk = rewrite.plan_file_edits(src, byfile[f], comments, locals_=locals_,
                                             discarding=discarding, typos=typos)
        edits[f] = E
        applied.update(app)
        skipped.update(sk)
    return edits, applied, skipped


def key_of(s):
    return (s["file"], s["line"], s["column"])


# --------------------------------------------------------------- grouping

def group_sites(plan, sites, applied):
    """Patches: (struct, lock) groups of fields; fields without a lock alone."""
    fields = plan["fields"]
    per_field = collections.defaultdict(list)
    for s in sites:
        if key_of(s) in applied or s["rule"] == "owner-read":
            per_field["%s.%s" % (s["struct"], s["field"])].append(s)
    # owner-read comments only go with a field that has marks
    per_field = {k: v for k, v in per_field.items()
                 if any(s["rule"] != "owner-read" for s in v)}
    groups = collections.defaultdict(list)
    for name in sorted(per_field):
        info = fields.get(name, {})
        lock = info.get("lock")
        struct = name.split(".", 1)[0]
        gk = (struct, lock) if lock else (struct, None, name)
        groups[gk].append(name)
    out = []
    for gk in sorted(groups, key=lambda k: (k[0], k[1] or "", k[2] if len(k) > 2 else "")):
        names = groups[gk]
        ss = sorted((s for n in names for s in per_field[n]),
                    key=lambda s: (s["file"], s["line"], s["column"]))
        out.append({"struct": gk[0], "lock": gk[1], "fields": names, "sites": ss})
    # the races KCSAN saw first: a maintainer can take the head alone
    merged = merge_shared_diag_lines(out)
    return sorted(merged, key=lambda g: TIERS.index(tier_of(g)))


def merge_shared_diag_lines(groups):
    """Groups that mark the same line, when that line gets a data_race(),
    become one patch: a later patch changing a data_race() line would have
    the old line between the comment and the new line, and checkpatch
    (DATA_RACE) only accepts a comment right above."""
    parent = list(range(len(groups)))

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i
    byline = collections.defaultdict(set)
    diag = set()
    for i, g in enumerate(groups):
        for s in g["sites"]:
            byline[(s["file"], s["line"])].add(i)
            if s["action"] == "data_race":
                diag.add((s["file"], s["line"]))
    for ln, gs in byline.items():
        if ln in diag and len(gs) > 1:
            gs = sorted(gs)
            for j in gs[1:]:
                parent[find(j)] = find(gs[0])
    merged = collections.OrderedDict()
    for i, g in enumerate(groups):
        merged.setdefault(find(i), []).append(g)
    out = []
    for parts in merged.values():
        if len(parts) == 1:
            out.append(parts[0])
            continue
        ss = sorted((s for g in parts for s in g["sites"]),
                    key=lambda s: (s["file"], s["line"], s["column"]))
        out.append({"struct": " and ".join(sorted({g["struct"] for g in parts})),
                    "lock": None, "fields": [n for g in parts for n in g["fields"]],
                    "sites": ss, "parts": parts})
    return out


# ------------------------------------------------------------------- git

def _git(repo, *args, env=None, check=True):
    e = dict(os.environ)
    e.update(env or {})
    r = subprocess.run(["git", "-C", str(repo)] + list(args), capture_output=True,
                       text=True, env=e)
    if check and r.returncode != 0:
        raise UserError("git %s failed: %s" % (args[0], r.stderr.strip().splitlines()[-1:]))
    return r.stdout


def identity(args, out_dir):
    if args.signoff:
        m = re.match(r"\s*(.+?)\s*<([^>]+)>\s*$", args.signoff)
        if not m:
            raise UserError("--signoff must be 'Name <email>'")
        return m.group(1), m.group(2)
    # the committed series keeps its author when regenerated
    cover = sorted(Path(out_dir).glob("0000-cover-letter.patch")) if out_dir else []
    if cover:
        for line in cover[0].read_text().splitlines():
            m = re.match(r"From: (.+?) <([^>]+)>$", line)
            if m:
                return m.group(1), m.group(2)
    name = subprocess.run(["git", "config", "user.name"], capture_output=True,
                          text=True).stdout.strip()
    mail = subprocess.run(["git", "config", "user.email"], capture_output=True,
                          text=True).stdout.strip()
    if not name or not mail:
        raise UserError("no Signed-off-by identity: give --signoff 'Name <email>' "
                        "or set git config user.name and user.email")
    return name, mail


def checkpatch(tree, patch):
    """(errors, warnings, checks) lines of checkpatch --strict."""
    cp = Path(tree) / "scripts" / "checkpatch.pl"
    r = subprocess.run(["perl", str(cp), "--strict", "--no-tree", "--no-color",
                        "--show-types", str(Path(patch).resolve())], capture_output=True,
                       text=True, cwd=str(tree))
    res = {"ERROR": [], "WARNING": [], "CHECK": []}
    for line in r.stdout.splitlines():
        m = re.match(r"(ERROR|WARNING|CHECK):(\w+): (.*)", line)
        if m:
            res[m.group(1)].append("%s: %s" % (m.group(2), m.group(3)))
    return res


def write_series(tree, plan, args, out_dir, policies_dir=None, run_checkpatch=True):
    comments = load_comments()
    texts = rule_texts(policies_dir)
    reports = evidence.pristine_reports(evidence.results_of(tree, target=plan["target"]),
                                       target=plan["target"])
    seen = evidence.site_reports(plan, reports, tree)
    sites = select_sites(plan)
    edits, applied, skipped = compute_edits(tree, sites, comments)
    groups = group_sites(plan, sites, applied)
    # --style helpers: the same edits, turned into accessor calls
    H = helperstyle.apply(tree, plan, sites, edits, applied, policies_dir=policies_dir) \
        if getattr(args, "style", None) == "helpers" else None
    name, mail = identity(args, out_dir)
    kv = kernel_version(tree)
    pkg, pv = pristine_package(tree)
    work = Path(tempfile.mkdtemp(prefix="series-", dir=str(cache_dir())))
    try:
        repo = work / "repo"
        repo.mkdir()
        env = {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": mail,
               "GIT_COMMITTER_NAME": name, "GIT_COMMITTER_EMAIL": mail,
               "GIT_AUTHOR_DATE": DATE, "GIT_COMMITTER_DATE": DATE,
               "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}
        _git(repo, "init", "-q", env=env)
        touched = sorted({s["file"] for g in groups for s in g["sites"]} |
                         ({H.fields[n].file for n in H.fields} if H else set()))
        for f in touched:
            (repo / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(Path(tree) / f, repo / f)
        _git(repo, "add", "-A", env=env)
        _git(repo, "commit", "-q", "-m", "base: Linux %s" % kv, env=env)
        done = collections.defaultdict(set)
        for g in groups:
            _write_group(repo, g, edits, done, H)
            extra = helpertext.patch_text(g, H, plan["target"]) if H else None
            msg = subject(g, plan["target"]) + "\n\n" + \
                message(g, plan, texts, reports, extra, left=skipped, seen=seen) + \
                "\n\nSigned-off-by: %s <%s>\n" % (name, mail)
            _git(repo, "add", "-A", env=env)
            r = subprocess.run(["git", "-C", str(repo), "commit", "-q", "-F", "-"],
                               input=msg, text=True, capture_output=True,
                               env=dict(os.environ, **env))
            if r.returncode != 0:
                raise UserError("git commit failed for %s: %s" % (subject(g, plan["target"]),
                                                                  r.stderr.strip()))
        fp = work / "fp"
        _git(repo, "format-patch", "-q", "--zero-commit", "--signature=lkmm-mark",
             "--cover-letter", "--numbered", "-o", str(fp),
             "HEAD~%d" % len(groups),
             env=env)
        pats = sorted(fp.glob("*.patch"))
        # checkpatch every patch; the remarks go into the cover letter
        cps = []
        if run_checkpatch:
            log("checkpatch --strict on %d patches" % (len(pats) - 1))
            for p in pats[1:]:
                cps.append((p.name, checkpatch(tree, p)))
        cover = pats[0].read_text()
        cover = cover.replace("*** SUBJECT HERE ***", "%s: access shared fields according to "
                              "ACCESS_ONCE policies" % subsystem_of(plan["target"]))
        base = "Linux %s" % kv + (" (Debian %s %s)" % (pkg, pv) if pv else "")
        cover = cover.replace("*** BLURB HERE ***", cover_text(
            plan, groups, skipped, cps, base, texts,
            helpertext.cover_text(H, plan["target"]) if H else None,
            helpertext.REPRODUCE if H else None))
        pats[0].write_text(cover)
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        for old in out.glob("*.patch"):
            old.unlink()
        for p in pats:
            shutil.copyfile(p, out / p.name)
        if H:
            log(helpertext.summary(H))
        return groups, skipped, cps, [out / p.name for p in pats]
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _write_group(repo, g, edits, done, H=None):
    """The files of one patch in repo: the edits of its sites and of the
    patches before it (done: file -> keys, updated), and in the accessor
    style the accessors of its fields."""
    extra = H.group_keys(g) if H else {}
    for s in g["sites"]:
        done[s["file"]].add(key_of(s))
    for f, keys in extra.items():
        done[f] |= keys
    for f in sorted({s["file"] for s in g["sites"]} | set(extra)):
        text = rewrite.render_file(edits[f], done[f])
        with open(repo / f, "w", encoding="utf-8", errors="surrogateescape") as fh:
            fh.write(text)


def summary_lines(groups):
    out = []
    for i, g in enumerate(groups):
        c = collections.Counter(s["action"] for s in g["sites"] if s["rule"] != "owner-read")
        f = ",".join(n.split(".", 1)[1] for n in g["fields"])
        if len(f) > 40:
            f = f[:37] + "..."
        out.append("%04d %-28s %-40s %-34s %s" % (
            i + 1, g["struct"][:28], f, (g["lock"] or "-")[:34],
            " ".join("%s %d" % (a, c[a]) for a in ACTION_ORDER if c[a])))
    return out


# ------------------------------------------------------------ sub-commands

def _plan(args, tree):
    from .commands import get_plan
    return get_plan(args, tree)


def cmd_series(args):
    require_tools("git", "perl")
    tree = ensure_tree(args.tree, args.target, args.kernel)
    kv = kernel_version(tree)
    pkg, pinned, _ = package_of(args.kernel)
    pv = installed_version(args.kernel)
    if not args.tree and pv and pv != pinned:
        log("note: the installed %s is %s, the committed series is for %s; "
            "the series is regenerated for %s" % (pkg, pv, pinned, pv))
    out_dir = Path(args.out) if args.out else patches_dir(args.kernel, args.target)
    if getattr(args, "style", None) == "helpers" and not args.out:
        out_dir = out_dir / "helpers"
    if args.check:
        cover = out_dir / "0000-cover-letter.patch"
        if cover.exists():
            m = re.search(r"^Base: (.*), %s\.$" % re.escape(args.target), cover.read_text(), re.M)
            here = "Linux %s" % kv
            if pv and not args.tree:
                here += " (Debian %s %s)" % (pkg, pv)
            if m and m.group(1) != here:
                raise UserError("the committed series is for %s, the tree here is %s; "
                                "regenerate with scripts/lkmm-mark series" % (m.group(1), here))
    plan = _plan(args, tree)
    if args.check:
        with tempfile.TemporaryDirectory(prefix="lkmm-series-check-") as tmp:
            groups, skipped, cps, paths = write_series(tree, plan, args, tmp)
            old = sorted(p.name for p in out_dir.glob("*.patch"))
            new = sorted(p.name for p in Path(tmp).glob("*.patch"))
            diff = [n for n in sorted(set(old) | set(new))
                    if n not in old or n not in new or
                    (out_dir / n).read_bytes() != (Path(tmp) / n).read_bytes()]
            if diff:
                print("lkmm-mark: error: %s is not current: %d file%s differ (first: %s); "
                      "run scripts/lkmm-mark series%s" % (
                          out_dir, len(diff), "" if len(diff) == 1 else "s", diff[0],
                          " --style helpers" if getattr(args, "style", None) == "helpers"
                          else ""), file=sys.stderr)
                return 1
            print("%s is current: %d patches" % (out_dir, len(new) - 1))
            return 0
    groups, skipped, cps, paths = write_series(tree, plan, args, out_dir)
    for l in summary_lines(groups):
        print(l)
    bad = [(n, c) for n, c in cps if c["ERROR"] or c["WARNING"]]
    nsites = sum(1 for g in groups for s in g["sites"] if s["rule"] != "owner-read")
    print("# %d patches, %d sites, %d planned sites not rewritten -> %s" % (
        len(groups), nsites, len(skipped), out_dir))
    for n, c in bad:
        for x in c["ERROR"] + c["WARNING"]:
            print("%s: %s" % (n, x), file=sys.stderr)
    if bad:
        print("lkmm-mark: error: checkpatch --strict reported errors or warnings "
              "in %d patches" % len(bad), file=sys.stderr)
        return 1
    return 0


def _dirty(tree, target):
    """Uncommitted changes under target of a git tree, or None if not git."""
    r = subprocess.run(["git", "-C", str(tree), "status", "--porcelain", "--", target],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return None
    return [l for l in r.stdout.splitlines() if l.strip()]


def cmd_rewrite(args):
    tree = ensure_tree(args.tree, args.target, args.kernel)
    if args.in_place:
        if not args.tree:
            raise UserError("--in-place needs an explicit --tree (the cached "
                            "pristine tree is never modified)")
        d = _dirty(tree, args.target)
        if d:
            raise UserError("%s has uncommitted changes under %s (%d files); commit "
                            "or stash them first" % (tree, args.target, len(d)))
    elif not args.out:
        raise UserError("give --out DIR for a rewritten copy, or --in-place with --tree")
    plan = _plan(args, tree)
    sites = select_sites(plan)
    edits, applied, skipped = compute_edits(tree, sites, load_comments())
    dest = Path(tree) if args.in_place else Path(args.out)
    if not args.in_place:
        if dest.exists() and any(dest.iterdir()):
            raise UserError("%s exists and is not empty" % dest)
        shutil.copytree(Path(tree) / args.target, dest / args.target)
    n = 0
    for f, E in sorted(edits.items()):
        keys = {k for k in applied if k[0] == f} | \
            {key_of(s) for s in sites if s["file"] == f and s["rule"] == "owner-read"}
        text = rewrite.render_file(E, keys)
        if text != E.S.text:
            with open(dest / f, "w", encoding="utf-8", errors="surrogateescape") as fh:
                fh.write(text)
            n += 1
    print("%d sites rewritten in %d files, %d skipped -> %s" % (
        len(applied), n, len(skipped), dest / args.target))
    for k, why in sorted(skipped.items()):
        print("%s:%d:%d: not rewritten: %s" % (k[0], k[1], k[2], why))
    return 0


def git_am(tree, patch_dir, target=None):
    """Apply the series with git am --whitespace=error onto a scratch git
    repository holding the pristine target (the default one without);
    returns (ok, message)."""
    target = target or default_target()
    pats = sorted(p for p in Path(patch_dir).glob("*.patch")
                  if not p.name.startswith("0000-"))
    if not pats:
        return False, "no patches in %s" % patch_dir
    with tempfile.TemporaryDirectory(prefix="lkmm-am-", dir=str(cache_dir())) as tmp:
        repo = Path(tmp)
        shutil.copytree(Path(tree) / target, repo / target)
        env = {"GIT_AUTHOR_NAME": "am", "GIT_AUTHOR_EMAIL": "am@localhost",
               "GIT_COMMITTER_NAME": "am", "GIT_COMMITTER_EMAIL": "am@localhost",
               "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}
        _git(repo, "init", "-q", env=env)
        _git(repo, "add", "-A", env=env)
        _git(repo, "commit", "-q", "-m", "pristine", env=env)
        for p in pats:
            r = subprocess.run(["git", "-C", str(repo), "am", "-q", "--whitespace=error",
                                str(p.resolve())], capture_output=True, text=True,
                               env=dict(os.environ, **env))
            if r.returncode != 0:
                why = (r.stdout + r.stderr).strip().splitlines()
                return False, "%s does not apply: %s" % (p.name, why[0] if why else "?")
        n = _git(repo, "rev-list", "--count", "HEAD", env=env).strip()
        return True, "%d patches applied with git am (%s commits)" % (len(pats), n)


def cmd_am(args):
    require_tools("git")
    tree = ensure_tree(args.tree, kernel=args.kernel)
    ok, msg = git_am(tree, args.patches or patches_dir(args.kernel, args.target), args.target)
    print(msg if ok else "lkmm-mark: error: " + msg, file=sys.stdout if ok else sys.stderr)
    return 0 if ok else 1
