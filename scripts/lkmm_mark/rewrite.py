# SPDX-License-Identifier: GPL-2.0-only
"""Stage 4: turn planned sites into source edits.

The edits are the same as cocci/access_marking.cocci's patch mode (stores
become WRITE_ONCE() statements, read-modify-writes WRITE_ONCE(x->f, x->f op
v), loads READ_ONCE() or data_race()), plus what SmPL cannot place well:
the comments the seed commit and checkpatch want (refetch after lock,
unlocked write, owner read, data_race) and the line wrapping of a grown
condition.  Every edit is computed against the pristine text, as offsets,
so any subset of sites (one patch of the series, or all of them) renders
from the same edits: the series is the pristine file with the edits of
patches 1..k applied.

A site that cannot be rewritten safely (a store inside a larger expression,
a chained or comma assignment, an already marked access) is skipped with a
reason; skipped sites are listed in the cover letter and stay in the report.
"""
import bisect
import difflib
import json
import os
import re
from pathlib import Path

from . import csrc, diagread
from .csrc import tokenize
from .cstmt import Skip, width, statement_start, comment_lines, indent_to as _indent

REPO = Path(__file__).resolve().parents[2]

MARKERS = ("READ_ONCE", "WRITE_ONCE", "data_race")
ASSIGN = {"=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>="}
BINOP = {"+", "-", "*", "/", "%", "&", "|", "^", "<<", ">>", "&&", "||", "?", ":",
         "<", ">", "<=", ">=", "==", "!="}
STMT_START = {";", "{", "}", "else", "do"}
HEADER_KW = {"if", "while", "for", "switch"}
# Comment texts per rule: the seed commit's wording, kept in policies.json.


def load_comments():
    with open(REPO / "policies" / "comments.json") as f:
        d = json.load(f)
    return {k: v for k, v in d.items() if not k.startswith("_")}


def select_sites(plan):
    """Sites the series touches: every planned mark outside test code, and
    the owner reads the commit style comments."""
    sites = [s for s in plan["sites"] if not s["test_code"]]
    unlocked_w = {(s["file"], s["function"], s["struct"], s["field"])
                  for s in sites if s["rule"] == "unlocked-write"}
    # the loads of a double fetch: a mark on each does not make them one
    # (the cover letter gives the fix, one load into a local)
    fetches = {(d["file"], x["line"], x["column"]) for d in plan.get("double_fetches", ())
               for x in [d] + list(d.get("again", ()))}
    out = []
    for s in sites:
        if s["action"] != "none":
            out.append(dict(s, double_fetch=True)
                       if (s["file"], s["line"], s["column"]) in fetches else s)
        elif s["rule"] == "owner-read":
            s = dict(s, comment=(s["file"], s["function"], s["struct"], s["field"])
                     in unlocked_w)
            if s["comment"]:
                out.append(s)
    return out


class Source:
    def __init__(self, text, toks=None, at=None):
        self.text = text
        self.toks = toks if toks is not None else tokenize(text)
        self.starts = [0]
        for m in re.finditer("\n", text):
            self.starts.append(m.end())
        self.at = at if at is not None else csrc.TokIndex(self.toks)

    def off(self, i):
        t = self.toks[i]
        return self.starts[t.line - 1] + t.col

    def end(self, i):
        t = self.toks[i]
        return self.starts[t.line - 1] + t.ecol

    def txt(self, i):
        return self.toks[i].text

    def line_text(self, line):
        a = self.starts[line - 1]
        b = self.text.find("\n", a)
        return self.text[a:b if b >= 0 else len(self.text)]

    def open_of(self, k):
        """Index of the opener matching the closer at k, or None."""
        o = csrc.open_of(self.toks, k)
        return o if o >= 0 else None


def base_start(S, op):
    """First token of the postfix expression whose member operator is at op."""
    j = csrc.base_start(S.toks, op)
    if j is None:
        raise Skip("unsupported base expression before %r" % S.txt(op))
    return j


def stmt_context(S, j):
    """True if token j starts an expression statement."""
    if j == 0:
        return False
    p = S.txt(j - 1)
    if p in STMT_START:
        return True
    if p == ":":
        # label or case (not the ternary: a ternary never starts a statement)
        return True
    if p == ")":
        o = S.open_of(j - 1)
        if o is None or o == 0:
            return False
        if S.txt(o - 1) in HEADER_KW:
            return True
        # an iterator macro used as a loop header: list_for_each_entry(...) stmt
        return S.toks[o - 1].kind == "id" and (o < 2 or S.txt(o - 2) in STMT_START or
                                               S.txt(o - 2) in (":", ")"))
    return False


