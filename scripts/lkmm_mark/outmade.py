# SPDX-License-Identifier: GPL-2.0-only
"""Ownership, part 6: objects handed back new through an out parameter,
and the objects an object owns through a pointer member.

A maker is a function that gets a new object (an allocator's or a
constructor's, or one another maker hands back to it) and hands it back
through a 'struct S **p' parameter before anything hands it on:

    int foo_get(struct foo **fpp)
    {
            struct foo *f;
            *fpp = NULL;
            f = kzalloc(sizeof(*f), GFP_NOFS);   // or foo_alloc(.., &f)
            if (!f)
                    return -ENOMEM;
            f->len = 1;
            *fpp = f;
            return 0;
    }

every use of p a statement '*p = v;' (NULL, or the new object, followed
by a return), the object made once, in no loop, and nothing between the
making and the hand-back that may hand it on (unpublished.py
_hands_on(): a call that may keep it, a store, a label).  A caller that
makes a local with 'foo_get(.., &x)' (x given nothing before, the call
in no loop) has the object to itself from the call to the first
statement that may hand it on: a window, as in unpublished.py, which
detach.py gathers into _detached().  A function that links the new
object into a shared tree or queues it for I/O before it hands it back
is no maker, and the window of a maker's caller ends where it does so.

owned_pointer(): a pointer member every store of which is NULL, a fresh
allocation or the address of a struct embedded in the same object
('x->m = &x->one;'), and whose value is only ever dereferenced
('x->m[i].f', 'x->m->f'), tested or handed to a call that keeps it
nowhere (a free): what it points to is part of the object, reached by
no other path, so private.py's _private_root() follows it from a private
object ('x->m[0].f' is as private as x).

Reads .src, .accesses, .params(), ._out_params() (handback.py),
._fresh_call() (private.py), ._hands_on(), ._keeps() (unpublished.py).
Sets only its memos (_outmakers, reset with the windows by
escapes.py _forget_windows(); _ownedmemo).  A maker found where its
object was already shared makes every access of its callers' windows a
'private' exclusion.
"""
from . import csrc
from .tokutil import _in_loop, _stmt_end

ROUNDS = 6


