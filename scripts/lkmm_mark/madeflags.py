# SPDX-License-Identifier: GPL-2.0-only
"""Made flags: a member that an object's maker copies from its own
parameter, on the object it allocates, is a flag the object carries for
its whole life; a branch on it is not reached from the calling contexts
whose chain hands down an object made with the other value.

    static struct foo_ctx *foo_setup(int replace)
    {
            struct foo_ctx *c = kzalloc(sizeof(*c), GFP_KERNEL);

            if (!c)
                    return NULL;
            c->replace = replace;       <- the one store of foo_ctx.replace
            return c;
    }
    static void foo_walk(struct foo_ctx *c)
    {
            if (c->replace)
                    foo_sync(c);        <- not reached from foo_run(.., 0)
    }
    int foo_run(.., int replace)
    {
            struct foo_ctx *c = foo_setup(replace);
            ...
            foo_walk(c);
    }

A test of 'p->m' (the branches memberflags.py's _member_ranges() finds:
'p->m', '!p->m', 'p->m op literal', p a parameter never assigned, which
'&p->lock' does not do) on a made flag is a need on the object: contexts.py carries it up the calling contexts
(carried_sites(), for each call site, with the caller's own such tests
at the call), through every call that hands the object on bare as a
parameter its function never assigns, up to a caller whose local holds
what the maker returned ('c = foo_setup(.., x, ..)', every assignment
of the local such a call or NULL): there it is a test of the maker's
argument, which a literal decides (the context is dropped when it fails)
and a parameter of that caller never assigned lifts one call further (its
call sites that pass a literal failing it do not reach it, as
flagargs.py's reaching_sites_for()).  Anything else, no conclusion.

A member is a made flag only when the code bears it out: its one store
in the target ('x->m = p;', no other store, step, marked access or
address taken) is a statement at the top level of the maker's body, of
a parameter p the maker never assigns, into a local x assigned once,
from an allocator or a constructor; every return of the maker returns
x, NULL or an error pointer, none before the store x, and no goto
before the store jumps past it but to an error tail that returns no x
and jumps nowhere; and nothing in the target writes a whole struct of
that type ('*y = v', memset(), memcpy(), memmove()).

Reads .src, .accesses, .params(), ._call_args(), ._decl_types(),
._local_values(), .constructors, .P.allocators, test_ranges(),
.reaching_sites_for(), ._contradicts().  Sets nothing but its cache
(_mademflags).
"""
from .flagargs import _declared, assigned_at, holds, literal_value, test_ranges
from .memberflags import _member_test
from .tokutil import _open_blocks

_STORES = ("write", "rmw", "address", "atomic", "marked")
_NO_OBJECT = ("NULL", "ERR_PTR", "ERR_CAST")
_WHOLE = ("memset", "memcpy", "memmove")