def expr_end(S, k):
    """Index of the ';' ending the expression that starts at token k."""
    depth = 0
    i = k
    n = len(S.toks)
    while i < n:
        x = S.txt(i)
        if x in ("(", "[", "{"):
            depth += 1
        elif x in (")", "]", "}"):
            depth -= 1
            if depth < 0:
                raise Skip("store inside an expression")
        elif depth == 0:
            if x == ";":
                return i
            if x == ",":
                raise Skip("comma expression")
            if x in ASSIGN:
                raise Skip("chained assignment")
        i += 1
    raise Skip("no end of statement")


def simple_operand(S, a, b, op=None):
    """True if tokens a..b (inclusive) need no parentheses after the binary
    operator op: no top-level operator at all, or (op one of | & ^) only
    op itself, which is associative ('x |= A | B' becomes 'x | A | B', as
    Coccinelle writes it)."""
    depth = 0
    for i in range(a, b + 1):
        x = S.txt(i)
        if x in ("(", "["):
            depth += 1
        elif x in (")", "]"):
            depth -= 1
        elif depth == 0 and (x in BINOP or x in ASSIGN):
            if op in ("|", "&", "^") and x == op:
                continue
            return False
    return True


class Edits:
    """Insertions and replacements at pristine offsets, rendered for any
    subset of sites."""

    def __init__(self, src, toks=None, at=None):
        self.S = Source(src, toks, at)
        self.items = []   # (site_key, kind, offset, order, text, end)
        self.spans = {}   # site key -> (start of its base, end of the field)
        self.values = {}  # store key -> the range of its stored value
        self.prefix = set()  # ++x->f / --x->f sites
        self.groups = {}    # site key -> the keys whose edits stand or fall together
        self.wide = False   # wrap at 100 columns what does not fit in 80 (helperstyle.py)

    def insert(self, key, off, text, order):
        self.items.append((key, "ins", off, order, text, off))

    def line(self, key, off, text, order):
        """Whole lines inserted at the line start off (a local's declaration
        or load): rendered before the chunk of lines they precede."""
        self.items.append((key, "line", off, order, text, off))

    def replace(self, key, a, b, text):
        self.items.append((key, "rep", a, (1, 0), text, b))

    def late(self, key, a, b, e, fmt, op, tail):
        """Replace [b, e) by ', <target> op tail'; the target [a, b) is
        rendered once every site's edits are known."""
        self.items.append((key, "late", b, (1, 0), (a, fmt, op, tail), e))

    def late_stmt(self, key, off, a, b, op, indent):
        """Insert 'WRITE_ONCE(<target>, <target> op 1);' and a new line
        indented by indent at off; the target [a, b) is rendered once every
        site's edits are known."""
        self.items.append((key, "late_stmt", off, (0, 0), (a, b, op, indent), off))

    def render(self, keys, lo=0, hi=None, at_lo=True):
        """The text [lo, hi) with the edits of keys; at_lo=False leaves out
        the whole lines inserted at lo (render_file() puts them first)."""
        hi = len(self.S.text) if hi is None else hi
        n = len(self.S.text)
        its = [it for it in self.items if it[0] in keys and it[5] <= hi and
               (lo <= it[2] < hi or it[2] == hi == n) and
               (at_lo or it[1] != "line" or it[2] != lo)]
        its.sort(key=lambda it: (it[2], it[3]))
        out = []
        pos = lo
        lines = set()
        for key, kind, off, order, text, e in its:
            if off < pos or kind == "line" and (off, order, text) in lines:
                continue
            if kind == "line":
                lines.add((off, order, text))
            out.append(self.S.text[pos:off])
            out.append(text)
            pos = e
        out.append(self.S.text[pos:hi])
        return "".join(out)


def _in_define(src, line):
    """Line (1-based) of src is part of a #define."""
    lines = src.split("\n")
    k = line - 1
    while k > 0 and lines[k - 1].rstrip().endswith("\\"):
        k -= 1
    return 0 <= k < len(lines) and lines[k].lstrip().startswith("#") and \
        "define" in lines[k]


