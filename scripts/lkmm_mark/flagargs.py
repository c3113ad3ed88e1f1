# SPDX-License-Identifier: GPL-2.0-only
"""Flag arguments: a branch on a parameter that callers pass as a
constant is not reached from the calls that pass the other value.

    static void foo_take(struct foo_ctl *ctl, u64 n, bool update)
    {
            ...
            if (update)
                    ctl->free -= n;         <- not reached from
    }                                          foo_take(c, n, false)

The call that passes false, made under another lock than the calls that
pass true, says nothing about the locks that protect the store: the
calling contexts of an access are those of the call sites that can reach
it (callers.py: attach_held() and lockset_chains() ask reaching_sites()).

A guard here is a condition that tests a parameter alone ('p', '!p', or
a comparison with a literal, 'p > 0'), or one of those before '&& ...',
of an if whose then-branch or else-branch holds the access, or of an
early 'if (p) return ...;' before it, with the parameter assigned only
inside the ranges of that same test (a search that shrinks a size it
has tested, 'if (grow > 0) { grow -= hdr; ... }').  A local
known equal to a parameter counts as it: in the branch of
'if (x == p && ...)', with x not assigned there, 'if (x == 0) ... else
...' tests p.  A call contradicts it when it passes a literal that fails
the test: true, false, NULL or an integer.  A guard lifts one call up
(reaching_sites_for()): a caller that passes a local declared with a
literal failing it, assigned only in the branches of a test of the
caller's own parameter ('u64 n = 0; if (r) n = r->count; f(n);'), makes
the call meet it only where that test holds, so the caller's own calls
that fail it (f reached from g(NULL)) do not reach the access.  nullargs.py asks the same of the argument
values a chain of calls hands down (a handle that is NULL only in calls
that pass a zero size).

Reads .src, .params(), ._call_args(), .sites_of().  Sets
nothing but its cache (_flagcache).
"""
from . import csrc
from .tokutil import _branch_end, _last_stmt, _open_blocks

_NEG = {"!=": "==", "==": "!=", ">": "<=", "<=": ">", "<": ">=", ">=": "<"}


