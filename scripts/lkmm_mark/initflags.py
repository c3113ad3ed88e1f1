# SPDX-License-Identifier: GPL-2.0-only
"""Init-time flags (policies/ 'init_time_flags'): a bit of a member that only
the init functions set, and that is clear again before init ends, so a
branch in which a test finds it set runs during init, when nothing else
runs.

    static void foo_replay(struct foo_sb *s)     <- an init function
    {
            s->state |= FOO_REPLAYING;
            ...
            s->state &= ~FOO_REPLAYING;
    }
    int foo_alloc(struct foo_sb *s, ...)
    {
            if (s->state & FOO_REPLAYING)
                    return foo_alloc_simple(s, ...);   <- init only
            ...
    }

The branches are those of an 'if' whose condition is the test
('x->m & BIT', 'BIT & x->m', in parentheses, negated, or one operand of
'&&', x->m an access of the declared member), and what follows an early
'if (!(x->m & BIT)) return ...;' (flagargs.test_ranges()).  A call made
there adds no calling context, as a call from an init function does
(contexts.py), and a function whose every call is made there or from an
init function is one too (owners.lifecycle_functions()); an access made
there gets no verdict of its own (exclusions.py).

The entry holds only when the code bears it out: every store of the
member that may set the bit is made in an init function.  A store
'x->m &= ...' clears bits only; 'x->m |= v' sets the bit only when v
names it; 'x->m = v & ~BIT' (no '|' in v) leaves it clear; any other
store (an assignment, a step, a marked store, the address taken) must
be in an init function, or the entry is ignored (init_flag_broken()
says why).

Reads .src, .accesses, .calls, .sites_of(), .dead, .P.init_time_flags.  Sets
.init_sites ((file, token) of each call in such a branch), .init_ranges
(file -> [(from, to, entry)]) and .init_fns (the functions only init
branches and init functions call), through with_init_branches().
"""
from .csrc import match_paren
from .flagargs import _NEG, test_ranges
from .tokutil import _stmt_end

_STORES = ("write", "rmw", "address", "atomic", "marked")