_CONDITIONAL = re.compile(r"^([ \t]*)(?:\}\s*)?(?:else\s+)?(?:if|while|for)\s*\(")


def _suspect_indent(S, i, line):
    """checkpatch's SUSPECT_CODE_INDENT, which it checks on every changed
    line that opens a conditional: the statement after the condition
    (tokens from S.toks[i], the site, on) is indented neither one level
    deeper nor, for a brace, at the same level.  The reason, or None."""
    m = _CONDITIONAL.match(S.line_text(line))
    if m is None:
        return None
    k = i
    while k > 0 and S.toks[k - 1].line == line:
        k -= 1
    while k < len(S.toks) and S.txt(k) != "(":
        k += 1
    depth = 0
    for q in range(k, len(S.toks)):
        depth += {"(": 1, ")": -1}.get(S.txt(q), 0)
        if depth == 0:
            break
    else:
        return None
    q += 1
    if q < len(S.toks) and S.txt(q) == "{":
        q += 1
    if q >= len(S.toks) or S.toks[q].line == S.toks[q - 1].line:
        return None
    text = S.line_text(S.toks[q].line)
    indent, sindent = width(m.group(1)), width(text[:len(text) - len(text.lstrip())])
    if sindent % 8 == 0 and indent <= sindent <= indent + 8 and \
            (sindent > indent or text.lstrip()[:1] in ("}", "{") or
             text.lstrip().startswith("else")):
        return None
    return ("the statement after this condition is indented %d columns, the "
            "condition %d: checkpatch warns (SUSPECT_CODE_INDENT) on a change "
            "of the line" % (sindent, indent))


def _read_half(s):
    """How the read half of a marked 'x->f += n' reads: READ_ONCE() only
    when a store races with it (pairs.py: not under the lock every racing
    store holds, nor in the field's only writer)."""
    if s.get("read_races") or s["rule"] not in ("locked-write", "unlocked-write"):
        return "READ_ONCE(%s)"
    return "%s"


def discarding_macros(tree, files):
    """The function-like macros that some configuration defines to use
    none of their arguments ('#define foo_debug(fs, fmt, ...) do {} while
    (0)' without DEBUG), from the headers under the files' common
    directory: a value loaded into a local for one of their calls would
    be an unused variable there (diagread.py leaves such a site for a
    human)."""
    from .accessors import macro_defs
    files = list(files)
    if not files:
        return frozenset()
    top = Path(tree) / os.path.commonpath([os.path.dirname(f) or "." for f in files])
    out = set()
    for h in sorted(top.rglob("*.h")):
        try:
            text = h.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for name, params, body in macro_defs(text):
            words = set(re.findall(r"\w+", " ".join(t for _, t in body).split(")", 1)[-1]))
            names = {p.strip(".").strip() or "__VA_ARGS__" for p in params}
            if params and not (names & words) and "__VA_ARGS__" not in words:
                out.add(name)
    return frozenset(out)


def checkpatch_typos(tree):
    """The words checkpatch's spelling check flags (the tree's
    scripts/spelling.txt, 'mispelled||correct'), lower case: a changed
    line that holds one, a variable named so in the pristine code, draws a
    warning the mark did not cause."""
    try:
        text = (Path(tree) / "scripts" / "spelling.txt").read_text(errors="replace")
    except OSError:
        return frozenset()
    return frozenset(w.split("||", 1)[0].strip().lower() for w in text.splitlines()
                     if "||" in w and not w.startswith("#"))


_IF = re.compile(r"\bif\s*\(")
_ASSIGN = re.compile(r"[^<>!=]=[^=]")


def _if_condition(code):
    """The condition of the if this line opens, as far as the line has it,
    or None."""
    m = _IF.search(code)
    if m is None:
        return None
    depth, k = 1, m.end()
    while k < len(code) and depth:
        depth += {"(": 1, ")": -1}.get(code[k], 0)
        k += 1
    return code[m.end():k - 1 if not depth else k]


def _pristine_checkpatch(S, line, typos):
    """Why checkpatch would warn on any change of this line of the pristine
    code (an assignment in an if condition, a word it takes for a typo),
    or None."""
    text = S.line_text(line)
    code = text.split("//", 1)[0]
    cond = _if_condition(code)
    if cond is not None and _ASSIGN.search(cond):
        return "an assignment in this line's if condition: checkpatch errors " \
            "(ASSIGN_IN_IF) on any change of the line"
    bad = sorted(w for w in re.findall(r"[A-Za-z]+", code) if w.lower() in typos)
    if bad:
        return "checkpatch takes '%s' on this line for a misspelling (TYPO_SPELLING) " \
            "on any change of it" % bad[0]
    return None