class FlagArgs:
    def flag_guards(self, fn, k):
        """((parameter index, op, literal), ...): toks[k] of fn is reached
        only when each of those parameters, as passed, has 'p op literal'."""
        return tuple((n, op, lit) for lo, hi, n, op, lit in self._flag_ranges(fn)
                     if lo < k <= hi)

    def _flag_ranges(self, fn):
        """[(from, to, parameter index, op, literal)]: the token ranges of
        fn reached only when a parameter has 'p op literal' (the branches
        of 'if (p)', 'if (!p)', 'if (p > 0)', and what follows
        'if (p) return ...;' at the top level of the body).  A parameter
        assigned in fn keeps the ranges of a test when every assignment is
        inside a range of that same test: a call whose value fails it
        never enters one, so the value stays the one passed."""
        memo = self.__dict__.setdefault("_flagranges", {})
        key = (fn.file, fn.body_start)
        if key in memo:
            return memo[key]
        toks = self.src.toks[fn.file]
        names = self.params(fn)
        out = test_ranges(toks, fn, lambda lo, hi: _param_test(toks, lo, hi, names))
        out += _alias_ranges(toks, fn, names)
        out = [r for r in out if self._kept_by_test(fn, names[r[2]], r, out)]
        memo[key] = out
        return out

    def _kept_by_test(self, fn, p, r, ranges):
        """Every assignment of parameter p in fn is inside a range of the
        same test as r (so the value r's test sees is the one passed)."""
        same = [x for x in ranges if x[2:] == r[2:]]
        toks = self.src.toks[fn.file]
        return all(any(lo < k <= hi for lo, hi, _, _, _ in same)
                   for k in assigned_at(toks, fn.body_start, fn.body_end, p))

    def reaching_sites(self, a):
        """The call sites of a's function that can reach a, when some of
        them cannot (they pass a flag of the other truth); else None."""
        if a.func is None or a.tok is None:
            return None
        return self.reaching_sites_at(a.func, a.tok)

    def reaching_sites_at(self, fn, k):
        """reaching_sites() of toks[k] in fn (an access, or a call); []
        when no call site reaches it (every one passes the other truth)."""
        key = (fn.file, fn.body_start, k)
        c = self._flagcache.get(key, False)
        if c is not False:
            return c
        c = None
        guards = self.flag_guards(fn, k)
        # and the members of a stack struct that holds fn (memberflags.py)
        mguards = self.member_guards(fn, k)
        if guards or mguards:
            sites = self.sites_of(fn)
            keep = [s for s in sites if not self._contradicts(s, guards) and
                    not self.member_contradicts(s, mguards, fn)]
            if len(keep) < len(sites):
                c = keep
        self._flagcache[key] = c
        return c

    def reaching_sites_for(self, caller, k, need):
        """reaching_sites_at(caller, k), less the calls of caller that
        cannot make the call at toks[k] pass values that meet need (the
        guards on the callee's parameters an access needs): an argument
        that is a local declared with a literal failing a guard, assigned
        only in the branches of a test of one of caller's parameters
        ('u64 n = 0; if (p) n = p->nr; ... f(n);' for a branch 'n != 0'
        of f), meets it only in the calls that can pass that test."""
        rs = self.reaching_sites_at(caller, k)
        lifted = self._lifted_guards(caller, k, need) if need else ()
        if not lifted or caller.name in self.addr_taken or caller.name in self.macro_used:
            return rs
        sites = rs if rs is not None else self.sites_of(caller)
        if not sites:
            return rs
        return [s for s in sites if not self._contradicts(s, lifted)]

    def _lifted_guards(self, caller, k, need):
        """The guards on caller's parameters that the call at toks[k]
        needs to pass values meeting need (reaching_sites_for())."""
        args = self._call_args(caller.file, k) or ()
        toks = self.src.toks[caller.file]
        names = self.params(caller)
        ranges = self._flag_ranges(caller)
        out = []
        for n, op, lit in need:
            if n >= len(args) or args[n][1] - args[n][0] != 1:
                continue
            v = toks[args[n][0]].text
            d = _declared(toks, caller.body_start, k, v)
            if d is None or toks[d + 1].text != "=" or toks[d + 3].text not in (";", ","):
                continue
            init = literal_value(toks, d + 2, d + 3)
            if init is None or holds(init, op, lit):
                continue
            sets = [j for j in assigned_at(toks, caller.body_start, caller.body_end, v) if j != d]
            if _address_taken(toks, caller, v):
                continue
            for r in ranges:
                p = names[r[2]]
                if sets and not assigned_at(toks, caller.body_start, caller.body_end, p) and \
                        all(any(lo < j <= hi for lo, hi, *g in ranges if tuple(g) == r[2:])
                            for j in sets):
                    out.append(r[2:])
                    break
        return tuple(out)

    def _contradicts(self, site, guards):
        """The call site passes a literal against one of the guards, or,
        against a guard that it is NULL ('if (!p)', the else branch of
        'if (p)'), a pointer its caller has dereferenced on its way to
        the call (deref_before())."""
        caller, _, k = site
        args = self._call_args(caller.file, k) or ()
        toks = self.src.toks[caller.file]
        return any(n < len(args) and (
            not holds(literal_value(toks, *args[n]), op, lit) or
            (op, lit) == ("==", 0) and args[n][1] - args[n][0] == 1 and
            deref_before(toks, caller, toks[args[n][0]].text, k)) for n, op, lit in guards)


_ASSIGN_OPS = {"=", "+=", "-=", "*=", "/=", "%=", "|=", "&=", "^=", "<<=", ">>=", "++", "--"}


def assigned_at(toks, lo, hi, name):
    """The tokens of toks[lo:hi] where the variable name may change: an
    assignment of any kind, '++'/'--', or its address taken ('&name')."""
    return [k for k in range(lo + 1, hi) if toks[k].text == name and toks[k].kind == "id" and
            toks[k - 1].text not in (".", "->") and
            (toks[k + 1].text in _ASSIGN_OPS or toks[k - 1].text in ("++", "--", "&"))]


_NOT_PLAIN = {"?", "&&", "||", "sizeof", "typeof", "__typeof__", "_Generic"}
_STMT_WORDS = {"if", "else", "for", "while", "do", "switch", "case", "default", "return"}


def deref_before(toks, fn, name, k):
    """name (a plain variable) is loaded through ('name->f') by a statement
    at the top level of fn's body before toks[k], outside parentheses (a
    macro's argument may be compiled out: ASSERT()), not after '?', '&&',
    '||' or in sizeof, not as '&name->f', the statement no loop macro's
    ('for_each(...) x = name->f;'); no label between it and toks[k] that
    a goto before it jumps to, and name assigned nowhere before toks[k]:
    a NULL name would have faulted there, so it is no NULL at toks[k]."""
    if toks[fn.body_start].text != "{" or assigned_at(toks, fn.body_start, k, name):
        return False
    depth = paren = 0
    found, start, plain = None, True, False
    for j in range(fn.body_start + 1, k):
        t = toks[j].text
        if t in ("{", "}") or (t == ";" and not paren):
            depth += (t == "{") - (t == "}")
            start = True
            continue
        if start:
            plain = not depth and t not in _STMT_WORDS and toks[j + 1].text != "("
            start = False
        paren += (t in ("(", "[")) - (t in (")", "]"))
        if t in _NOT_PLAIN:
            plain = False
        if found is not None and toks[j].kind == "id" and toks[j + 1].text == ":" and \
                toks[j - 1].text in (";", "{", "}") and any(
                    toks[g].text == "goto" and toks[g + 1].text == t
                    for g in range(fn.body_start, found)):
            found = None                # a label an earlier goto jumps to, past the load
        elif plain and not paren and t == name and toks[j + 1].text == "->" and \
                toks[j - 1].text not in ("&", ".", "->"):
            found = j
    return found is not None