class InitFlags:
    def with_init_branches(self, life):
        """life (the init and teardown functions, and those only they
        call) with the functions every call of which is made from one of
        them or in an init branch, to a fixed point (owners.py's
        _only_called_from() for the rest)."""
        self.init_sites, self.init_ranges, self.init_fns = set(), {}, set()
        specs = [e for e in getattr(self.P, "init_time_flags", ())
                 if self.init_flag_broken(e, life) is None]
        if not specs:
            return life
        for key, fn in self.src.funcs.items():
            if key in self.dead:
                continue
            for lo, hi, e in self._init_branches(fn, specs):
                self.init_ranges.setdefault(fn.file, []).append((lo, hi, e))
        for callee, sites in self.calls.items():
            for (caller, _, k) in sites:
                if self.in_init_branch(caller.file, k):
                    self.init_sites.add((caller.file, k))
        callers, _ = self._call_keys()
        cands = {(caller.file, callee) for callee, sites in self.calls.items()
                 for (caller, _, k) in sites if (caller.file, k) in self.init_sites}
        keys = [key for key, fn in self.src.funcs.items()
                if fn.name in {c for _, c in cands} and callers.get(key) is not None]
        mine = set(life)
        while True:
            new = {key for key in keys if key not in mine and self._init_called(key, mine)}
            if not new:
                self.init_fns = mine - set(life)
                return mine
            mine = self._only_called_from(mine | new)

    def _init_called(self, key, mine):
        """Every call of the function key is made in an init branch or by
        a function of mine, and one in an init branch."""
        fn = self.src.funcs[key]
        sites = [s for s in self.sites_of(fn) if s[0] is not fn]
        here = [s for s in sites if (s[0].file, s[2]) in self.init_sites]
        return bool(here) and all((s[0].file, s[2]) in self.init_sites or
                                  (s[0].file, s[0].name) in mine for s in sites)

    def in_init_branch(self, file, k):
        """The init_time_flags entry whose branch holds token k of file, or None."""
        for lo, hi, e in self.init_ranges.get(file, ()):
            if lo < k <= hi:
                return e
        return None

    def init_flag_broken(self, e, life):
        """Why the code does not bear out the init_time_flags entry e (a store
        that may set its bit outside the init functions life), or None."""
        struct, member = e["field"].split(".", 1)
        for a in self.accesses:
            if a.struct != struct or a.field != member or a.kind not in _STORES or \
                    (a.file, a.fn) in life or a.tok is None:
                continue
            if not self._clears_only(self.src.toks[a.file], a.tok, member, e["bit"]):
                return "%s at %s in %s() may set %s outside init" % (
                    e["field"], a.where(), a.fn, e["bit"])
        return None

    @staticmethod
    def _clears_only(toks, k, member, bit):
        """The store toks[k:] of member cannot set bit."""
        end = _stmt_end(toks, k, len(toks))
        j = next((i for i in range(k, end) if toks[i].text == member), None)
        if j is None or j + 1 >= end:
            return False
        op, rhs = toks[j + 1].text, [t.text for t in toks[j + 2:end]]
        if op == "&=":
            return True
        if op == "|=":
            return bit not in rhs
        if op == "=":
            return "|" not in rhs and any(rhs[i:i + 3] == ["&", "~", bit]
                                          for i in range(len(rhs) - 2))
        return False

    def _init_branches(self, fn, specs):
        """[(from, to, entry)]: the token ranges of fn reached only when a
        test finds the bit of an entry set."""
        toks = self.src.toks[fn.file]
        bits = {e["bit"]: e for e in specs}
        if not any(toks[i].text in bits for i in range(fn.body_start, fn.body_end)):
            return []
        found = {}

        def test(lo, hi):
            g = self._bit_test(fn, toks, lo, hi, bits)
            if g is None:
                return None
            found[g[0]] = bits[g[0]]
            return g

        return [(lo, hi, found[key]) for lo, hi, key, op, lit in test_ranges(toks, fn, test)
                if op == "!=" and lit == 0]

    def _bit_test(self, fn, toks, lo, hi, bits):
        """(bit, op, 0, whole) when toks[lo:hi] tests 'x->m & bit' of an
        entry's member ('!=': set, '==': clear), or an operand before or
        after '&&' does (not whole: the bit is set where the condition
        holds), else None."""
        if any(toks[j].text in ("||", "?") for j in range(lo, hi)):
            return None
        depth, start, parts = 0, lo, []
        for j in range(lo, hi):
            depth += toks[j].text in ("(", "[") and 1 or toks[j].text in (")", "]") and -1 or 0
            if depth == 0 and toks[j].text == "&&":
                parts.append((start, j))
                start = j + 1
        if parts:
            parts.append((start, hi))
            for a, b in parts:
                g = self._bit_test(fn, toks, a, b, bits)
                if g is not None and g[1] == "!=":
                    return g[:3] + (False,)
            return None
        neg = False
        while lo < hi and (toks[lo].text == "!" or toks[lo].text == "(" and
                           match_paren(toks, lo) == hi - 1):
            if toks[lo].text == "!":
                neg = not neg
            else:
                hi -= 1
            lo += 1
        if hi - lo < 5:
            return None
        if toks[hi - 2].text == "&" and toks[hi - 1].text in bits:
            bit, m = toks[hi - 1].text, hi - 3
        elif toks[lo].text in bits and toks[lo + 1].text == "&":
            bit, m = toks[lo].text, hi - 1
        else:
            return None
        struct, member = bits[bit]["field"].split(".", 1)
        if toks[m].text != member or toks[m - 1].text not in ("->", "."):
            return None
        if not any(a.struct == struct and a.field == member and a.tok is not None and
                   lo <= a.tok <= m for a in self._fn_accesses(fn)):
            return None
        return (bit, _NEG["!="] if neg else "!=", 0, True)

    def _fn_accesses(self, fn):
        """The accesses of fn (by file and name), remembered."""
        memo = self.__dict__.get("_ifaccs")
        if memo is None:
            memo = self._ifaccs = {}
            for a in self.accesses:
                memo.setdefault((a.file, a.fn), []).append(a)
        return memo.get((fn.file, fn.name), ())