def _mark_site(E, S, s, key, i, j, a, b):
    """The edits that mark site s (the field token toks[i], its access
    expression from toks[j], offsets a to b): READ_ONCE()/data_race()
    around a load, WRITE_ONCE() for a plain store or a read-modify-write
    of a statement of its own; raises Skip when the site cannot be
    rewritten so."""
    span = b - a
    act = s["action"]
    if s["rule"] == "owner-read":
        pass
    elif act in ("READ_ONCE", "data_race"):
        if s["access"] != "read":
            raise Skip("%s on a %s" % (act, s["access"]))
        nxt = S.txt(i + 1) if i + 1 < len(S.toks) else ""
        if nxt in ASSIGN or nxt in ("++", "--"):
            raise Skip("read site is a store")
        E.insert(key, a, act + "(", (0, -span))
        E.insert(key, b, ")", (-1, span))
    elif act == "WRITE_ONCE" and s["access"] == "write":
        if S.txt(i + 1) != "=":
            raise Skip("store is not a plain assignment")
        if not stmt_context(S, j):
            raise Skip("store inside an expression")
        semi = expr_end(S, i + 2)
        E.values[key] = (b, S.off(semi))
        E.insert(key, a, "WRITE_ONCE(", (0, -(S.off(semi) - a)))
        # ' = ' becomes ', ' (a value on the next line stays there)
        if S.toks[i + 2].line != S.toks[i + 1].line:
            E.replace(key, b, S.end(i + 1), ",")
        else:
            E.replace(key, b, S.off(i + 2), ", ")
        E.insert(key, S.end(semi - 1), ")", (-1, S.off(semi) - a))
    elif act == "WRITE_ONCE" and s["access"] == "rmw":
        fmt = _read_half(s)
        op = S.txt(i + 1) if i + 1 < len(S.toks) else ""
        pre = S.txt(j - 1) if j > 0 else ""
        if op in ("++", "--") and S.txt(i + 2) == ";" and stmt_context(S, j):
            E.insert(key, a, "WRITE_ONCE(", (0, -(S.off(i + 2) - a)))
            E.late(key, a, b, S.end(i + 1), fmt, op[0], "1)")
        elif pre in ("++", "--") and S.txt(i + 1) == ";" and stmt_context(S, j - 1):
            E.replace(key, S.off(j - 1), a, "WRITE_ONCE(")
            E.prefix.add(key)
            E.late(key, a, b, b, fmt, pre[0], "1)")
        elif pre in ("++", "--") and s["rule"] == "locked-write" and \
                (hoist := _if_condition_start(S, j - 1, i)) is not None:
            # 'if (!--x->f)' under the lock every store holds: the
            # store goes before the if, the condition reads the
            # new value (no other store can come between)
            k, indent = hoist
            E.replace(key, S.off(j - 1), a, "")
            E.late_stmt(key, S.off(k), a, b, pre[0], indent)
            E.prefix.add(key)
        elif op in ASSIGN and op != "=" and stmt_context(S, j):
            semi = expr_end(S, i + 2)
            E.values[key] = (b, S.off(semi))
            paren = not simple_operand(S, i + 2, semi - 1, op[:-1])
            E.insert(key, a, "WRITE_ONCE(", (0, -(S.off(semi) - a)))
            E.late(key, a, b, S.off(i + 2), fmt, op[:-1], "(" if paren else "")
            E.insert(key, S.end(semi - 1), "))" if paren else ")",
                     (-1, S.off(semi) - a))
        else:
            raise Skip("read-modify-write inside an expression")
    else:
        raise Skip("action %s on a %s" % (act, s["access"]))


