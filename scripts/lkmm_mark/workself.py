# SPDX-License-Identifier: GPL-2.0-only
"""Racing pairs, part 4: a work item on its own object, per calling
context and per object.

A work item never runs on two CPUs at once (the workqueue is
non-reentrant: policies/ 'work_items').  Its function finds the object
that embeds it, `x = container_of(work, struct S, member)`, and two runs
of the function on one object come one after the other: what the
function does through x, and what the callees it hands x to bare do
through the parameter it lands in ('p->f', 'p->m.f'), never runs beside
the same function's accesses through its own object.  Another object's
work item is another object: two such accesses either touch two objects
or come one after the other.  They still race with any other context
that reaches the object (a caller of the same helper on an object it
found otherwise), so the decision is per calling context, as in torn.py:
the contexts in which the parameter is not the work item's own object
count as the ordinary contexts give them.

The work function must be one every registration of which is a work
item's on one member of one struct (threads.py work_items()), called by
no function, and x a local of it given only that container_of() (of the
work parameter itself, or of to_delayed_work() of it, on the registered
member or a member inside it).  A call passing a literal NULL where the
object goes gives no context for 'p->f' (it is not reached with p NULL).

Reads .src, .calls (sites_of()), .flows, .entry, threads.py's
work_items(), torn.py's carriers and compositions.  Sets nothing but its
memos; pairs.py asks work_apart().
"""
from .callers import _excluding

_NULLS = ("NULL", "0")


class WorkSelf:
    def work_apart(self, a, b):
        """a and b are both accesses to the object of one work function
        (through its container_of() local, or a parameter carrying it),
        and every pair of their calling contexts that is not such a pair
        of the work item's own is kept apart by a lock."""
        if not self.P.work_items:
            return False
        wa, wb = self._own_work(a), self._own_work(b)
        if wa is None or wb is None or wa[0] != wb[0]:
            return False
        xa, xb = self._other_locksets(a, wa), self._other_locksets(b, wb)
        if xa is None or xb is None:
            return False
        pairs = [(x, y) for x in xa for y in self._locksets(b)] + \
            [(x, y) for x in self._locksets(a) for y in xb]
        return all(_excluding(frozenset(x), frozenset(y)) is not None for x, y in pairs)

    def _own_work(self, a):
        """(work function, parameter index or None for its local) when a's
        base ('p->f', 'p->m.f') is the work item's own object in some
        calling context; or None."""
        memo = self.__dict__.setdefault("_wsmemo", {})
        key = ("own", a.file, a.tok)
        if key not in memo:
            memo[key] = self._find_own_work(a)
        return memo[key]

    def _find_own_work(self, a):
        p = self._base_name(a)
        if p is None:
            return None
        objs = self._work_objects()
        if a.fn in objs and p in objs[a.fn][1] and a.func.file == objs[a.fn][0].file:
            return (a.fn, None)
        names = self.params(a.func)
        if p not in names:
            return None
        n = names.index(p)
        for w in objs:
            if (a.func.file, a.func.name, n) in self._work_carried(w):
                return (w, n)
        return None

    def _base_name(self, a):
        """The variable a's base is ('p->f', 'p->m.f'), or None."""
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
        return toks[k - 1].text

    # ------------------------------------------------ the work's object
    def _work_objects(self):
        """{work function: (its function, the locals holding its own
        object)} for the work functions no function calls."""
        memo = self.__dict__.setdefault("_wsmemo", {})
        if "objs" in memo:
            return memo["objs"]
        out = {}
        items = self.work_items()
        for w, struct in items.items():
            fns = self.src.by_name.get(w, ())
            members = {m.split(".", 1)[1] for m in self._workmembers.get(w, ())}
            if len(fns) != 1 or self._callers_of(w) or len(members) != 1:
                continue
            fn = fns[0]
            ps = self.params(fn)
            if len(ps) != 1 or not ps[0] or self._reassigned(fn, ps[0]):
                continue
            xs = {x for x, t in self._decl_types(fn).items() if t == struct and x not in ps
                  and self._only_container(fn, x, ps[0], struct, next(iter(members)))}
            if xs:
                out[w] = (fn, frozenset(xs))
        memo["objs"] = out
        return out

    def _only_container(self, fn, x, work, struct, member):
        """Every assignment of local x in fn is `x = container_of(work,
        struct S, member...)` (or of to_delayed_work(work)), and there is
        one."""
        toks = self.src.toks[fn.file]
        got = [k for kind, k in self._bare_uses(fn, x) if kind == "assigned"]
        for k in got:
            t = [toks[j].text for j in range(k + 1, min(k + 16, fn.body_end))]
            if t[:3] != ["=", "container_of", "("]:
                return False
            rest = t[3:]
            if rest[:4] == ["to_delayed_work", "(", work, ")"]:
                rest = rest[4:]
            elif rest[:1] == [work]:
                rest = rest[1:]
            else:
                return False
            if rest[:5] != [",", "struct", struct, ",", member] or \
                    rest[5:6] not in ([")"], ["."]):
                return False
        return bool(got)

    def _work_carried(self, w):
        """{(file, function, index)}: the parameters work function w's own
        object is handed to bare, from its locals on down (callees that
        never assign them; torn.py _carry_closure())."""
        memo = self.__dict__.setdefault("_wsmemo", {})
        key = ("carried", w)
        if key not in memo:
            fn, xs = self._work_objects()[w]
            memo[key] = self._carry_closure(list(self._bare_calls(fn, xs, self._callee_sites())))
        return memo[key]

    # ------------------------------------------------ the other contexts
    def _other_locksets(self, a, own):
        """a's locksets in the calling contexts in which its base is not
        the work item's own object ([] for the work function's local);
        None when not known."""
        w, n = own
        if n is None:
            return []
        return self._locksets_in(a, self._other_contexts(a.func, n, w, set()))

    def _other_contexts(self, fn, n, w, visiting):
        """The locksets fn is entered with in the calling contexts in which
        its parameter n is not work function w's own object (torn.py
        contexts_without(): a NULL argument is no object, and the work
        function's own locals are only its object); None past the context
        limit or in a cycle."""
        objs = self._work_objects()
        return self.contexts_without(
            fn, n, ("other", w), self._work_carried(w), visiting,
            skip=lambda caller, t: t in _NULLS or caller.name == w and t in objs[w][1])
