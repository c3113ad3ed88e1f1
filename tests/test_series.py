# SPDX-License-Identifier: GPL-2.0-only
"""Rewrite and series tests.

- rewrite fixtures: tests/fixtures/<name>/<file>.res is the expected
  rewritten <file>.c (every rewrite form and safety rule), expected.skipped
  the planned sites left for a human;
- the seed-style fixture's rewrite changes the same lines, in the same
  order, as the seed commit did (whitespace aside);
- cocci/access_marking.cocci -D patch makes the same marks;
- a second run over the rewritten fixture asks for nothing more;
- the committed patches/ is what `lkmm-mark series` writes today, applies
  with git am to the pristine tree, and the analysis of the fully patched
  fs/btrfs asks for no further marks (idempotence);
- rewrite never touches the user's tree without --in-place, refuses a
  dirty one.
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from fixture_lib import REPO, TARGET, analyse_fixture, make_tree, make_policies, \
    policy_mod, facts_mod, Analysis
from lkmm_mark import rewrite, series
from lkmm_mark.analysis import PHASE_TAG
from lkmm_mark.commands import plan_dict

FIXTURES = Path(__file__).resolve().parent / "fixtures"
# the seed commit, given to the project beside the repository
SEED_DIRS = [Path(os.environ["LKMM_SEEDS"])] if os.environ.get("LKMM_SEEDS") else []
SEED_DIRS += [REPO.parent / "shared" / "seeds", Path("/work/shared/seeds")]
LKMM = [sys.executable, str(REPO / "scripts" / "lkmm-mark")]


def rewrite_fixture(d, locals_=True):
    """{file name: rewritten text}, sorted skipped lines; locals_=False
    keeps every data_race() in place (as spatch's patch mode does)."""
    A = analyse_fixture(d)
    plan = plan_dict(A)
    sites = series.select_sites(plan)
    byf = {}
    for s in sites:
        byf.setdefault(s["file"], []).append(s)
    out, skipped = {}, []
    comments = series.load_comments()
    for f, ss in byf.items():
        name = f[len(TARGET) + 1:]
        src = (d / name).read_text()
        E, app, sk = rewrite.plan_file_edits(src, ss, comments, locals_=locals_)
        for s in plan["sites"]:
            if (s["file"], s["line"], s["column"]) in rewrite.nested_outer(E, app):
                s["nested"] = True
        keys = set(app) | {series.key_of(s) for s in ss if s["rule"] == "owner-read"}
        out[name] = rewrite.render_file(E, keys)
        skipped += ["%s:%d:%d: %s" % (name, k[1], k[2], why) for k, why in sk.items()]
    return out, sorted(skipped), plan


def change_blocks(diff):
    """Runs of -/+ lines of a unified diff, whitespace removed."""
    out, cur, inh = [], None, False
    for l in diff.split("\n"):
        if l.startswith("@@"):
            inh, cur = True, None
            continue
        if not inh or l.startswith(("---", "+++")):
            continue
        if l == "-- ":
            break
        if l[:1] in ("-", "+"):
            if cur is None:
                cur = [[], []]
                out.append(cur)
            cur[0 if l[0] == "-" else 1].append(l[1:])
        else:
            cur = None
    return [(re.sub(r"\s+", "", "".join(a)), re.sub(r"\s+", "", "".join(b))) for a, b in out]


def strip_c(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"\s+", "", text)


_LABEL = re.compile(r"\s*(\w+|case .*|default)\s*:\s*$")
_HEADER = re.compile(r"\s*((else\s+)?if|for|while)\b.*\)\s*$|\s*else\s*$")
_COMMENT_END = re.compile(r".*\*/\s*$")


def _is_load(text):
    """A code line with a data_race() (not a comment that names one)."""
    return "data_race(" in text and not text.strip().startswith(("/*", "*", "//"))


def hunk_lines(patch):
    """The new side of each hunk of a patch: [[(added, text)]]."""
    hunks = []
    for l in patch.split("\n"):
        if l.startswith("@@"):
            hunks.append([])
        elif l == "-- " or l.startswith("diff "):
            hunks.append(None)
        elif hunks and hunks[-1] is not None and l[:1] in (" ", "+"):
            hunks[-1].append((l[:1] == "+", l[1:]))
    return [h for h in hunks if h]


def _comment_top(lines, i):
    """Index of the first line of the comment that ends on line i; -1 when
    it starts above the lines given (a hunk's context), None when code
    comes before it on its line."""
    k = i
    while k >= 0 and "/*" not in lines[k][1]:
        k -= 1
    if k < 0:
        return -1
    if lines[k][1][:lines[k][1].index("/*")].strip():
        return None
    return k


def data_race_comment_faults(lines, only_added=True):
    """(line, why) for each data_race() line (added, with only_added)
    whose comment is not right above it (checkpatch) or is not above a
    statement: walking up from the comment over other comments and blank
    lines, the code line found must end a statement (';', '{', '}'), be a
    label, a preprocessor line or an if/else/loop header."""
    out = []
    for i, (added, text) in enumerate(lines):
        if not _is_load(text) or (only_added and not added):
            continue
        if i == 0 or not _COMMENT_END.match(lines[i - 1][1]):
            out.append((text, "no comment right above"))
            continue
        k = _comment_top(lines, i - 1)
        if k == 0:
            out.append((text, "cannot see the code above the comment"))
            continue
        while k is not None and k > 0:
            prev = lines[k - 1][1]
            if not prev.strip():
                k -= 1
            elif _COMMENT_END.match(prev):
                k = _comment_top(lines, k - 1)
            else:
                break
        if k is None:
            out.append((text, "comment after code on its line"))
            continue
        if k < 0:
            continue        # above a comment that begins before the hunk
        prev = lines[k - 1][1].rstrip() if k > 0 else None
        if prev is None:
            out.append((text, "cannot see the code above the comment"))
        elif not (prev.endswith((";", "{", "}")) or _LABEL.match(prev) or
                  prev.lstrip().startswith("#") or _HEADER.match(prev)):
            out.append((text, "comment inside a statement, after %r" % prev.strip()))
    return out


def data_race_comment_uses(lines, uses):
    """(line, comment text, expected text) of each data_race() whose use is
    known: the call its line starts with, or for a load into a local the
    call of the statement after the loads, classified by uses."""
    from lkmm_mark.diagread import use_of
    out = []
    for i, (added, text) in enumerate(lines):
        if not _is_load(text) or not added:
            continue
        m = re.match(r"\s*/\* (.*) \*/\s*$", lines[i - 1][1])
        j = i
        if re.match(r"\s*[\w *]+ = data_race\(", text):
            j = i + 1
            while j < len(lines) and (not lines[j][1].strip() or "data_race(" in lines[j][1] or
                                      lines[j][1].strip().startswith(("/*", "*"))):
                j += 1
        c = re.match(r"\s*(\w+)\(", lines[j][1]) if j < len(lines) else None
        u = use_of(uses, c.group(1), -1) if c else None
        if c is None and j < len(lines) and re.match(r"\s*if \(", lines[j][1]):
            # 'if (data_race(x->f) != S)' over one assertion: its check
            k = j + 1
            while k < len(lines) and (not lines[k][1].strip() or "data_race(" in lines[k][1]
                                      or lines[k][1].strip().startswith(("/*", "*"))):
                k += 1
            g = re.match(r"\s*(\w+)\(", lines[k][1]) if k < len(lines) else None
            u = use_of(uses, g.group(1), 0) if g else None
        elif c and u is None and _format_before_load(lines, j):
            # an argument after a format string: the message
            u = next((v for v in uses if v.get("use") == "message" and "argument" not in v),
                     None)
        # a call whose use depends on the argument (WARN(cond, fmt, ...)) is
        # left out: the line does not say which argument the load is for
        by_arg = c and any("argument" in v and use_of([v], c.group(1), v["argument"])
                           for v in uses)
        if m and u and not by_arg:
            out.append((text.strip(), m.group(1), u["text"]))
    return out


def _format_before_load(lines, j):
    """The statement at lines[j] (to its ';') has a format string ('"..%'),
    as the call of a message does."""
    text = ""
    for _, line in lines[j:j + 6]:
        text += line
        if line.rstrip().endswith(";"):
            break
    return re.search(r'"[^"]*%', text) is not None


class RewriteFixtures(unittest.TestCase):
    def check(self, name):
        d = FIXTURES / name
        out, skipped, _ = rewrite_fixture(d)
        for res in sorted(d.glob("*.res")):
            c = res.with_suffix(".c").name
            self.assertIn(c, out)
            self.assertEqual(out[c], res.read_text(), "rewrite of %s/%s differs" % (name, c))
        exp = d / "expected.skipped"
        self.assertEqual(skipped, exp.read_text().splitlines() if exp.exists() else [])

    def test_rewrite_forms(self):
        self.check("rewrite_forms")

    def test_message_and_assertion_guard(self):
        """A load after a format string, or in the condition of an 'if'
        whose body is one assertion, gets data_race() and the comment of
        that use; sysfs_emit()'s output is data (READ_ONCE())."""
        self.check("message_args")

    def test_diagnostic_through_a_local(self):
        """A load whose value reaches a message only through a local or a
        static function's result gets data_race() in place; the twins whose
        local or result does work too get READ_ONCE() (diagflow.py)."""
        self.check("diag_local")

    def test_diagnostic_through_a_traced_struct(self):
        """A load a helper stores into a struct its callers keep on the
        stack only for a tracepoint gets data_race() in place; the twin
        whose struct also picks a device gets READ_ONCE() (diagflow.py)."""
        self.check("diag_trace_struct")

    def test_double_fetch_left_for_a_human(self):
        """The loads of a double fetch get no mark: a READ_ONCE() on each
        would not make them one load (the cover letter's fix)."""
        self.check("double_fetch")

    def test_swap_arguments_left_for_a_human(self):
        """swap(a->f, b->f) assigns both: no READ_ONCE() around them (the
        verify of an ext4 series failed to build on one); they are listed
        for a human."""
        self.check("swap_macro")

    def test_rewrite_align(self):
        """Continuation lines keep their alignment (value, '?', a moved
        parenthesis, WRITE_ONCE()'s own); a line aligned with nothing
        upstream stays."""
        self.check("rewrite_align")

    def test_seed_style(self):
        self.check("seed_eb_locking")

    def test_rewrite_hoist(self):
        """'if (!--x->f)' under the field's lock: the store moves before
        the if; 'else if' stays for a human."""
        self.check("rewrite_hoist")

    def test_rewrite_single_writer(self):
        """The read half of an unlocked read-modify-write: plain in the
        only writer (a work item on its own struct), READ_ONCE() where
        the statement runs in two tasks at once."""
        self.check("rewrite_single_writer")

    def test_rewrite_diag(self):
        """A data_race() on a continuation line of a message or an assertion:
        the value is loaded into a local before the statement, the comment
        above the load; the comment names the use (message, check, trace);
        a load a condition guards, a loop header, an #if in the way: left."""
        self.check("rewrite_diag")
        res = (FIXTURES / "rewrite_diag" / "diag.res").read_text()
        lines = [(True, l) for l in res.split("\n")]
        self.assertEqual(data_race_comment_faults(lines), [])
        uses = series.load_comments()["diagnostic-read-uses"]
        text = {u["use"]: u["text"] for u in uses}
        for use, line in (("message", "\t\td_gen = data_race(d->gen);"),
                          ("message", "\tstruct task *owner = data_race(d->owner);"),
                          ("assertion", "\tint state = data_race(d->state);"),
                          ("assertion", "\t\tWARN(data_race(d->size) > 4, "),
                          ("message", "\t\tu64 size = data_race(d->size);"),
                          ("trace", "\ttrace_dev_size(data_race(d->size));"),
                          ("message", "\t\tmode = data_race(d->mode);"),
                          ("message", "\tunsigned long errors = data_race(d->errors);")):
            self.assertIn("/* %s */\n%s" % (text[use], line), res)
        checked = data_race_comment_uses(lines, uses)
        self.assertGreaterEqual(len(checked), 8)
        self.assertEqual([c for c in checked if c[1] != c[2]], [])
        # the fault finder finds faults: the old placement, inside the call
        old = [(True, l) for l in ("\tfx_err(d, \"bad %llu\",", "\t       /* x */",
                                   "\t       data_race(d->gen));")]
        self.assertEqual(len(data_race_comment_faults(old)), 1)

    def test_forms_cover_each_rewrite(self):
        res = (FIXTURES / "rewrite_forms" / "forms.res").read_text()
        for form in ("WRITE_ONCE(p->count, p->count + 1);",          # x->f++ locked
                     "WRITE_ONCE(p->count, p->count - 1);",          # --x->f
                     "WRITE_ONCE(p->bytes, p->bytes - (a + b));",    # -= with parens
                     "WRITE_ONCE(p->flags, p->flags | n);",          # |=
                     "WRITE_ONCE(p->total, READ_ONCE(p->total) + 4);",  # unlocked rmw
                     "wait_event(p->wq, READ_ONCE(p->state) == 0);",
                     "/* Unlocked write */",
                     "WARN_ON(data_race(p->limit) > 100);",
                     "list_for_each_entry(q, head, list)\n\t\tWRITE_ONCE(q->state, 3);"):
            self.assertIn(form, res)
        # safety: never touched
        for plain in ("p->dirty = 1;", "p->slots[0] = 1;", "&p->count", "sizeof(p->bytes)",
                      "p->rcu_ptr ||", "atomic_read(&p->users)", "&p->list",
                      "*out = READ_ONCE(p->limit);", "y = p->state = x;",
                      "BUG_ON(p->limit > 200);",
                      # re-read under the lock every store holds
                      "spin_lock(&p->lock);\n\tif (p->count) {"):
            self.assertIn(plain, res)
        # the refetch comment: a re-read under the lock of a field that is
        # also stored without it (the seed commit's blocking_writers)
        seed = (FIXTURES / "seed_eb_locking" / "locking.res").read_text()
        self.assertIn("/* Refetch value after lock */\n\tif (READ_ONCE(eb->blocking_writers))",
                      seed)
        self.assertNotRegex(res, r"(READ_ONCE|data_race)\([^()]*\)\s*=[^=]")
        self.assertNotIn("ONCE(READ_ONCE(", res)
        self.assertNotIn("ONCE(WRITE_ONCE(", res)
        # every data_race() has its comment on the line above (checkpatch)
        lines = res.splitlines()
        for i, l in enumerate(lines):
            if "data_race(" in l:
                self.assertIn("/*", lines[i - 1])

    def test_suspect_indent_left_for_a_human(self):
        """A mark on the line that opens a conditional whose statement is
        indented oddly would draw checkpatch's SUSPECT_CODE_INDENT (the
        pristine code's indentation, not the mark's): the site is left
        for a human; the same condition indented as usual is marked."""
        from lkmm_mark import rewrite
        odd = ("void f(struct s *p)\n{\n\tif (a) {\n\t\tg();\n"
               "\t} else if (p->qflags &\n\t\t\t\t(A | B)) {\n\t\t\tx();\n\t}\n}\n")
        usual = odd.replace("\t\t\tx();", "\t\tx();")
        for src, marked in ((odd, False), (usual, True)):
            S = rewrite.Edits(src).S
            i = next(k for k, t in enumerate(S.toks) if S.txt(k) == "qflags")
            site = {"file": "f.c", "line": S.toks[i].line, "column": S.toks[i].col,
                    "field": "qflags", "action": "READ_ONCE", "access": "read",
                    "rule": "unlocked-read", "struct": "s"}
            E, applied, skipped = rewrite.plan_file_edits(src, [site], {})
            self.assertEqual(bool(applied), marked, skipped)
            if not marked:
                self.assertIn("SUSPECT_CODE_INDENT", list(skipped.values())[0])

    def test_lines_checkpatch_flags_before_any_mark(self):
        """A line checkpatch flags whatever the change (an assignment in
        its if condition; a variable named like a misspelling in the
        tree's scripts/spelling.txt) is left for a human: a mark there
        would draw an error or warning it did not cause."""
        from lkmm_mark import rewrite
        from lkmm_mark.tree import ensure_tree
        typos = rewrite.checkpatch_typos(ensure_tree(None))
        self.assertIn("alow", typos)
        for line, why in (("\tif (rt && (t = (a %% p->size)))\n\t\tx();\n", "ASSIGN_IN_IF"),
                          ("\tdo_div(alow.start, p->size);\n", "TYPO_SPELLING"),
                          ("\tif (rt && (a %% p->size) == 0)\n\t\tx();\n", None),
                          ("\tif (rt) t = a %% p->size;\n", None)):
            src = "void f(struct s *p)\n{\n" + line.replace("%%", "%") + "}\n"
            S = rewrite.Edits(src).S
            i = next(k for k, t in enumerate(S.toks) if S.txt(k) == "size")
            site = {"file": "f.c", "line": S.toks[i].line, "column": S.toks[i].col,
                    "field": "size", "action": "READ_ONCE", "access": "read",
                    "rule": "unlocked-read", "struct": "s"}
            E, applied, skipped = rewrite.plan_file_edits(src, [site], {}, typos=typos)
            if why is None:
                self.assertTrue(applied, skipped)
            else:
                self.assertIn(why, list(skipped.values())[0])

    def test_no_local_for_a_macro_that_may_compile_away(self):
        """A data_race() on a continuation line of a call to a macro that
        some configuration defines to use none of its arguments is left
        for a human: the local it would be loaded into would be unused
        there (W=1).  Without that macro's definition the load goes into
        a local as usual."""
        from lkmm_mark import rewrite
        with tempfile.TemporaryDirectory() as tmp:
            d = Path(tmp) / "fs" / "fsx"
            d.mkdir(parents=True)
            (d / "msg.h").write_text(
                "#ifdef DEBUG\n#define fsx_debug(fs, fmt, ...) printk(fmt, ##__VA_ARGS__)\n"
                "#else\n#define fsx_debug(fs, fmt, ...) do {} while (0)\n#endif\n"
                "#define fsx_warn(fs, fmt, ...) printk(fmt, ##__VA_ARGS__)\n")
            found = rewrite.discarding_macros(tmp, ["fs/fsx/a.c"])
        self.assertEqual(found, {"fsx_debug"})
        src = ("int f(struct s *p, int x)\n{\n\tfsx_debug(p, \"%d %d\",\n"
               "\t\tx, p->flags);\n\treturn 0;\n}\n")
        S = rewrite.Edits(src).S
        i = next(k for k, t in enumerate(S.toks) if S.txt(k) == "flags")
        site = {"file": "fs/fsx/a.c", "line": S.toks[i].line, "column": S.toks[i].col,
                "field": "flags", "action": "data_race", "access": "read",
                "rule": "diagnostic-read", "struct": "s", "field_type": "unsigned int"}
        comments = series.load_comments()
        for discarding, marked in ((found, False), (frozenset(), True)):
            E, applied, skipped = rewrite.plan_file_edits(src, [dict(site)], comments,
                                                          discarding=discarding)
            self.assertEqual(bool(applied), marked, skipped)
            if not marked:
                self.assertIn("fsx_debug()", list(skipped.values())[0])

    def test_second_run_asks_nothing(self):
        for name, src in (("rewrite_forms", "forms"), ("seed_eb_locking", "locking"),
                          ("rewrite_diag", "diag")):
            with tempfile.TemporaryDirectory() as tmp:
                d = Path(tmp) / name
                shutil.copytree(FIXTURES / name, d)
                (d / (src + ".c")).write_text((d / (src + ".res")).read_text())
                before = {(a.line, a.col): (a.fn, a.field)
                          for a in analyse_fixture(FIXTURES / name).accesses}
                A = analyse_fixture(d)
                flagged = [(a.fn, a.field) for a in A.accesses if a.action != "none"]
                exp = d / "expected.skipped"
                want = [before[(int(l.split(":")[1]), int(l.split(":")[2]))]
                        for l in (exp.read_text().splitlines() if exp.exists() else [])]
                self.assertEqual(sorted(flagged), sorted(want), name)
                out, skipped, _ = rewrite_fixture(d)
                self.assertEqual(out.get(src + ".c", (d / (src + ".c")).read_text()),
                                 (d / (src + ".c")).read_text())


class SeedCommit(unittest.TestCase):
    def test_same_changes_as_the_commit(self):
        commit = [c for d in SEED_DIRS for c in glob.glob(str(d / "001-commit-*.patch"))]
        if not commit:
            self.skipTest("seed commit not found in %s" % ", ".join(map(str, SEED_DIRS)))
        d = FIXTURES / "seed_eb_locking"
        r = subprocess.run(["diff", "-u", str(d / "locking.c"), str(d / "locking.res")],
                           capture_output=True, text=True)
        mine = change_blocks(r.stdout)
        theirs = change_blocks(Path(commit[0]).read_text())
        self.assertEqual(len(mine), 12)
        self.assertEqual(mine, theirs)


class CocciPatchMode(unittest.TestCase):
    def test_same_marks_as_the_series(self):
        d = FIXTURES / "rewrite_forms"
        out, skipped, plan = rewrite_fixture(d, locals_=False)
        skip = {(l.split(":")[0], int(l.split(":")[1]), int(l.split(":")[2])) for l in skipped}
        plan["sites"] = [s for s in plan["sites"]
                         if (s["file"][len(TARGET) + 1:], s["line"], s["column"]) not in skip]
        nested = [s for s in plan["sites"] if s.get("nested")]
        self.assertEqual(len(nested), 1)    # the prefix --p->count
        with tempfile.TemporaryDirectory() as tmp:
            tree = make_tree(d, tmp)
            pf = Path(tmp) / "plan.json"
            pf.write_text(json.dumps(plan))
            r = subprocess.run(["spatch", "--very-quiet", "--sp-file",
                                str(REPO / "cocci" / "access_marking.cocci"), "-D", "patch",
                                "--dir", TARGET, "--no-includes", "--include-headers",
                                "--in-place"], cwd=tree, capture_output=True, text=True,
                               env=dict(os.environ, LKMM_PLAN=str(pf)))
            self.assertEqual(r.returncode, 0, r.stderr)
            got = (tree / TARGET / "forms.c").read_text()
        want = out["forms.c"].replace("WRITE_ONCE(p->count, p->count - 1);", "--p->count;")
        self.assertEqual(strip_c(got), strip_c(want))


class CocciPatchModeBtrfs(unittest.TestCase):
    def test_btrfs_same_marks_as_the_series(self):
        """On all of 6.1 fs/btrfs, spatch -D patch makes the series' marks
        (comments and line breaks aside, and a data_race() kept in place
        where the series loads the value into a local before the
        statement), except the nested loads the plan leaves to the series
        rewriter."""
        from lkmm_mark.tree import ensure_tree
        base = ensure_tree(None)
        with tempfile.TemporaryDirectory(prefix="lkmm-cocci-") as tmp:
            pf = Path(tmp) / "plan.json"
            r = subprocess.run(LKMM + ["plan", "--json", str(pf)], capture_output=True,
                               text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            plan = json.loads(pf.read_text())
            r = subprocess.run(["spatch", "--very-quiet", "--sp-file",
                                str(REPO / "cocci" / "access_marking.cocci"), "-D", "patch",
                                "--dir", TARGET, "--no-includes", "--include-headers",
                                "--jobs", str(os.cpu_count() or 2)],
                               cwd=base, capture_output=True, text=True,
                               env=dict(os.environ, LKMM_PLAN=str(pf)))
            self.assertEqual(r.returncode, 0, r.stderr[-2000:])
            self.assertNotIn("EXN", r.stderr)
            copy = Path(tmp) / "btrfs"
            shutil.copytree(base / TARGET, copy)
            p = subprocess.run(["patch", "-p1", "-s", "-d", str(copy)], input=r.stdout,
                               capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            sites = series.select_sites(plan)
            edits, applied, skipped = series.compute_edits(base, sites, series.load_comments(),
                                                           locals_=False)
            # nested loads, and sites the series leaves for a human (its
            # placement of a data_race() may leave one that stays in place here)
            nested = {(s["file"], s["line"], s["column"]) for s in plan["sites"]
                      if s.get("nested") or s.get("rewrite")}
            differ = []
            for f, E in sorted(edits.items()):
                keys = {k for k in applied if k[0] == f and k not in nested}
                mine = rewrite.render_file(E, keys)
                theirs = (copy / f[len(TARGET) + 1:]).read_text()
                if strip_c(mine) != strip_c(theirs):
                    differ.append(f)
            self.assertEqual(differ, [])
            self.assertLess(len(nested), 40)
            # not vacuous: spatch made the marks of hundreds of sites
            self.assertGreater(len([k for k in applied if k not in nested]), 450)


class CommitMessage(unittest.TestCase):
    def test_plain_by_declared_fact_is_counted(self):
        """A patch's message counts the loads of its fields that a declared
        fact (policies/ 'owners', 'phases') left plain, which a reviewer
        checks against the fact; other plain loads and other fields' are
        not counted."""
        def site(field, action, rule, reason="", fn="f", line=1):
            return {"file": "fs/btrfs/a.c", "line": line, "column": 1, "function": fn,
                    "struct": "s", "field": field, "action": action, "rule": rule,
                    "reason": reason, "test_code": False}
        mark = site("x", "READ_ONCE", "unlocked-read")
        sites = [mark, site("x", "none", "owner-read", line=2),
                 site("x", "none", "owner-read", line=3),
                 site("x", "none", "unraced-in-every-context",
                      "s.x: every write of it is ordered ... %s ..." % PHASE_TAG, line=4),
                 site("x", "none", "unraced-in-every-context", "s.x: a lock ...", line=5),
                 site("y", "none", "owner-read", line=6)]
        g = {"struct": "s", "fields": ["s.x"], "sites": [mark], "lock": None}
        from lkmm_mark import messages
        body = messages.rules_paragraph(g, {"sites": sites, "fields": {}}, {})
        flat = " ".join(body.split())
        self.assertIn("policies/ 'owners'): 2 reads left plain", flat)
        self.assertIn("policies/ 'phases'): 1 access left plain", flat)
        g2 = dict(g, fields=["s.z"])
        body = messages.rules_paragraph(g2, {"sites": sites, "fields": {}}, {})
        self.assertNotIn("declared in", body)

    def test_cover_lists_other_bugs_with_their_fix(self):
        """The cover letter lists the double fetches and the two-step
        stores of the plan (the series marks none of them for it), each
        with its racing counterpart, under the fix that each needs."""
        from lkmm_mark import messages
        for name, fix, verb in (("double_fetch", "load once into a local", "stored by"),
                                ("two_step_store", "compute into a local, store once",
                                 "loaded by")):
            plan = plan_dict(analyse_fixture(FIXTURES / name))
            flat = " ".join(" ".join(messages.cover_leftovers(plan, {}, [])).split())
            self.assertIn("Fix: " + fix, flat)
            found = plan["double_fetches"] + plan["two_step_stores"]
            self.assertTrue(found)
            for x in found:
                c = x["counterpart"]
                self.assertIn("%s:%d %s.%s in %s()," % (
                    x["file"].split("/")[-1], x["line"], x["struct"], x["field"],
                    x["function"]), flat)
                self.assertIn("%s %s() at %s:%d" % (verb, c["function"],
                                                   c["file"].split("/")[-1], c["line"]), flat)


def _unquoted_races(target, pdir):
    """The races a committed KCSAN run saw on the pristine kernel at a
    site of a field the series marks (any site of it: a marked one, a
    locked read, a lost update) whose report no patch of that field
    quotes: (report title, field)."""
    import argparse
    from lkmm_mark import evidence
    from lkmm_mark.commands import get_plan
    from lkmm_mark.tree import ensure_tree
    plan = get_plan(argparse.Namespace(tree=None, target=target, policies=None,
                                       jobs=0, no_cache=False))
    tree = ensure_tree(None)
    reports = evidence.pristine_reports(evidence.results_of(tree, target=target),
                                        target=target)
    idx = evidence.site_reports(plan, reports, tree)
    marked = {(s["struct"], s["field"]) for s in plan["sites"]
              if s["action"] != "none" and not s["test_code"]}
    texts = [" ".join(p.read_text().split()) for p in sorted(Path(pdir).glob("0*.patch"))[1:]]
    missing, seen = [], 0
    for s in plan["sites"]:
        if (s["struct"], s["field"]) not in marked or s["test_code"]:
            continue
        for key in idx.get((s["file"], s["line"], s["struct"], s["field"]), ()):
            seen += 1
            field = "%s::%s" % (s["struct"], s["field"])
            if not any(key in t and field in t for t in texts):
                missing.append((key, field, s["file"], s["line"]))
    return missing, seen


def _patches():
    return sorted((REPO / "patches").glob("0*.patch"))


@unittest.skipUnless(_patches(), "patches/ has no series")
class CommittedSeries(unittest.TestCase):
    def test_regenerating_changes_nothing(self):
        r = subprocess.run(LKMM + ["series", "--check"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_hunk_draw_covers_every_hunk(self):
        """tests/draw_hunks.py (the hunk review's draw) sees every hunk of
        the committed series once, and draws the same for a seed."""
        import sys
        sys.path.insert(0, str(REPO / "tests"))
        import draw_hunks
        hs = draw_hunks.hunks(REPO / "patches")
        n = sum(1 for p in sorted((REPO / "patches").glob("0*.patch"))
                for ln in p.read_text().splitlines() if ln.startswith("@@"))
        self.assertEqual(len(hs), n)
        self.assertTrue(all(h[2].startswith("@@") and h[1].startswith("fs/") for h in hs))

    def test_every_patch_names_a_racing_pair(self):
        """Each patch says who stores the field and who loads it, in which
        contexts, and lists its racing pairs."""
        for p in _patches()[1:]:
            msg = p.read_text().split("\n---\n", 1)[0]
            flat = " ".join(msg.split())
            self.assertIn("The two run at the same time", flat, p.name)
            pairs = msg.split("Racing pairs", 1)[1].split("\n\n")[1]
            self.assertRegex(pairs, r"\w+\(\)\s+against \w+\(\)", p.name)

    def test_kcsan_races_quoted_in_their_patches(self):
        """Every race a committed KCSAN run saw on the pristine kernel, at a
        site the series marks, is quoted in that site's patch, and those
        patches come first (tier confirmed)."""
        from lkmm_mark import evidence
        from lkmm_mark.commands import get_plan
        import argparse
        plan = get_plan(argparse.Namespace(tree=None, target="fs/btrfs", policies=None,
                                           jobs=0, no_cache=False))
        texts = [(p.name, p.read_text()) for p in _patches()[1:]]
        confirmed = [s for s in plan["sites"] if s.get("tier") == "confirmed"]
        self.assertGreaterEqual(len(confirmed), 10)
        last_confirmed = 0
        for s in confirmed:
            field = "%s::%s" % (s["struct"], s["field"])
            hit = [i for i, (n, t) in enumerate(texts)
                   if "BUG: KCSAN: %s" % s["kcsan"] in t and field in t]
            self.assertTrue(hit, (s["file"], s["line"], s["kcsan"]))
            last_confirmed = max(last_confirmed, hit[0])
        first_paired = min(i for i, (n, t) in enumerate(texts) if "BUG: KCSAN" not in t)
        self.assertLess(last_confirmed, first_paired)

    def test_kcsan_races_on_marked_fields_quoted(self):
        """Every race a committed KCSAN run saw on pristine at any site of a
        field the series marks is quoted in that field's patch."""
        missing, seen = _unquoted_races("fs/btrfs", REPO / "patches")
        self.assertGreaterEqual(seen, 10)
        self.assertEqual(missing, [])

    def test_git_am_on_pristine(self):
        from lkmm_mark.tree import ensure_tree
        ok, msg = series.git_am(ensure_tree(None), REPO / "patches")
        self.assertTrue(ok, msg)

    def test_cover_letter_lists_other_bugs(self):
        """Every double fetch and two-step store of the plan of fs/btrfs is
        in the committed cover letter."""
        from lkmm_mark.commands import get_plan
        import argparse
        plan = get_plan(argparse.Namespace(tree=None, target="fs/btrfs", policies=None,
                                           jobs=0, no_cache=False))
        cover = " ".join((REPO / "patches" / "0000-cover-letter.patch").read_text().split())
        found = plan["double_fetches"] + plan["two_step_stores"]
        self.assertTrue(plan["double_fetches"] and plan["two_step_stores"])
        for x in found:
            self.assertIn("%s:%d %s.%s in %s()," % (x["file"].split("/")[-1], x["line"],
                                                    x["struct"], x["field"], x["function"]),
                          cover)

    def test_data_race_comments_above_statements(self):
        """Every data_race() the series adds has its comment right above its
        line (checkpatch), and that comment is above a statement, never in
        an argument list or a condition; its text says the use (message,
        check) of the call around it, and the texts vary."""
        uses = series.load_comments()["diagnostic-read-uses"]
        faults, checked, texts, n = [], [], set(), 0
        for p in _patches()[1:]:
            for h in hunk_lines(p.read_text()):
                faults += [(p.name,) + f for f in data_race_comment_faults(h)]
                checked += data_race_comment_uses(h, uses)
                n += sum(1 for a, l in h if a and "data_race(" in l)
                texts |= {h[i - 1][1].strip() for i, (a, l) in enumerate(h)
                          if a and "data_race(" in l}
        self.assertEqual(faults, [])
        self.assertGreaterEqual(n, 12)
        # the hunk's text cannot tell the use of three: WARN(1, ...) (by
        # argument), a condition that only decides whether a message
        # prints, a value stored into a struct on the stack that only a
        # tracepoint reads (diagflow.py; the plan's diag_call gives it)
        self.assertGreaterEqual(len(checked), n - 3)
        self.assertEqual([c for c in checked if c[1] != c[2]], [])
        self.assertGreaterEqual(len(texts), 2, texts)
        # and none of them falls back to the stock text: each says its use
        stock = "/* %s */" % series.load_comments()["diagnostic-read"]
        self.assertNotIn(stock, texts)

    def test_cover_letter(self):
        cover = (REPO / "patches" / "0000-cover-letter.patch").read_text()
        from lkmm_mark.tree import PACKAGE_VERSION
        self.assertIn("Debian linux-source-6.1 %s" % PACKAGE_VERSION, cover)
        self.assertIn("checkpatch.pl --strict: 0 errors, 0 warnings", cover)
        n = len(_patches()) - 1
        self.assertIn("%d patches" % n, cover)
        for p in _patches()[1:]:
            text = p.read_text()
            self.assertRegex(text, r"\nSubject: \[PATCH \d+/\d+\] btrfs: ")
            self.assertIn("\nSigned-off-by: ", text)
            body = text.split("\n\n", 1)[1].split("\n---\n", 1)[0]
            # a quoted KCSAN title keeps its length, as upstream patches do
            long_ = [l for l in body.splitlines() if len(l) >= 75
                     and not l.startswith(("Signed-off-by:", "BUG: KCSAN: "))]
            self.assertEqual(long_, [], p.name)

    def test_fully_patched_tree_asks_for_nothing_more(self):
        from lkmm_mark.tree import ensure_tree
        base = ensure_tree(None)
        cover = (REPO / "patches" / "0000-cover-letter.patch").read_text()
        left = set(re.findall(r"^  ([\w.-]+\.[ch]):\d+:\d+: ", cover, re.M))
        with tempfile.TemporaryDirectory(prefix="lkmm-idem-") as tmp:
            tree = Path(tmp) / "tree"
            tree.mkdir()
            for e in os.listdir(base):
                if e != "fs":
                    os.symlink(base / e, tree / e)
            (tree / "fs").mkdir()
            shutil.copytree(base / TARGET, tree / TARGET)
            for p in _patches()[1:]:
                r = subprocess.run(["patch", "-p1", "-s", "-d", str(tree), "-i", str(p)],
                                   capture_output=True, text=True)
                self.assertEqual(r.returncode, 0, p.name + r.stdout)
            P = policy_mod.load(None)
            recs, _ = facts_mod.run(str(tree), TARGET, 0, use_cache=True)
            A = Analysis(str(tree), TARGET, recs, P,
                         facts_mod.source_files(str(tree), TARGET)).run()
        flagged = [a for a in A.accesses if a.action != "none" and not a.test]
        # only the sites the series left for a human (listed in the cover
        # letter) may still be flagged
        extra = ["%s:%d %s %s.%s" % (a.file, a.line, a.fn, a.struct, a.field)
                 for a in flagged if a.file.split("/", 2)[2] not in left]
        self.assertEqual(extra, [])
        self.assertLessEqual(len(flagged), len(re.findall(r"^  [\w.-]+\.[ch]:\d+:\d+: ",
                                                          cover, re.M)))


def _cached_612():
    """The 6.12 tree in the cache, unpacked and stamped (never fetched here)."""
    from lkmm_mark.tree import cache_dir, package_of
    pkg = package_of("6.12")[0]
    return (cache_dir() / pkg).is_dir() and (cache_dir() / (pkg + ".unpacked")).exists()


class CommittedSeries612(unittest.TestCase):
    """patches/6.12/, the series of --kernel 6.12: checked like patches/."""

    @unittest.skipUnless(_cached_612(), "linux-source-6.12 is not in the cache "
                         "(scripts/lkmm-mark provision --kernel 6.12)")
    def test_regenerating_changes_nothing(self):
        r = subprocess.run(LKMM + ["series", "--kernel", "6.12", "--check"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("patches/6.12 is current", r.stdout)

    def test_apart_from_the_61_series(self):
        """patches/*.patch is 6.1's alone; the 6.12 cover letter names its base."""
        d = REPO / "patches" / "6.12"
        self.assertTrue((d / "0000-cover-letter.patch").exists())
        for p in _patches():
            self.assertEqual(p.parent, REPO / "patches")
        cover = (d / "0000-cover-letter.patch").read_text()
        from lkmm_mark.tree import KERNELS
        self.assertIn("Base: Linux 6.12.", cover)
        self.assertIn("(Debian linux-source-6.12 %s), fs/btrfs." % KERNELS["6.12"][1], cover)
        self.assertIn("checkpatch.pl --strict: 0 errors, 0 warnings", cover)


class RewriteCommand(unittest.TestCase):
    def fake_tree(self, tmp):
        t = Path(tmp) / "k"
        for d in ("include/linux", "scripts", TARGET):
            (t / d).mkdir(parents=True)
        (t / "Makefile").write_text("VERSION = 6\nPATCHLEVEL = 1\nSUBLEVEL = 0\n")
        (t / "Kconfig").write_text("")
        shutil.copy(FIXTURES / "rewrite_forms" / "forms.c", t / TARGET / "forms.c")
        return t

    def run_cli(self, *a):
        return subprocess.run(LKMM + list(a), capture_output=True, text=True)

    def test_in_place_needs_tree(self):
        r = self.run_cli("rewrite", "--in-place")
        self.assertEqual(r.returncode, 2)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)

    def test_dirty_tree_refused(self):
        with tempfile.TemporaryDirectory() as tmp:
            t = self.fake_tree(tmp)
            env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t",
                       GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t")
            for c in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "x"]):
                subprocess.run(["git", "-C", str(t)] + c, check=True, env=env,
                               capture_output=True)
            with open(t / TARGET / "forms.c", "a") as f:
                f.write("/* local change */\n")
            before = (t / TARGET / "forms.c").read_text()
            r = self.run_cli("rewrite", "--in-place", "--tree", str(t), "--no-cache")
            self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
            self.assertIn("uncommitted changes", r.stderr)
            self.assertEqual((t / TARGET / "forms.c").read_text(), before)

    def test_copy_leaves_tree_alone(self):
        with tempfile.TemporaryDirectory() as tmp:
            t = self.fake_tree(tmp)
            before = (t / TARGET / "forms.c").read_text()
            out = Path(tmp) / "out"
            r = self.run_cli("rewrite", "--tree", str(t), "--out", str(out), "--no-cache",
                             "--allow-stale-facts")
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertEqual((t / TARGET / "forms.c").read_text(), before)
            self.assertIn("WRITE_ONCE(p->count, p->count + 1);",
                          (out / TARGET / "forms.c").read_text())


if __name__ == "__main__":
    unittest.main()


class OtherTargetSeries(unittest.TestCase):
    """patches/ext4/, the series of --target fs/ext4: its own directory,
    current, ext4 subjects, a racing pair in every patch."""

    def test_regenerating_changes_nothing(self):
        r = subprocess.run(LKMM + ["series", "--target", "fs/ext4", "--check"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("patches/ext4 is current", r.stdout)

    def test_subjects_and_pairs(self):
        pats = sorted((REPO / "patches" / "ext4").glob("0*.patch"))
        self.assertGreater(len(pats), 1)
        self.assertIn("Base: Linux 6.1.", pats[0].read_text())
        self.assertIn("fs/ext4.", pats[0].read_text())
        for p in pats[1:]:
            msg = p.read_text().split("\n---\n", 1)[0]
            self.assertRegex(msg, r"(?m)^Subject: \[PATCH \d+/\d+\] ext4: ", p.name)
            self.assertIn("The two run at the same time", " ".join(msg.split()), p.name)
            self.assertNotIn("fs/btrfs/", p.read_text(), p.name)

    def test_xfs_series_is_current(self):
        """patches/xfs/, the series of --target fs/xfs: current, xfs
        subjects, a racing pair in every patch."""
        r = subprocess.run(LKMM + ["series", "--target", "fs/xfs", "--check"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("patches/xfs is current", r.stdout)
        pats = sorted((REPO / "patches" / "xfs").glob("0*.patch"))
        self.assertGreater(len(pats), 1)
        for p in pats[1:]:
            msg = p.read_text().split("\n---\n", 1)[0]
            self.assertRegex(msg, r"(?m)^Subject: \[PATCH \d+/\d+\] xfs: ", p.name)
            self.assertIn("The two run at the same time", " ".join(msg.split()), p.name)

    def test_kcsan_races_on_marked_fields_quoted(self):
        """ext4's committed KCSAN run (qemu-test/results/ext4/): its races
        on fields the series marks are quoted in their patches, the lost
        update among them too, citing the file under results/ext4/."""
        missing, seen = _unquoted_races("fs/ext4", REPO / "patches" / "ext4")
        self.assertGreaterEqual(seen, 4)
        self.assertEqual(missing, [])
        text = "".join(p.read_text() for p in (REPO / "patches" / "ext4").glob("0*.patch"))
        self.assertIn("qemu-test/results/ext4/kcsan-", text)
        self.assertIn("KCSAN also saw a race at the read-modify-write", text)