def plan_file_edits(src, sites, comments, toks=None, at=None, locals_=True,
                    discarding=frozenset(), typos=frozenset()):
    """Edits for the sites of one file.  sites: plan dicts (action != none or
    rule owner-read); toks: the tokens of src, when already at hand;
    locals_=False keeps every data_race() where it is (diagread.py).
    discarding: discarding_macros() of the tree; typos: checkpatch_typos().
    Returns (Edits, applied keys, {key: skip reason})."""
    E = Edits(src, toks, at if toks is not None else None)
    S = E.S
    applied, skipped = [], {}
    stmt_comments = {}
    diag = []   # data_race() sites: diagread places them and their comments
    for s in sorted(sites, key=lambda s: (s["line"], s["column"])):
        key = (s["file"], s["line"], s["column"])
        try:
            if s.get("double_fetch"):
                raise Skip("a load of a double fetch: a mark on each load does not make "
                           "them one; the fix is one load into a local (cover letter)")
            if "BUG_ON(" in S.line_text(s["line"]) or "BUG(" in S.line_text(s["line"]):
                # checkpatch warns (AVOID_BUG) on every added BUG_ON line
                raise Skip("on a BUG_ON() line (checkpatch AVOID_BUG)")
            i = S.at.get((s["line"], s["column"]))
            if i is None and _in_define(src, s["line"]):
                # accessors.py: one site for the calls of a macro or of
                # the functions a macro generates
                raise Skip("in the body of a macro (%s()): one mark there, by hand, "
                           "covers every call" % s["function"])
            if i is None or S.txt(i) != s["field"]:
                raise Skip("field token not found")
            why = _suspect_indent(S, i, s["line"]) or _pristine_checkpatch(S, s["line"], typos)
            if why:
                raise Skip(why)
            if i == 0 or S.txt(i - 1) not in ("->", "."):
                raise Skip("not a member access")
            j = base_start(S, i - 1)
            a, b = S.off(j), S.end(i)
            E.spans[key] = (a, b)
            if j >= 2 and S.txt(j - 1) == "(" and S.txt(j - 2) in MARKERS:
                raise Skip("already marked")
            if j >= 1 and S.txt(j - 1) == "&":
                raise Skip("address taken")
            _mark_site(E, S, s, key, i, j, a, b)
            _resolve_late(E)
            c = comments.get(s["rule"])
            if c and s.get("comment", True) is False and s["rule"] != "owner-read":
                c = None
            if s["action"] == "data_race":
                diag.append((key, s, i, j))
            elif c and (s["rule"] != "owner-read" or s.get("comment")):
                stmt_comments.setdefault(statement_start(S, j), []).append((key, s, c, i))
            if s["rule"] != "owner-read":
                applied.append(key)
        except Skip as e:
            skipped[key] = str(e)
    for key, why in diagread.place(E, diag, comments, stmt_comments, locals_,
                                          discarding).items():
        applied.remove(key)
        skipped[key] = why
    # sites that together make a line too long for checkpatch are left out
    while True:
        bad = long_line_keys(E, set(applied))
        if not bad:
            break
        for key in {k for b in bad for k in E.groups.get(b, {b})}:
            E.items = [it for it in E.items if it[0] != key]
            applied.remove(key)
            skipped[key] = "the marked line would exceed 100 columns"
    for st, lst in stmt_comments.items():
        lst[:] = [x for x in lst if x[0] in applied or x[1]["rule"] == "owner-read"]
        _place_comment(E, st, lst)
    return E, applied, skipped


def nested_outer(E, keys):
    """Sites cocci/access_marking.cocci's single patch rule leaves to the
    series rewriter: a load whose expression starts with another site's
    (READ_ONCE(READ_ONCE(a->b)->c): one SmPL rule cannot add two tokens
    before the same one), and a load inside a store (its target or value)."""
    starts = {}
    for k in keys:
        if k in E.spans:
            starts.setdefault(E.spans[k][0], []).append(k)
    out = {k for k in keys if k in E.prefix}   # SmPL takes no position there
    for ks in starts.values():
        if len(ks) > 1:
            ks.sort(key=lambda k: E.spans[k][1])
            out.update(ks[1:])
    # loads inside a stored value: the store's rule does not look inside
    vals = [E.values[k] for k in keys if k in E.values] + \
        [E.spans[k] for k in keys if k in E.values and k in E.spans]
    for k in keys:
        if k in E.spans and k not in E.values and \
                any(lo <= E.spans[k][0] < hi for lo, hi in vals):
            out.add(k)
    return out