class MadeFlags:
    def carried_sites(self, fn, caller, k, need):
        """(the calls of caller that can reach its call of fn at toks[k],
        None: all; the made-flag needs on caller's parameters its calling
        contexts must meet): need is what fn's contexts must meet, flag
        guards on its parameters (n, op, literal) and made-flag needs (n,
        (struct, member), op, literal)."""
        plain = tuple(g for g in need if len(g) == 3)
        rs = self.reaching_sites_for(caller, k, plain)
        if rs is not None and not rs:
            return rs, ()
        up, lifted = set(self.made_guards(caller, k)), set()
        for g in need:
            if len(g) != 4:
                continue
            got = self._made_need(caller, k, g)
            if got is False:
                return [], ()           # an object made with the other value
            if got is not None:
                (up if len(got) == 4 else lifted).add(got)
        if lifted and caller.name not in self.addr_taken and \
                caller.name not in self.macro_used:
            sites = rs if rs is not None else self.sites_of(caller)
            if sites:
                rs = [s for s in sites if not self._contradicts(s, tuple(lifted))]
        return rs, tuple(sorted(up))

    def access_needs(self, fn, k):
        """What the calling contexts of toks[k] of fn must meet: the flag
        guards on fn's parameters and the made flags of their objects."""
        return self.flag_guards(fn, k) + self.made_guards(fn, k)

    def made_guards(self, fn, k):
        """((parameter index, (struct, member), op, literal), ...): toks[k]
        of fn is reached only when the object fn's parameter points to
        has 'member op literal', member a made flag of its struct."""
        if not hasattr(self, "constructors"):
            return ()
        types, names = self._decl_types(fn), self.params(fn)
        out = []
        for lo, hi, n, m, op, lit in self._made_ranges(fn):
            s = types.get(names[n])
            if lo < k <= hi and s and self.made_flag(s, m) is not None:
                out.append((n, (s, m), op, lit))
        return tuple(out)

    def _made_ranges(self, fn):
        """memberflags.py's _member_ranges() of fn, with a parameter whose
        member's address is taken ('&p->lock') still one fn never assigns."""
        memo = self.__dict__.setdefault("_mademflags", {})
        key = ("ranges", fn.file, fn.body_start)
        if key not in memo:
            toks, names = self.src.toks[fn.file], self.params(fn)

            def test(lo, hi):
                g = _member_test(toks, lo, hi, names)
                if g is None or _changed(toks, fn, names[g[0]]):
                    return None
                return (g[0], g[1]), g[2], g[3], g[4]
            memo[key] = [(lo, hi, n, m, op, lit)
                         for lo, hi, (n, m), op, lit in test_ranges(toks, fn, test)]
        return memo[key]

    def _made_need(self, caller, k, g):
        """What need g on the callee's parameter n asks of caller at its
        call toks[k]: a need on caller's own parameter (a 4-tuple), a
        guard on caller's parameter (n, op, literal), False when the
        object the call hands is made with a value failing it, None when
        not known (or met)."""
        n, (s, m), op, lit = g
        args = self._call_args(caller.file, k) or ()
        if n >= len(args) or args[n][1] - args[n][0] != 1:
            return None
        toks = self.src.toks[caller.file]
        v, names = toks[args[n][0]].text, self.params(caller)
        if v in names:
            if _changed(toks, caller, v):
                return None
            return (names.index(v), (s, m), op, lit)
        maker, j = self.made_flag(s, m)
        if _declared(toks, caller.body_start, k, v) is None:
            return None                 # no local of caller's
        args = self._made_args(caller, v, maker, j)
        if not args:
            return None
        vals = [literal_value(toks, a, b) for a, b in args]
        if None not in vals:
            return False if not any(holds(x, op, lit) for x in vals) else None
        ps = {toks[a].text for a, b in args}
        p = ps.pop() if len(ps) == 1 and all(b - a == 1 for a, b in args) else None
        if p in names and not _changed(toks, caller, p):
            return (names.index(p), op, lit)
        return None

    def _made_args(self, fn, v, maker, j):
        """The token range of argument j of each 'v = maker(...)' that
        assigns the local v of fn, when every assignment of v is one (or
        NULL); else None."""
        vals = self._local_values(fn).get(v)
        if not vals or any(x is None or x != ["NULL"] and x[:2] != [maker, "("]
                           for x in vals):
            return None
        toks = self.src.toks[fn.file]
        out = []
        for i in range(fn.body_start + 1, fn.body_end - 3):
            if toks[i].text == v and toks[i + 1].text == "=" and \
                    toks[i + 2].text == maker and toks[i - 1].text not in (".", "->"):
                args = self._call_args(fn.file, i + 2) or ()
                if j >= len(args):
                    return None
                out.append(args[j])
        return out or None

    def made_flag(self, s, m):
        """(maker function name, parameter index) when member m of struct
        s is a made flag (the module's docstring), else None."""
        memo = self.__dict__.setdefault("_mademflags", {})
        if (s, m) not in memo:
            memo[(s, m)] = self._made_flag(s, m)
        return memo[(s, m)]

    def _made_flag(self, s, m):
        stores = [b for b in self._accesses_of(s, m) if b.kind in _STORES]
        if len(stores) != 1 or stores[0].kind != "write" or stores[0].func is None:
            return None
        b, fn = stores[0], stores[0].func
        toks, t = self.src.toks[b.file], b.tok
        if toks[t - 1].text != "->" or toks[t - 3].text not in (";", "{", "}") or \
                toks[t + 1].text != "=" or toks[t + 3].text != ";":
            return None
        x, p, names = toks[t - 2].text, toks[t + 2].text, self.params(fn)
        if p not in names or assigned_at(toks, fn.body_start, fn.body_end, p) or \
                next(_open_blocks(toks, fn.body_start, t), None) != fn.body_start:
            return None
        vals = self._local_values(fn).get(x)
        fresh = set(self.constructors) | set(self.P.allocators)
        if not vals or len(vals) != 1 or vals[0] is None or vals[0][0] not in fresh or \
                vals[0][1:2] != ["("]:
            return None
        if not self._returns_made(toks, fn, x, t) or s in self._whole_written():
            return None
        return fn.name, names.index(p)

    @staticmethod
    def _returns_made(toks, fn, x, t):
        """fn returns x, only after toks[t], and nothing but x, NULL or an
        error pointer, and no goto before toks[t] jumps past it."""
        made = False
        for i in range(fn.body_start + 1, fn.body_end):
            w = toks[i].text
            if w == "goto" and i < t and any(
                    toks[j].text == toks[i + 1].text and toks[j + 1].text == ":" and
                    not _error_tail(toks, j, fn.body_end, x) for j in range(t, fn.body_end)):
                return False
            if w != "return":
                continue
            r = toks[i + 1].text
            if r == x and toks[i + 2].text == ";":
                if i < t:
                    return False
                made = True
            elif r not in _NO_OBJECT:
                return False
        return made

    def _whole_written(self):
        """The structs some function of the target writes whole: '*y = v'
        at the start of a statement, or y or '&y' handed first to memset(),
        memcpy() or memmove(), y of that struct (pointer) type."""
        memo = self.__dict__.setdefault("_mademflags", {})
        if "whole" not in memo:
            out = set()
            for fn in self.src.funcs.values():
                toks = self.src.toks[fn.file]
                for i in range(fn.body_start + 1, fn.body_end - 3):
                    w = toks[i].text
                    if w == "*" and toks[i - 1].text in (";", "{", "}") and \
                            toks[i + 2].text == "=":
                        y = toks[i + 1].text
                    elif w in _WHOLE and toks[i + 1].text == "(":
                        y = toks[i + 3 if toks[i + 2].text == "&" else i + 2].text
                    else:
                        continue
                    s = self._decl_types(fn).get(y)
                    if s:
                        out.add(s)
            memo["whole"] = out
        return memo["whole"]


def _error_tail(toks, j, end, x):
    """What follows the label at toks[j] never returns x and jumps nowhere
    ('nomem: free(x); return ERR_PTR(-ENOMEM);'): a goto from before the
    store to it hands the caller no object."""
    return not any(toks[i].text == "goto" or toks[i].text == "return" and
                   toks[i + 1].text == x for i in range(j, end))


def _changed(toks, fn, name):
    """fn may change the variable name: flagargs.assigned_at() less the
    address of a member it points to ('&name->lock', '&name[i]')."""
    return [k for k in assigned_at(toks, fn.body_start, fn.body_end, name)
            if toks[k - 1].text != "&" or toks[k + 1].text not in ("->", "[", ".")]
