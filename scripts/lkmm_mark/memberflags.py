# SPDX-License-Identifier: GPL-2.0-only
"""Member flags of a stack struct: a callback stored in a struct on its
storer's stack, which tests a member of that struct, is not reached
from the storers that leave the member at a value failing the test.

    static int foo_visit(struct foo_walk *w, ...)
    {
            if (w->pin)
                    foo_pin(...);           <- not reached from foo_free()
    }
    static void foo_free(...)
    {
            struct foo_walk w = { .free = 1, .visit = foo_visit };
            foo_walk_tree(&w);              <- w.pin is 0 there
    }

callgraph.py makes the '&w' handed to a call the call site of such a
callback (_stack_callbacks()); this says which of those sites can reach
a branch of a test of 'p->m' (flagargs.py asks it, with the flag
parameters, for reaching_sites_at()).  A site contradicts the test when:

- the callback's parameter p is the struct that holds it: every call
  through a member the callback is stored in passes its own base there,
  'x->visit(.., x, ..)' or 'x.visit(.., &x, ..)', and p is never
  assigned in the callback;
- the storer's struct has a known value of m: an initialiser that gives
  m a literal, or leaves it out (0), and no other store of m in the
  storer ('w.m = v', '&w.m');
- nothing else can change it: every store of m of that struct in the
  target is one to a struct on its own function's stack ('x.m = v' of a
  local x, another object) or a designated initialiser; a store through
  a pointer ('p->m = v') may be to any, and makes the value unknown.

Reads .src, .accesses, .params(), ._call_args(), ._stack_structs() and
.stack_cb_members (callgraph.py).  Sets nothing but its cache
(_mflagcache).
"""
from . import csrc
from .flagargs import _NEG, assigned_at, holds, literal_value, test_ranges

_STORES = ("write", "rmw", "address", "atomic", "marked")


class MemberFlags:
    def member_guards(self, fn, k):
        """((parameter index, member, op, literal), ...): toks[k] of fn is
        reached only when each 'p->m op literal' holds."""
        return tuple(g for lo, hi, *g in self._member_ranges(fn) if lo < k <= hi)

    def _member_ranges(self, fn):
        """[(from, to, parameter index, member, op, literal)]: the token
        ranges of fn reached only when 'p->m op literal' holds (the
        branches of 'if (p->m)', 'if (!p->m)', 'if (p->m > 0)', and what
        follows 'if (p->m) return ...;' at the top level), p a parameter
        fn never assigns."""
        memo = self._mflagcache
        key = ("ranges", fn.file, fn.body_start)
        if key in memo:
            return memo[key]
        toks = self.src.toks[fn.file]
        names = self.params(fn)

        def test(lo, hi):
            g = _member_test(toks, lo, hi, names)
            if g is None or assigned_at(toks, fn.body_start, fn.body_end, names[g[0]]):
                return None
            n, m, op, lit, whole = g
            return (n, m), op, lit, whole
        out = [(lo, hi, n, m, op, lit)
               for lo, hi, (n, m), op, lit in test_ranges(toks, fn, test)]
        memo[key] = out
        return out

    def member_contradicts(self, site, guards, callee):
        """The call site of callee is a stack struct handed whole ('&w',
        callgraph.py) whose member fails one of the guards."""
        if not guards:
            return False
        caller, _, k = site
        toks = self.src.toks[caller.file]
        if toks[k].text != "&" or toks[k + 1].kind != "id" or \
                self._call_args(caller.file, k) is not None:
            return False
        for n, m, op, lit in guards:
            if not self._holder_param(callee.name, n):
                continue
            v = self._stack_member_value(caller, toks[k + 1].text, m)
            if v is not None and not holds(v, op, lit):
                return True
        return False

    def _holder_param(self, name, n):
        """Every call through a member callback name is stored in passes
        the struct whose member it calls as argument n."""
        members = getattr(self, "stack_cb_members", {}).get(name)
        if not members:
            return False
        key = ("holder", name, n)
        if key not in self._mflagcache:
            self._mflagcache[key] = all(self._passes_base(f, j, n)
                                        for f, j in self._member_calls(members))
        return self._mflagcache[key]

    def _member_calls(self, members):
        """(file, token) of the member name of every 'x->m(...)' and
        'x.m(...)' in the target's functions, m one of members."""
        for fn in self.src.funcs.values():
            toks = self.src.toks[fn.file]
            for j in range(fn.body_start + 1, fn.body_end):
                if toks[j].text in members and toks[j].kind == "id" and \
                        toks[j - 1].text in ("->", ".") and toks[j + 1].text == "(":
                    yield fn.file, j

    def _passes_base(self, file, j, n):
        """The member call at toks[j] has a plain base x ('x->m(', 'x.m(')
        and passes it as argument n ('x', or '&x' for 'x.m(')."""
        toks = self.src.toks[file]
        if toks[j - 2].kind != "id" or toks[j - 3].text in (".", "->"):
            return False
        args = self._call_args(file, j) or ()
        if n >= len(args):
            return False
        got = [t.text for t in toks[args[n][0]:args[n][1]]]
        base = toks[j - 2].text
        return got == ([base] if toks[j - 1].text == "->" else ["&", base])

    def _stack_member_value(self, fn, var, m):
        """The value member m of fn's stack struct var has at any time
        (an integer), or None when not known."""
        key = ("value", fn.file, fn.body_start, var, m)
        if key in self._mflagcache:
            return self._mflagcache[key]
        toks = self.src.toks[fn.file]
        v = None
        if var in self._stack_structs(fn):
            d = _declaration(toks, fn.body_start, fn.body_end, var)
            if d is not None and not _member_set(toks, fn, var, m) and \
                    self._only_local_stores(d[0], m):
                v = _initial_value(toks, d[1], m)
        self._mflagcache[key] = v
        return v

    def _only_local_stores(self, struct, m):
        """Every store of struct.m in the target is to a struct on its own
        function's stack ('x.m = v') or in a designated initialiser."""
        key = ("local", struct, m)
        if key not in self._mflagcache:
            ok = True
            for a in self.accesses:
                if a.struct != struct or a.field != m or a.kind not in _STORES:
                    continue
                toks = self.src.toks.get(a.file)
                if toks is None or a.tok is None or a.func is None:
                    ok = False
                    break
                t = a.tok
                if toks[t - 1].text == "." and toks[t - 2].text in ("{", ","):
                    continue                    # '.m = v' in an initialiser
                if toks[t - 1].text == "." and toks[t - 3].text not in (".", "->") and \
                        toks[t - 2].text in self._stack_structs(a.func):
                    continue                    # 'x.m = v' of a local struct
                ok = False
                break
            self._mflagcache[key] = ok
        return self._mflagcache[key]