def _resolve_late(E):
    """Read-modify-writes copy their target, with the other sites' edits
    inside it (a READ_ONCE() of the base, say) but not their own."""
    new = []
    for it in E.items:
        if it[1] == "late_stmt":
            key, _, off, order, (a, b, op, indent), e = it
            keys = {x[0] for x in E.items if x[0] != key and a <= x[2] and x[5] <= b}
            tgt = E.render(keys, a, b)
            new.append((key, "ins", off, order,
                        "WRITE_ONCE(%s, %s %s 1);\n%s" % (tgt, tgt, op, indent), e))
            continue
        if it[1] != "late":
            new.append(it)
            continue
        key, _, b, order, (a, fmt, op, tail), e = it
        keys = {x[0] for x in E.items if x[0] != key and a <= x[2] and x[5] <= b}
        tgt = E.render(keys, a, b)
        new.append((key, "rep", b, (1, 0), ", %s %s %s" % (fmt % tgt, op, tail), e))
    E.items = new


def _if_condition_start(S, p, i):
    """(token index of the 'if', its indentation) when the prefix operator
    at p and the member access ending at i are the whole condition of an
    if that starts its line: 'if (--x->f)' or 'if (!--x->f)' (not 'else
    if'); else None."""
    k = p - 1
    if k >= 0 and S.txt(k) == "!":
        k -= 1
    if k < 1 or S.txt(k) != "(" or S.txt(k - 1) != "if" or S.txt(i + 1) != ")" or \
            S.open_of(i + 1) != k:
        return None
    k -= 1
    if k > 0 and S.txt(k - 1) == "else":
        return None
    ind = _indent_of(S, k)
    return (k, ind) if ind is not None else None


def _indent_of(S, k):
    """The white space before token k when k is the first on its line."""
    off = S.off(k)
    ls = S.text.rfind("\n", 0, off) + 1
    ind = S.text[ls:off]
    return ind if not ind.strip() else None


def _place_comment(E, st, lst):
    S = E.S
    seen = set()
    for key, s, text, i in lst:
        if text in seen:
            continue
        seen.add(text)
        sline = S.toks[st].line
        first_on_line = st == 0 or S.toks[st - 1].line != sline
        if first_on_line:
            ls = S.starts[sline - 1]
            indent = re.match(r"[ \t]*", S.text[ls:]).group()
            body = comment_lines(text, indent)
            E.insert(key, ls, body, (-5, len(E.items)))
        else:
            line = S.toks[i].line
            eol = S.starts[line - 1] + len(S.line_text(line))
            E.insert(key, eol, " /* %s */" % text, (5, 0))


# ------------------------------------------------------------------ wrapping

LOGICAL = ("||", "&&")
BINARY = ("==", "!=", "<=", ">=", "<<", ">>", "+", "-", "|", "&", "^", "*", "/", "<", ">")


def wrap_line(line, limit=80, short=0):
    """Break a grown line after a top-level '||', '&&' or ',' (else after a
    spaced binary operator), aligned with the innermost open parenthesis,
    as kernel style does.  Returns the line unchanged if it fits or has no
    break point.  short: no break leaves a last operand of that many
    characters or fewer alone on its line ('- 1);')."""
    if width(line) <= limit or "//" in line or "/*" in line or '"' in line:
        return line
    indent = re.match(r"[ \t]*", line).group()
    opens = []
    best = {0: None, 1: None}
    body = line.rstrip()
    i = len(indent)
    while i < len(body):
        ch = body[i]
        cut = None
        prio = 1
        if ch == "(":
            opens.append(i)
        elif ch == ")":
            if opens:
                opens.pop()
        elif body.startswith(LOGICAL, i):
            cut, prio = i + 2, 0
        elif ch == ",":
            cut, prio = i + 1, 0
        else:
            for op in BINARY:
                if body.startswith(op, i) and body[i - 1:i] == " " and \
                        body[i + len(op):i + len(op) + 1] == " ":
                    cut = i + len(op)
                    break
        if cut and cut < len(body) and width(body[:cut]) <= limit and \
                len(body[cut:].strip().rstrip(");,")) > short:
            # the outermost level wins, then the last break that fits
            if best[prio] is None or len(opens) <= best[prio][2]:
                best[prio] = (cut, opens[-1] if opens else None, len(opens))
        if cut:
            i = cut
            continue
        i += 1
    pick = best[0] or best[1]
    if pick is None:
        return line
    cut, op, _ = pick
    head = body[:cut].rstrip()
    if op is not None:
        col = width(body[:op + 1])
    elif " " in indent:
        col = width(indent)          # a continuation line: keep its alignment
    else:
        col = width(indent) + 8
    cont = _indent(col)
    rest = cont + body[cut:].lstrip()
    if width(rest) > limit:
        rest = wrap_line(rest, limit, short)
    return head + "\n" + rest