class OutMade:
    def out_makers(self):
        """{function: {parameter index: why}} of the makers, in rounds (a
        maker whose object another maker hands it)."""
        c = self.__dict__.get("_outmakers")
        if c is not None:
            return c
        cands = [(fn, outs) for fn in self.src.funcs.values()
                 for outs in [self._out_params(fn)]
                 if outs and len(self.src.by_name.get(fn.name, ())) == 1]
        found = {}
        for _ in range(ROUNDS):
            new = {}
            for fn, outs in cands:
                for n, p in outs:
                    if n in found.get(fn.name, {}):
                        continue
                    why = self._hands_back_new(fn, p, found)
                    if why is not None:
                        new.setdefault(fn.name, {})[n] = why
            if not new:
                break
            for name, d in new.items():
                found.setdefault(name, {}).update(d)
        self._outmakers = found
        return found

    def _hands_back_new(self, fn, p, found):
        """Why fn hands back through its parameter p only new objects that
        nothing handed on before, or None."""
        toks = self.src.toks[fn.file]
        lo, hi = fn.body_start, fn.body_end
        backs = []
        for k in range(lo + 1, hi - 3):
            if toks[k].text != p or toks[k - 1].text in (".", "->"):
                continue
            if not (toks[k - 1].text == "*" and toks[k - 2].text in (";", "{", "}") and
                    toks[k + 1].text == "=" and toks[k + 2].kind == "id" and
                    toks[k + 3].text == ";"):
                return None                 # p used otherwise: handed on, tested
            if toks[k + 2].text != "NULL":
                backs.append(k + 2)
        why = None
        for v in backs:
            made = self._made_once(fn, toks[v].text, found)
            if made is None or made[0] > v or toks[v + 2].text != "return" or \
                    self._hands_on(fn, toks, made[0], toks[v].text) != v:
                return None
            why = made[1]
        return why

    def _made_once(self, fn, x, found):
        """(end of the statement, why) of the one statement that gives the
        local x of fn a new object: 'x = alloc(...);' or a maker's call
        handed '&x' where the maker hands back; None when x gets a value
        anywhere else, is a parameter or no local, or the statement is in a
        loop."""
        toks = self.src.toks[fn.file]
        lo, hi = fn.body_start, fn.body_end
        if x in self.params(fn) or not _local_pointer(toks, lo, hi, x):
            return None
        made = None
        for k in range(lo + 1, hi - 2):
            if toks[k].text != x or toks[k - 1].text in (".", "->"):
                continue
            deref = toks[k - 1].text == "*" and toks[k - 2].text in (";", "{", "}", ")", "else")
            if toks[k + 1].text == "=" and not deref:
                if toks[k + 2].text == "NULL" and toks[k + 3].text == ";" and \
                        toks[k - 2].text in ("struct", "union"):
                    continue                    # 'struct foo *x = NULL;'
                call = self._fresh_call(toks, k + 2)
                why = "allocated by %s()" % call if call else None
            elif toks[k - 1].text == "&" and toks[k + 1].text not in ("->", ".", "["):
                why = self._maker_call(fn, toks, k - 1, found)
            else:
                continue
            if why is None or made is not None or _in_loop(toks, lo, k):
                return None
            made = (_stmt_end(toks, k, hi), why)
        return made

    def _maker_call(self, fn, toks, k, found):
        """Why '&x' at toks[k] is the out argument of a maker's call that
        hands back a new object, or None."""
        c = self._call_arg(toks, k, fn.body_start)
        if c is None or c[1] not in found.get(c[0], {}) or \
                toks[k + 2].text not in (",", ")") or toks[k - 1].text not in (",", "("):
            return None
        return "handed back new by %s()" % c[0]

    def _made_out(self, fn):
        """name -> (from, to, why): a local fn gives a new object by a
        maker's call, from the end of that statement to the first that
        may hand it on (_hands_on())."""
        out = {}
        makers = self.out_makers()
        if not makers:
            return out
        toks = self.src.toks[fn.file]
        lo, hi = fn.body_start, fn.body_end
        ids = self._ids(fn)
        for name in makers:
            for k in ids.get(name, ()):
                if not lo < k < hi or toks[k + 1].text != "(":
                    continue
                for n in makers[name]:
                    args = self._call_args(fn.file, k)
                    if args is None or n >= len(args) or args[n][1] - args[n][0] != 2 or \
                            toks[args[n][0]].text != "&":
                        continue
                    x = toks[args[n][0] + 1].text
                    made = self._made_once(fn, x, {name: {n: None}})
                    if made is None or x in out:
                        continue
                    start = made[0]
                    out[x] = (start, self._hands_on(fn, toks, start, x),
                              "not yet published: %s() hands it back new at line %d (%s), and "
                              "nothing has handed it on since" % (
                                  name, toks[k].line, makers[name][n]))
        return out

    def owned_pointer(self, st, fld):
        """Is st.fld a pointer member whose object belongs to the object
        that holds it: every store NULL, a fresh allocation or the address
        of a struct embedded in that same object, and every load
        dereferenced, tested or handed to a call that keeps nothing."""
        memo = self.__dict__.setdefault("_ownedmemo", {})
        key = (st, fld)
        if key not in memo:
            m = self.src.member(st, fld)
            ok = m is not None and m.pointer and not m.array and \
                csrc.struct_name(m.type) is not None
            seen = False
            for b in self.accesses if ok else ():
                if b.struct != st or b.field != fld:
                    continue
                if b.kind == "write":
                    seen = True
                    ok = self._owned_store(b, csrc.struct_name(m.type))
                elif b.kind == "read":
                    ok = self._owned_load(b)
                elif b.kind != "sizeof":
                    ok = False
                if not ok:
                    break
            memo[key] = ok and seen
        return memo[key]

    def _owned_store(self, b, pointee):
        """b stores NULL, a fresh object or '&base->m' of the same base,
        m a struct of the pointee's type embedded in it."""
        toks = self.src.toks.get(b.file)
        k = b.tok
        if toks is None or k is None or toks[k + 1].text != "=":
            return False
        v = k + 2
        if (toks[v].text == "NULL" and toks[v + 1].text == ";") or self._fresh_call(toks, v):
            return True
        base = [t.text for t in csrc.tokenize(b.base or "")]
        n = len(base)
        if not base or toks[v].text != "&" or \
                [t.text for t in toks[v + 1:v + 1 + n]] != base or \
                toks[v + 1 + n].text not in ("->", ".") or toks[v + 3 + n].text != ";":
            return False
        m = self.src.member(b.struct, toks[v + 2 + n].text)
        return m is not None and not m.pointer and not m.array and \
            csrc.struct_name(m.type) == pointee

    def _owned_load(self, b):
        """b's value is dereferenced ('x->m->f', 'x->m[i].f'), tested, or
        handed whole to a call that keeps nothing, as is the address of
        what it points to ('&x->m[i]')."""
        toks = self.src.toks.get(b.file)
        k = b.tok
        if toks is None or k is None or not b.base:
            return False
        first = k - 1 - len(csrc.tokenize(b.base))
        nxt, prev = toks[k + 1].text, toks[first - 1].text
        if nxt in ("==", "!=") or prev in ("!", "==", "!="):
            return True
        if prev == "&":
            first -= 1
        elif nxt in ("[", "->"):
            return True
        e = k + 1
        while True:
            if toks[e].text == "[":
                e = csrc.match_paren(toks, e) + 1
            elif toks[e].text in (".", "->") and toks[e + 1].kind == "id":
                e += 2
            else:
                break
        if toks[e].text not in (",", ")") or toks[first - 1].text not in (",", "("):
            return False
        c = self._call_arg(toks, first, b.func.body_start)
        return c is not None and not self._keeps(b.func, c[0], c[1])


def _local_pointer(toks, lo, hi, x):
    """x is declared in toks[lo:hi] as a pointer to a struct, not static:
    'struct foo *x;' (a global or a static local is no task's own)."""
    return any(toks[k].text == x and toks[k - 1].text == "*" and toks[k - 2].kind == "id" and
               toks[k - 3].text in ("struct", "union") and toks[k - 4].text != "static" and
               toks[k + 1].text in (";", "=", ",")
               for k in range(lo + 4, hi))