def literal_value(toks, a, b):
    """The integer value of toks[a:b] when it is a literal (true, false,
    NULL, 0, 1, -1, 0x10, 4096U), else None."""
    neg = b - a == 2 and toks[a].text == "-"
    if b - a != 1 and not neg:
        return None
    x = toks[b - 1].text
    if x in _NAMED:
        return None if neg else _NAMED[x]
    try:
        v = int(x.rstrip("uUlL"), 0)
    except ValueError:
        return None
    return -v if neg else v


_NOT_TYPES = {"return", "case", "goto", "else", "do", "sizeof", "typeof"}

_NAMED = {"true": 1, "false": 0, "NULL": 0}


def holds(v, op, lit):
    """Whether a value v (an integer, a set of the integers it may be, or
    None: not known) can have 'v op lit'."""
    if v is None:
        return True
    return any({"!=": x != lit, "==": x == lit, ">": x > lit, "<": x < lit,
                ">=": x >= lit, "<=": x <= lit}[op]
               for x in (v if isinstance(v, frozenset) else (v,)))


def _alias_ranges(toks, fn, names):
    """Flag ranges of a local known equal to a parameter: in the branch
    of 'if (x == p && ...)', with x a local not assigned there, a test of
    x alone ('if (x == 0) ... else ...') tests p too; in the branch of
    'if (x < p && ...)', x an unsigned local, p is not 0."""
    out = []
    for i in range(fn.body_start + 1, fn.body_end):
        if toks[i].text != "if" or toks[i + 1].text != "(":
            continue
        close = csrc.match_paren(toks, i + 1)
        eq = _equal_conjunct(toks, i + 2, close, names)
        d = _declared(toks, fn.body_start, i, eq[0]) if eq else None
        if d is None:
            continue
        x, n, rel = eq
        end = _branch_end(toks, close + 1, fn.body_end)
        if rel == "<":
            # 'if (x < p && ...)' with x unsigned: p is not 0 there
            if _unsigned(toks, fn.body_start, d):
                out.append((close, end - 1, n, "!=", 0))
            continue
        if assigned_at(toks, close, end, x) or _address_taken(toks, fn, x):
            continue
        for j in range(close + 1, end):
            if toks[j].text != "if" or toks[j + 1].text != "(":
                continue
            c2 = csrc.match_paren(toks, j + 1)
            g = _param_test(toks, j + 2, c2, [x])
            if g is None:
                continue
            _, op, lit, whole = g
            e2 = _branch_end(toks, c2 + 1, end)
            out.append((c2, e2 - 1, n, op, lit))
            if whole and toks[e2 + 1].text == "else":
                out.append((e2, _branch_end(toks, e2 + 2, end), n, _NEG[op], lit))
    return out


_UNSIGNED = {"u8", "u16", "u32", "u64", "__u8", "__u16", "__u32", "__u64", "size_t",
             "unsigned"}


def _unsigned(toks, lo, d):
    """The local declared at toks[d] is of an unsigned integer type: its
    declaration starts with one ('u64 a, v;', 'unsigned long v;')."""
    i = d
    while i > lo and toks[i - 1].text not in (";", "{", "}"):
        i -= 1
    if toks[i].text in ("const", "static"):
        i += 1
    return toks[d - 1].text != "*" and toks[i].text in _UNSIGNED


def _address_taken(toks, fn, v):
    """'&v' somewhere in fn: a callee may change v at any time."""
    return any(toks[k - 1].text == "&" for k in assigned_at(toks, fn.body_start, fn.body_end, v))


