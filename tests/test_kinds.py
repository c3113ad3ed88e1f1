# SPDX-License-Identifier: GPL-2.0-only
"""scripts/lkmm_mark/kinds.py (how an access is used, from the tokens)
against its SmPL reference cocci/kinds.cocci: the same kinds and marking
macro for every access of every fixture and of all of 6.1 fs/btrfs, and
the forms that tell them apart."""
import collections
import os
import shutil
import tempfile
import unittest
from pathlib import Path

import fixture_lib
from fixture_lib import TARGET, facts_mod
from lkmm_mark import csrc, kinds
from lkmm_mark.tree import ensure_tree
from lkmm_mark.analysis import Analysis

HERE = Path(__file__).resolve().parent


def mismatches(tree, target, use_cache):
    """Accesses whose token kinds differ from cocci/kinds.cocci's."""
    recs, _ = facts_mod.run(str(tree), target, 0, use_cache=use_cache)
    krecs, _ = facts_mod.run(str(tree), target, 0, use_cache=use_cache,
                             cocci=facts_mod.KINDS_COCCI)
    sp = collections.defaultdict(set)
    mac = {}
    for r in krecs:
        k = (r["file"], r["eline"], r["ecol"])
        if r["k"] == "marked":
            sp[k].add("marked")
            mac.setdefault(k, r["macro"])
        else:
            sp[k].add(r["k"])
    files = facts_mod.source_files(str(tree), target)
    A = Analysis(str(tree), target, [], None, files)
    out = []
    n = 0
    for r in recs:
        if r["k"] != "acc":
            continue
        n += 1
        k = (r["file"], r["eline"], r["ecol"])
        got = A._kinds(r["file"], r["line"], r["col"])
        want = (sp.get(k, set()), mac.get(k))
        if got != want:
            out.append("%s:%d:%d: tokens %s, SmPL %s" % (r["file"], r["line"], r["col"],
                                                        got, want))
    return n, out


class TokenKinds(unittest.TestCase):
    """The forms kinds.py must tell apart, each with its expected kinds."""
    CASES = [
        ("x = p->f;", set(), None),
        ("p->f = 1;", {"write"}, None),
        ("p->f == 1;", set(), None),
        ("p->f += 1;", {"rmw"}, None),
        ("p->f++;", {"rmw"}, None),
        ("--p->f;", {"rmw"}, None),
        ("if (c) ++p->f;", {"rmw"}, None),        # ')' of a condition, then prefix
        ("x = (a) - p->f;", set(), None),         # binary minus
        ("*p->f = 1;", set(), None),              # stores through the pointer
        ("*--p->f = 1;", {"rmw"}, None),          # decrements the pointer
        ("*p->f++ = 1;", {"rmw"}, None),          # postfix binds tighter
        ("p->f.g = 1;", set(), None),             # ->f is the base of .g
        ("q = &p->f;", {"addr"}, None),
        ("x = a & p->f;", set(), None),           # binary and
        ("q = (void *)&p->f;", {"addr"}, None),
        ("x = READ_ONCE(p->f);", {"marked"}, "READ_ONCE"),
        ("WRITE_ONCE(p->f, 1);", {"marked"}, "WRITE_ONCE"),
        ("x = xchg(&p->f, 1);", {"marked", "addr"}, "xchg"),
        ("WRITE_ONCE(x, p->f);", set(), None),    # not the first argument
        ("x = data_race(p->f);", {"marked"}, "data_race"),
        ("x = data_race(p->f + 1);", {"marked"}, "data_race-expr"),
        ("x = data_race(READ_ONCE(p->f) + 1);", {"marked"}, "READ_ONCE"),
        ("x = sizeof(p->f);", {"sizeof"}, None),
        ("x = sizeof(((struct s *)0))->f;", {"sizeof"}, None),
        ("x = f(sizeof(g(p->f)), 2);", {"sizeof"}, None),
    ]

    def test_cases(self):
        for src, want, macro in self.CASES:
            toks = csrc.tokenize("void fn(void) { %s }" % src)
            csrc.index_parens(toks)
            k = max(i for i, t in enumerate(toks) if t.text == "f" and i > 0 and
                    toks[i - 1].text in ("->", "."))
            self.assertEqual(kinds.kinds_of(toks, k), (want, macro), src)

    def test_macro_body_line(self):
        """Accesses spatch reports inside a #define: '##' and '#' do not
        end the line's tokens."""
        toks = kinds.line_tokens("\ttest_bit(PENDING_##opt, &(info)->pending);")
        k = next(i for i, t in enumerate(toks) if t.text == "pending")
        self.assertEqual(kinds.kinds_of(toks, k), ({"addr"}, None))
        toks = kinds.line_tokens("#define ABORTED(t) (READ_ONCE((t)->aborted) != 0)")
        k = next(i for i, t in enumerate(toks) if t.text == "aborted")
        self.assertEqual(kinds.kinds_of(toks, k), ({"marked"}, "READ_ONCE"))


    def test_tokenize_hash_in_line(self):
        """A '#' inside a line (stringify in a macro body) is one operator;
        the tokens after it, and the line numbers of the lines below a
        continued line, are kept."""
        toks = csrc.tokenize("S(x) #x + a->b ## c \\\n  d\n#if X\ne->f;\n")
        self.assertEqual([t.text for t in toks],
                         ["S", "(", "x", ")", "#", "x", "+", "a", "->", "b",
                          "#", "#", "c", "\\", "d", "e", "->", "f", ";"])
        self.assertEqual((toks[-4].text, toks[-4].line, toks[-4].col), ("e", 4, 0))

    def test_tokenize_blanks(self):
        """Blanks are read with the token after them, at the columns spatch
        gives; an odd blank (a no-break space, which stopped the old
        tokenizer with a traceback) and blanks at the end are skipped."""
        toks = csrc.tokenize("\tint  a;\t/* x\n y */ b\u00a0= 'c';  \n  ")
        self.assertEqual([(t.kind, t.text, t.line, t.col) for t in toks],
                         [("id", "int", 1, 1), ("id", "a", 1, 6), ("op", ";", 1, 7),
                          ("id", "b", 2, 6), ("op", "=", 2, 8), ("chr", "'c'", 2, 10),
                          ("op", ";", 2, 13)])

    def test_bracket_tables_live_with_tokens(self):
        """index_parens() keeps its tables on the token list, not in module
        state: the tokens of an analysis are freed with it (they used to
        stay in a module dict for the life of the process), and the
        tables agree with a scan of the tokens."""
        import sys
        src = "void f(int a[2]) { if (g(a[0], (h))) { x(); } }"
        toks = csrc.tokenize(src)
        plain = list(toks)                      # no tables: scanned
        before = sys.getrefcount(toks)
        csrc.index_parens(toks)
        self.assertEqual(sys.getrefcount(toks), before)
        for i, t in enumerate(toks):
            if t.text in ("(", "[", "{"):
                self.assertEqual(csrc.match_paren(toks, i), csrc.match_paren(plain, i))
            if t.text in (")", "]", "}"):
                self.assertEqual(csrc.open_of(toks, i), csrc.open_of(plain, i))
        j = csrc.match_paren(toks, 2)           # the parameter list's '('
        self.assertEqual((toks[j].text, toks[j + 1].text), (")", "{"))
        self.assertEqual(csrc.open_of(toks, j), 2)

    def test_token_index(self):
        """TokIndex finds the token at each (line, col), as the dict of
        positions it replaced did, and nothing between tokens or past the
        end; equal texts are one string."""
        src = "struct s { int cnt; };\n\tx->cnt = y.b;  /* c */ z->cnt++;\n#define M(p) ((p)->cnt)\nw(x->cnt);\n"
        toks = csrc.tokenize(src)
        at = csrc.TokIndex(toks)
        want = {(t.line, t.col): i for i, t in enumerate(toks)}
        self.assertEqual(len(want), len(toks))
        for lc, i in want.items():
            self.assertEqual(at.get(lc), i)
        for line in range(0, 7):
            for col in range(0, 40):
                if (line, col) not in want:
                    self.assertIsNone(at.get((line, col)))
                    self.assertEqual(at.get((line, col), -1), -1)
        cnt = [t for t in toks if t.text == "cnt"]
        self.assertEqual(len(cnt), 4)               # the #define line is dropped
        self.assertTrue(all(t.text is cnt[0].text for t in cnt))


