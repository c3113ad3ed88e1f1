# SPDX-License-Identifier: GPL-2.0-only
"""Racing pairs, part 3: an object a context tears down, per calling
context (policies/ 'teardown_contexts').

A work item or thread that takes objects nobody holds off a list and
tears them down (the object no longer found by any lookup) is the
teardown context of the object it hands to one declared function
('object': {function, arg}, every call of which the declared 'entry'
makes).  The object is carried down the calls that pass that parameter
on, bare, as an argument (a callee's parameter that its function never
assigns); an access whose base is such a parameter ('p->f', or a member
embedded in it, 'p->m.f') is, in those calling contexts, an access to
the torn-down object.  Those contexts race only with the paths that
still reach such an object (the declared 'reached_by' functions and
what they call: the lookups that find it and refuse it, a flush of
every object attached to a buffer, an I/O completion); an access made
on any other path is to a live object, never this one.  The access's
other calling contexts (the same helper called on a live object) still
count, each as the ordinary contexts give it.

Unlike torn_down() (pairs.py), which asks that every context of a
function be a teardown method's, the decision is per calling context
and per object: a helper called by the teardown on its object and by a
live path on another keeps the live path's contexts.

Reads .src, .calls (sites_of()), .flows, .entry, .P.teardown_contexts,
.P.container_locks, and the calling contexts of contexts.py.  Sets
nothing but its memos.
"""
from .callers import _excluding, _own_guards
from .contexts import _config_clash, _context_set


