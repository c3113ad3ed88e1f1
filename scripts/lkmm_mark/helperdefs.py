# SPDX-License-Identifier: GPL-2.0-only
"""The accessors of `series --style helpers`: where a struct is defined,
the declared type of a field, the names of its accessors, and their text.

A field of a struct defined once in the target, in a header or a .c file,
gets static inline accessors right after the struct's definition:

    static inline T <prefix>get_<short>_<field>(const struct S *p)
    {
            return READ_ONCE(p->field);
    }

and the setter with WRITE_ONCE(), where <prefix> is the subsystem's name
and an underscore (policies/policies.json's target, fs/foofs -> foofs_),
<short> the struct's name without that prefix, or the short name the
subsystem's naming data gives (policies/<subsystem>/helpers/naming.json,
"struct_names").  The parameter is named as the code most often names a
pointer to the struct.  A name the target or include/ already uses, as an
identifier or as one a macro pastes together with ##, is not taken.

Imports only csrc and cstmt: helperstyle.py (the rewrite) asks.
"""
import collections
import json
import re
from pathlib import Path

from . import csrc
from .cstmt import comment_lines as _one_comment, comment_words, width

REPO = Path(__file__).resolve().parents[2]
KEYWORDS = {"auto", "break", "case", "char", "const", "continue", "default", "do", "double",
            "else", "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long",
            "register", "return", "short", "signed", "sizeof", "static", "struct", "switch",
            "typedef", "union", "unsigned", "void", "volatile", "while", "bool"}
ID = re.compile(r"[A-Za-z_]\w*")


def naming(subsystem, policies_dir=None):
    """The subsystem's naming data: {"struct_names": {struct: short}}."""
    p = Path(policies_dir or REPO / "policies") / subsystem / "helpers" / "naming.json"
    if not p.exists():
        return {"struct_names": {}}
    with open(p) as f:
        d = json.load(f)
    return {"struct_names": dict(d.get("struct_names", {}))}


def short_name(struct, prefix, names):
    if struct in names:
        return names[struct]
    return struct[len(prefix):] if struct.startswith(prefix) and len(struct) > len(prefix) \
        else struct


# ------------------------------------------------------------------ structs

class StructDef:
    """One definition of struct name: its file, the offset of the line
    after it (where the accessors go) and whether that line is blank."""

    def __init__(self, file, text, toks, name, brace):
        self.file, self.text, self.toks, self.name = file, text, toks, name
        close = csrc.match_paren(toks, brace)
        k = close
        while k < len(toks) and toks[k].text != ";":
            k += 1
        starts = line_starts(text)
        last = toks[min(k, len(toks) - 1)].line
        self.after = starts[last] if last < len(starts) else len(text)
        nxt = text[self.after:text.find("\n", self.after)] if self.after < len(text) else ""
        self.blank_after = not nxt.strip()
        self.lo, self.hi = brace, close
        self.first_line = toks[brace].line


_PP_LINE = re.compile(r"[ \t]*#[ \t]*(if|ifdef|ifndef|elif|else|endif)\b")


def conditions(text, first, last):
    """The preprocessor conditions open at line last of text, counted from
    line first (the struct's '{'): their '#if' lines, outermost first, or
    None when the line is in an '#else' or '#elif' branch."""
    stack = []
    for line in text.split("\n")[first - 1:last - 1]:
        m = _PP_LINE.match(line)
        if not m:
            continue
        if m.group(1).startswith("if"):
            stack.append(line.strip())
        elif m.group(1) == "endif":
            if stack:
                stack.pop()
        elif stack:
            stack[-1] = None
    return None if None in stack else stack


def line_starts(text):
    return [0] + [m.end() for m in re.finditer("\n", text)]


