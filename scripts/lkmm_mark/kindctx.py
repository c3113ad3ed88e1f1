# SPDX-License-Identifier: GPL-2.0-only
"""Racing pairs, part 5: another container of an embedded struct, per
calling context.

An object embedded in a struct ('c->m.f', 'v->f' with v given only
'&c->m') is part of an object of that container type: a struct embedded
as member m of a struct C is never one embedded as member n of a struct
D.  instances.py tells two such accesses apart when each path names its
container.  A generic helper reached through a parameter ('p->f', p a
'struct S *' parameter) is handed many kinds of object: one caller
passes '&c->m', another '&d->n', a third a pointer that does not tell.
Per calling context, the context of a call whose argument is known to
be another container's member (or NULL) touches another object than an
access that names its container: against it, only the contexts in
which the parameter may be an object of that container count (a call
passing on a parameter of its own bare follows the caller's contexts
the same way; one whose argument does not tell, all of the caller's).
When every such context is kept apart by a lock from every context of
the other access, the two never race on one object.

Reads instances.py's _object_of() and _value_objects(), torn.py's
contexts_without(), _locksets_in(), _carry-style call sites, the
calling contexts of contexts.py.  Sets nothing but its memos; pairs.py
asks kind_apart().
"""
from .callers import _excluding


class KindContexts:
    def kind_apart(self, a, b):
        """One of a and b names the container of the struct it touches
        ('c->m.f'), the other is made through a parameter, and every
        calling context in which that parameter may be such a container's
        member is kept apart by a lock from every context of the first."""
        return self._kind_side(a, b) or self._kind_side(b, a)

    def _kind_side(self, a, b):
        objs = self._object_of(a)
        if not objs or any(o[0] != "embedded" for o in objs) or b.func is None:
            return False
        n = self._param_index(b)
        if n is None:
            return False
        ys = self._locksets_in(b, self._kind_contexts(b.func, n, objs))
        if ys is None:
            return False
        xs = self._locksets(a)
        return all(_excluding(frozenset(x), frozenset(y)) is not None for x in xs for y in ys)

    def _param_index(self, b):
        """The index of the parameter b's base is ('p->f', 'p->m.f'), a
        parameter its function never assigns; or None."""
        p = self._base_name(b)
        names = self.params(b.func)
        if p is None or p not in names:
            return None
        n = names.index(p)
        return None if self._reassigned_at(b.func, n) else n

    def _kind_contexts(self, fn, n, objs):
        """The locksets fn is entered with in the calling contexts in which
        its parameter n may be one of objs (torn.py contexts_without(): a
        call whose argument is known to be none of them gives none); None
        when not known."""
        return self.contexts_without(
            fn, n, ("kind", objs), self._kind_carried(fn, n), set(),
            skip_arg=lambda caller, lo, hi: self._other_kind(caller, lo, hi, objs))

    def _other_kind(self, caller, lo, hi, objs):
        """The argument toks[lo:hi] of caller is known to point to none of
        objs: NULL, or only embedded members of other containers, or
        fresh objects (instances.py _value_objects()); a parameter the
        caller assigns does not tell."""
        toks = self.src.toks[caller.file]
        if hi - lo == 1 and toks[lo].text in self.params(caller) and \
                self._reassigned(caller, toks[lo].text):
            return False
        got = self._value_objects(caller, toks, lo, hi, 0)
        return got is not None and got.isdisjoint(objs)

    def _kind_carried(self, fn, n):
        """{(file, function, index)}: parameter n of fn and the parameters
        of its callers, up the calls, that each passes on to it bare and
        never assigns."""
        memo = self.__dict__.setdefault("_kindmemo", {})
        key = (fn.file, fn.name, n)
        if key in memo:
            return memo[key]
        out, todo = set(), [(fn, n)]
        while todo:
            g, m = todo.pop()
            if (g.file, g.name, m) in out:
                continue
            out.add((g.file, g.name, m))
            for (caller, _, k) in self.sites_of(g):
                args = self._call_args(caller.file, k) or ()
                if m >= len(args) or args[m][1] - args[m][0] != 1:
                    continue
                names = self.params(caller)
                t = self.src.toks[caller.file][args[m][0]].text
                if t in names and not self._reassigned_at(caller, names.index(t)):
                    todo.append((caller, names.index(t)))
        memo[key] = frozenset(out)
        return memo[key]
