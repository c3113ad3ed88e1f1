# SPDX-License-Identifier: GPL-2.0-only
"""Token helpers of the analysis: questions about a C token list that need
no analysis state (the statement or block around a token, the items of a
list, a declaration, a goto label, a return).  Functions of (toks, index
...) only: they read and set no attribute of the analysis."""
import bisect
import functools

from . import csrc
from .locks import KEYWORDS


def _declares(toks, k, lo):
    """True when the ',' at toks[k] separates the names of a declaration
    ('u64 a_reserve, foo_reserve;'): the statement it is in starts
    with a type name followed by a name or '*', outside any parentheses."""
    depth = 0
    j = k - 1
    while j > lo:
        x = toks[j].text
        if x in (")", "]", "}"):
            if x == "}" and depth == 0:
                break                   # the end of the statement before
            depth += 1
        elif x in ("(", "[", "{"):
            if depth == 0:
                if x == "{":
                    break
                return False
            depth -= 1
        elif x == ";" and depth == 0:
            break
        j -= 1
    s = j + 1
    while toks[s].text in ("const", "static", "unsigned", "signed", "volatile"):
        s += 1
    if toks[s].text in ("struct", "union", "enum"):
        s += 1
    return toks[s].kind == "id" and toks[s].text not in KEYWORDS and \
        (toks[s + 1].kind == "id" or toks[s + 1].text == "*")


def _owner(fns, starts, i):
    """[the function whose body holds token i] (fns sorted by body_start,
    bodies do not nest), or []."""
    j = bisect.bisect_left(starts, i) - 1
    if j >= 0 and fns[j].body_start < i < fns[j].body_end:
        return [fns[j]]
    return []


_AGGREGATES = {}


def _aggregate_keywords(toks):
    """The sorted indices of toks' 'struct' and 'union' tokens."""
    return csrc.remembered(_AGGREGATES, toks, lambda: [
        k for k, t in enumerate(toks) if t.text in ("struct", "union")])


def _scan_decls(toks, lo, hi, body, types):
    """Record 'struct x *a, b[N], *c = ...' declarations in toks[lo:hi]
    into types (name -> 'x').  Before index body (a parameter list) each
    'struct x' declares one name."""
    where = _aggregate_keywords(toks)
    for k in where[bisect.bisect_left(where, lo):bisect.bisect_left(where, hi - 2)]:
        if toks[k + 1].kind != "id":
            continue
        st = toks[k + 1].text
        j = k + 2
        while True:
            while j < hi and toks[j].text in ("*", "const", "__rcu"):
                j += 1
            if not (j + 1 < hi and toks[j].kind == "id" and
                    toks[j + 1].text in (",", ";", ")", "=", "[")):
                break
            types.setdefault(toks[j].text, st)
            if k < body:
                break
            m = j + 1
            while m < hi and toks[m].text not in (",", ";"):
                if toks[m].text in ("(", "[", "{"):
                    m = csrc.match_paren(toks, m)
                m += 1
            if m >= hi or toks[m].text != ",":
                break
            j = m + 1


def own_decls(toks, fn):
    """name -> struct of fn's parameters and locals ('struct x *a'), not
    the file's top-level declarations; remembered with fn."""
    c = getattr(fn, "_own_decls", None)
    if c is None:
        i = fn.body_start - 1
        while i > 0 and not (toks[i].kind == "id" and toks[i].text == fn.name
                             and toks[i + 1].text == "("):
            i -= 1
        c = {}
        _scan_decls(toks, i, fn.body_end, fn.body_start, c)
        fn._own_decls = c
    return c


def _designated_init(toks, i):
    """(struct, variable, member) when toks[i] is the value of a designated
    initializer '.member = name' inside 'struct S x = { ... }' (variable
    None for an array of them, 'struct S x[] = {'), else None."""
    if i < 3 or toks[i - 1].text != "=" or toks[i - 2].kind != "id" or \
            toks[i - 3].text != "." or toks[i + 1].text not in (",", "}"):
        return None
    depth = 0
    j = i - 3
    while j > 0:
        x = toks[j].text
        if x == "}":
            depth += 1
        elif x == "{":
            if depth == 0:
                break
            depth -= 1
        elif x == ";" and depth == 0:
            return None
        j -= 1
    # 'struct S name[] = {' or 'struct S name = {' (const/static before)
    k = j - 1
    if k < 0 or toks[k].text != "=":
        return None
    for n in range(k - 1, max(k - 8, 0), -1):
        if toks[n].text == "struct" and toks[n + 1].kind == "id":
            var = toks[k - 1].text if n + 2 == k - 1 else None
            return (toks[n + 1].text, var, toks[i - 2].text)
        if toks[n].text in (";", "}", "{"):
            break
    return None


def _ops_member(toks, i):
    """(struct, member) when toks[i] is the value of a designated
    initializer '.member = name' inside 'struct S x = { ... }' (or an
    array of them), else None."""
    d = _designated_init(toks, i)
    return (d[0], d[2]) if d else None


def _call_start(toks, k, lo):
    """Index of the name of the call whose argument list holds toks[k]
    (the token before its '(', past balanced parentheses)."""
    j = k - 1
    depth = 0
    while j > lo and (toks[j].text != "(" or depth):
        depth += {")": 1, "(": -1}.get(toks[j].text, 0)
        j -= 1
    return j - 1