def find_struct_defs(tree, files, structs):
    """{struct: [(file, text, toks, index of its '{')]} for the file-scope
    definitions 'struct NAME {' of the given structs in files."""
    want = set(structs)
    rx = re.compile(r"(?m)^(?:typedef\s+)?struct\s+(\w+)\s*\{")
    found = collections.defaultdict(list)
    for f in files:
        text = (Path(tree) / f).read_text(encoding="utf-8", errors="surrogateescape")
        names = {m.group(1) for m in rx.finditer(text)} & want
        if not names:
            continue
        toks = csrc.tokenize(text)
        depth = 0
        for i, t in enumerate(toks):
            if t.text == "{":
                if depth == 0 and i >= 2 and toks[i - 2].text == "struct" and \
                        toks[i - 1].text in names:
                    found[toks[i - 1].text].append((f, text, toks, i))
                depth += 1
            elif t.text == "}":
                depth -= 1
    return found


# ------------------------------------------------------------------ fields

class Field:
    """A field that gets accessors: where its struct and declaration are,
    its type, and the names and text of its accessors."""

    def __init__(self, struct, field, sdef, decl_tok, ctype, nfields):
        self.struct, self.field, self.sdef = struct, field, sdef
        self.file = sdef.file
        self.ctype = ctype
        self.decl_line = decl_tok.line
        starts = line_starts(sdef.text)
        self.decl_off = starts[decl_tok.line - 1]
        line = sdef.text[self.decl_off:sdef.text.find("\n", self.decl_off)]
        self.indent = re.match(r"[ \t]*", line).group()
        self.shared_line = nfields > 1
        # the '#if' lines around the declaration, repeated around the accessors
        self.conds = conditions(sdef.text, sdef.first_line, decl_tok.line)
        self.getter = self.setter = self.param = None
        self.lock = None
        self.partial = False

    @property
    def name(self):
        return "%s.%s" % (self.struct, self.field)


def field_decl(sdef, field):
    """(first token of the declaration of field, its C type, number of
    fields the declaration line declares), or (None, why)."""
    toks = sdef.toks
    k = next((x for x in range(sdef.lo + 1, sdef.hi) if toks[x].text == field and
              toks[x].kind == "id" and toks[x + 1].text in (";", ",", "[", ":") and
              _directly_in(toks, sdef.lo, x)), None)
    if k is None:
        return None, "its declaration is not found in the struct"
    start = k
    while toks[start - 1].text not in (";", "{", "}"):
        start -= 1
    end = k
    while toks[end].text != ";":
        end += 1
    decl = toks[start:k]
    words = [t.text for t in decl]
    if toks[k + 1].text in ("[", ":") or any(w in ("(", "[", ":", "__rcu", "volatile")
                                              for w in words):
        return None, "an array, a bit field, a function pointer, __rcu or volatile"
    commas = [x for x, w in enumerate(words) if w == ","]
    head = words[:commas[0] - 1] if commas else words
    stars = words[commas[-1] + 1:].count("*") if commas else head.count("*")
    base = [w for w in head if w != "*" and not w.startswith("____") and w not in ATTRS]
    if not base or any(w in ("static", "extern", "typedef") for w in base):
        return None, "an unsupported declaration"
    if base in (["unsigned"], ["signed"]):
        base = base + ["int"]
    ctype = " ".join(base) + (" " + "*" * stars if stars else "")
    nfields = sum(1 for x in range(start, end) if toks[x].kind == "id" and
                  toks[x + 1].text in (";", ",", "[", ":"))
    return (decl[0] if decl else toks[k], ctype, nfields), None


ATTRS = {"__packed", "__randomize_layout", "__user", "__iomem", "__percpu", "__aligned"}


def _directly_in(toks, lo, x):
    """Token x is a member of the struct whose '{' is at lo: every block
    between them is an anonymous struct or union ('};')."""
    stack = []
    for k in range(lo + 1, x):
        if toks[k].text == "{":
            stack.append(k)
        elif toks[k].text == "}" and stack:
            stack.pop()
    return all(toks[csrc.match_paren(toks, o) + 1].text == ";" for o in stack)


