# SPDX-License-Identifier: GPL-2.0-only
"""Stage 4: where the data_race() of a load only for a diagnostic goes,
and what its comment says.

checkpatch (DATA_RACE) accepts the comment of a data_race() only on the
lines right above it (a code line between does not count) or at the end
of its line.  A comment inside an argument list or a condition reads
badly, so:

- a data_race() on the first line of its statement gets its comment above
  the statement;
- otherwise the value is loaded into a local right before the statement,
  with the comment above the load, and the statement uses the local (as
  upstream does: 'bg = data_race(fs->cur_bg);' before printing it).  The local is declared at the start of the
  enclosing block (the kernel builds with -Wdeclaration-after-statement),
  or declared and loaded there when no statement comes before; the
  unbraced body of an 'if' gets braces.  The same value used again in the
  next statement comes from the same load;
- a site whose load cannot move safely (a loop header, an 'else' body, a
  condition before it that tests the pointer it goes through, a base that
  is not a plain member path, an #if between the block start and the
  statement) is left for a human.

The comment says why the race is tolerated for that use: the diagnostic
call around the load (a message, an assertion, a tracepoint), named by the
generic patterns of policies/comments.json ("diagnostic-read-uses").
"""
import fnmatch
import re

from . import csrc
from .cstmt import Skip, comment_lines, statement_start, width
from .callctx import guarded_call
from .policy import GUARD, MESSAGE

HEADERS = ("if", "while", "for", "switch")
# words that begin a declaration's type without being a type name
TYPE_WORDS = {"const", "static", "unsigned", "signed", "volatile", "register", "long",
              "short", "int", "char", "bool", "_Bool", "float", "double"}
NOT_TYPES = {"if", "else", "while", "for", "do", "switch", "case", "default", "return",
             "goto", "break", "continue", "sizeof", "typeof", "__typeof__", "asm"}
STORES = {"=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>=", "++", "--"}


# ------------------------------------------------------------ the comment

def use_text(S, j, st, comments, diag_call=None):
    """The comment of the data_race() whose base starts at token j, in the
    statement starting at st: the text of the first use (from the innermost
    call outwards) whose patterns name a call around it and, when the use
    gives one, whose argument it is in; else that of the diagnostic the
    analysis found the value goes to (diag_call, the plan's); else the
    stock text."""
    uses = comments.get("diagnostic-read-uses") or []
    depth, arg = 0, 0
    for k in range(j - 1, st - 1, -1):
        x = S.txt(k)
        if x in (")", "]"):
            depth += 1
        elif x in ("(", "[") and depth:
            depth -= 1
        elif x in ("(", "["):
            if x == "(" and k and S.toks[k - 1].kind == "id":
                u = use_of(uses, S.txt(k - 1), arg)
                if u:
                    return u["text"]
                if _after_format(S, k, j):
                    # an argument after the format string of any call
                    # (callctx.call_context())
                    u = _use_named(uses, "message")
                    if u:
                        return u["text"]
            arg = 0
        elif x == "," and not depth:
            arg += 1
    g = _guarded_assertion(S, st, j)
    if g:
        # the condition of an 'if' whose body is one assertion
        u = use_of(uses, g, 0)
        if u:
            return u["text"]
    if diag_call:
        u = _use_named(uses, "message") if diag_call.endswith(MESSAGE) else \
            use_of(uses, diag_call[:-len(GUARD)], 0) if diag_call.endswith(GUARD) else \
            use_of(uses, diag_call, -1)
        if u:
            return u["text"]
    return comments.get("diagnostic-read")


def _use_named(uses, use):
    return next((u for u in uses if u.get("use") == use and "argument" not in u), None)


def _after_format(S, o, j):
    """A string with a '%' is a whole argument of the call opening at
    S.toks[o], before the one token j is in."""
    depth = 0
    for k in range(o + 1, j):
        x = S.txt(k)
        if x in ("(", "["):
            depth += 1
        elif x in (")", "]"):
            depth -= 1
        elif not depth and S.toks[k].kind == "str" and "%" in x:
            return True
    return False


def _guarded_assertion(S, st, j):
    """The call that is the whole body of the 'if' at st when token j is
    in its condition (callctx.guarded_call()), else None."""
    if S.txt(st) != "if" or S.txt(st + 1) != "(" or \
            not st + 1 < j < csrc.match_paren(S.toks, st + 1):
        return None
    return guarded_call(S.toks, st + 1)


def use_of(uses, name, arg):
    """The first use whose call patterns match name (and argument arg)."""
    for u in uses:
        if "argument" in u and u["argument"] != arg:
            continue
        if any(fnmatch.fnmatchcase(name, p) for p in u["calls"]):
            return u
    return None


# ------------------------------------------------------- the statement