def _equal_conjunct(toks, lo, hi, names):
    """(x, parameter index, '==' or '<') when a top-level operand of '&&'
    in toks[lo:hi] is 'x == p' or 'p == x' ('=='), 'x < p' or 'p > x'
    ('<'), x an identifier that is no parameter; else None."""
    if any(toks[j].text in ("||", "?") for j in range(lo, hi)):
        return None
    depth, start = 0, lo
    for j in range(lo, hi + 1):
        if j < hi:
            depth += toks[j].text in ("(", "[") and 1 or toks[j].text in (")", "]") and -1 or 0
        if j == hi or (depth == 0 and toks[j].text == "&&"):
            w = toks[start:j]
            if len(w) == 3 and w[1].text in ("==", "<", ">") and w[0].kind == w[2].kind == "id":
                pairs = ((w[0].text, w[2].text), (w[2].text, w[0].text))
                if w[1].text != "==":
                    pairs = pairs[:1] if w[1].text == "<" else pairs[1:]
                for x, p in pairs:
                    if p in names and x not in names:
                        return x, names.index(p), ("==" if w[1].text == "==" else "<")
            start = j + 1
    return None


def _declared(toks, lo, k, v):
    """The token of the last declaration of the local v in toks[lo:k]
    ('u64 v;', 'u64 v = 0;', 'u64 a, v;', 'struct s *v = NULL;'), else None."""
    for j in range(k - 1, lo, -1):
        if toks[j].text == v and toks[j].kind == "id" and \
                (toks[j - 1].kind == "id" or toks[j - 1].text in ("*", ",")) and \
                toks[j + 1].text in (";", "=", ",", "[") and toks[j - 1].text not in _NOT_TYPES:
            if toks[j - 1].text != "," or _in_declaration(toks, lo, j):
                return j
    return None


def _in_declaration(toks, lo, j):
    """toks[j], after a ',', is in a statement that declares: it starts
    with a type name and has no '(' before j ('u64 a, v;')."""
    i = j
    while i > lo and toks[i - 1].text not in (";", "{", "}"):
        i -= 1
        if toks[i].text in ("(", ")"):
            return False
    return toks[i].kind == "id" and toks[i].text not in _NOT_TYPES and toks[i + 1].kind == "id"


def test_ranges(toks, fn, test):
    """[(from, to, key, op, literal)]: the token ranges of fn reached only
    when what test(lo, hi) finds in the condition of an 'if' holds
    ((key, op, literal, whole) or None): the branch of the test; and, when
    the test is the whole condition, its else branch, or what follows
    'if (...) return ...;' or 'if (...) { ...; return ...; }' (no goto)
    at the top level of the body, with op negated."""
    out = []
    for i in range(fn.body_start + 1, fn.body_end):
        if toks[i].text != "if" or toks[i + 1].text != "(":
            continue
        close = csrc.match_paren(toks, i + 1)
        g = test(i + 2, close)
        if g is None:
            continue
        key, op, lit, whole = g
        end = _branch_end(toks, close + 1, fn.body_end)
        out.append((close, end - 1, key, op, lit))
        if not whole:
            continue                # 'if (p && x)': p's truth is known in the branch only
        if toks[end + 1].text == "else":
            out.append((end, _branch_end(toks, end + 2, fn.body_end), key, _NEG[op], lit))
        elif (toks[close + 1].text == "return" or _block_returns(toks, close + 1, end)) and \
                next(_open_blocks(toks, fn.body_start, i), None) == fn.body_start:
            out.append((end, fn.body_end, key, _NEG[op], lit))
    return out


def _block_returns(toks, a, end):
    """toks[a:end + 1] is a block whose last statement is a return and
    which holds no goto: every path through it leaves the function."""
    if toks[a].text != "{" or any(toks[j].text == "goto" for j in range(a, end)):
        return False
    last = _last_stmt(toks, a, end)
    return last is not None and toks[last].text == "return"


def _param_test(toks, lo, hi, names):
    """(index, op, literal, whole) when toks[lo:hi] is 'p', '!p' or 'p op
    literal' of a parameter p (whole), or one of them followed by '&& ...'
    (not whole: the test holds where the condition does), else None."""
    if any(toks[j].text in ("||", "?") for j in range(lo, hi)):
        return None
    depth = 0
    for j in range(lo, hi):
        depth += toks[j].text in ("(", "[") and 1 or toks[j].text in (")", "]") and -1 or 0
        if depth == 0 and toks[j].text == "&&":
            g = _param_test(toks, lo, j, names)
            return g[:3] + (False,) if g else None
    while hi - lo > 2 and toks[lo].text == "(" and csrc.match_paren(toks, lo) == hi - 1:
        lo, hi = lo + 1, hi - 1
    if hi - lo in (3, 4) and toks[lo + 1].text in _NEG:
        lit = literal_value(toks, lo + 2, hi)
        op = toks[lo + 1].text
    elif hi - lo in (1, 2):
        lit, op = 0, ("==" if hi - lo == 2 else "!=")
        if hi - lo == 2 and toks[lo].text != "!":
            return None
        lo = hi - 1
    else:
        return None
    if lit is None or toks[lo].kind != "id" or toks[lo].text not in names:
        return None
    return names.index(toks[lo].text), op, lit, True
