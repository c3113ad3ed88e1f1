# SPDX-License-Identifier: GPL-2.0-only
"""Ownership, part 4: objects not yet published.  A struct on a function's
stack before the first statement that may let another task reach it; a
parameter of a struct nothing points to, before the function links it
into its first list or tree (an object a flag says is new, an inode
with I_NEW: newobjects.py).  Windows of tokens, as in detach.py, which
gathers them into _detached().

Reads .src, .P (publishers, unlinkers, link_removers),
.escaping (through _addr_escapes()).  Sets only its caches (_unpubcache,
_unrefcache).  A store made before publication is where the 'not yet
published' exclusions come from.
"""

from . import csrc
from .locks import KEYWORDS
from .tokutil import _in_loop, _is_label, _stmt_end as _stmt_end_tok


class Unpublished:
    def _unreferenced(self):
        """Structs no struct of the target points to or embeds: other tasks
        reach their objects only through their own list or tree links."""
        c = getattr(self, "_unrefcache", None)
        if c is not None:
            return c
        refs = set()
        for members in self.src.structs.values():
            for m in (members or {}).values():
                t = csrc.struct_name(m.type)
                if t is not None:
                    refs.add(t)
        c = self._unrefcache = {t for t in self.src.structs if t not in refs}
        return c

    def _unpublished_params(self, fn):
        """name -> (from, to, why): a parameter of a struct nothing points
        to, which fn links into a list or tree (rb_link_node(&p->node,
        ...)): it was on none on entry, so no other task can reach it
        before that call (a log insert that stores e->seq first)."""
        out = {}
        toks = self.src.toks[fn.file]
        lo, hi = fn.body_start, fn.body_end
        names = [p for p in self.params(fn) if p]
        if not names:
            return out
        types = self._decl_types(fn)
        unref = self._unreferenced()
        for p in names:
            st = types.get(p)
            if st not in unref or self._reassigned(fn, p):
                continue
            # one link only: with two, the object may be on the other one
            # (a relink function moves an entry that stays in another
            # tree)
            links = self._struct_links(fn, st)
            if len(links) != 1:
                continue
            for k in range(lo + 1, hi - 5):
                if toks[k].text in self.P.unlinkers or toks[k].text in self.P.link_removers:
                    if toks[k + 1].text == "(" and toks[k + 2].text == "&" and \
                            toks[k + 3].text == p:
                        break                   # taken off first: it was linked
                if toks[k].text in self.P.publishers and toks[k + 1].text == "(" and \
                        self.P.publishers[toks[k].text] == 0 and toks[k + 2].text == "&" and \
                        toks[k + 3].text == p and toks[k + 4].text in ("->", ".") and \
                        toks[k + 5].text in links:
                    if not _in_loop(toks, lo, k):
                        out[p] = (lo, k, "not yet published: %s() links it into its first "
                                  "list or tree here, and no struct points to a struct %s"
                                  % (toks[k].text, st))
                    break
        return out

    def _unpublished_stack(self, fn):
        """name -> (from, to, why): a struct on fn's stack before the first
        statement that may let another task reach it (a member linked into
        a shared list or tree, its address or a member's handed to code
        that may keep it).  Until then it is as private as a stack object
        whose address never escapes ('ticket.error = 0' before
        list_add_tail(&ticket.list, ...) in a reserve function).  Not when
        that statement is in a loop or the object is an array; a goto
        jumping back ends the window at its label (_detached())."""
        out = {}
        toks = self.src.toks[fn.file]
        lo, hi = fn.body_start, fn.body_end
        stack = self._stack_structs(fn)
        if not stack:
            return out
        first = {}
        ids = self._ids(fn)
        for k in sorted(j - 1 for n in ids.keys() & stack.keys() for j in ids[n]
                        if lo + 1 <= j - 1 < hi - 2):
            name = toks[k + 1].text
            if name in first or toks[k].text in (".", "->"):
                continue
            nx = toks[k + 2].text
            if toks[k].text != "&":
                if nx == "[" and toks[k].text not in ("struct", "union") and \
                        toks[k - 1].text not in ("struct", "union"):
                    first[name] = None          # an array: its name is its address
                continue
            if nx in ("[", "->") or (nx != "." and self._addr_escapes(fn, k)) or \
                    (nx == "." and self._member_addr_escapes(fn, k)):
                first[name] = k
        for name, k in first.items():
            if k is None or _in_loop(toks, lo, k):
                continue
            c = self._call_of(toks, k, lo)
            out[name] = (lo, k, "a stack object not yet published: %s at line %d is the "
                         "first statement that may let another task reach it"
                         % ("%s()" % c if c else "'&%s'" % name, toks[k].line))
        return out

    def _fresh_members_here(self, fn):
        """'x.p' -> (from, to, why): an object fn has just allocated and
        stored in a pointer member ('x->p = foo_alloc(...);'), from that
        statement to the first that may let another task reach it: a call
        handed x, x->p or another member of x (but a lock call or a
        function that keeps nothing), a lock released, x->p itself used
        as a value, x assigned again, or the end of the block.  Until then
        only this task has the object's address (another task reading x->p
        there would race on the pointer itself)."""
        out = {}
        toks = self.src.toks[fn.file]
        lo, hi = fn.body_start, fn.body_end
        ids = self._ids(fn)
        for k in sorted(j - 4 for n in ids.keys() & self._maker_names() for j in ids[n]
                        if lo + 1 <= j - 4 < hi - 5):
            if toks[k].kind != "id" or toks[k + 1].text != "->" or toks[k + 2].kind != "id" or \
                    toks[k + 3].text != "=" or toks[k - 1].text not in (";", "{", "}"):
                continue
            call = self._fresh_call(toks, k + 4)
            if call is None:
                continue
            x, p = toks[k].text, toks[k + 2].text
            start = _stmt_end_tok(toks, k, hi)
            end = self._fresh_member_end(fn, toks, start, x, p)
            if end > start + 1:
                out.setdefault("%s.%s" % (x, p), (start, end, "allocated by %s() at line %d "
                               "and not yet reachable by another task" % (call, toks[k].line)))
        return out

    def _fresh_member_end(self, fn, toks, start, x, p):
        """Where the window of _fresh_members_here() that opens at toks[start]
        ends (a token index)."""
        depth = 0
        for j in range(start + 1, fn.body_end):
            t = toks[j].text
            if t == "{":
                depth += 1
            elif t == "}":
                depth -= 1
                if depth < 0:
                    return j
            elif t == x and toks[j - 1].text not in (".", "->"):
                nx = toks[j + 1].text
                if nx == "=" or (nx == "->" and toks[j + 2].text == p and
                                 toks[j + 3].text not in ("->",) and toks[j - 1].text != "!"):
                    return j
                if nx != "->":
                    return j
            elif toks[j].kind == "id" and toks[j + 1].text == "(" and t not in KEYWORDS:
                spec = self.lockfns.get(t)
                if spec is not None:
                    if spec.get("op") == "release":
                        return j
                    continue
                if t in self.P.non_retaining:
                    continue
                close = csrc.match_paren(toks, j + 1)
                if any(toks[i].text == x and toks[i - 1].text not in (".", "->")
                       for i in range(j + 2, close)):
                    return close
            elif _is_label(toks, j):
                return j
        return fn.body_end

    def _initialised_here(self, fn):
        """name -> (from, to, why): a pointer to an object whose own lock fn
        initialises at the top level of its body (policies 'initialisers':
        'spin_lock_init(&x->lock);', not '&x->p->lock').  Initialising a
        lock another task may take is a bug, so no other task reaches the
        object before that call: from where fn got the pointer (its one
        assignment, or the entry for a parameter it never assigns) to the
        first statement after the last such call that may hand the
        object on (_hands_on()): a preallocation filled in before it is
        linked, reached through a private context's member."""
        out = {}
        if not self.P.initialisers:
            return out
        toks = self.src.toks[fn.file]
        lo, hi = fn.body_start, fn.body_end
        inits = {}
        ids = self._ids(fn)
        for k in sorted(k for n in ids.keys() & set(self.P.initialisers) for k in ids[n]
                        if k < hi - 5):
            if toks[k + 1].text == "(" and \
                    toks[k + 2].text == "&" and toks[k + 3].kind == "id" and \
                    toks[k + 4].text == "->" and toks[k - 1].text in (";", "{", "}"):
                c = csrc.match_paren(toks, k + 1)
                if all(toks[i].text != "->" for i in range(k + 5, c)) and \
                        _top_level(toks, lo, k):
                    inits.setdefault(toks[k + 3].text, []).append(k)
        types = self._decl_types(fn)
        params = {p for p in self.params(fn) if p}
        for x, ks in inits.items():
            n = _assignments(toks, lo, hi, x)
            if types.get(x) is None or (x in params and n) or (x not in params and n != 1):
                continue
            start = lo
            if x not in params:
                a = next(k for k in range(lo + 1, hi - 1) if toks[k].text == x and
                         toks[k + 1].text == "=" and toks[k - 1].text not in (".", "->"))
                if a > ks[0] or not _top_level(toks, lo, a):
                    continue
                start = _stmt_end_tok(toks, a, hi)
            out[x] = (start, self._hands_on(fn, toks, ks[-1], x),
                      "not yet published: %s() at line %d initialises its lock, which no "
                      "other task can have taken yet" % (toks[ks[0]].text, toks[ks[0]].line))
        return out

    def _hands_on(self, fn, toks, k0, x):
        """The first token after toks[k0] where fn may hand on the object x
        points to: x, or the address of a member of it, passed to a call
        that may keep it (_keeps()), stored, returned or assigned again;
        a label; or the end of fn.  Member accesses and tests of x do not."""
        lo, hi = fn.body_start, fn.body_end
        for j in range(k0 + 1, hi):
            if _is_label(toks, j):
                return j
            if toks[j].text != x or toks[j - 1].text in (".", "->"):
                continue
            prev, nxt = toks[j - 1].text, toks[j + 1].text
            if nxt == "->" and prev != "&":
                continue                        # x->f: a member of it
            c = self._call_arg(toks, j - 1 if prev == "&" else j, lo)
            if c is not None and (prev == "&" or c[2]):
                if self._keeps(fn, c[0], None if prev == "&" else c[1]):
                    return j
                continue
            if nxt in _TESTS or prev in _TESTS:
                continue
            return j
        return hi

    def _keeps(self, fn, callee, n, deep=True):
        """A call of callee given the object (as its argument n; None: a
        member's address) may keep it: not a lock call, a diagnostic, a
        function that keeps nothing, or a function of the target whose
        parameter n does not escape (escapes.py) or (deep) escapes only
        into a member of a private parameter (_kept_privately())."""
        if callee in KEYWORDS or callee in self.lockfns or callee in self.P.non_retaining or \
                self.P.is_diag(callee):
            return False
        targets = self._callee(fn, callee)
        if n is None or not targets or callee in self.addr_taken:
            return True
        return not all((t.file, t.name, n) not in self.escaping or
                       (deep and self._kept_privately(t, n)) for t in targets)

    def _kept_privately(self, fn, n):
        """fn's parameter n is only stored into a member of a parameter
        every caller passes its own private object ('ac->pa = pa;', the
        allocation context of one task), or handed to calls that keep it
        no further (_keeps(), one level)."""
        names = self.params(fn)
        p = names[n] if n < len(names) else None
        priv = self.priv_params.get((fn.file, fn.name), {})
        if not p or not priv or self._reassigned(fn, p):
            return False
        toks = self.src.toks[fn.file]
        for kind, info in self._bare_uses(fn, p):
            if kind == "stored" and toks[info - 1].text == "=" and toks[info + 1].text == ";" \
                    and toks[info - 3].text == "->" and toks[info - 4].text in priv and \
                    toks[info - 5].text in (";", "{", "}"):
                continue
            if kind == "arg" and not self._keeps(fn, info[0], info[1], deep=False):
                continue
            return False
        return True

    def _unpublished_stack_cut(self, fn):
        """_unpublished_stack(), each window ending at a label a goto from
        outside it jumps to (cached: private_params() asks for it at every
        call site)."""
        key = (fn.file, fn.body_start)
        c = self._unpubcache.get(key)
        if c is None:
            c = self._unpubcache[key] = self._cut_at_labels(fn, self._unpublished_stack(fn))
        return c


_TESTS = ("==", "!=", "!", "&&", "||", "?")




def _top_level(toks, lo, k):
    """toks[k] is a statement of the function's own block (toks[lo] its
    '{'), in no branch or loop."""
    depth = 0
    for i in range(lo, k):
        if toks[i].text == "{":
            depth += 1
        elif toks[i].text == "}":
            depth -= 1
    return depth == 1 and toks[k - 1].text in (";", "{", "}")


def _assignments(toks, lo, hi, v):
    """How many times v is assigned ('v = ...') in toks[lo:hi]."""
    return sum(1 for k in range(lo + 1, hi - 1) if toks[k].text == v and toks[k + 1].text == "="
               and toks[k - 1].text not in (".", "->"))
