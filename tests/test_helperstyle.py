# SPDX-License-Identifier: GPL-2.0-only
"""`series --style helpers`: accessors instead of in-place marks.

- the fixture tests/fixtures/helper_style (a header and two .c files):
  the rewritten files are <file>.helpers, the fields with accessors and
  those refused them expected.helpers; a field with fewer marked sites
  than the threshold keeps READ_ONCE()/WRITE_ONCE(), data_race() stays,
  a struct defined in a .c file gets its accessors there, a name a macro
  pastes with ## is not taken, an existing comment above a field gets
  the lock's paragraph, a field declared under #ifdef gets its accessors
  under the same #ifdef;
- every step of the fixture's series (the patches in order, each with
  the accessors of its fields) compiles with gcc, with the #ifdef's
  option and without, and each step defines
  exactly the accessors of its own fields;
- the accessor heads and the ## names, on made-up input;
- the committed patches/helpers/ is what `series --style helpers`
  writes today, has the default series' patches, applies with git am,
  calls no accessor before the patch that adds it, and checkpatch
  --strict finds no error or warning in it.
"""
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from fixture_lib import REPO, TARGET, analyse_fixture, make_tree
from lkmm_mark import helperdefs, helperstyle, rewrite, series
from lkmm_mark.commands import plan_dict

FIX = Path(__file__).resolve().parent / "fixtures" / "helper_style"
LKMM = [sys.executable, str(REPO / "scripts" / "lkmm-mark")]
OUT = REPO / "patches" / "helpers"
# what the fixture's code needs from the kernel, for gcc -fsyntax-only
PRELUDE = """typedef unsigned long long u64;
typedef _Bool bool;
typedef struct { int x; } spinlock_t;
#define NULL ((void *)0)
#define READ_ONCE(x) (*(const volatile __typeof__(x) *)&(x))
#define WRITE_ONCE(x, v) do { *(volatile __typeof__(x) *)&(x) = (v); } while (0)
#define data_race(x) (x)
static inline void spin_lock(spinlock_t *l) { (void)l; }
static inline void spin_unlock(spinlock_t *l) { (void)l; }
#define WARN_ON(c) ((void)(c))
int pr_info(const char *fmt, ...);
"""


def styled(d=FIX, min_sites=helperstyle.MIN_SITES):
    """(plan, sites, edits, applied, groups, Helpers, tree text) of a
    fixture in the accessor style."""
    plan = plan_dict(analyse_fixture(d))
    with tempfile.TemporaryDirectory(prefix="lkmm-hs-") as tmp:
        tree = make_tree(d, tmp)
        sites = series.select_sites(plan)
        edits, applied, _ = series.compute_edits(tree, sites, series.load_comments())
        groups = series.group_sites(plan, sites, applied)
        H = helperstyle.apply(tree, plan, sites, edits, applied, min_sites=min_sites)
    return plan, sites, edits, applied, groups, H


def all_keys(sites, applied, H):
    return set(applied) | {series.key_of(s) for s in sites if s["rule"] == "owner-read"} | \
        {H.key(n) for n in H.fields}


def render(edits, keys):
    """{file name: text} with the edits of keys (a file's Edits holds only
    its own keys' edits)."""
    return {f[len(TARGET) + 1:]: rewrite.render_file(E, keys) for f, E in edits.items()}


def steps(groups, H, edits):
    """The files after each patch of the fixture's series, in order."""
    done, out = set(), []
    for g in groups:
        done |= {series.key_of(s) for s in g["sites"]}
        done |= {H.key(n) for n in g["fields"] if n in H.fields}
        out.append((g, render(edits, done)))
    return out


def summary(H):
    lines = []
    for n in sorted(H.fields):
        F = H.fields[n]
        get, put = H.uses[n]
        lines.append("%s: %s%s in %s" % (n, "%s() " % F.getter if get else "",
                                          "%s()" % F.setter if put else "",
                                          F.file[len(TARGET) + 1:]))
    lines += ["%s: refused: %s" % (n, why) for n, why in sorted(H.refused.items())]
    lines += ["%s: %d marked sites, keeps the marks" % (n, c) for n, c in sorted(H.counts.items())
              if c < H.min_sites]
    return lines


