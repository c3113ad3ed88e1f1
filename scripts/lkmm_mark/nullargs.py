# SPDX-License-Identifier: GPL-2.0-only
"""Handle parameters that may be NULL (policies/ 'param_locks'): which
calls pass NULL, with what other arguments, and where in a function the
handle is known to be there after all.

A parameter of a param_locks type stands for the lock its handle holds
(callers.py _param_held()) unless the function may be given NULL: it
tests the parameter, a caller passes NULL, or a caller passes such a
parameter of its own on.  A NULL handle comes down a chain of calls
together with the other arguments of the call that passed it, and a
branch those arguments cannot reach is not run without the handle:

    int find_slot(struct handle *h, ..., int grow, int cow)
    {                                           <- find_slot(NULL, ..., 0, 0)
            ...
            ret = leaf_find(h, ..., grow);
    }
    static int leaf_find(struct handle *h, ..., int grow)
    {
            if (grow > 0)
                    leaf_divide(h, ...);       <- never with NULL
    }

So each (function, handle parameter) gets its NULL calls: the values of
all its arguments that are known (a literal, or a caller's parameter
handed on unchanged whose value that caller's NULL call knows), a
parameter's own test counting too ('if (h)' is not entered with NULL).
A call a NULL call of its caller cannot reach (flagargs.py flag_guards()
fails on the known values) passes no NULL on; a function no NULL call
reaches is given a handle.  Where a function that may be given NULL has
a branch no NULL call reaches ('if (h) { ... }'), the handle's locks are
held there (handle_tests(), which adds them to the lock flow's states).

Reads .src, .flows, .calls, sites_of(), params(), flag_guards(),
P.param_locks, P.state_assertions.  Sets ._nullp (maybe NULL or weak),
._nullp_only (maybe NULL), ._nullp_weak, ._nullvecs; handle_tests()
changes the states of .flows and .calls.
"""
from . import csrc
from .flagargs import assigned_at, holds, literal_value
from .lockmodes import mode_name
from .lockstate import How, State
from .tokutil import _asserted_set, _null_tested, _split

# NULL calls kept per (function, parameter): past it, one that knows no
# other argument stands for them all
_MAX_VECTORS = 32