class AgainstSmPL(unittest.TestCase):
    def test_fixtures(self):
        """Every fixture (copied side by side into one small tree)."""
        with tempfile.TemporaryDirectory(prefix="lkmm-kinds-") as tmp:
            tree = Path(tmp) / "tree"
            for fx in sorted((HERE / "fixtures").iterdir()):
                for p in sorted(fx.rglob("*")):
                    if p.suffix in (".c", ".h", ".res") and p.is_file():
                        dst = tree / TARGET / fx.name / p.relative_to(fx)
                        if p.suffix == ".res":
                            dst = dst.with_suffix(".res.c")   # rewritten forms too
                        dst.parent.mkdir(parents=True, exist_ok=True)
                        shutil.copy(p, dst)
            (tree / "include").mkdir()
            n, bad = mismatches(tree, TARGET, use_cache=False)
            self.assertGreater(n, 500)
            self.assertEqual(bad, [])

    def test_btrfs(self):
        """All of 6.1 fs/btrfs (both passes cached by content)."""
        tree = str(ensure_tree())
        n, bad = mismatches(tree, TARGET, use_cache=True)
        self.assertGreater(n, 30000)
        self.assertEqual(bad, [])


if __name__ == "__main__":
    unittest.main()


class ScanPlacement(unittest.TestCase):
    def test_scan_in_thread_child_or_process_agree(self):
        """The source-only part of the call graph runs in the reading thread
        while spatch runs (cold), in a forked child beside the analysis
        (cached facts), or in process (fixture_lib): the verdicts agree."""
        import argparse
        from lkmm_mark import commands
        fx = Path(fixture_lib.HERE) / "fixtures" / "ops_callback"
        want = fixture_lib.site_lines(fixture_lib.analyse_fixture(fx))
        with tempfile.TemporaryDirectory(prefix="lkmm-scan-") as tmp:
            tree = fixture_lib.make_tree(fx, tmp)
            pol = fixture_lib.make_policies(fx, tmp)
            old = os.environ.get("LKMM_MARK_CACHE")
            os.environ["LKMM_MARK_CACHE"] = os.path.join(tmp, "cache")
            try:
                for no_cache, where in ((True, "thread"), (False, "child")):
                    args = argparse.Namespace(tree=str(tree), target=TARGET, policies=str(pol),
                                              jobs=1, no_cache=no_cache)
                    if not no_cache:
                        facts_mod.run(str(tree), TARGET, 1)     # facts cached
                    A = commands.analyse(args, tree=str(tree), check_tree=False)
                    self.assertEqual(A.cached, not no_cache)
                    with self.subTest(where=where):
                        self.assertEqual(fixture_lib.site_lines(A), want)
            finally:
                if old is None:
                    del os.environ["LKMM_MARK_CACHE"]
                else:
                    os.environ["LKMM_MARK_CACHE"] = old
        # use_bitmap() runs only where the table's member is called, under
        # the caller's lock: the scan's ops-table entries say so
        self.assertIn("ops.c:24:11-17: use_bitmap ctl.thresh none (always-locked)", want)
