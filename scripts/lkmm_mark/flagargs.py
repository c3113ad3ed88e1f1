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

A guard here is a condition that is a parameter alone ('p' or '!p'), of
an if whose then-branch or else-branch holds the access, or of an early
'if (p) return ...;' before it, with the parameter never assigned in the
function.  A call contradicts it when it passes a literal of the other
truth: true, false, 0, 1 or NULL.

Reads .src, .params(), ._bare_uses(), ._call_args(), .sites_of().  Sets
nothing but its cache (_flagcache).
"""
from . import csrc
from .tokutil import _branch_end, _open_blocks

_LITERAL = {"true": True, "false": False, "0": False, "1": True, "NULL": False}


class FlagArgs:
    def flag_guards(self, fn, k):
        """((parameter index, truth), ...): the parameters toks[k] of fn is
        reached only when they have that truth."""
        return tuple((n, truth) for lo, hi, n, truth in self._flag_ranges(fn)
                     if lo < k <= hi)

    def _flag_ranges(self, fn):
        """[(from, to, parameter index, truth)]: the token ranges of fn
        reached only when a parameter has that truth (the branches of
        'if (p)' and 'if (!p)', and what follows 'if (p) return ...;' at
        the top level of the body)."""
        memo = self.__dict__.setdefault("_flagranges", {})
        key = (fn.file, fn.body_start)
        if key in memo:
            return memo[key]
        toks = self.src.toks[fn.file]
        names = self.params(fn)
        out = []
        for i in range(fn.body_start + 1, fn.body_end):
            if toks[i].text != "if" or toks[i + 1].text != "(":
                continue
            close = csrc.match_paren(toks, i + 1)
            g = self._param_test(fn, toks, i + 2, close, names)
            if g is None:
                continue
            n, truth, whole = g
            end = _branch_end(toks, close + 1, fn.body_end)
            out.append((close, end - 1, n, truth))
            if not whole:
                continue                # 'if (p && x)': p's truth is known in the branch only
            if toks[end + 1].text == "else":
                out.append((end, _branch_end(toks, end + 2, fn.body_end), n, not truth))
            elif toks[close + 1].text == "return" and \
                    next(_open_blocks(toks, fn.body_start, i), None) == fn.body_start:
                out.append((end, fn.body_end, n, not truth))
        memo[key] = out
        return out

    def _param_test(self, fn, toks, lo, hi, names):
        """(index, truth, whole) when toks[lo:hi] is 'p' or '!p' of a
        parameter p that fn never assigns (whole), or 'p && ...' (not
        whole: p is true where the condition is), else None."""
        if hi - lo > 2 and toks[lo].kind == "id" and toks[lo + 1].text == "&&" and \
                not any(toks[j].text in ("||", "?") for j in range(lo + 2, hi)):
            g = self._param_test(fn, toks, lo, lo + 1, names)
            return (g[0], g[1], False) if g else None
        neg = hi - lo == 2 and toks[lo].text == "!"
        if hi - lo != 1 and not neg:
            return None
        p = toks[hi - 1].text
        if toks[hi - 1].kind != "id" or p not in names:
            return None
        if any(kind == "assigned" for kind, _ in self._bare_uses(fn, p)):
            return None
        return names.index(p), not neg, True

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
        if guards:
            sites = self.sites_of(fn)
            keep = [s for s in sites if not self._contradicts(s, guards)]
            if len(keep) < len(sites):
                c = keep
        self._flagcache[key] = c
        return c

    def _contradicts(self, site, guards):
        """The call site passes a literal against one of the guards."""
        caller, _, k = site
        args = self._call_args(caller.file, k) or ()
        toks = self.src.toks[caller.file]
        for n, truth in guards:
            if n < len(args):
                a, b = args[n]
                if b - a == 1 and _LITERAL.get(toks[a].text, truth) != truth:
                    return True
        return False
