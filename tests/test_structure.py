#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""The package's shape: no two modules of scripts/lkmm_mark import each
other, directly or through others (imports inside functions count: a
lazy import is still a dependency), and the analysis stays in modules
of at most 600 lines whose functions are at most 60 lines long.  Each
check is also run on a small made-up package that breaks it, so that a
check that could never fail fails here."""
import ast
import os
import pathlib
import unittest
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "scripts" / "lkmm_mark"
PACKAGE = "lkmm_mark"

# the modules of the analysis (analysis.py and the parts Analysis is
# composed of): the size limits below hold for these
ANALYSIS = ["analysis", "assertentry", "source", "tokutil", "accesses", "syntax", "scan",
            "waitedwork", "callgraph",
            "callers", "escapes", "private", "unpublished", "values", "detach", "owners",
            "exclusions", "protection", "races", "verdicts", "accessors", "contexts",
            "pairs", "guards", "doublefetch", "twostep", "flagargs", "instances", "variants",
            "opsentry", "forksplit", "lockstate", "lockmodes", "lockconds", "callctx",
            "lockobjects", "lockraise", "heldobjects", "locks", "nullargs", "waits", "handback", "diagflow",
            "drains", "memberflags", "madeflags",
            "threads", "lending", "torn", "initflags", "workself", "kindctx",
            "newobjects", "newmembers", "outmade"]
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 60


def read_package(pkg=PKG):
    """module name -> source, for the .py files of pkg."""
    return {p.stem: p.read_text() for p in sorted(Path(pkg).glob("*.py"))}


def imports_of(src, modules):
    """The modules of the package (names in modules) that src imports,
    anywhere in the file: 'from .x import y', 'from . import x',
    'from lkmm_mark.x import y', 'import lkmm_mark.x'."""
    out = set()
    for n in ast.walk(ast.parse(src)):
        names = []
        if isinstance(n, ast.ImportFrom):
            if n.level >= 1 and n.module:
                names = [n.module.split(".")[0]]
            elif n.level >= 1:
                names = [a.name for a in n.names]
            elif n.module == PACKAGE:
                names = [a.name for a in n.names]
            elif n.module and n.module.startswith(PACKAGE + "."):
                names = [n.module.split(".")[1]]
        elif isinstance(n, ast.Import):
            names = [a.name.split(".")[1] for a in n.names
                     if a.name.startswith(PACKAGE + ".")]
        out.update(x for x in names if x in modules)
    return out


def cycles(sources):
    """Sorted pairs (a, b) of modules that reach each other through
    imports (each pair once)."""
    deps = {m: imports_of(src, sources) for m, src in sources.items()}

    def reach(a):
        seen, todo = set(), [a]
        while todo:
            for b in deps.get(todo.pop(), ()):
                if b not in seen:
                    seen.add(b)
                    todo.append(b)
        return seen
    r = {m: reach(m) for m in deps}
    return sorted({tuple(sorted((a, b))) for a in deps for b in r[a]
                   if b != a and a in r[b]} |
                  {(a, a) for a in deps if a in deps[a]})


def big_modules(sources, names, limit=MAX_MODULE_LINES):
    """(module, lines) of the modules in names longer than limit lines."""
    return [(m, sources[m].count("\n")) for m in names
            if sources[m].count("\n") > limit]


def long_functions(sources, names, limit=MAX_FUNCTION_LINES):
    """('module.function', lines) of the functions and methods of the
    modules in names longer than limit lines."""
    out = []
    for m in names:
        for n in ast.walk(ast.parse(sources[m])):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                size = n.end_lineno - n.lineno + 1
                if size > limit:
                    out.append(("%s.%s" % (m, n.name), size))
    return out


def _fn(name, lines):
    """A made-up function of that many lines."""
    return "def %s():\n" % name + "    x = 1\n" * (lines - 2) + "    return x\n"


class Structure(unittest.TestCase):
    def setUp(self):
        self.src = read_package()

    def test_no_import_cycle(self):
        self.assertEqual(cycles(self.src), [],
                         "modules of scripts/lkmm_mark that import each other")

    def test_analysis_modules_listed(self):
        """Every module of the list exists, and every module of the package
        analysis.py imports is in the list (a new part of the analysis is
        held to the limits too)."""
        missing = [m for m in ANALYSIS if m not in self.src]
        self.assertEqual(missing, [], "analysis modules that do not exist")
        unlisted = sorted(imports_of(self.src["analysis"], self.src) - set(ANALYSIS) -
                          {"csrc", "kinds", "locks"})
        self.assertEqual(unlisted, [], "modules analysis.py imports that ANALYSIS lacks")

    def test_analysis_module_size(self):
        self.assertEqual(big_modules(self.src, ANALYSIS), [],
                         "analysis modules over %d lines" % MAX_MODULE_LINES)

    def test_analysis_function_size(self):
        self.assertEqual(long_functions(self.src, ANALYSIS), [],
                         "analysis functions over %d lines" % MAX_FUNCTION_LINES)


def conflict_markers(root):
    """(file, line) of every merge conflict marker left in the
    repository's text: docs, scripts, tests, policies, the README."""
    out = []
    files = [root / "README.md"]
    for d in ("docs", "scripts", "tests", "policies", "cocci"):
        files += sorted(p for p in (root / d).rglob("*")
                        if p.is_file() and p.suffix in (".md", ".py", ".json", ".cocci", ".sh"))
    for f in files:
        for n, line in enumerate(f.read_text(errors="replace").split("\n"), 1):
            if line.startswith(("<<<<<<< ", ">>>>>>> ")) or line == "=======":
                out.append("%s:%d" % (f.relative_to(root), n))
    return out


class NoConflictMarkers(unittest.TestCase):
    def test_none_left(self):
        root = pathlib.Path(__file__).resolve().parents[1]
        self.assertEqual(conflict_markers(root), [], "merge conflict markers left")


class ChecksCanFail(unittest.TestCase):
    def test_conflict_marker_found(self):
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            root = pathlib.Path(d)
            (root / "docs").mkdir()
            (root / "README.md").write_text("ok\n")
            (root / "docs" / "a.md").write_text("x\n" + "=" * 7 + "\ny\n")
            self.assertEqual(conflict_markers(root), ["docs/a.md:2"])

    """The checks above, on made-up packages that break them."""

    def test_cycle_found(self):
        fake = {"a": "from . import b\n",
                "b": "def f():\n    from .c import x\n",     # a lazy import counts
                "c": "from lkmm_mark.a import y\n",
                "d": "from . import a\n"}
        self.assertEqual(cycles(fake), [("a", "b"), ("a", "c"), ("b", "c")])
        self.assertEqual(cycles({"a": "from .b import x\n", "b": ""}), [])

    def test_big_module_found(self):
        fake = {"a": "x = 1\n" * (MAX_MODULE_LINES + 1), "b": "x = 1\n" * MAX_MODULE_LINES}
        self.assertEqual(big_modules(fake, ["a", "b"]), [("a", MAX_MODULE_LINES + 1)])

    def test_long_function_found(self):
        fake = {"a": _fn("f", MAX_FUNCTION_LINES + 1) + "\n\nclass C:\n" +
                "".join("    " + line + "\n" for line in
                        _fn("m", MAX_FUNCTION_LINES + 2).splitlines()) +
                "\n\n" + _fn("g", MAX_FUNCTION_LINES)}
        self.assertEqual(long_functions(fake, ["a"]),
                         [("a.f", MAX_FUNCTION_LINES + 1), ("a.m", MAX_FUNCTION_LINES + 2)])


if __name__ == "__main__":
    unittest.main()