class NullArgs:
    def _null_params(self):
        """(function key, parameter) of the param_locks types that may be
        NULL or weak: the function tests it, a NULL call reaches it
        (_null_vectors()), or a handle from a weak source reaches it.  A
        function that dereferences the parameter and never tests it
        relies on a handle: only a weak one makes it maybe (a
        copy-on-write function: 'must happen through a running
        transaction')."""
        c = getattr(self, "_nullp", None)
        if c is not None:
            return c
        cand, maybe, tested, relies = self._handle_params()
        weak = self._weak_params(cand)
        vecs = self._null_vectors(cand, maybe, tested, relies)
        self._nullp_only = set(vecs)
        self._nullp_weak = weak
        self._nullvecs = vecs
        self._nullp = maybe | weak | set(vecs)
        return self._nullp

    def _weak_params(self, cand):
        """(function key, parameter) that a handle from a weak source
        reaches: a local assigned from one, or such a parameter passed on."""
        weak_locals = self._weak_locals()
        weak = set()
        changed = True
        while changed:
            changed = False
            for key, ps in cand.items():
                fn = self.src.funcs[key]
                for n, p in ps.items():
                    if (key, p) in weak:
                        continue
                    for (caller, st, k) in self.live_sites(self.sites_of(fn)):
                        x = self._arg_token(caller, k, n)
                        ck = (caller.file, caller.name)
                        if x in weak_locals.get(ck, ()) or (ck, x) in weak:
                            weak.add((key, p))
                            changed = True
                            break
        return weak

    def _null_vectors(self, cand, seeds, tested, relies):
        """(function key, parameter) -> its NULL calls, each the tuple of
        the argument values it is known to pass (None: not known).  Seeds:
        a parameter the function tests or a macro passes (nothing else
        known), a call that passes NULL.  A caller's NULL parameter passed
        on hands its NULL calls down through the calls they can reach,
        unless the caller tests it itself (it guards the calls that need
        one: a tree search takes NULL for a read-only search and copies
        on write, with the handle, only when it has one)."""
        vecs = {}
        out_sites = {}          # caller key -> [(callee key, index, parameter, site)]
        for key, ps in cand.items():
            fn = self.src.funcs[key]
            width = len(self.params(fn))
            for n, p in ps.items():
                if (key, p) in seeds:
                    top = tuple(_ZERO if i == n else None for i in range(width))
                    got = None if (key, p) in tested else \
                        self._macro_null_calls(fn.name, n, width)
                    for v in (got if got is not None else [top]):
                        _add(vecs, (key, p), v, n)
                if (key, p) in relies:
                    continue
                for site in self.live_sites(self.sites_of(fn)):
                    caller, _, k = site
                    args = self._call_args(caller.file, k) or ()
                    if n < len(args) and literal_value(self.src.toks[caller.file],
                                                       *args[n]) == 0:
                        _add(vecs, (key, p), self._passed(site, fn, n, None), n)
                    out_sites.setdefault((caller.file, caller.name), []).append(
                        (key, n, p, site))
        todo = list(vecs)
        while todo:
            ck, x = todo.pop()
            if (ck, x) in tested:
                continue
            for key, n, p, site in out_sites.get(ck, ()):
                if self._arg_token(site[0], site[2], n) != x:
                    continue
                fn = self.src.funcs[key]
                for v in list(vecs[(ck, x)]):
                    if self._reaches(site[0], site[2], v) and \
                            _add(vecs, (key, p), self._passed(site, fn, n, v), n):
                        todo.append((key, p))
        return vecs

    def _macro_null_calls(self, name, n, width):
        """The NULL calls the macro bodies make of the function name (its
        handle the parameter n): None unless every mention of it in a
        '#define' is a call with a literal handle, 'for (r =
        find_slot(NULL, (root), (key), (p), 0, 0); ...)'; the literal
        arguments of those that pass NULL are known."""
        bodies = self.__dict__.get("_nullmacros")
        if bodies is None:
            bodies = self._nullmacros = [
                csrc.tokenize(b.replace("#", " ")) for f in sorted(self.src.text)
                for b in csrc.macro_bodies(self.src.text[f])]
        out = []
        found = False
        for toks in bodies:
            for i, t in enumerate(toks):
                if t.text != name or t.kind != "id":
                    continue
                found = True
                if i + 1 >= len(toks) or toks[i + 1].text != "(":
                    return None
                args = _split(toks, i + 2, csrc.match_paren(toks, i + 1))
                vals = [literal_value(toks, a, b) for a, b in args]
                if len(args) != width or vals[n] is None:
                    return None
                if vals[n] == 0:
                    out.append(tuple(None if x is None else frozenset((x,)) for x in vals))
        return out if found else None

    def _passed(self, site, fn, n, v):
        """The argument values the call site passes fn, its parameter n
        NULL: each a set of the integers it may be (a literal, a local
        initialised from literals, 'x = c ? -1 : 0', and never assigned
        again), the value v (a NULL call of the caller) knows of the
        caller's parameter handed on unchanged, or None."""
        caller, _, k = site
        toks = self.src.toks[caller.file]
        args = self._call_args(caller.file, k) or ()
        names = self.params(caller)
        out = []
        for i in range(len(self.params(fn))):
            val = None
            if i == n:
                val = _ZERO
            elif i < len(args):
                a, b = args[i]
                lit = literal_value(toks, a, b)
                val = frozenset((lit,)) if lit is not None else None
                if val is None and b - a == 1 and toks[a].kind == "id":
                    val = self._fixed_value(caller, toks[a].text, names, v)
            out.append(val)
        return tuple(out)

    def _fixed_value(self, fn, x, names, v):
        """The values the variable x of fn may have anywhere in it: a
        parameter never assigned (what v knows of it), a local assigned
        once, where it is declared, from literals; else None."""
        toks = self.src.toks[fn.file]
        sets = assigned_at(toks, fn.body_start, fn.body_end, x)
        if x in names:
            return v[names.index(x)] if v is not None and not sets else None
        if len(sets) != 1 or toks[sets[0] + 1].text != "=" or \
                not (toks[sets[0] - 1].kind == "id" or toks[sets[0] - 1].text == "*"):
            return None
        j = sets[0] + 2
        end = j
        depth = 0
        while toks[end].text not in (";", ",") or depth:
            depth += (toks[end].text in "([") - (toks[end].text in ")]")
            end += 1
        return _literals(toks, j, end)

    def _reaches(self, fn, k, v):
        """A call of fn that passes the values v can reach toks[k]."""
        return all(n >= len(v) or holds(v[n], op, lit) for n, op, lit in self.flag_guards(fn, k))

    def handle_tests(self):
        """The handle's locks at the points of a function that may be given
        NULL where no NULL call reaches ('if (h) { ... }', a branch of a
        size only calls with a handle pass): added to the lock flow's
        states there, unless the flow released them before; the call
        graph's sites get the new states."""
        self._null_params()
        patched = {}
        for (key, p), vs in self._nullvecs.items():
            fn = self.src.funcs[key]
            res = self.flows.get(key)
            spec = self.P.param_locks.get(self._decl_types(fn).get(p))
            if res is None or spec is None:
                continue
            cache = {}

            def held(k):
                if k not in cache:
                    cache[k] = None
                    if self.flag_guards(fn, k) and not any(self._reaches(fn, k, v) for v in vs):
                        cache[k] = self._handle_locks(fn, p, spec, k)
                return cache[k]
            for k, st in list(res.at.items()):
                if held(k):
                    res.at[k] = _with(st, held(k))
            for i, (k, callee, st) in enumerate(res.calls):
                if held(k):
                    res.calls[i] = (k, callee, _with(st, held(k)))
                    patched[(fn.file, k)] = res.calls[i][2]
        if patched:
            for callee, sites in self.calls.items():
                self.calls[callee] = [(c, patched.get((c.file, k), st), k) for (c, st, k) in sites]
            self._sites = {}
            self._flagcache.clear()

    def _handle_locks(self, fn, p, spec, k):
        """The locks the handle parameter p stands for at toks[k], where it
        is known not NULL: the pin (any handle), and the lock unless a
        weak handle may be passed."""
        line = self.src.toks[fn.file][k].line
        what = "%s parameter '%s', not NULL here (no call that passes NULL reaches it)" % (
            spec["struct"], p)
        out = {}
        if spec.get("pin"):
            out[spec["pin"]["lock"] + ":r"] = How("%s (%s)" % (what, spec["pin"]["reason"]), line)
        if ((fn.file, fn.name), p) not in self._nullp_weak:
            out[mode_name(spec["lock"], spec)] = How("%s (%s)" % (what, spec["reason"]), line)
        return out

    def _arg_token(self, caller, k, n):
        """The one token of argument n of the call at toks[k], or None."""
        args = self._call_args(caller.file, k)
        if not args or n >= len(args):
            return None
        a, b = args[n]
        return self.src.toks[caller.file][a].text if b - a == 1 else None

    def _handle_params(self):
        """(function key -> {index: name} of its param_locks parameters,
        those that may be NULL in the function itself, those it tests,
        those it dereferences without a test)."""
        cand = {}
        maybe = set()
        tested = set()
        relies = set()
        # assertions that hold their argument true ('ASSERT(trans)')
        asserts = {c["call"] for c in self.P.state_assertions if c["holds"] is True}
        for key, fn in self.src.funcs.items():
            types = None
            for n, p in enumerate(self.params(fn)):
                if not p:
                    continue
                if types is None:
                    types = self._decl_types(fn)
                if types.get(p) in self.P.param_locks:
                    cand.setdefault(key, {})[n] = p
                    toks = self.src.toks[fn.file]
                    if _null_tested(toks, fn.body_start, fn.body_end, p):
                        maybe.add((key, p))
                        tested.add((key, p))
                    elif fn.name in self.macro_used:
                        # called from a macro body: the handles its callers
                        # pass are not seen (a weak one among them)
                        maybe.add((key, p))
                    elif _derefs(toks, fn.body_start, fn.body_end, p) or \
                            _asserted_set(toks, fn.body_start, fn.body_end, p, asserts):
                        relies.add((key, p))
        return cand, maybe, tested, relies

    def _weak_locals(self):
        """function key -> its locals assigned a handle from a weak source
        (policies 'param_locks' 'weak_sources')."""
        weak_src = set()
        for spec in self.P.param_locks.values():
            weak_src |= set(spec.get("weak_sources", ()))
        weak_locals = {}
        if weak_src:
            for key, fn in self.src.funcs.items():
                toks = self.src.toks[fn.file]
                for k in range(fn.body_start, fn.body_end - 3):
                    if toks[k].kind == "id" and toks[k + 1].text == "=" and \
                            toks[k + 2].text in weak_src and toks[k + 3].text == "(":
                        weak_locals.setdefault(key, set()).add(toks[k].text)
        return weak_locals