def param_name(plan, struct, field):
    """The name the target's code most often gives a pointer to struct,
    from the bases of the plan's accesses; the struct's short name else."""
    c = collections.Counter()
    for s in plan["sites"]:
        if s["struct"] == struct:
            base = s.get("base") or ""
            ids = ID.findall(base)
            if ids and base.rstrip()[-1:] not in (")", "]") and ids[-1] not in KEYWORDS:
                c[ids[-1]] += 1
    for name, _ in sorted(c.items(), key=lambda kv: (-kv[1], kv[0])):
        if name != field:
            return name
    return "p"


# ------------------------------------------------------------------ names

def taken_names(tree, files, prefix, extra_dirs=("include",)):
    """Identifiers starting with prefix that the target's files and
    extra_dirs use, and those the target's macros paste together with ##."""
    rx = re.compile(r"\b%s\w*" % re.escape(prefix))
    out = set()
    texts = []
    for f in files:
        t = (Path(tree) / f).read_text(encoding="utf-8", errors="surrogateescape")
        texts.append(t)
        out.update(rx.findall(t))
    for d in extra_dirs:
        for p in sorted((Path(tree) / d).rglob("*.h")):
            t = p.read_text(encoding="utf-8", errors="surrogateescape")
            if prefix in t:
                out.update(rx.findall(t))
    out.update(n for n in pasted_names(texts) if n.startswith(prefix))
    return out


_DEFINE = re.compile(r"(?m)^[ \t]*#[ \t]*define[ \t]+(\w+)\(([^)]*)\)((?:\\\n|[^\n])*)")
_PASTE = re.compile(r"\w+(?:\s*##\s*\w+)+")


def pasted_names(texts):
    """The names function-like macros of texts make with ## at their uses
    in texts: '#define M(n) foo_##n' and 'M(bar)' give foo_bar."""
    templates = collections.defaultdict(list)
    for t in texts:
        for m in _DEFINE.finditer(t):
            params = [p.strip() for p in m.group(2).split(",")]
            for chain in _PASTE.findall(m.group(3)):
                parts = [p.strip() for p in chain.split("##")]
                templates[m.group(1)].append([params.index(p) if p in params else p
                                              for p in parts])
    out = set()
    if not templates:
        return out
    call = re.compile(r"\b(%s)\s*\(" % "|".join(map(re.escape, sorted(templates))))
    for t in texts:
        for m in call.finditer(t):
            if re.search(r"#\s*define\s+$", t[t.rfind("\n", 0, m.start()) + 1:m.start()]):
                continue
            args = _args(t, m.end())
            for tpl in templates[m.group(1)]:
                if all(not isinstance(p, int) or p < len(args) for p in tpl):
                    out.add("".join(args[p] if isinstance(p, int) else p for p in tpl))
    return out