def inner_statement(S, j):
    """(first token of the innermost statement holding token j, the ')'
    of the 'if' header whose unbraced body that statement is, or None)."""
    st = statement_start(S, j)
    hdr = None
    while True:
        x = S.txt(st)
        if x in ("else", "do"):
            raise Skip("in an unbraced '%s' body or after it" % x)
        if x in HEADERS and S.txt(st + 1) == "(":
            close = csrc.match_paren(S.toks, st + 1)
            if close < j:
                if x != "if":
                    raise Skip("in the unbraced body of a loop")
                hdr, st = close, close + 1
                continue
            if x != "if":
                raise Skip("in a loop header (a load before it is not repeated)")
        return st, hdr


def stmt_end(S, st):
    """Index of the ';' (or the '{' of a header) that ends the statement."""
    depth = 0
    for k in range(st, len(S.toks)):
        x = S.txt(k)
        if x in ("(", "["):
            depth += 1
        elif x in (")", "]"):
            depth -= 1
        elif not depth and x in (";", "{"):
            return k
    raise Skip("no end of statement")


def line_indent(S, k):
    """The white space before token k, which must start its line."""
    off = S.off(k)
    ls = S.text.rfind("\n", 0, off) + 1
    ind = S.text[ls:off]
    if ind.strip():
        raise Skip("'%s' does not start its line" % S.txt(k))
    return ind


def enclosing_block(S, k):
    """Index of the '{' of the innermost block around token k that is not
    the body of a switch (no declaration goes before the first case)."""
    depth = 0
    for o in range(k - 1, -1, -1):
        x = S.txt(o)
        if x == "}":
            depth += 1
        elif x == "{" and depth:
            depth -= 1
        elif x == "{" and not _switch_body(S, o):
            return o
    raise Skip("no enclosing block")


def _switch_body(S, o):
    if o < 1 or S.txt(o - 1) != ")":
        return False
    p = S.open_of(o - 1)
    return p is not None and p > 0 and S.txt(p - 1) == "switch"


def function_range(S, k):
    """(first token of the signature, closing '}') of the function around
    token k: the body's '{' is the one at column 0 (kernel style)."""
    o = enclosing_block(S, k)
    while S.toks[o].col:
        o = enclosing_block(S, o)
    lo, depth = o - 1, 0
    while lo >= 0:
        x = S.txt(lo)
        if x in (")", "]"):
            depth += 1
        elif x in ("(", "["):
            depth -= 1
        elif not depth and x in (";", "}"):
            break
        lo -= 1
    return lo + 1, csrc.match_paren(S.toks, o)


def is_declaration(S, t):
    """True when the statement at token t declares variables."""
    k, typed = t, False
    while S.txt(k) in TYPE_WORDS:
        k, typed = k + 1, True
    if S.txt(k) in ("struct", "union", "enum"):
        return S.toks[k + 1].kind == "id"
    if S.toks[k].kind != "id" or S.txt(k) in NOT_TYPES:
        return typed
    if S.toks[k + 1].kind == "id":
        return True
    if S.txt(k + 1) == "*":
        return S.toks[k + 2].kind == "id" or S.txt(k + 2) == "*"
    return typed and S.txt(k + 1) in (";", "=", ",", "[")


def declarations(S, o):
    """(first statement after the declarations opening the block at '{' o,
    the ';' of the last declaration or None)."""
    t, last = o + 1, None
    while S.txt(t) != "}" and is_declaration(S, t):
        last = stmt_end(S, t)
        if S.txt(last) != ";":
            break
        t = last + 1
    return t, last


def line_after(S, k):
    """Offset of the line after token k's; nothing but a comment may follow
    k on its line."""
    ln = S.toks[k].line
    if k + 1 < len(S.toks) and S.toks[k + 1].line == ln:
        raise Skip("code after '%s' on its line" % S.txt(k))
    return S.starts[ln] if ln < len(S.starts) else len(S.text)


def above_comments(S, st):
    """Offset of the first of the comment lines right above the statement at
    st (its own line when none): a load goes above the statement's comment."""
    top = S.toks[st].line
    while top > 1:
        t = S.line_text(top - 1).strip()
        if t.startswith("//"):
            top -= 1
            continue
        if not t.endswith("*/"):
            break
        k = top - 1
        while k > 1 and "/*" not in S.line_text(k):
            k -= 1
        head = S.line_text(k)
        if "/*" not in head or head[:head.index("/*")].strip():
            break
        top = k
    return S.starts[top - 1]


def crosses_directive(S, lo, hi):
    """True when an #if region starts or ends between offsets lo and hi: a
    local declared at lo would be missing, or unused, at hi."""
    level = 0
    for m in re.finditer(r"(?m)^[ \t]*#[ \t]*(\w+)", S.text[lo:hi]):
        d = m.group(1)
        if d.startswith("if"):
            level += 1
        elif d == "endif":
            level -= 1
            if level < 0:
                return True
        elif d in ("else", "elif", "elifdef", "elifndef") and not level:
            return True
    return level != 0