def _add(vecs, kp, v, n):
    """Add the NULL call v of kp (its handle the parameter n); whether it
    was new.  Past _MAX_VECTORS the one that knows nothing but the handle
    stands for them all."""
    got = vecs.setdefault(kp, set())
    top = tuple(_ZERO if i == n else None for i in range(len(v)))
    if v in got or top in got:
        return False
    if len(got) >= _MAX_VECTORS:
        got.clear()
        v = top
    got.add(v)
    return True


_ZERO = frozenset((0,))


def _literals(toks, lo, hi):
    """The integers toks[lo:hi] may be: a literal, or 'c ? a : b' of two
    such (in parentheses or not); else None."""
    while toks[lo].text == "(" and csrc.match_paren(toks, lo) == hi - 1:
        lo, hi = lo + 1, hi - 1
    lit = literal_value(toks, lo, hi)
    if lit is not None:
        return frozenset((lit,))
    q = [j for j in range(lo, hi) if toks[j].text in ("?", ":")]
    if len(q) != 2 or toks[q[0]].text != "?" or any(
            toks[j].text in ("(", "[") for j in range(q[0], hi)):
        return None
    a, b = literal_value(toks, q[0] + 1, q[1]), literal_value(toks, q[1] + 1, hi)
    return None if a is None or b is None else frozenset((a, b))


def _with(st, locks):
    """st with locks held too (those the flow released before left out)."""
    more = {n: h for n, h in locks.items() if n not in st.held and n not in st.killed}
    if not more:
        return st
    held = dict(st.held)
    held.update(more)
    return State(held, st.killed, dict(st.cond))


def _derefs(toks, lo, hi, p):
    """toks[lo:hi] dereferences p ('p->x'); with no NULL test of p in
    it (_null_tested()), the code relies on p being set."""
    return any(toks[k].text == p and toks[k + 1].text == "->" and
               toks[k - 1].text not in (".", "->") for k in range(lo, hi - 1))