def _args(text, i):
    """The top-level arguments of the call whose '(' ends at i."""
    depth, cur, out = 0, [], []
    while i < len(text):
        ch = text[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            if depth == 0:
                break
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
        i += 1
    out.append("".join(cur).strip())
    return out


# ------------------------------------------------------------------ text

def signature(ret, name, params):
    """A function head as upstream writes its accessors: on one line
    within 80 columns, else with the parameters after the first on lines
    aligned with the parenthesis, else on one line within 100 columns
    (as upstream writes a setter that does not fit), else with the return
    type on a line of its own.  checkpatch --strict takes each.  None if
    none fits in 100 columns."""
    sep = "" if ret.endswith("*") else " "
    full = ("static inline %s%s%s(" % (ret, sep, name), "")
    split = ("%s(" % name, "static inline %s\n" % ret)
    for (head, first), limit, wrap in ((full, 80, False), (full, 80, True), (full, 100, False),
                                       (full, 100, True), (split, 80, True),
                                       (split, 100, True)):
        lines = [head + params[0]]
        for p in params[1:]:
            if not wrap or width(lines[-1] + ", " + p + ")") <= limit:
                lines[-1] += ", " + p
            else:
                lines[-1] += ","
                lines.append(" " * width(head) + p)
        lines[-1] += ")"
        if all(width(ln) <= limit for ln in lines):
            return first + "\n".join(_tabs(ln) for ln in lines)
    return None


def _tabs(line):
    ind = len(line) - len(line.lstrip(" "))
    return "\t" * (ind // 8) + " " * (ind % 8) + line.lstrip(" ")


def definitions(f, get, put):
    """The accessors used, in the conditions of the field's declaration,
    ending with a blank line."""
    texts = ([getter_text(f)] if get else []) + ([setter_text(f)] if put else [])
    conds = f.conds or []
    return "".join(c + "\n" for c in conds) + "\n".join(texts) + \
        "#endif\n" * len(conds) + "\n"


def getter_text(f):
    """The getter's definition, or None when its head fits in no form."""
    p = f.param
    head = signature(f.ctype, f.getter, ["const struct %s *%s" % (f.struct, p)])
    return head and "%s\n{\n\treturn READ_ONCE(%s->%s);\n}\n" % (head, p, f.field)


def setter_text(f):
    """The setter's definition, or None when its head fits in no form."""
    p, v = f.param, f.value
    arg = "%s%s%s" % (f.ctype, "" if f.ctype.endswith("*") else " ", v)
    head = signature("void", f.setter, ["struct %s *%s" % (f.struct, p), arg])
    return head and "%s\n{\n\tWRITE_ONCE(%s->%s, %s);\n}\n" % (head, p, f.field, v)


def comment_lines(text, indent, limit=80, inner=False):
    """A comment's lines; inner: the ' * ' lines only, for a block."""
    if not inner:
        return _one_comment(text, indent, limit)
    return "".join("%s * %s\n" % (indent, ln) for ln in comment_words(text, indent, limit))


def lock_words(lock):
    """'s.l' -> 's::l' ('a or b' each)."""
    return " or ".join(x.replace(".", "::") for x in lock.split(" or "))


def comment_text(f, get, put):
    """The comment above the field: its lock and its accessors."""
    use = []
    if get:
        use.append("racy reads use %s()" % f.getter)
    if put:
        use.append("racy writes %s()" % f.setter if get else "racy writes use %s()" % f.setter)
    use = " and ".join(use)
    who = "%s: " % f.field if f.shared_line else ""
    if f.lock and not f.partial:
        return "%sProtected by %s, but read without it too: %s." % (
            who, lock_words(f.lock), use)
    if f.lock:
        return "%sMostly written under %s, not always: %s." % (who, lock_words(f.lock), use)
    return "%sNot protected by a lock: %s." % (who, use)


def field_comment(f, get, put):
    """How the comment goes above the field: [("line", offset, text)] to
    insert whole lines, and ("cut", start, end) to take out the lines
    [start, end).  A block comment right above the declaration gets the
    text as a paragraph of its own, a one-line comment becomes a block
    comment with both; otherwise the comment is new."""
    text = comment_text(f, get, put)
    lines = f.sdef.text[:f.decl_off].split("\n")[:-1]
    above = lines[-1] if lines else ""
    ind = f.indent
    if f.shared_line or not above.startswith(ind + "/*") and above != ind + " */":
        return [("line", f.decl_off, comment_lines(text, ind))]
    start = f.decl_off - len(above) - 1
    if above == ind + " */":
        body = comment_lines(text, ind, inner=True)
        return [("line", start, "%s *\n%s" % (ind, body))]
    m = re.match(r"/\*\s*(.*?)\s*\*/$", above[len(ind):])
    if not m or "*/" in m.group(1) or m.group(1).startswith("*"):
        return [("line", f.decl_off, comment_lines(text, ind))]
    old = m.group(1)
    old = old if old.endswith((".", ":", "!", "?")) else old
    merged = "%s/*\n%s%s *\n%s%s */\n" % (ind, comment_lines(old, ind, inner=True), ind,
                                          comment_lines(text, ind, inner=True), ind)
    return [("cut", start, f.decl_off), ("line", start, merged)]