# ------------------------------------------------- is the move safe

def member_path(S, j, i):
    """Token texts of the base j..i when it is 'a->b.c' (names joined by
    '->' or '.'), else Skip."""
    path = [S.txt(k) for k in range(j, i + 1)]
    for n, k in enumerate(range(j, i + 1)):
        if (S.toks[k].kind != "id") if n % 2 == 0 else path[n] not in ("->", "."):
            raise Skip("the base is not a plain member path (a load before the "
                       "statement would evaluate more than the field)")
    return path


def unsafe_move(S, st, j, path):
    """Why loading path (its data_race() at token j) before the statement
    at st would be unsafe, or None: a statement that stores to the path on
    the way, or a '&&', '||' or '?' before the load (at a level around it)
    whose condition tests a pointer of the path itself, as 'p && p->f'."""
    levels = [False]
    seen = []
    for k in range(st, j):
        x = S.txt(k)
        if x in ("(", "["):
            levels.append(False)
        elif x in (")", "]"):
            levels.pop()
        elif x in ("&&", "||", "?"):
            levels[-1] = True
        elif x == ",":
            levels[-1] = False
        seen.append(k)
    conditional = any(levels)
    for n in range(1, len(path) - 1, 2):
        pre = path[:n]
        for k in seen:
            if [S.txt(q) for q in range(k, min(k + n, j))] != pre:
                continue
            nxt = S.txt(k + n)
            through = nxt in ("->", ".")      # a member of it, not the pointer
            if nxt in STORES or not through and k and S.txt(k - 1) in ("++", "--", "&"):
                return "the statement changes %s before the load" % "".join(pre)
            if conditional and not through:
                return "a condition before the load tests %s" % "".join(pre)
    return None


def pick_name(S, fn, path, taken, cache):
    """A name for the local: the field's, else base_field; none that the
    function already uses (members aside) or another load took."""
    ids = cache.get(fn)
    if ids is None:
        ids = {S.txt(k) for k in range(fn[0], fn[1])
               if S.toks[k].kind == "id" and S.txt(k - 1) not in ("->", ".")}
        cache[fn] = ids
    cands = [path[-1]] + (["%s_%s" % (path[-3], path[-1])] if len(path) >= 3 else [])
    for c in cands:
        if c not in ids and c not in taken:
            taken.add(c)
            return c
    raise Skip("no free name for the local (%s)" % ", ".join(cands))


def decl_of(ftype, name):
    return "%s%s" % (ftype, name) if ftype.endswith("*") else "%s %s" % (ftype, name)


# ------------------------------------------------------------ placement

def place(E, diag, comments, stmt_comments, locals_=True, discarding=frozenset()):
    """Place the data_race() sites diag [(key, site, i, j)] of one file.
    A comment above a statement goes to stmt_comments (the rewrite puts
    it there); a continuation-line site gets a local (locals_=False: the
    comment goes above its line, as a plain patch would have it).
    Returns {key: why} for the sites left for a human, whose edits are
    removed; among them those in a call of a macro some configuration
    compiles to nothing (discarding): a local would be unused there."""
    S = E.S
    stmts, skipped = {}, {}
    for key, s, i, j in diag:
        st = statement_start(S, j)
        text = use_text(S, j, st, comments, s.get("diag_call"))
        line = S.toks[i].line
        if line == S.toks[st].line:
            stmt_comments.setdefault(st, []).append((key, s, text, i))
            continue
        try:
            inner, hdr = inner_statement(S, j)
        except Skip as e:
            inner, hdr = None, str(e)
        if inner is not None and line == S.toks[inner].line:
            stmt_comments.setdefault(inner, []).append((key, s, text, i))
        elif not locals_:
            k = i
            while k and S.toks[k - 1].line == line:
                k -= 1
            stmt_comments.setdefault(k, []).append((key, s, text, i))
        elif inner is None:
            skipped[key] = hdr
        elif S.txt(inner) in discarding:
            skipped[key] = ("in a call of %s(), a macro that some configuration defines "
                            "to use none of its arguments: a local would be unused there"
                            % S.txt(inner))
        else:
            stmts.setdefault(inner, (hdr, []))[1].append((key, s, i, j, text))
    state = {"names": {}, "ids": {}, "chain": None}
    for st in sorted(stmts):
        hdr, sites = stmts[st]
        try:
            localise(E, st, hdr, sites, state)
        except Skip as e:
            skipped.update((x[0], str(e)) for x in sites)
    for key in list(skipped):
        for k in E.groups.get(key, {key}):
            E.items = [it for it in E.items if it[0] != k]
            skipped.setdefault(k, skipped[key])
    return skipped


