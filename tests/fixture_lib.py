# SPDX-License-Identifier: GPL-2.0-only
"""Run the analysis on a fixture directory: its .c/.h files become a small
fs/btrfs; its policies.json (if any) is the subsystem policy file."""
import os
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO / "scripts"))

from lkmm_mark import facts as facts_mod  # noqa: E402
from lkmm_mark import policy as policy_mod  # noqa: E402
from lkmm_mark.analysis import Analysis  # noqa: E402

TARGET = "fs/btrfs"


def make_tree(fixture, tmp):
    tree = Path(tmp) / "tree"
    dst = tree / TARGET
    dst.mkdir(parents=True)
    for p in sorted(Path(fixture).rglob("*")):
        rel = p.relative_to(fixture)
        if p.suffix in (".c", ".h") and p.is_file() and rel.parts[0] != "kernel-include":
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(p, dst / rel)
    # the fixture's kernel-include/ is the tree's include/, its Makefile
    # the target's
    if (Path(fixture) / "kernel-include").is_dir():
        shutil.copytree(Path(fixture) / "kernel-include", tree / "include")
    else:
        (tree / "include").mkdir()
    if (Path(fixture) / "Makefile").is_file():
        shutil.copy(Path(fixture) / "Makefile", dst / "Makefile")
    return tree


def make_policies(fixture, tmp, own_text=None):
    pdir = Path(tmp) / "policies"
    (pdir / "btrfs").mkdir(parents=True)
    for f in ("policies.json", "kernel.json"):
        shutil.copy(REPO / "policies" / f, pdir / f)
    own = Path(fixture) / "policies.json"
    if own_text is not None:
        (pdir / "btrfs" / "fixture.json").write_text(own_text)
    elif own.exists():
        shutil.copy(own, pdir / "btrfs" / "fixture.json")
    return pdir


def analyse_fixture(fixture, policies=None, tweak=None):
    """policies: the text of a subsystem policy file to use instead of the
    fixture's own policies.json; tweak: a function given the loaded
    policies before the analysis (to take a kernel.json fact away)."""
    with tempfile.TemporaryDirectory(prefix="lkmm-fx-") as tmp:
        tree = make_tree(fixture, tmp)
        P = policy_mod.load(make_policies(fixture, tmp, policies))
        if tweak is not None:
            tweak(P)
        recs, _ = facts_mod.run(str(tree), TARGET, 1, use_cache=False)
        files = facts_mod.source_files(str(tree), TARGET)
        A = Analysis(str(tree), TARGET, recs, P, files).run()
        return A


def site_lines(A):
    """Every verdict of the fixture, one line each, for expected files."""
    out = []
    for a in A.accesses:
        f = a.file[len(TARGET) + 1:]
        out.append("%s:%d:%d-%d: %s %s.%s %s (%s)" % (
            f, a.line, a.col, a.ecol, a.fn, a.struct, a.field, a.action, a.rule))
    return out


def pair_lines(A):
    """The racing pair of every site the lockset marked (pairs.py): its
    tier and, when paired, the counterpart, for expected.pairs files."""
    out = []
    for a in A.accesses:
        if getattr(a, "tier", None) is None:
            continue
        f = a.file[len(TARGET) + 1:]
        b = a.pair
        out.append("%s:%d:%d: %s %s.%s %s%s" % (
            f, a.line, a.col, a.fn, a.struct, a.field, a.tier,
            "" if b is None else " with %s() at %s:%d" % (b.fn, b.file[len(TARGET) + 1:],
                                                        b.line)))
    return out


def other_lines(A):
    """The bugs no mark fixes (doublefetch.py, twostep.py), one line
    each, for expected.other files: the rule, the first load or store, the
    lines of the others, and the racing counterpart."""
    out = []
    for rule, found in (("double-fetch", A.double_fetches),
                        ("two-step-store", A.two_step_stores)):
        for x in found:
            c = x["counterpart"]
            out.append("%s:%d:%d-%d: %s %s %s.%s again %s, with %s() at %s:%d" % (
                x["file"][len(TARGET) + 1:], x["line"], x["column"], x["end_column"], rule,
                x["function"], x["struct"], x["field"],
                ",".join(str(y["line"]) for y in x["again"]), c["function"],
                c["file"][len(TARGET) + 1:], c["line"]))
    return out


if __name__ == "__main__":
    # print the verdicts of a fixture (to review before writing expected)
    A = analyse_fixture(sys.argv[1])
    print("\n".join(site_lines(A)))
    if len(sys.argv) > 2:
        print("\n".join(pair_lines(A)))
        print("\n".join(other_lines(A)))