def _chunks(E, items):
    """Line-aligned [lo, hi) ranges of the text that no edit crosses."""
    S = E.S
    cross = set()
    span = {}
    for it in items:
        # a site's edits as one range: a store's 'WRITE_ONCE(' and its ')'
        # may be lines apart, and the lines between continue the call
        lo, hi = span.get(it[0], (it[2], it[5]))
        span[it[0]] = (min(lo, it[2]), max(hi, it[5]))
    for lo, hi in span.values():
        ln = bisect.bisect_right(S.starts, lo)
        while ln < len(S.starts) and S.starts[ln] < hi:
            cross.add(ln)
            ln += 1
    bounds = [S.starts[ln] for ln in range(len(S.starts)) if ln not in cross] + [len(S.text)]
    return zip(bounds, bounds[1:])


def render_file(E, keys, wrap=True):
    """The file with the edits of keys applied; a grown line over 80 columns
    (100 if it already was over 80) is wrapped.  Whole lines inserted at
    the start of a chunk (a local's declaration or load) come before it,
    outside its realignment."""
    if not wrap or not keys:
        return E.render(keys)
    its = [it for it in E.items if it[0] in keys and it[1] != "line"]
    heads = {}
    for it in sorted((it for it in E.items if it[0] in keys and it[1] == "line"),
                     key=lambda it: it[3]):
        # the same line of two sites (the blank line after the declarations) once
        if it[3:5] not in heads.setdefault(it[2], []):
            heads[it[2]].append(it[3:5])
    heads = {off: [text for order, text in its] for off, its in heads.items()}
    touched = sorted({it[2] for it in its} | {it[5] for it in its})
    out = []
    S = E.S
    for lo, hi in _chunks(E, its):
        out.extend(heads.get(lo, ()))
        a = bisect.bisect_left(touched, lo)
        if a >= len(touched) or touched[a] >= hi:
            out.append(S.text[lo:hi])
            continue
        out.append(_render_chunk(E, keys, lo, hi))
    return "".join(out)


def long_line_keys(E, keys):
    """Keys of the sites in chunks that render to a line over 100 columns."""
    its = [it for it in E.items if it[0] in keys and it[1] != "line"]
    bad = set()
    touched = sorted({it[2] for it in its})
    for lo, hi in _chunks(E, its):
        a = bisect.bisect_left(touched, lo)
        if a >= len(touched) or touched[a] >= hi:
            continue
        orig = E.S.text[lo:hi]
        text = _render_chunk(E, keys, lo, hi)
        if any(width(l) > 100 and l not in orig for l in text.split("\n")):
            bad.update(it[0] for it in its if lo <= it[2] < hi)
    return bad


def _tabify(line):
    """Leading indentation of a line the rewrite writes, with tabs for
    every 8 columns (checkpatch refuses a new line indented with spaces;
    a few upstream lines are)."""
    ind = re.match(r"[ \t]*", line).group()
    if "        " not in ind:
        return line
    n = len(ind.expandtabs(8))
    return _indent(n) + line[len(ind):]


def _paren_cols(lines):
    """For each line, the display column just after the innermost '(' still
    open at its start (None when none is), skipping strings, character
    constants and comments."""
    res = []
    stack = []
    in_comment = False
    for l in lines:
        res.append(stack[-1] if stack else None)
        i, n = 0, len(l)
        while i < n:
            if in_comment:
                j = l.find("*/", i)
                if j < 0:
                    break
                in_comment = False
                i = j + 2
                continue
            ch = l[i]
            if l.startswith("/*", i):
                in_comment = True
                i += 2
                continue
            if l.startswith("//", i):
                break
            if ch in "\"'":
                j = i + 1
                while j < n and l[j] != ch:
                    j += 2 if l[j] == "\\" else 1
                i = j + 1
                continue
            if ch == "(":
                stack.append(width(l[:i + 1]))
            elif ch == ")" and stack:
                stack.pop()
            i += 1
    return res


_COMMENT_LINE = re.compile(r"\s*/\*.*\*/\s*$")