class TornObjects:
    def torn_apart(self, a, b):
        """a or b is an access to an object a declared context tears down,
        made there, and every pair of calling contexts of the two that no
        lock keeps apart has that side in such a context, the other side
        not on a path that still reaches such objects (policies/
        'teardown_contexts')."""
        return bool(self.P.teardown_contexts) and (
            self._torn_side(a, b) or self._torn_side(b, a))

    def _torn_side(self, a, b):
        for i, spec in enumerate(self.P.teardown_contexts):
            n = self._carried_param(a, i)
            if n is None:
                continue
            xs = self._live_locksets(a, n, i)
            if xs is None:
                continue
            ys = self._locksets(b)
            # the live contexts of a against all of b's; all of a's (its
            # torn-down ones among them) against b's on the paths that
            # still reach such an object
            rs = self._locksets_in(b, self._reach_contexts(b.func, i, set())) \
                if b.fn in self._still_reaching(i) and b.func is not None else []
            if rs is None:
                continue
            pairs = [(x, y) for x in xs for y in ys] + \
                [(x, y) for x in self._locksets(a) for y in rs]
            if all(_excluding(frozenset(x), frozenset(y)) is not None for x, y in pairs):
                return True
        return False

    # ------------------------------------------------- the carried object
    def _carried(self, i):
        """{(file, function, index)}: the parameters the object of
        teardown_contexts[i] is handed to in some calling context (the
        declared one, and each callee's parameter a carrier passes on
        bare); empty when the declared function has another caller than
        the declared entry."""
        memo = self.__dict__.setdefault("_tornmemo", {})
        if ("carried", i) in memo:
            return memo[("carried", i)]
        spec = self.P.teardown_contexts[i]
        obj = spec["object"]
        todo = []
        for fn in self.src.by_name.get(obj["function"], ()):
            # called only by the entry, never through a pointer
            if all(c.name == spec["entry"] for (c, _, _) in self.sites_of(fn)) and \
                    self.sites_of(fn) and fn.name not in self.addr_taken and \
                    not self._reassigned_at(fn, obj["arg"]):
                todo.append((fn, obj["arg"]))
        out = self._carry_closure(todo)
        memo[("carried", i)] = out
        return out

    def _carry_closure(self, todo):
        """{(file, function, index)}: the parameters (fn, n) of todo and
        those each passes on bare, down the callees that never assign
        them (also workself.py's)."""
        out, callees = set(), self._callee_sites()
        while todo:
            fn, n = todo.pop()
            if (fn.file, fn.name, n) in out:
                continue
            out.add((fn.file, fn.name, n))
            todo.extend(self._bare_calls(fn, {self.params(fn)[n]}, callees))
        return out

    def _bare_calls(self, fn, names, callees):
        """(callee, index) of fn's calls that pass one of names bare to a
        parameter the callee never assigns."""
        toks = self.src.toks[fn.file]
        for (g, k) in callees.get((fn.file, fn.name), ()):
            for m, (lo, hi) in enumerate(self._call_args(fn.file, k) or ()):
                if hi - lo == 1 and toks[lo].text in names and not self._reassigned_at(g, m):
                    yield (g, m)

    def _reassigned_at(self, fn, n):
        names = self.params(fn)
        return n >= len(names) or not names[n] or self._reassigned(fn, names[n])

    def _callee_sites(self):
        """{(file, caller): [(callee function, token of the call)]}."""
        got = self.__dict__.get("_tcallees")
        if got is None:
            got = self._tcallees = {}
            for fns in self.src.by_name.values():
                for g in fns:
                    for (c, _, k) in self.sites_of(g):
                        got.setdefault((c.file, c.name), []).append((g, k))
        return got

    def _carried_param(self, a, i):
        """The index of the parameter a's base is ('p->f', 'p->m.f',
        'p->m.n.f'), when that parameter carries the object of
        teardown_contexts[i] in some calling context; or None."""
        toks = self.src.toks.get(a.file)
        k = a.tok
        if toks is None or k is None or a.func is None or k < 3:
            return None
        k -= 1
        while toks[k].text == "." and toks[k - 1].kind == "id" and \
                toks[k - 2].text in (".", "->"):
            k -= 2                      # an embedded member: 'p->m.f'
        if toks[k].text != "->" or toks[k - 1].kind != "id" or \
                toks[k - 2].text in (".", "->", "*", "&"):
            return None
        names = self.params(a.func)
        p = toks[k - 1].text
        if p not in names:
            return None
        n = names.index(p)
        return n if (a.func.file, a.func.name, n) in self._carried(i) else None

    # --------------------------------------------------- the other paths
    def _still_reaching(self, i):
        """The functions the declared paths that still reach a torn-down
        object call, themselves included."""
        memo = self.__dict__.setdefault("_tornmemo", {})
        if ("reach", i) not in memo:
            down = {}
            for (_, c), gs in self._callee_sites().items():
                down.setdefault(c, set()).update(g.name for (g, _) in gs)
            seen = set(self.P.teardown_contexts[i]["reached_by"])
            todo = list(seen)
            while todo:
                for g in down.get(todo.pop(), ()):
                    if g not in seen:
                        seen.add(g)
                        todo.append(g)
            memo[("reach", i)] = frozenset(seen)
        return memo[("reach", i)]

    # ------------------------------------------------- the live contexts
    def _live_locksets(self, a, n, i):
        """The locksets of a (its own locks with each context's) in the
        calling contexts of its function in which its parameter n is not
        the torn-down object; None when not known."""
        return self._locksets_in(a, self._live_contexts(a.func, n, i, set()))

    def _locksets_in(self, a, ctxs):
        """a's own locks with each of the entry locksets ctxs (None: not
        known)."""
        res = self.flows.get((a.file, a.fn))
        st = res.at.get(a.tok) if res and a.tok is not None else None
        if st is None or ctxs is None:
            return None
        local = set(st.held)
        return [self._entry_lock(_own_guards(local | {x for x in c if x not in st.killed},
                                             a.struct), a.struct) for c in ctxs]

    def _reach_contexts(self, fn, i, visiting):
        """The locksets fn is entered with on the declared paths that still
        reach a torn-down object (all of a declared function's own, and
        those its callers on such paths give); None when not known."""
        memo = self.__dict__.setdefault("_tornmemo", {})
        key = ("reach", i, fn.file, fn.name)
        if key in memo:
            return memo[key]
        if fn.name in self.P.teardown_contexts[i]["reached_by"]:
            ck = (fn.file, fn.name)
            out = memo[key] = self.caller_contexts(ck) or [frozenset(self.entry.get(ck, {}))]
            return out
        if key in visiting:
            return None
        visiting.add(key)
        sites = self._context_sites(fn, None, ()) or ()
        reach = self._still_reaching(i)
        out = self._compose(fn, [(x, self._reach_contexts(x[0], i, visiting))
                                 for x in sites if x[0].name in reach])
        if out is not None and (fn.name in self.addr_taken or fn.name in self.macro_used):
            out = sorted(set(out) | {frozenset(self.entry.get((fn.file, fn.name), {}))},
                         key=sorted)
        visiting.discard(key)
        memo[key] = out
        return out

    def _live_contexts(self, fn, n, i, visiting):
        """The locksets fn is entered with in the calling contexts in which
        its parameter n is not the object teardown_contexts[i] tears down;
        None past the context limit or in a cycle."""
        spec = self.P.teardown_contexts[i]
        obj = (spec["object"]["function"], spec["object"]["arg"])
        return self.contexts_without(fn, n, ("live", i), self._carried(i), visiting,
                                     alone=lambda g, m: (g.name, m) == obj)

    def contexts_without(self, fn, n, tag, carried, visiting, alone=None, skip=None,
                         skip_arg=None):
        """The locksets fn is entered with in the calling contexts in which
        its parameter n is not the object the parameters carried carry (a
        call passing on a carrier's parameter bare follows the caller's own
        such contexts; any other call, all of the caller's): [] where
        alone(fn, n) says n is only ever that object, no context from a
        call whose argument skip(caller, text) (a single token) or
        skip_arg(caller, lo, hi) (toks[lo:hi]) rules out; None past the
        context limit or in a cycle.  tag names the object in the memo."""
        memo = self.__dict__.setdefault("_withoutmemo", {})
        key = (tag, fn.file, fn.name, n)
        if key in memo:
            return memo[key]
        if alone is not None and alone(fn, n) and (fn.file, fn.name, n) in carried:
            memo[key] = []
            return []
        if key in visiting:
            return None
        visiting.add(key)
        out = self._sites_without(fn, n, tag, carried, visiting, alone, (skip, skip_arg))
        visiting.discard(key)
        memo[key] = out
        return out

    def _sites_without(self, fn, n, tag, carried, visiting, alone, skips):
        skip, skip_arg = skips
        own = [frozenset(self.entry.get((fn.file, fn.name), {}))]
        sites = self._context_sites(fn, None, ())
        if sites is None:
            return own                  # an entry point
        got = []
        for (caller, st, k) in sites:
            args = self._call_args(caller.file, k) or ()
            toks = self.src.toks[caller.file]
            cc = None
            if skip_arg is not None and n < len(args) and skip_arg(caller, *args[n]):
                continue                # not the object asked about
            if n < len(args) and args[n][1] - args[n][0] == 1:
                t = toks[args[n][0]].text
                names = self.params(caller)
                if skip is not None and skip(caller, t):
                    continue            # no object, or only the carried one
                if t in names and (caller.file, caller.name, names.index(t)) in carried:
                    cc = self.contexts_without(caller, names.index(t), tag, carried,
                                               visiting, alone, skip, skip_arg)
                    if cc == []:
                        continue        # only the carried object comes here
            got.append(((caller, st, k), cc))
        out = self._compose(fn, got)
        if out is not None and (fn.name in self.addr_taken or fn.name in self.macro_used):
            # also called through a pointer or a macro: from anywhere
            out = sorted(set(out) | set(own), key=sorted)
        return out

    def _compose(self, fn, got):
        """fn's entry locksets through the call sites of got, each with the
        contexts of its caller to follow (None: all of them), as
        contexts.py composes them; None past the context limit."""
        own = set(self.entry.get((fn.file, fn.name), {}))
        clocks = list(self.P.container_locks.values())
        covered = fn.name in self._covering()
        out = set()
        for (caller, st, k), cc in got:
            ck = (caller.file, caller.name)
            if cc is None:
                cc = self.caller_contexts(ck) or [frozenset(self.entry.get(ck, {}))]
            for c in cc:
                h = _context_set(set(st.held) | {x for x in c if x not in st.killed} | own,
                                 clocks, covered)
                if not _config_clash(h):
                    out.add(frozenset(h))
            if len(out) > self._CTX_MAX:
                return None
        return sorted(out, key=sorted)