def localise(E, st, hdr, sites, state):
    """Load the values of sites (data_race() on a continuation line of the
    statement at st) into locals right before it; hdr: the ')' of the
    'if' whose unbraced body the statement is."""
    S = E.S
    fn = function_range(S, st)
    chain = state["chain"]
    reuse = chain[1] if chain and chain[0] == st - 1 else {}
    loads = _loads(E, st, sites, reuse)
    taken = state["names"].setdefault(fn, set())
    for ld in loads.values():
        ld["name"] = pick_name(S, fn, ld["path"], taken, state["ids"])
    end = stmt_end(S, st)
    if S.txt(end) != ";" or S.text[S.end(end):S.text.find("\n", S.end(end))].strip():
        raise Skip("the statement does not end its line with ';'")
    where = _positions(S, st, hdr, end)
    first = sites[0][0]
    keys = {x[0] for x in sites}
    E.items = [it for it in E.items if it[0] not in keys]    # the data_race() in place
    for n, (expr, ld) in enumerate(loads.items()):
        _load_edits(E, where, expr, ld, (st, n))
    if where["tail"]:
        E.line(first, where["L"], "\n", (-7, st, 1 << 30))
    if where.get("D_tail") and loads:
        E.line(first, where["D"], "\n", (-8, 1 << 30, 0))
    if hdr is not None:
        E.insert(first, S.end(hdr), " {", (5, 0))
        E.insert(first, S.end(end), "\n" + where["kw_ind"] + "}", (5, 1))
    names = dict(reuse)
    names.update((expr, ld["name"]) for expr, ld in loads.items())
    for key, s, i, j, text in sites:
        a, b = E.spans[key]
        E.replace(key, a, b, names[S.text[a:b]])
    group = set(keys)
    if reuse and any(S.text[slice(*E.spans[x[0]])] in reuse for x in sites):
        group |= chain[2]
    for k in group:
        E.groups[k] = group
    state["chain"] = (end, names, group)


def _loads(E, st, sites, reuse):
    """{expression: load} of the sites, in order; an expression the previous
    statement already loaded (reuse) needs none."""
    S = E.S
    loads = {}
    for key, s, i, j, text in sites:
        a, b = E.spans[key]
        path = member_path(S, j, i)
        why = unsafe_move(S, st, j, path)
        if why:
            raise Skip(why)
        for it in E.items:
            if it[0] != key and (a <= it[2] <= b or a <= it[5] <= b or it[2] < a < it[5]):
                raise Skip("another mark inside the loaded expression")
        expr = S.text[a:b]
        if "\n" in expr:
            raise Skip("the loaded expression spans lines")
        if not s.get("field_type"):
            raise Skip("the type of %s.%s is not known" % (s["struct"], s["field"]))
        if expr not in reuse and expr not in loads:
            loads[expr] = {"path": path, "type": s["field_type"], "key": key, "text": text}
    return loads


def _positions(S, st, hdr, end):
    """Where the loads (L) and the declarations (D) go, their indentation,
    and whether the loads declare the locals themselves (merged)."""
    w = {"ind": line_indent(S, st), "tail": False}
    if hdr is not None:
        if end + 1 < len(S.toks) and S.txt(end + 1) == "else":
            raise Skip("the unbraced body of an if that has an else")
        w["kw_ind"] = line_indent(S, S.open_of(hdr) - 1)
        w.update(merged=True, L=above_comments(S, st), tail=True)
        return w
    block = enclosing_block(S, st)
    first, last = declarations(S, block)
    w["merged"] = first == st
    if w["merged"] and last is not None:
        w["L"] = line_after(S, last)
    else:
        w["L"] = above_comments(S, st)
        w["tail"] = w["merged"]
    if not w["merged"]:
        w["D"] = line_after(S, last if last is not None else block)
        w["D_ind"] = line_indent(S, block + 1)
        w["D_tail"] = last is None
        if crosses_directive(S, w["D"], w["L"]):
            raise Skip("an #if between the start of the block and the statement")
    if crosses_directive(S, w["L"], S.off(st)):
        raise Skip("an #if between the declarations and the statement")
    return w


def _load_edits(E, w, expr, ld, order):
    """The comment and the load (declaring the local when merged), and the
    declaration at the block start when not."""
    ind, name = w["ind"], ld["name"]
    if w["merged"]:
        load = "%s%s = data_race(%s);\n" % (ind, decl_of(ld["type"], name), expr)
    else:
        decl = "%s%s;\n" % (w["D_ind"], decl_of(ld["type"], name))
        E.line(ld["key"], w["D"], decl, (-8,) + order)
        load = "%s%s = data_race(%s);\n" % (ind, name, expr)
    if width(load.rstrip("\n")) > 100:
        raise Skip("the load would exceed 100 columns")
    E.line(ld["key"], w["L"], comment_lines(ld["text"], ind) + load, (-7,) + order)
