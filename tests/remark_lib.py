# SPDX-License-Identifier: GPL-2.0-only
"""Turn the tree's own READ_ONCE/WRITE_ONCE/data_race marks back into plain
accesses (in a scratch copy), and see whether the analysis asks for them."""
import os
import re
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from lkmm_mark import csrc  # noqa: E402

MARK = re.compile(r"\b(READ_ONCE|WRITE_ONCE|data_race)\s*\(")


def _close(text, i):
    depth = 0
    while i < len(text):
        c = text[i]
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


def _top_comma(s):
    depth = 0
    for i, c in enumerate(s):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth == 0:
            return i
    return -1


def strip_marks(text):
    """Returns (new text, [(line, macro, field)]) for every mark removed
    whose operand is a struct field access."""
    out = []
    sites = []
    pos = 0
    while True:
        m = MARK.search(text, pos)
        if not m:
            out.append(text[pos:])
            break
        # skip comments: the line up to the match must not be inside /* */ or //
        line_start = text.rfind("\n", 0, m.start()) + 1
        prefix = text[line_start:m.start()]
        if "//" in prefix or prefix.lstrip().startswith("*") or "/*" in prefix:
            out.append(text[pos:m.end()])
            pos = m.end()
            continue
        o = m.end() - 1
        c = _close(text, o)
        if c < 0:
            out.append(text[pos:])
            break
        inner = text[o + 1:c]
        macro = m.group(1)
        if macro == "WRITE_ONCE":
            k = _top_comma(inner)
            lhs, rhs = inner[:k], inner[k + 1:].lstrip()
            repl = "%s = %s" % (lhs, rhs)
            operand = lhs
        else:
            repl = "(%s)" % inner if macro == "data_race" and not re.fullmatch(r"[\w\s\->.()\[\]]*", inner) else inner
            operand = inner
        toks = [t for t in csrc.tokenize(operand)]
        if len(toks) >= 3 and toks[-2].text in ("->", ".") and toks[-1].kind == "id":
            line = text.count("\n", 0, m.start()) + 1 + operand.count("\n", 0, len(operand))
            sites.append((line, macro, toks[-1].text))
        out.append(text[pos:m.start()])
        out.append(repl)
        pos = c + 1
    return "".join(out), sites


def make_scratch(tree, target, dest):
    """Copy tree/target into dest/target with the marks stripped."""
    src = Path(tree) / target
    dst = Path(dest) / target
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
    (Path(dest) / "include").mkdir(exist_ok=True)
    stripped = []
    for p in sorted(dst.rglob("*.[ch]")):
        rel = str(p.relative_to(dest))
        if "/tests/" in rel:
            continue
        text = p.read_text(errors="replace")
        new, sites = strip_marks(text)
        if new != text:
            p.write_text(new)
            for (line, macro, field) in sites:
                stripped.append((rel, line, macro, field))
    return stripped


def score(stripped, sites):
    """How many stripped marks the plan asks for again, and with which macro."""
    want = {}
    for s in sites:
        if s["action"] != "none":
            want.setdefault((s["file"], s["end_line"], s["field"]), s["action"])
    found = same = 0
    rows = []
    for (f, line, macro, field) in stripped:
        act = want.get((f, line, field))
        if act:
            found += 1
            if act == macro:
                same += 1
        rows.append((f, line, macro, field, act))
    return found, same, rows
