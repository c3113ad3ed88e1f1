#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""The engine names no subsystem: nothing under scripts/ or cocci/ (every
file, code, comments and docstrings alike) names a function, struct, field,
macro, constant, file or tool of the code it is applied to.  What is
specific to a subsystem is data under policies/<subsystem>/ (its facts, its
verify.json); the default target is policies/policies.json's.

The rule, in two checks:

1. Words (always): the name of every subsystem that has a policies/
   directory ('btrfs': btrfs_* functions, struct btrfs_*, BTRFS_* macros
   and constants, BTRFS_I(), fs/btrfs paths, mkfs.btrfs), in any case, as
   a word or inside one; and 'fs_info', btrfs's name for its
   struct btrfs_fs_info (fs_info->x).
2. Names (with the kernel tree): every identifier of the default target's
   code (comments and strings left out) that no file of a reference part
   of the kernel uses (include/, kernel/, mm/, lib/, block/, fs/*.c and two
   other file systems) is the target's own: its functions, struct tags,
   fields, macros, variables.  None may appear in the engine's comments,
   docstrings and strings, nor anywhere in the cocci/ files.  The engine's
   Python code names (a parameter 'use_cache' is not the field of that
   name) are its own and not checked.

No exception: a hit is listed as file:line.  Examples in comments and
docstrings use made-up names (foo->bar, struct foo) or describe the rule."""
import io
import os
import re
import tokenize
import unittest
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ENGINE = [REPO / "scripts", REPO / "cocci"]
# btrfs's conventional name of its per-file-system struct: no other code of
# the engine has a reason to say it
EXTRA_WORDS = ["fs_info"]
# what the target's names are checked against: code of the kernel that is
# not the target's (a name found here is a kernel name, not the target's)
REFERENCE = ["include", "kernel", "mm", "lib", "block", "fs/ext4", "fs/xfs"]
ID = re.compile(r"\b[A-Za-z_]\w*\b")
C_NOISE = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)


def subsystems(policies=REPO / "policies"):
    return sorted(p.name for p in Path(policies).iterdir() if p.is_dir())


def engine_files(roots=ENGINE):
    out = []
    for root in roots:
        for p in sorted(Path(root).rglob("*")):
            if p.is_file() and "__pycache__" not in p.parts:
                out.append(p)
    return out


def word_hits(files, words):
    """'file:line: text' of each line naming one of words (any case,
    inside a longer word too)."""
    rx = re.compile("|".join(re.escape(w) for w in words), re.I)
    out = []
    for f in files:
        for n, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
            if rx.search(line):
                out.append("%s:%d: %s" % (_rel(f), n, line.strip()))
    return out


def prose(path, text):
    """(line, text) of what a file says rather than does: a Python file's
    comments and string literals (docstrings too); the whole of any other."""
    if path.suffix != ".py" and not text.startswith("#!/usr/bin/python3"):
        return list(enumerate(text.splitlines(), 1))
    out = []
    for t in tokenize.generate_tokens(io.StringIO(text).readline):
        if t.type in (tokenize.COMMENT, tokenize.STRING):
            for i, line in enumerate(t.string.splitlines()):
                out.append((t.start[0] + i, line))
    return out


def own_names(tree, target, reference=REFERENCE):
    """Identifiers of the target's code (comments and strings left out) that
    no file of the reference directories names."""
    mine = set()
    for p in (Path(tree) / target).rglob("*.[ch]"):
        mine.update(ID.findall(C_NOISE.sub(" ", p.read_text(errors="replace"))))
    sub = Path(target).name
    files = [p for d in reference for p in (Path(tree) / d).rglob("*.[ch]")]
    files += list((Path(tree) / "fs").glob("*.[ch]"))
    for p in files:
        if sub not in p.name:                  # include/trace/events/<sub>.h...
            mine.difference_update(ID.findall(p.read_text(errors="replace")))
            if not mine:
                break
    return mine


def name_hits(files, names):
    out = []
    for f in files:
        for n, line in prose(f, f.read_text(errors="replace")):
            hit = sorted(set(ID.findall(line)) & names)
            if hit:
                out.append("%s:%d: %s: %s" % (_rel(f), n, ", ".join(hit), line.strip()))
    return out


def _rel(f):
    try:
        return str(Path(f).relative_to(REPO))
    except ValueError:
        return str(f)


class EngineNamesNoSubsystem(unittest.TestCase):
    def test_no_subsystem_words(self):
        words = subsystems() + EXTRA_WORDS
        self.assertIn("btrfs", words)
        hits = word_hits(engine_files(), words)
        self.assertEqual(hits, [], "the engine names a subsystem (%d lines):\n%s"
                         % (len(hits), "\n".join(hits)))

    def test_no_names_of_the_target(self):
        import sys
        sys.path.insert(0, str(REPO / "scripts"))
        from lkmm_mark.base import UserError
        from lkmm_mark.target import default_target
        from lkmm_mark.tree import ensure_tree
        try:
            tree = ensure_tree()
        except UserError as e:
            self.skipTest("no kernel tree: %s" % e)
        names = own_names(tree, default_target())
        self.assertIn("delayed_refs_rsv", names)        # a field of the target's only
        self.assertNotIn("spin_lock", names)
        hits = name_hits(engine_files(), names)
        self.assertEqual(hits, [], "the engine names code of %s (%d lines):\n%s"
                         % (default_target(), len(hits), "\n".join(hits)))


class ChecksCanFail(unittest.TestCase):
    """The checks on made-up engine files that break them."""

    def setUp(self):
        import tempfile
        self._tmp = tempfile.TemporaryDirectory()
        self.d = Path(self._tmp.name)

    def tearDown(self):
        self._tmp.cleanup()

    def test_words_found(self):
        (self.d / "a.py").write_text('x = 1\n# see Btrfs_foo()\ny = "mkfs.btrfs"\n')
        (self.d / "b.cocci").write_text("// e.g. fs_info->x\n@@\n@@\n")
        (self.d / "c.py").write_text("ok = 1\n")
        hits = word_hits(engine_files([self.d]), ["btrfs"] + EXTRA_WORDS)
        self.assertEqual([h.split(": ", 1)[0].rsplit("/", 1)[-1] for h in hits],
                         ["a.py:2", "a.py:3", "b.cocci:1"])

    def test_names_found_in_prose_only(self):
        (self.d / "a.py").write_text('def f(use_cache):\n    """As foo_sync() does."""\n'
                                     '    return use_cache  # foo->bar_lock\n')
        (self.d / "b.cocci").write_text("@@\nexpression E;\n@@\n- foo_sync(E)\n")
        (self.d / "drv").write_text("#!/usr/bin/python3\nimport foo_sync\n")
        hits = name_hits(engine_files([self.d]), {"foo_sync", "bar_lock", "use_cache"})
        self.assertEqual([h.split(": ", 2)[:2] for h in hits],
                         [[str(self.d / "a.py:2"), "foo_sync"],
                          [str(self.d / "a.py:3"), "bar_lock"],
                          [str(self.d / "b.cocci:4"), "foo_sync"]])

    def test_own_names(self):
        t = self.d / "tree"
        (t / "fs/foo").mkdir(parents=True)
        (t / "include/linux").mkdir(parents=True)
        (t / "fs/foo/a.c").write_text('/* spin_lock_irq */\nstruct foo_info { int bar_gen; };\n'
                                      'void f(struct foo_info *fi) { spin_lock(&fi->l); '
                                      'pr_err("only_in_a_string"); }\n')
        (t / "include/linux/s.h").write_text("void spin_lock(int *l); struct x { int l; };\n")
        names = own_names(t, "fs/foo", ["include"])
        # the reference names spin_lock, l, void, int, struct; comments and
        # strings of the target do not count
        self.assertEqual(names, {"foo_info", "bar_gen", "fi", "f", "pr_err"})


if __name__ == "__main__":
    unittest.main()
