# SPDX-License-Identifier: GPL-2.0-only
"""Ownership, part 1: objects private to a function.  A stack struct whose
address does not escape, an object the function allocated or a
constructor returned (before a pointer to another one is assigned), one it
frees, the entries of a tree or list such an object holds, the
parameters every caller passes such an object (escapes.py), and what a
local finds in a member of such a parameter that every caller set to its
own private object (_member_locals()) are reached by no other task: their
accesses need no mark.

Reads .src, .P (allocators, freers), .constructors, .priv_params,
.escaping (through _addr_escapes()), the detached windows (detach.py) and
the stack structs' stores (unpublished.py) through _private_why().  Sets
.constructors' value (find_constructors(), which run() stores) and its
caches (_privcache, _pofcache, _mixedcache, _memlocals).  _private_why() is what
exclusions.py asks for each access: a false 'private' (an object
published before the access) would hide a race here.
"""
import collections
import heapq

from . import csrc
from .tokutil import _root, _stmt_end, _reaches


class Private:
    def _private_name(self, fn, name):
        """(what, origin) when name is an object private to fn, else None."""
        key = (fn.file, fn.name)
        r = self.priv_params.get(key, {}).get(name)
        if r is not None:
            return r
        c = self._privcache.get(key)
        if c is None:
            self._private_of(fn)
            c = self._privcache[key]
        r = c.get(name)
        if r is None and key in self.priv_params:
            r = self._ptr_locals(fn).get(name) or self._member_locals(fn).get(name)
        return r

    def _fresh_at(self, fn, name, k):
        """False when name, a pointer private_bases() found assigned a fresh
        object, was last assigned something else before toks[k] (in
        source order: the branch that assigns a shared object)."""
        if k is None:
            return True
        mixed = self._mixedcache.get((fn.file, fn.name), {}).get(name)
        if not mixed and name in self.priv_params.get((fn.file, fn.name), {}):
            mixed = self._pmixed.get((fn.file, fn.name, name))
        if not mixed:
            return True
        toks = self.src.toks[fn.file]

        def value_at(k):
            last, at = None, None
            for j, fresh in mixed:
                if j < k and _reaches(toks, j, k):
                    last, at = fresh, j
            return last, at

        last, at = value_at(k)
        if not last:
            return False
        # a label between the fresh assignment and k: every goto to it
        # must bring a fresh value too
        labels = {toks[i].text for i in range(at + 1, k)
                  if toks[i].kind == "id" and toks[i + 1].text == ":" and
                  toks[i - 1].text in (";", "{", "}") and toks[i].text != "default"}
        if labels:
            for g in range(fn.body_start, fn.body_end - 1):
                if toks[g].text == "goto" and toks[g + 1].text in labels and \
                        not value_at(g)[0]:
                    return False
        return True

    def _ptr_locals(self, fn):
        """'x = *p;' of a parameter p that points to a caller's private
        object (origin 'ptr'): x is that object."""
        key = (fn.file, fn.name)
        pp = self.priv_params.get(key, {})
        ptrs = [n for n, w in pp.items() if w[1] == "ptr"]
        out = {}
        if not ptrs:
            return out
        toks = self.src.toks[fn.file]
        for k in range(fn.body_start, fn.body_end - 4):
            if toks[k].kind == "id" and toks[k + 1].text == "=" and \
                    toks[k + 2].text == "*" and toks[k + 3].text in ptrs and \
                    toks[k + 4].text in (";", ",") and \
                    not self._reassigned(fn, toks[k + 3].text):
                n = toks[k + 3].text
                out.setdefault(toks[k].text, ("the object *%s points to (%s)" % (
                    n, pp[n][0]), "alloc"))
        return out

    def _private_of(self, fn):
        """name -> (what, origin kind 'stack'/'alloc') for the objects private
        to fn: its own (private_bases) and its private parameters."""
        key = (fn.file, fn.name)
        pp = self.priv_params.get(key, {})
        # private_params() only adds parameters: their number versions
        # the result
        done = self._pofcache.get(key)
        if done is not None and done[0] == len(pp):
            return done[1]
        c = self._privcache.get(key)
        if c is None:
            c = {n: (w, "stack" if w == "stack object" else "alloc")
                 for n, w in self.private_bases(fn).items()}
            self._privcache[key] = c
        out = dict(c)
        out.update({n: w for n, w in pp.items() if w[1] != "ptr"})
        for n, w in self._ptr_locals(fn).items():
            out.setdefault(n, w)
        for n, w in (self._member_locals(fn) if pp else {}).items():
            out.setdefault(n, w)
        if pp:
            # 'lp = &p->m;' with p a private parameter: as private as p
            emb = {n: w[0] for n, w in pp.items() if w[1] != "ptr"}
            self._embedded_pointers(fn, emb)
            for n, w in emb.items():
                if n not in pp:
                    out.setdefault(n, (w, "alloc"))
        if out:
            # a parameter assigned again is private only at some points
            # (_fresh_at()): its tree or list entries are not looked at
            whole = {n: w for n, w in out.items()
                     if not (n in pp and self._reassigned(fn, n))}
            for n, w in self._private_entries(fn, whole).items():
                out.setdefault(n, w)
        self._pofcache[key] = (len(pp), out)
        return out

    _FIRST = {"rb_first", "rb_last", "rb_first_cached", "rb_first_postorder"}

    _NEXT = {"rb_next", "rb_prev", "rb_next_postorder"}

    _ENTRY = {"rb_entry": 0, "container_of": 0, "list_first_entry": 0,
              "list_last_entry": 0, "list_entry": 0}

    _FOREACH = {"list_for_each_entry": 1, "list_for_each_entry_safe": 2,
                "list_for_each_entry_reverse": 1, "rbtree_postorder_for_each_entry_safe": 2}

    def _private_entries(self, fn, priv):
        """Entries of a tree or list that a private object holds: 'n =
        rb_first(&ctl->root); e = rb_entry(n, ...)', 'list_for_each_entry(e,
        &x->list, ...)'.  Nobody else can reach them while they are there
        (a copy function that empties a ctl on its stack)."""
        toks = self.src.toks[fn.file]
        lo, hi = fn.body_start, fn.body_end

        def head(a):
            # '&X->member' or '&X.member' with X private: X
            if a + 3 < hi and toks[a].text == "&" and toks[a + 1].text in priv and \
                    toks[a + 2].text in ("->", ".") and toks[a + 3].kind == "id" and \
                    toks[a + 4].text in (")", ","):
                return toks[a + 1].text
            return None

        # entries moved in from elsewhere (list_splice_init_rcu() of a live
        # device list into a new set of devices) may still be reachable from
        # other structures: only containers filled with their own entries
        # (the calls looked at are found through the function's identifiers)
        ids = self._ids(fn)
        for k in _calls_of(ids, lambda n: n.startswith(("list_splice", "list_move", "list_add")),
                           hi - 2):
            if toks[k + 1].text == "(":
                for a, b in self._call_args(fn.file, k) or ():
                    x = head(a)
                    if x is not None:
                        priv = {n: w for n, w in priv.items() if n != x}
        nodes, out = {}, {}
        names = self._FIRST | self._NEXT | set(self._ENTRY)
        for k in (j - 2 for j in _calls_of(ids, names.__contains__, hi - 2) if j - 2 >= lo):
            t = toks[k]
            if t.kind != "id" or toks[k + 1].text != "=" or toks[k + 3].text != "(":
                continue
            call = toks[k + 2].text
            if call in self._FIRST:
                x = head(k + 4)
                if x is not None:
                    nodes[t.text] = x
            elif call in self._NEXT and toks[k + 4].text in nodes and toks[k + 5].text == ")":
                nodes.setdefault(t.text, nodes[toks[k + 4].text])
            elif call in self._ENTRY:
                a = k + 4
                x = nodes.get(toks[a].text) if toks[a + 1].text == "," else head(a)
                if x is not None:
                    out[t.text] = ("an entry of the tree or list of %s, which is %s"
                                   % (x, priv[x][0]), priv[x][1])
        for k in _calls_of(ids, self._FOREACH.__contains__, hi - 2):
            n = self._FOREACH[toks[k].text]
            if toks[k + 1].text != "(":
                continue
            args = self._call_args(fn.file, k)
            if args and len(args) > n and args[0][1] - args[0][0] == 1:
                x = head(args[n][0])
                if x is not None:
                    out[toks[args[0][0]].text] = (
                        "an entry of the list of %s, which is %s" % (x, priv[x][0]), priv[x][1])
        return out

    def _fresh_call(self, toks, k):
        """The allocator or constructor whose call starts at toks[k]
        ('kzalloc(...)', 'foo_new_inode(...)'), or None."""
        f = toks[k].text
        if toks[k + 1].text == "(" and (f in self.P.allocators or f in self.constructors):
            return f
        return None

    def _fresh_value(self, toks, k):
        """Is the value starting at toks[k] no object or a fresh one?"""
        return toks[k].text in ("NULL", "ERR_PTR") or self._fresh_call(toks, k) is not None

    def find_constructors(self):
        """Functions returning an object they allocated: 'x = kzalloc(); ...
        return x;' (and constructors of constructors), or that they
        unlinked from its tree: 'rb_erase(&x->node, root); ... return x;'."""
        pre = []
        for key, fn in self.src.funcs.items():
            if "*" not in fn.ret:
                continue
            toks = self.src.toks[fn.file]
            assigns = []                                # x = f(...)
            unlinked = set()
            entry_of = collections.defaultdict(set)   # node var -> x = rb_entry(node, ..)
            for k in range(fn.body_start, fn.body_end - 3):
                t = toks[k]
                if t.kind == "id" and toks[k + 1].text == "=" and toks[k + 3].text == "(":
                    assigns.append((t.text, toks[k + 2].text))
            for k in range(fn.body_start, fn.body_end - 4):
                if toks[k].kind == "id" and toks[k + 1].text == "=" and \
                        toks[k + 2].text in ("rb_entry", "container_of") and \
                        toks[k + 3].text == "(" and toks[k + 4].kind == "id":
                    entry_of[toks[k + 4].text].add(toks[k].text)
            # an object unlinked from the tree that indexed it (under
            # the tree's lock) and handed to the caller: the caller owns it
            for k in range(fn.body_start, fn.body_end - 4):
                if toks[k].text in self.P.unlinkers and toks[k + 1].text == "(":
                    if toks[k + 2].text == "&" and toks[k + 3].kind == "id" and \
                            toks[k + 4].text == "->":
                        unlinked.add(toks[k + 3].text)
                    elif toks[k + 2].kind == "id" and toks[k + 3].text == ",":
                        unlinked.update(entry_of.get(toks[k + 2].text, ()))
            rets = {toks[k + 1].text for k in range(fn.body_start, fn.body_end - 2)
                    if toks[k].text == "return" and toks[k + 2].text == ";"}
            ret_calls = {toks[k + 1].text for k in range(fn.body_start, fn.body_end - 2)
                         if toks[k].text == "return"}
            pre.append((fn.name, assigns, unlinked, rets, ret_calls))
        allocs = self.P.allocators
        cons = set()
        for _ in range(5):
            new = set(cons)
            for name, assigns, unlinked, rets, ret_calls in pre:
                if name in new:
                    continue
                made = {v for v, c in assigns if c in allocs or c in cons} | unlinked
                if any(c in allocs or c in cons for c in ret_calls) or rets & made:
                    new.add(name)
            if new == cons:
                break
            cons = new
        return cons

    def private_bases(self, fn, stack_only=False):
        """Roots of objects that are private to this function: stack structs,
        objects allocated here, objects freed here."""
        toks = self.src.toks[fn.file]
        # struct foo x;  (a stack object, not a pointer)
        priv = dict.fromkeys(self._stack_structs(fn), "stack object")
        lo, hi = fn.body_start, fn.body_end
        # the allocations, constructor calls and frees, found through the
        # function's identifiers
        ids = self._ids(fn)
        cand = set()
        if not stack_only:
            for name in ids.keys() & self._maker_names():
                cand.update(j - 2 for j in ids[name])
            for name in ids.keys() & self.P.freers:
                cand.update(ids[name])
        for k in sorted(x for x in cand if lo <= x < hi):
            t = toks[k]
            # x = kzalloc(...)
            if t.kind == "id" and k + 3 < hi and toks[k + 1].text == "=" and \
                    self._fresh_call(toks, k + 2):
                priv.setdefault(t.text, "allocated here by %s()" % toks[k + 2].text
                                if toks[k + 2].text in self.P.allocators else
                                "returned by %s(), which allocates it or unlinks it from "
                                "its tree" % toks[k + 2].text)
            if t.text in self.P.freers and k + 2 < hi and toks[k + 1].text == "(" and \
                    toks[k + 2].kind == "id" and toks[k + 3].text == ")":
                priv.setdefault(toks[k + 2].text, "freed here by %s()" % t.text)
        mixed = self._mixed_pointers(fn, priv)
        if not stack_only:
            self._mixedcache[(fn.file, fn.name)] = mixed
        # a stack object whose address escapes (&obj stored, passed to a
        # callback or to code that keeps it) is not private any more; nor
        # is one linked into a shared list or tree (&obj.node published)
        for name in [n for n, w in priv.items() if w == "stack object"]:
            for k in (j - 1 for j in ids.get(name, ()) if lo <= j - 1 < hi - 2):
                if toks[k].text != "&":
                    continue
                if toks[k + 2].text not in (".", "->", "["):
                    if self._addr_escapes(fn, k):
                        priv.pop(name)
                        break
                elif toks[k + 2].text == "." and self._published(toks, k, lo):
                    priv.pop(name)
                    break
        if not stack_only and priv:
            self._fresh_members(fn, priv)
            self._embedded_pointers(fn, priv)
        return priv

    def _maker_names(self):
        """The allocators and the constructors (find_constructors())."""
        c = self.__dict__.get("_maker_set")
        if c is None or c[0] is not self.constructors:
            c = self._maker_set = (self.constructors,
                                frozenset(self.P.allocators) | frozenset(self.constructors))
        return c[1]

    def _mixed_pointers(self, fn, priv):
        """name -> [(end of the statement, whether the value is fresh)] for
        each assignment of the pointers of priv that are also assigned
        something else than a fresh object."""
        toks = self.src.toks[fn.file]
        hi = fn.body_end
        # a pointer that is also assigned something else than a fresh
        # object ('ctl = fs->cur_ctl' on one path, kzalloc() on another)
        # names the fresh object only
        # after a fresh assignment: _fresh_at() checks each use
        mixed = {}
        for n, w in priv.items():
            if w == "stack object" or w.startswith("freed here"):
                continue
            seen = []
            for kind, k in self._bare_uses(fn, n):
                if kind != "assigned":
                    continue
                v = toks[k + 2] if toks[k + 1].text == "=" else None
                seen.append((_stmt_end(toks, k, hi), v is not None and (
                    self._fresh_value(toks, k + 2) or
                    # 'a = b;' with b another fresh object of this function
                    (v.text in priv and v.text != n and toks[k + 3].text == ";" and
                     priv[v.text] != "stack object"))))
            if not all(f for _, f in seen):
                mixed[n] = sorted(seen)
        return mixed

    def _fresh_members(self, fn, priv):
        """Adds to priv the members of its stack structs that hold a fresh
        object and nothing else."""
        toks = self.src.toks[fn.file]
        hi = fn.body_end
        # 'args.inode = foo_new_inode(...);': a fresh object kept in a
        # member of a stack struct, which is assigned nothing else but
        # NULL in fn
        fresh, other = {}, set()
        ids = self._ids(fn)
        stack = [n for n in ids.keys() & priv.keys() if priv[n] == "stack object"]
        for k in sorted(k for n in stack for k in ids[n] if k < hi - 5):
            if toks[k + 1].text == "." and toks[k + 2].kind == "id" and \
                    toks[k + 3].text == "=" and toks[k - 1].text not in (".", "->", "&"):
                path = "%s.%s" % (toks[k].text, toks[k + 2].text)
                call = self._fresh_call(toks, k + 4)
                if call:
                    fresh.setdefault(path, call)
                elif not (toks[k + 4].text == "NULL" and toks[k + 5].text == ";"):
                    other.add(path)
        for path, call in fresh.items():
            if path not in other:
                priv[path] = "%s by %s()" % (
                    "allocated here" if call in self.P.allocators else
                    "returned here", call)

    def _embedded_pointers(self, fn, priv):
        """Adds to priv the pointers to a struct embedded in an object of
        priv."""
        toks = self.src.toks[fn.file]
        lo, hi = fn.body_start, fn.body_end
        # 'rsv = &pending->rsv;' with pending private: a pointer to a
        # struct embedded in a private object, assigned once, is as
        # private as the object
        types = None
        # the tokens 'x = &' before a private name, in order; a pointer
        # found adds its own later uses
        ids = self._ids(fn)
        todo = sorted({j - 3 for n in priv for j in ids.get(n, ()) if lo < j - 3 < hi - 6})
        while todo:
            k = heapq.heappop(todo)
            if todo and todo[0] == k:
                continue
            t = toks[k]
            if t.kind != "id" or toks[k + 1].text != "=" or toks[k + 2].text != "&" or \
                    toks[k + 3].text not in priv or toks[k + 4].text not in ("->", ".") or \
                    toks[k + 5].kind != "id" or toks[k + 6].text != ";" or \
                    toks[k - 1].text in (".", "->") or t.text in priv:
                continue
            if toks[k - 1].text == "*" and not (
                    toks[k - 2].kind == "id" and toks[k - 3].text in ("struct", "union")):
                continue                     # '*x = &p->m': not x itself
            if types is None:
                types = self._decl_types(fn)
            st = types.get(toks[k + 3].text)
            m = self.src.member(st, toks[k + 5].text) if st else None
            if m is None or m.pointer or m.array or m.category != "aggregate" or \
                    sum(1 for kind, _ in self._bare_uses(fn, t.text)
                        if kind == "assigned") != 1:
                continue
            priv[t.text] = "a pointer to the %s embedded in '%s', which is %s" % (
                toks[k + 5].text, toks[k + 3].text, priv[toks[k + 3].text])
            for j in ids.get(t.text, ()):
                if k < j - 3 < hi - 6:
                    heapq.heappush(todo, j - 3)

    def _private_root(self, a, priv):
        """The private object a's base lies inside: the root itself
        (p->f, x.f, arr[i].f) or structs embedded in it (p->emb.f), not
        objects it points to (p->ptr->f)."""
        root = _root(a.base)
        acc = self.P.container_accessors.get(root)
        if root not in priv and acc is None and \
                not any(n.startswith(root + ".") for n in priv):
            return None
        toks = csrc.tokenize(a.base)
        while toks and toks[0].text in ("(", "*", "&"):
            toks = toks[1:]
        parts = [[]]
        depth = 0
        for t in toks:
            if t.text in "([":
                depth += 1
            elif t.text in ")]":
                depth -= 1
            if depth == 0 and t.text in ("->", "."):
                parts.append([])
                continue
            parts[-1].append(t)
        head = [t.text for t in parts[0]]
        if acc is not None:
            # FOO_I(inode)->f: the struct that embeds the private inode;
            # FOO_I(args.inode)->f with a fresh inode in a stack struct
            if len(head) == 6 and head[1] == "(" and head[3] == "." and head[5] == ")" and \
                    "%s.%s" % (head[2], head[4]) in priv:
                return "%s.%s" % (head[2], head[4])
            if len(head) != 4 or head[1] != "(" or head[3] != ")" or head[2] not in priv:
                return None
            root, st = head[2], acc
        else:
            if head[:1] != [root] or (len(head) > 1 and head[1] != "["):
                return None
            st = self._decl_types(a.func).get(root)
        path = root
        for p in parts[1:]:
            # 'x->m[i].f': an index only into what an owned pointer points to
            index = len(p) > 3 and p[1].text == "[" and p[-1].text == "]"
            if (len(p) != 1 and not index) or st is None:
                return None
            m = self.src.member(st, p[0].text)
            path += "." + p[0].text
            if m is not None and m.pointer and path in priv and not m.array and not index:
                # x.ptr->f where x.ptr holds an object fresh in this function
                root = path
            elif m is not None and m.pointer and self.owned_pointer(st, p[0].text):
                pass                    # x->m->f: m points to x's own part
            elif m is None or m.pointer or m.array or index:
                return None
            st = csrc.struct_name(m.type)
        # 'x->p->f' with only x.p private (unpublished.py: a fresh object
        # just stored in a member): x's own fields are not
        return root if root in priv else None

    def _private_why(self, a):
        """Why a's object is private to its function (allocated there and
        not yet published, a private parameter, detached from its tree at
        this point), or None."""
        priv = self._private_of(a.func)
        root = self._private_root(a, priv)
        if root is not None and self._fresh_at(a.func, root, a.tok):
            return "'%s' is %s" % (root, priv[root][0])
        if a.tok is not None:
            det = {n: (d[2], "alloc") for n, d in self._detached(a.func).items()
                   if d[0] < a.tok < d[1]}
            root = self._private_root(a, det) if det else None
            if root is not None:
                # the window says how: 'detached: ...', 'not yet published: ...'
                return "'%s' is %s" % (root, det[root][0])
            det = {n: (why, "alloc") for n, lo, hi, why in self._stack_unlinked(a.func)
                   if lo < a.tok < hi}
            root = self._private_root(a, det) if det else None
            if root is not None:
                return "'%s' is %s" % (root, det[root][0])
        return None


def _calls_of(ids, named, end):
    """The token indices below end, in order, of the identifiers of ids
    (syntax.py _ids()) whose names named() accepts."""
    return sorted(k for name, ks in ids.items() if named(name) for k in ks if k < end)