def defined(text):
    return set(re.findall(r"^(?:static inline [^\n(]*?\b|)(\w+)\((?:const )?struct \w+ \*\w+",
                          text, re.M)) & set(re.findall(r"\b\w+_[gs]et_\w+\b", text))


def called(text):
    return set(re.findall(r"\b(btrfs_[gs]et_\w+)\(", re.sub(r"/\*.*?\*/", "", text, flags=re.S)))


class Fixture(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.plan, cls.sites, cls.edits, cls.applied, cls.groups, cls.H = styled()
        cls.out = render(cls.edits, all_keys(cls.sites, cls.applied, cls.H))

    def test_rewritten_files(self):
        for res in sorted(FIX.glob("*.[ch].helpers")):
            name = res.name[:-len(".helpers")]
            self.assertIn(name, self.out)
            self.assertEqual(self.out[name], res.read_text(), name)
        self.assertEqual(sorted(p.name[:-8] for p in FIX.glob("*.[ch].helpers")),
                         sorted(self.out))

    def test_fields(self):
        self.assertEqual(summary(self.H), (FIX / "expected.helpers").read_text().splitlines())

    def test_data_race_and_few_sites_stay(self):
        c = self.out["pool.c"]
        self.assertIn("data_race(p->count)", c)
        self.assertIn("WRITE_ONCE(p->limit, n);", c)          # 2 marked sites
        self.assertIn("READ_ONCE(p->flags)", c)               # its setter name is taken
        code = re.sub(r"static inline [^{;]*\{[^}]*\}", "",
                      c + self.out["pool.h"] + self.out["ticker.c"])
        self.assertNotRegex(code, r"(READ|WRITE)_ONCE\(\w+->(count|bytes|peak|state|next|"
                            r"ticks|stats\.hits)\b")

    def test_locked_reads_stay_plain(self):
        c = self.out["pool.c"]
        self.assertIn("btrfs_set_pool_count(p, p->count + 1);", c)
        self.assertIn("if (p->bytes > p->peak)", c)
        self.assertIn("btrfs_set_pool_count(p, p->count - 1);\n\tif (!p->count)", c)

    def test_threshold(self):
        *_, H2 = styled(min_sites=2)
        self.assertLessEqual(set(self.H.fields) | {"pool.limit", "ticker.period",
                                                   "pool_stats.misses"}, set(H2.fields))
        *_, H4 = styled(min_sites=4)
        self.assertEqual(set(H4.fields), set())
        self.assertEqual(set(H4.refused), {"pool.flags"})

    def test_every_step_compiles(self):
        if not shutil.which("gcc"):
            self.skipTest("no gcc")
        with tempfile.TemporaryDirectory(prefix="lkmm-hs-cc-") as tmp:
            t = Path(tmp)
            (t / "prelude.h").write_text(PRELUDE)
            for k, (g, files) in enumerate(steps(self.groups, self.H, self.edits), 1):
                for name, text in files.items():
                    (t / name).write_text(text)
                for name in files:
                    for debug in ([], ["-DCONFIG_TICKER_DEBUG"]):
                        if not name.endswith(".c"):
                            continue
                        r = subprocess.run(["gcc", "-fsyntax-only", "-Wall", "-Werror",
                                            "-Wdeclaration-after-statement", "-include",
                                            str(t / "prelude.h"), "-I", str(t)] + debug +
                                           [str(t / name)], capture_output=True, text=True)
                        self.assertEqual(r.returncode, 0, "step %d (%s) %s: %s" % (
                            k, g["fields"], debug, r.stderr))

    def test_each_step_adds_its_own_accessors(self):
        before = set()
        for g, files in steps(self.groups, self.H, self.edits):
            text = "".join(files.values())
            now = defined(text)
            mine = {x for n in g["fields"] if n in self.H.fields
                    for x, used in zip((self.H.fields[n].getter, self.H.fields[n].setter),
                                       self.H.uses[n]) if used}
            self.assertEqual(now - before, mine, g["fields"])
            self.assertLessEqual(called(text), now)
            before = now


class Pieces(unittest.TestCase):
    def test_pasted_names(self):
        texts = ["#define SETGET(name, t) \\\n\tstatic t foo_##name(void); \\\n"
                 "\tstatic void foo_set_##name(t v);\n",
                 "SETGET(bar, int)\nSETGET(baz_qux, long)\n"]
        self.assertEqual(helperdefs.pasted_names(texts),
                         {"foo_bar", "foo_set_bar", "foo_baz_qux", "foo_set_baz_qux"})

    def test_signature_forms(self):
        sig = helperdefs.signature
        self.assertEqual(sig("int", "foo_get_a_b", ["const struct a *a"]),
                         "static inline int foo_get_a_b(const struct a *a)")
        two = sig("void", "foo_set_some_struct_field", ["struct some_struct *some_struct",
                                                        "unsigned long field"])
        self.assertEqual(two, "static inline void foo_set_some_struct_field("
                         "struct some_struct *some_struct,\n\t\t\t\t\t     "
                         "unsigned long field)")
        long_ = sig("struct a_rather_long_type_name *",
                    "foo_get_a_rather_long_struct_name_and_its_field",
                    ["const struct a_long_struct_name *a"])
        self.assertTrue(long_.startswith("static inline struct a_rather_long_type_name *\n"
                                         "foo_get_"), long_)
        self.assertIsNone(sig("int", "f" * 90, ["const struct a *" + "a" * 20]))


def _committed():
    return sorted(OUT.glob("0*.patch"))


@unittest.skipUnless(_committed(), "patches/helpers/ has no series")
class CommittedHelperSeries(unittest.TestCase):
    def test_regenerating_changes_nothing(self):
        r = subprocess.run(LKMM + ["series", "--style", "helpers", "--check"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("patches/helpers is current", r.stdout)

    def test_same_patches_as_the_default_series(self):
        subj = [re.search(r"^Subject: (.*(?:\n .*)*)", p.read_text(), re.M).group(1)
                for p in _committed()]
        default = [re.search(r"^Subject: (.*(?:\n .*)*)", p.read_text(), re.M).group(1)
                   for p in sorted((REPO / "patches").glob("0*.patch"))]
        self.assertEqual(subj[1:], default[1:])

    def test_git_am_on_pristine(self):
        from lkmm_mark.tree import ensure_tree
        ok, msg = series.git_am(ensure_tree(None), OUT)
        self.assertTrue(ok, msg)

    def test_no_accessor_called_before_its_patch(self):
        """Text-level bisect: each accessor a patch calls is added by that
        patch or an earlier one, and each added accessor is called; every
        patch that adds accessors says so, and its field gets a comment."""
        rx = r"^(?:static inline [^\n(]*?\b|)(btrfs_[gs]et_\w+)\("
        patches = []
        for p in _committed()[1:]:
            msg, diff = p.read_text().split("\n---\n", 1)
            plus = "\n".join(l[1:] for l in diff.splitlines() if l.startswith("+"))
            patches.append((p.name, msg, plus, set(re.findall(rx, plus, re.M))))
        every = set().union(*(x[3] for x in patches))
        have, called_all = set(), set()
        for name, msg, plus, added in patches:
            have |= added
            body = re.sub(r"static inline [^{;]*\{[^}]*\}", "", plus)
            calls = set(re.findall(r"\b(btrfs_[gs]et_\w+)\(", body)) & every
            self.assertLessEqual(calls, have, name)
            if added:
                self.assertIn("This patch adds", " ".join(msg.split()), name)
                flat = re.sub(r"\n\s*\*\s*", " ", plus)
                self.assertRegex(flat, r"racy (reads|writes) use btrfs_[gs]et_", name)
            called_all |= calls
        self.assertGreaterEqual(len(every), 40)
        self.assertEqual(every - called_all, set())

    def test_cover_letter(self):
        cover = (OUT / "0000-cover-letter.patch").read_text()
        self.assertIn("checkpatch.pl --strict: 0 errors, 0 warnings", cover)
        self.assertIn("Style: accessors (lkmm-mark series --style helpers)", cover)
        self.assertIn("%d patches" % (len(_committed()) - 1), cover)


if __name__ == "__main__":
    unittest.main()