def _member_test(toks, lo, hi, names):
    """(index, member, op, literal, whole) when toks[lo:hi] is 'p->m',
    '!p->m' or 'p->m op literal' of a parameter p (whole), or one of them
    followed by '&& ...' (not whole), else None."""
    if any(toks[j].text in ("||", "?") for j in range(lo, hi)):
        return None
    depth = 0
    for j in range(lo, hi):
        depth += toks[j].text in ("(", "[") and 1 or toks[j].text in (")", "]") and -1 or 0
        if depth == 0 and toks[j].text == "&&":
            g = _member_test(toks, lo, j, names)
            return g[:4] + (False,) if g else None
    while hi - lo > 2 and toks[lo].text == "(" and csrc.match_paren(toks, lo) == hi - 1:
        lo, hi = lo + 1, hi - 1
    neg = toks[lo].text == "!"
    if neg:
        lo += 1
    if hi - lo < 3 or toks[lo].text not in names or toks[lo + 1].text != "->" or \
            toks[lo + 2].kind != "id":
        return None
    if hi - lo == 3:
        op, lit = ("==" if neg else "!="), 0
    elif not neg and hi - lo in (5, 6) and toks[lo + 3].text in _NEG:
        op, lit = toks[lo + 3].text, literal_value(toks, lo + 4, hi)
    else:
        return None
    if lit is None:
        return None
    return names.index(toks[lo].text), toks[lo + 2].text, op, lit, True


def _declaration(toks, lo, hi, var):
    """(struct, token after var) of 'struct S var' in toks[lo:hi]."""
    for k in range(lo, hi - 3):
        if toks[k].text == "struct" and toks[k + 1].kind == "id" and \
                toks[k + 2].text == var and toks[k + 3].text in (";", "="):
            return toks[k + 1].text, k + 3
    return None


def _member_set(toks, fn, var, m):
    """fn may change var.m itself: 'var.m = v', 'var.m++', '&var.m'."""
    for k in range(fn.body_start + 1, fn.body_end - 2):
        if toks[k].text == var and toks[k + 1].text == "." and toks[k + 2].text == m and \
                toks[k - 1].text not in (".", "->") and \
                (toks[k + 3].text in ("=", "+=", "-=", "|=", "&=", "^=", "++", "--",
                                      "*=", "/=", "<<=", ">>=", "%=") or
                 toks[k - 1].text in ("&", "++", "--")):
            return True
    return False


def _initial_value(toks, j, m):
    """The value member m gets from the declaration whose '=' or ';' is
    toks[j]: a literal given '.m = lit', 0 for a member an initialiser of
    designated members leaves out ('= {}', '= {0}' too); None when not
    known (no initialiser, a value that is no literal, positions)."""
    if toks[j].text != "=" or toks[j + 1].text != "{":
        return None
    close = csrc.match_paren(toks, j + 1)
    body = [t.text for t in toks[j + 2:close]]
    if body in ([], ["0"]):
        return 0
    k, val = j + 2, 0
    while k < close:
        if toks[k].text != "." or toks[k + 2].text != "=":
            return None                         # a positional entry
        e = k + 3
        while e < close and toks[e].text != ",":
            if toks[e].text in ("(", "[", "{"):
                e = csrc.match_paren(toks, e)
            e += 1
        if toks[k + 1].text == m:
            val = literal_value(toks, k + 3, e)
        k = e + 1
    return val