def _null_tested(toks, lo, hi, name):
    """Does toks[lo:hi] compare name with NULL ('!p', 'p == NULL', 'if (p)',
    'p ? ...', 'p && ...')?"""
    for k in range(lo + 1, hi - 1):
        if toks[k].text != name or toks[k].kind != "id":
            continue
        prev, nxt = toks[k - 1].text, toks[k + 1].text
        if prev in ("->", ".") or nxt in ("->", ".", "[", "("):
            # a member of something else, or a dereference ('&& p->x')
            continue
        if prev == "!" or nxt in ("?", "&&", "||") or prev in ("&&", "||"):
            return True
        if nxt in ("==", "!=") and toks[k + 2].text == "NULL":
            return True
        if prev in ("==", "!=") and toks[k - 2].text == "NULL":
            return True
        if prev == "(" and nxt == ")" and toks[k - 2].text in ("if", "while"):
            return True
    return False


def _asserted_set(toks, lo, hi, p, asserts):
    """Is 'A(p)' in toks[lo:hi] for an assertion A that holds its argument
    true: the function relies on p being set."""
    for k in range(lo + 2, hi - 1):
        if toks[k].text == p and toks[k - 1].text == "(" and toks[k + 1].text == ")" and \
                toks[k - 2].text in asserts:
            return True
    return False


def _open_blocks(toks, lo, k):
    """The '{' of every block that holds toks[k], innermost first, down
    to toks[lo].  A '}' the bracket table matches (csrc.index_parens())
    closes a balanced block: the walk goes on from its '{' (the same
    walk, without the block's tokens)."""
    back = getattr(toks, "opening", None)
    depth = 0
    i = k
    while i > lo:
        i -= 1
        t = toks[i].text
        if t == "}":
            o = back[i] if back is not None else -1
            if o >= 0:
                if o < lo:
                    return
                i = o
                continue
            depth += 1
        elif t == "{":
            if depth:
                depth -= 1
            else:
                yield i


def _in_loop(toks, lo, k):
    """Is toks[k] inside a for/while/do body of the function starting at
    lo?"""
    for i in _open_blocks(toks, lo, k):
        j = i - 1
        if toks[j].text == "do":
            return True
        if toks[j].text == ")":
            d = 0
            while j > lo:
                if toks[j].text == ")":
                    d += 1
                elif toks[j].text == "(":
                    d -= 1
                    if d == 0:
                        break
                j -= 1
            if toks[j - 1].text in ("for", "while") or \
                    toks[j - 1].text.startswith(("list_for_each", "for_each", "rbtree_postorder")):
                return True
    return False


def _is_label(toks, i):
    """Is toks[i] a goto label ('out:' at the start of a statement)?"""
    return toks[i].kind == "id" and toks[i + 1].text == ":" and \
        toks[i - 1].text in (";", "{", "}") and toks[i].text != "default"


def _stmt_end(toks, k, hi):
    """The ';' that ends the statement toks[k] is in (an assignment takes
    effect there: 'x = f(x);' passes the old x)."""
    depth = 0
    for i in range(k, hi):
        t = toks[i].text
        if t in "([{":
            depth += 1
        elif t in ")]}":
            if depth == 0:
                return i
            depth -= 1
        elif t == ";" and depth == 0:
            return i
    return hi


def _reaches(toks, j, k):
    """Can the assignment at toks[j] reach toks[k] (j < k)?  Not when j
    is in the then-block of an if whose else-block holds k: 'if (e) { p =
    e; } else { ... p->f ... }'."""
    for i in _open_blocks(toks, 0, j):
        e = csrc.match_paren(toks, i)
        if e >= k:
            return True                 # this block holds k too
        if e + 2 < len(toks) and toks[e + 1].text == "else" and toks[e + 2].text == "{" \
                and k < csrc.match_paren(toks, e + 2):
            return False
    return True


@functools.lru_cache(maxsize=1 << 14)
def _root(base):
    """The variable an access path's base starts with ('(*x)' -> 'x'),
    or None (remembered: the same bases come back, and tokenizing them
    is the cost)."""
    if not base:
        return None
    toks = csrc.tokenize(base)
    for t in toks:
        if t.kind == "id":
            return t.text
        if t.text not in ("(", "*", "&"):
            return None
    return None


def _split(toks, lo, hi):
    """(start, end) token ranges of the comma-separated items in lo..hi."""
    out = []
    start = k = lo
    while k < hi:
        x = toks[k].text
        if x in ("(", "[", "{"):
            m = csrc.match_paren(toks, k)
            if m >= hi:
                break
            k = m + 1
            continue
        if x == ",":
            out.append((start, k))
            start = k + 1
        k += 1
    if start < hi:
        out.append((start, hi))
    return out


def _returns(toks, k, hi):
    """toks[k] starts 'return ...;' or a block '{ ... return ...; }': the
    index of the statement's last token (';' or '}'), else None."""
    if toks[k].text == "return":
        while k < hi and toks[k].text != ";":
            k += 1
        return k
    if toks[k].text == "{":
        # the block's last statement is a return
        e = csrc.match_paren(toks, k)
        last = _last_stmt(toks, k, e)
        return e if last is not None and toks[last].text == "return" else None
    return None


def _last_stmt(toks, lo, hi):
    """The first token of the last statement of the block toks[lo:hi+1]
    ('{' ... '}'), or None when it does not end in ';'."""
    j = hi - 1
    if toks[j].text != ";":
        return None
    depth = 0
    j -= 1
    while j > lo:
        t = toks[j].text
        if t in (")", "]"):
            depth += 1
        elif t in ("(", "["):
            depth -= 1
        elif depth == 0 and t in (";", "{", "}"):
            return j + 1
        j -= 1
    return lo + 1


def _branch_end(toks, k, hi):
    """The last token of the branch starting at toks[k]: the '}' of a
    block, or the ';' of a statement."""
    if toks[k].text == "{":
        return csrc.match_paren(toks, k)
    return _stmt_end(toks, k, hi)