def _line_toks(l):
    """(display column, text) of the tokens of one line."""
    return [(width(l[:t.col]), t.text) for t in tokenize(l)]


_ANCHOR_AFTER = ("=", "+=", "-=", "*=", "/=", "%=", "|=", "&=", "^=", "<<=", ">>=", "return")


def _moved_col(o_line, n_line, col):
    """The column in n_line of the token that starts at display column col
    of o_line (the same line before the rewrite), or None."""
    ot, nt = _line_toks(o_line), _line_toks(n_line)
    k = next((i for i, t in enumerate(ot) if t[0] == col), None)
    # an anchor a line is aligned with on purpose: the value after an
    # assignment or 'return', or a '?' (the ':' below it); not a token that
    # merely happens to start at that column
    if k is None or not (ot[k][1] in ("?", ":") or k and ot[k - 1][1] in _ANCHOR_AFTER):
        return None
    m = difflib.SequenceMatcher(None, [t[1] for t in ot], [t[1] for t in nt], autojunk=False)
    for x, y, size in m.get_matching_blocks():
        if x <= k < x + size:
            return nt[y + k - x][0]
    return None


def _realign(orig, new, limit):
    """Continuation lines of a rewritten statement, kept aligned as they
    were (kernel style; checkpatch's PARENTHESIS_ALIGNMENT): a line aligned
    with the parenthesis it continues follows the parenthesis, a line
    aligned with a token of the line above (the stored value after '= ',
    a '?') follows that token, and a line that continues a parenthesis the
    rewrite opened (the value of a store now inside WRITE_ONCE()) is
    aligned with it.  A line that was aligned with nothing stays as it
    was, and so does one that would pass the column limit."""
    oc = _paren_cols(orig)
    nc = _paren_cols(new)
    # the lines that start inside an unfinished statement
    cont = []
    last = None
    for l in orig:
        cont.append(last is not None and last not in (";", "{", "}"))
        tl = tokenize(l)
        if tl:
            last = tl[-1].text
    out = list(new)
    back = {}                   # orig line -> index of its line in out
    j = 0
    for i, l in enumerate(new):
        if j >= len(orig):
            break
        if l != orig[j] and _COMMENT_LINE.match(l) and not _COMMENT_LINE.match(orig[j]):
            continue            # a comment line the rewrite inserted
        o = j
        j += 1
        back[o] = i
        if not l.strip() or not cont[o] or l == orig[o] and nc[i] == oc[o] and \
                all(out[back[q]] == orig[q] for q in range(o) if q in back):
            continue            # nothing before it moved
        ind0 = width(re.match(r"[ \t]*", orig[o]).group())
        if oc[o] is not None and ind0 == oc[o]:
            target = nc[i]      # aligned with its parenthesis
        else:
            target = None
            q = o - 1
            if q in back and orig[q].strip():
                target = _moved_col(orig[q], out[back[q]], ind0)
            if target is None:
                if oc[o] is not None or nc[i] is None:
                    continue    # aligned with nothing upstream
                target = nc[i]  # continues the parenthesis the rewrite opened
        if target is None:
            continue
        fixed = _indent(target) + l.lstrip()
        if fixed != l and width(fixed) <= limit:
            out[i] = fixed
    return out


def _render_chunk(E, keys, lo, hi):
    orig = E.S.text[lo:hi]
    new = E.render(keys, lo, hi, at_lo=False)
    limit = 80 if max(width(l) for l in orig.split("\n")) <= 80 else 100
    # the accessor style's longer calls (helperstyle.py): no lone short
    # operand on a line, and wrapped at 100 columns what passes them
    tries = [(limit, 0)] if not E.wide else \
        [(limit, 4), (100, 4), (limit, 0), (100, 0)]
    for lim, short in tries:
        out = _wrap_chunk(orig, new, lim, short)
        if all(width(l) <= 100 for l in out):
            break
    return "\n".join(out)


def _wrap_chunk(orig, new, limit, short=0):
    out = []
    for l in _realign(orig.split("\n"), new.split("\n"), limit):
        if l not in orig:
            l = _tabify(l)
        # a data_race() line is not wrapped (its comment must stay right
        # above it): up to 100 columns it stays, past them the site is left
        if width(l) > limit and l not in orig and "data_race(" not in l:
            out.extend(wrap_line(l, limit, short).split("\n"))
        else:
            out.append(l)
    return out
