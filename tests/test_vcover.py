# SPDX-License-Identifier: GPL-2.0-only
"""verify's coverage row: the series' changed lines the verification
kernel does not compile (a file whose object was not built, a line under
an #if of an unset option) are counted apart from the live ones."""
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from lkmm_mark import vcover  # noqa: E402

PATCH = """\
--- a/fs/fsx/a.c
+++ b/fs/fsx/a.c
@@ -3,5 +3,5 @@ int f(struct s *p)
 {
-	p->x = 1;
+	WRITE_ONCE(p->x, 1);
 #ifdef CONFIG_FSX_DEBUG
-	p->y = 2;
+	WRITE_ONCE(p->y, 2);
 #endif
--- a/fs/fsx/rt.c
+++ b/fs/fsx/rt.c
@@ -1,2 +1,2 @@
-int g(struct s *p) { return p->x; }
+int g(struct s *p) { return READ_ONCE(p->x); }
"""

A_C = """int f(struct s *p);
int f(struct s *p)
{
	WRITE_ONCE(p->x, 1);
#ifdef CONFIG_FSX_DEBUG
	WRITE_ONCE(p->y, 2);
#endif
}
"""


class Coverage(unittest.TestCase):
    def test_changed_lines_are_numbered_as_the_build_sees_them(self):
        """The patched file's lines that the pristine one lacks: a later
        patch that adds a line above shifts them, as it does in the
        build."""
        self.assertEqual(vcover.patched_files([PATCH]), ["fs/fsx/a.c", "fs/fsx/rt.c"])
        old = "a\nb\nc\nd\n"
        self.assertEqual(vcover.added_lines(old, "/* x */\na\nB\nc\nd\ne\n"), [1, 3, 6])

    def test_conditions(self):
        cfg = {"CONFIG_A": "y", "CONFIG_B": "m"}
        for kind, expr, want in (("ifdef", " CONFIG_A", True), ("ifndef", " CONFIG_A", False),
                                 ("ifdef", " CONFIG_C", False),
                                 ("if", " IS_ENABLED(CONFIG_B) && !defined(CONFIG_C)", True),
                                 ("if", " defined(CONFIG_C) || CONFIG_A /* why */", True),
                                 ("if", " DEBUG", None), ("ifdef", " DEBUG", None),
                                 ("if", " CONFIG_A > 2", None)):
            self.assertEqual(vcover.condition(kind, expr, cfg), want, (kind, expr))

    def test_dead_lines_follow_else_and_nesting(self):
        text = ("a\n#ifdef CONFIG_X\nb\n#else\nc\n#ifdef DEBUG\nd\n#endif\n#endif\n"
                "#if defined(CONFIG_Y)\ne\n#elif defined(CONFIG_X)\nf\n#else\ng\n#endif\n")
        self.assertEqual(vcover.dead_lines(text, {"CONFIG_Y": "y"}), {3, 13, 15})

    def test_a_file_not_built_and_an_unset_option(self):
        with tempfile.TemporaryDirectory() as tmp:
            src, out = Path(tmp) / "src", Path(tmp) / "out"
            pristine = Path(tmp) / "pristine"
            (src / "fs" / "fsx").mkdir(parents=True)
            (pristine / "fs" / "fsx").mkdir(parents=True)
            (out / "fs" / "fsx").mkdir(parents=True)
            (src / "fs" / "fsx" / "a.c").write_text(A_C)
            (pristine / "fs" / "fsx" / "a.c").write_text(
                A_C.replace("WRITE_ONCE(p->x, 1)", "p->x = 1").replace(
                    "WRITE_ONCE(p->y, 2)", "p->y = 2"))
            (src / "fs" / "fsx" / "rt.c").write_text(
                "int g(struct s *p) { return READ_ONCE(p->x); }\n")
            (pristine / "fs" / "fsx" / "rt.c").write_text(
                "int g(struct s *p) { return p->x; }\n")
            (out / "fs" / "fsx" / "a.o").write_text("")
            (out / ".config").write_text("CONFIG_FSX=y\n# CONFIG_FSX_DEBUG is not set\n")
            p = Path(tmp) / "0001.patch"
            p.write_text(PATCH)
            row, left = vcover.coverage_row([p], pristine, src, out)
        self.assertEqual(left, [("fs/fsx/a.c", 6, "under an unset option"),
                                ("fs/fsx/rt.c", 1, "file not built")])
        self.assertEqual(row[0], "coverage")
        self.assertEqual(row[2], "1 of 3 changed lines compiled; not by this config: "
                         "1 in 1 files not built (rt.c), 1 under unset options")


if __name__ == "__main__":
    unittest.main()
