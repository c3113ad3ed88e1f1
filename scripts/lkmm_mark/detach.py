# SPDX-License-Identifier: GPL-2.0-only
"""Ownership, part 3: objects a function takes out of the shared structures
(windows of tokens in which the function owns them).  Detached: unlinked
under a lock from every list or tree link its struct has, or by a call to
a function that does so (_detachers()); stolen: 'x = p->f; p->f = NULL;'
under a lock when p->f is the only pointer to such objects; off its only
list for good, as a lockless assertion says; a stack struct the function
takes off its only list, or that a declared wait (policies 'unlink_waits')
returns after another task took off it.  _detached() also gathers the windows of
unpublished.py (new, not yet published).

Reads .src, .flows (the locks at the unlink), .P (unlinkers,
link_removers, link_tests, assertions, non_retaining), .addr_taken,
.owned_params (owners.py: owner_params() runs first), .escaping
(escapes.py).  Sets only its caches (_detcache, reset by
private_params(); _stackunl_cache, _detachcache, _entrycache,
_solecache).  A window that runs too far (the object linked again
unseen) would hide a race: private.py and exclusions.py turn a window
into the 'private' exclusion.
"""
import collections
import re

from . import csrc
from .locks import KEYWORDS
from .tokutil import _in_loop, _is_label

_LINK_TYPES = {"struct rb_node", "struct list_head", "struct hlist_node", "struct llist_node"}


class Detach:
    def _detached(self, fn):
        """name -> (from, to, why): objects fn detaches from the shared
        structure that indexed them, and owns from token index `from`
        until `to`.  The object is unlinked with 'rb_erase(&x->node, ...)'
        (unlink_functions) under a lock fn holds, and every list or tree
        link its struct has is unlinked in fn too: other tasks found it
        only through those links.  The ownership ends where x is linked
        again (&x->link handed to a call), handed to code that keeps it,
        or the name is assigned again.  Not detached: an object that
        keeps a link (a block group leaves the block group tree but stays
        on other lists, and other tasks hold references to it), nor
        'x = p->f; p->f = NULL;' (nothing says p->f was the only way to x).
        A call to a function that detaches its parameter so and keeps it
        detached to its end (_detachers(): foo_delete_head()) is an
        unlink of the argument.  Links are rb_nodes and the list members
        the target links as entries; a list head the object anchors is no
        way to it.  Before the unlink the object is shared as usual."""
        key = (fn.file, fn.body_start)
        c = self._detcache.get(key)
        if c is not None:
            return c
        out = {}
        self._detcache[key] = out
        self._unlinked_here(fn, out)
        self._unlinked_by_calls(fn, out)
        for name, d in self._new_windows(fn).items():
            out.setdefault(name, d)
        for name, d in self._unpublished_params(fn).items():
            out.setdefault(name, d)
        for name, d in self._unpublished_stack(fn).items():
            out.setdefault(name, d)
        for name, d in self._fresh_members_here(fn).items():
            out.setdefault(name, d)
        for name, d in self._initialised_here(fn).items():
            out.setdefault(name, d)
        for name, d in self._made_out(fn).items():
            out.setdefault(name, d)
        for name, d in self._stolen(fn).items():
            out.setdefault(name, d)
        for name, d in self._asserted_off_list(fn).items():
            out.setdefault(name, d)
        return self._cut_at_labels(fn, out)

    def _unlinked_here(self, fn, out):
        """Adds to out the objects fn unlinks under a lock from every list
        or tree link of their struct (_detached())."""
        toks = self.src.toks[fn.file]
        lo, hi = fn.body_start, fn.body_end
        res = self.flows.get((fn.file, fn.name))
        ids = self._ids(fn)
        for k in sorted(k for n in ids.keys() & self.P.unlinkers for k in ids[n] if k < hi - 5):
            t = toks[k]
            if not (toks[k + 1].text == "(" and
                    toks[k + 2].text == "&" and toks[k + 3].kind == "id" and
                    toks[k + 4].text == "->" and toks[k + 5].kind == "id"):
                continue
            name = toks[k + 3].text
            st = res.at.get(k + 5) if res is not None else None
            if name in out or st is None or not any(x != "irqs-off" for x in st.held):
                continue
            struct, links = self._var_links(fn, name)
            if not links:
                continue
            # the links fn unlinks (anywhere in fn: 'if (!list_empty(&x->l))
            # list_del(&x->l)' after the rb_erase counts)
            gone = set()
            for j in range(lo + 1, hi - 5):
                if toks[j].text in self.P.unlinkers or toks[j].text in self.P.link_removers:
                    if toks[j + 1].text == "(" and toks[j + 2].text == "&" and \
                            toks[j + 3].text == name and toks[j + 4].text == "->":
                        gone.add(toks[j + 5].text)
            if not links <= gone:
                continue
            end = self._detached_end(fn, name, k, links)
            out[name] = (k, end, "detached: unlinked here by %s() under a lock, and no list "
                         "or tree link of struct %s is left" % (t.text, struct))

    def _unlinked_by_calls(self, fn, out):
        """Adds to out the arguments fn hands to a function that detaches
        them (_detachers())."""
        toks = self.src.toks[fn.file]
        hi = fn.body_end
        # a call to a function that detaches the object it is passed
        # (foo_delete_head(): rb_erase_cached() of the head's only
        # link under the locks it asserts) detaches the argument here
        self._detachers()
        # the names of the detachers known so far (_detachers() may be
        # filling its table and be asking this): a call by another name
        # reaches none
        known = self._detachnames
        ids = self._ids(fn)
        for k in sorted(k for n in ids.keys() & known for k in ids[n] if k < hi - 2):
            if toks[k + 1].text != "(" or toks[k - 1].text in (".", "->"):
                continue
            targets = self._callee(fn, toks[k].text)
            if not targets or toks[k].text in self.addr_taken:
                continue
            idx = None
            for tg in targets:
                d = self._detachers().get((tg.file, tg.name))
                idx = d if idx is None else (idx & d if d else set())
                if not idx:
                    break
            if not idx:
                continue
            args = self._call_args(fn.file, k) or []
            for n in sorted(idx):
                if n >= len(args) or args[n][1] - args[n][0] != 1:
                    continue
                name = toks[args[n][0]].text
                if name in out:
                    continue
                struct, links = self._var_links(fn, name)
                if not links:
                    continue
                out[name] = (k, self._detached_end(fn, name, k + 1, links),
                             "detached: unlinked here by %s() under a lock, which takes it "
                             "off every list or tree of struct %s" % (toks[k].text, struct))

    def _detached_end(self, fn, name, k, links):
        """Where fn stops owning the object it detached at toks[k]."""
        toks = self.src.toks[fn.file]
        lo, hi = fn.body_start, fn.body_end
        end = hi
        for j in range(k + 1, hi - 2):
            x = toks[j]
            if x.text != name or toks[j - 1].text in (".", "->"):
                continue
            nx = toks[j + 1].text
            if nx == "=" or (toks[j - 1].text == "=" and nx not in ("->", "[")):
                end = j                          # reassigned, or stored
                break
            if toks[j - 1].text == "&" and nx == "->" and toks[j + 2].text in links:
                c = self._call_of(toks, j - 1, lo)
                if c not in self.P.unlinkers and c not in self.P.link_removers and \
                        c not in self.P.link_tests and c not in self.P.non_retaining:
                    end = j                      # linked again (or may be)
                    break
            if nx in (",", ")") and toks[j - 1].text in (",", "("):
                c = self._call_arg(toks, j, lo)
                if c is not None and c[2] and c[0] not in KEYWORDS and \
                        self._arg_escapes(fn, c[0], c[1]):
                    end = j                      # handed to code that keeps it
                    break
        return end

    def _var_links(self, fn, name):
        """The struct of the variable name and its links."""
        struct = self._decl_types(fn).get(name)
        return struct, self._struct_links(fn, struct)

    def _cut_at_labels(self, fn, out):
        """A window is a range of tokens: it ends at a label that a goto
        from outside it jumps to (a path that did not unlink the object
        joins there: 'goto out' before the rb_erase(); a path that
        published it jumps back: 'goto again' after the list_add())."""
        toks = self.src.toks[fn.file]
        hi = fn.body_end
        gotos = [(g, toks[g + 1].text) for g in self._ids(fn).get("goto", ()) if g < hi - 1]
        for name, (a, b, why) in list(out.items()):
            for i in range(a + 1, b):
                if _is_label(toks, i) and any(
                        lbl == toks[i].text and not a <= g < b for g, lbl in gotos):
                    out[name] = (a, i, why)
                    break
        return out

    def _stack_unlinked(self, fn):
        """[(name, from, to, why)], apart from _detached() (the same struct
        has its not-yet-published window there): a struct on fn's stack
        that fn itself takes off its only list under a lock (a context a
        sync function links for others to see, then unlinks).  Other
        tasks reached it only through that link and, as it lives on this
        task's stack, hold no reference that outlives
        their critical section; fn owns it again up to the end of the
        block that holds the unlink (a path that skipped it joins after),
        until it links it or hands its address anew.  Not when the unlink
        is the body of an if, else or loop without braces, or in a loop.
        One struct may have several windows (taken off its list on two
        paths)."""
        key = (fn.file, fn.body_start)
        c = self._stackunl_cache.get(key)
        if c is not None:
            return c
        out = []
        self._stackunl_cache[key] = out
        toks = self.src.toks[fn.file]
        lo, hi = fn.body_start, fn.body_end
        res = self.flows.get((fn.file, fn.name))
        types = self._decl_types(fn)
        stack = self._stack_structs(fn)
        if not stack:
            return out
        # the calls _unlink_at() looks at, found by name first
        names = set(self.P.unlinkers) | set(self.P.link_removers) | set(self.P.unlink_waits)
        for k in range(lo + 1, hi - 6):
            if toks[k].text not in names:
                continue
            u = self._unlink_at(fn, k, stack)
            if u is None:
                continue
            name, link, at, how = u
            st = res.at.get(at) if res is not None else None
            if st is None or not any(x != "irqs-off" for x in st.held) or _in_loop(toks, lo, k):
                continue
            struct = types.get(name)
            if self._struct_links(fn, struct) != {link}:
                continue
            end = self._stack_unlink_end(fn, k, name)
            if end is None:
                continue
            why = ("detached: a struct on this task's stack, taken off its only list %s: "
                   "other tasks reached it only through that link" % how)
            out.append((name,) + self._cut_at_labels(fn, {name: (k, end, why)})[name])
        return out

    def _unlink_at(self, fn, k, stack):
        """(name, link, token to ask the locks at, how) when toks[k] takes the
        struct name on fn's stack off its list: an unlink of '&name.link',
        or a declared wait (policies 'unlink_waits') handed a member of it,
        'wait(q, name.id)', which returns only once another task, under
        the lock the wait runs with, took name off its only list; else
        None."""
        toks = self.src.toks[fn.file]
        t = toks[k]
        if (t.text in self.P.unlinkers or t.text in self.P.link_removers) and \
                toks[k + 1].text == "(" and toks[k + 2].text == "&" and \
                toks[k + 3].text in stack and toks[k + 4].text == "." and \
                toks[k + 5].kind == "id" and toks[k + 6].text == ")":
            return toks[k + 3].text, toks[k + 5].text, k + 5, "by %s() under a lock" % t.text
        n = self.P.unlink_waits.get(t.text)
        if n is None or toks[k + 1].text != "(" or toks[k - 1].text in (".", "->"):
            return None
        args = self._call_args(fn.file, k) or []
        if n >= len(args) or args[n][1] - args[n][0] != 3:
            return None
        a = args[n][0]
        if toks[a].text not in stack or toks[a + 1].text != "." or toks[a + 2].kind != "id":
            return None
        links = self._struct_links(fn, self._decl_types(fn).get(toks[a].text))
        how = "by the task %s() waits for, under the lock the wait holds" % t.text
        return (toks[a].text, next(iter(links)), a + 2, how) if len(links) == 1 else None

    def _stack_unlink_end(self, fn, k, name):
        """Where fn stops owning the stack struct name it took off its list
        at toks[k] (_stack_unlinked()): the end of the block that holds the
        unlink, or where fn links it or hands its address anew; None when
        the unlink is the body of an if, else or loop without braces."""
        toks = self.src.toks[fn.file]
        lo, hi = fn.body_start, fn.body_end
        depth, j = 0, k - 1
        while j > lo and not (toks[j].text in (";", "{", "}") and depth == 0):
            depth += {")": 1, "(": -1}.get(toks[j].text, 0)
            j -= 1
        if toks[j + 1].text in ("if", "else", "for", "while", "do") or \
                toks[k - 1].text in (")", "else"):
            return None
        depth, b = 0, k - 1
        while b > lo:
            if toks[b].text == "}":
                depth += 1
            elif toks[b].text == "{":
                if depth == 0:
                    break
                depth -= 1
            b -= 1
        end = csrc.match_paren(toks, b) if b > lo else hi
        for j in range(k + 7, end):
            if toks[j].text != name or toks[j - 1].text in (".", "->"):
                continue
            if toks[j + 1].text == "=" or (toks[j - 1].text == "&" and (
                    toks[j + 1].text != "." or self._call_of(toks, j - 1, lo) not in
                    self.P.unlinkers | self.P.link_removers | self.P.link_tests)):
                end = j
                break
        return end

    def _asserted_off_list(self, fn):
        """name -> (from, to, why): an object the calling task owns (an
        owner parameter, _owned_params()) whose struct has one link, which
        fn asserts empty without holding a lock: 'ASSERT(list_empty(
        &ticket->list))' in a function handed its own ticket.  Other tasks reach
        such an object only through that link, under the lock that guards
        the list, and take it off in the same critical section as their
        last access (a stack object must be left alone once it is off the
        list: its task may return).  An assertion made without the lock
        says the object is off the list, for good, from the return of the
        last call fn handed it to (the wait for the grant) on; fn owns it
        from there until it hands it to a call again.  Not in a loop, and
        not without such a call before the assertion."""
        out = {}
        owned = getattr(self, "owned_params", None)
        assert owned is not None, "_asserted_off_list() before owner_params()"
        owned = owned.get((fn.file, fn.name), {})
        if not owned:
            return out
        toks = self.src.toks[fn.file]
        lo, hi = fn.body_start, fn.body_end
        res = self.flows.get((fn.file, fn.name))
        types = self._decl_types(fn)
        for k in range(lo + 1, hi - 9):
            if toks[k].text not in self.P.assertions or toks[k + 1].text != "(" or \
                    toks[k + 2].text not in self.P.link_tests or toks[k + 3].text != "(" or \
                    toks[k + 4].text != "&" or toks[k + 5].text not in owned or \
                    toks[k + 6].text != "->" or toks[k + 8].text != ")" or \
                    toks[k + 9].text != ")":
                continue
            name, link = toks[k + 5].text, toks[k + 7].text
            st = types.get(name)
            if name in out or self._struct_links(fn, st) != {link} or _in_loop(toks, lo, k):
                continue
            state = res.at.get(k + 7) if res is not None else None
            if state is None or any(x != "irqs-off" for x in state.held):
                continue
            w = self._off_list_window(fn, k, name)
            if w is None:
                continue
            start, end = w
            out[name] = (start[0], end, "detached: the lockless %s(%s(&%s->%s)) at line %d "
                         "says it is off its only list for good once the calls it was handed "
                         "to before (the last: %s()) returned, and the task owns it (%s)" % (
                             toks[k].text, toks[k + 2].text, name, link, toks[k].line,
                             start[1], owned[name]))
        return out

    def _off_list_window(self, fn, k, name):
        """((index, callee) of the last call before toks[k] that fn hands
        name to, where fn stops owning it after toks[k]) for the assertion
        at toks[k] (_asserted_off_list()), or None without such a call."""
        toks = self.src.toks[fn.file]
        lo, hi = fn.body_start, fn.body_end

        def handed(j):
            """toks[j] is name as a whole argument of a call (not an
            assertion, a link test or a diagnostic)."""
            if toks[j].text != name or toks[j - 1].text not in (",", "(") or \
                    toks[j + 1].text not in (",", ")"):
                return None
            c = self._call_of(toks, j, lo)
            if c is None or c in KEYWORDS or c in self.P.assertions or \
                    c in self.P.link_tests or self.P.is_diag(c):
                return None
            return c
        start = None
        for j in range(k - 1, lo, -1):
            c = handed(j)
            if c is not None:
                start = (j, c)
                break
        if start is None:
            return None
        end = hi
        for j in range(k + 10, hi):
            if toks[j].text != name or toks[j - 1].text in (".", "->"):
                continue
            if handed(j) is not None or toks[j + 1].text == "=" or (
                    toks[j - 1].text == "&" and self._call_of(toks, j - 1, lo) not in
                    self.P.link_tests | self.P.link_removers | self.P.unlinkers):
                end = j                 # handed on, reassigned or linked anew
                break
        return start, end

    def _detachers(self):
        """(file, function) -> indices of the parameters the function
        detaches and keeps detached to its end (not reassigned, linked
        again or handed on)."""
        c = getattr(self, "_detachcache", None)
        if c is not None:
            return c
        c = self._detachcache = {}
        self._detachnames = set()
        for key, fn in self.src.funcs.items():
            names = self.params(fn)
            if not names or not self.P.unlinkers & self._ids(fn).keys():
                continue
            d = self._detached(fn)
            idx = {n for n, p in enumerate(names) if p and p in d and d[p][1] == fn.body_end
                   and not self._reassigned(fn, p)}
            if idx:
                c[key] = idx
                self._detachnames.add(fn.name)
        return c

    _ENTRY_ADD = ("list_add", "list_add_tail", "list_move", "list_move_tail", "list_add_rcu",
                  "list_add_tail_rcu", "hlist_add_head", "hlist_add_head_rcu", "llist_add")

    def _entry_names(self):
        """Names of list members the target links into a list as entries
        ('list_add(&x->NAME, head)', 'list_del(&x->NAME)'), as opposed to
        list heads other entries hang on (the anchor a delayed ref head
        keeps its refs on)."""
        c = getattr(self, "_entrycache", None)
        if c is not None:
            return c
        c = self._entrycache = set()
        calls = set(self._ENTRY_ADD) | set(self.P.link_removers)
        for f, toks in self.src.toks.items():
            for k in range(len(toks) - 5):
                if toks[k].text in calls and toks[k + 1].text == "(" and \
                        toks[k + 2].text == "&" and toks[k + 3].kind == "id" and \
                        toks[k + 4].text in ("->", ".") and toks[k + 5].kind == "id" and \
                        toks[k + 6].text in (",", ")"):
                    c.add(toks[k + 5].text)
        return c

    def _links_of(self, members):
        """The members through which other tasks can find an object of a
        struct: its rb_nodes, and the list members used as entries (a list
        head it only anchors is no way to it)."""
        entries = self._entry_names()
        return {m for m, mem in members.items() if not mem.pointer and not mem.array and
                mem.type in _LINK_TYPES and (mem.type == "struct rb_node" or m in entries)}

    def _struct_links(self, fn, struct):
        """_links_of() the struct as fn's file declares it (a local
        struct shadows a target-wide one of the same name)."""
        return self._links_of(self.src.file_structs.get(fn.file, {}).get(struct) or
                              self.src.structs.get(struct) or {})

    def _sole_pointers(self):
        """struct T -> (S, F) when S.F is the only member of any struct of
        the target that can point to a T, and T has no list or tree link,
        reference count or lock of its own: other tasks find a T only
        through S.F."""
        c = getattr(self, "_solecache", None)
        if c is not None:
            return c
        refs = collections.defaultdict(set)
        for s, members in self.src.structs.items():
            for m in (members or {}).values():
                t = csrc.struct_name(m.type)
                if t is not None:
                    refs[t].add((s, m.name, m.pointer and not m.array))
        c = {}
        for t, where in refs.items():
            if len(where) != 1:
                continue
            s, f, ptr = next(iter(where))
            members = self.src.structs.get(t) or {}
            if not ptr or not members:
                continue
            if any(m.type in _LINK_TYPES or re.search(r"\b(refcount_t|atomic_t|atomic64_t|"
                                                       r"spinlock_t|rwlock_t)\b|"
                                                       r"\bstruct (mutex|rw_semaphore)\b",
                                                       m.type) for m in members.values()):
                continue
            c[t] = (s, f)
        self._solecache = c
        return c

    def _stolen(self, fn):
        """name -> (from, to, why) for 'x = p->f; ... p->f = NULL;' (or x
        from a helper handed p) under the lock fn holds at the clearing
        store, when p->f is the only way other tasks find an object of x's
        type (_sole_pointers()): from the store on, x belongs to fn until
        it is assigned again or stored somewhere."""
        out = {}
        toks = self.src.toks[fn.file]
        lo, hi = fn.body_start, fn.body_end
        res = self.flows.get((fn.file, fn.name))
        sole = self._sole_pointers()
        if res is None or not sole:
            return out
        types = None
        for k in (j - 4 for j in self._ids(fn).get("NULL", ()) if lo + 1 <= j - 4 < hi - 5):
            if not (toks[k].kind == "id" and toks[k + 1].text == "->" and
                    toks[k + 2].kind == "id" and toks[k + 3].text == "=" and
                    toks[k + 4].text == "NULL" and toks[k + 5].text == ";" and
                    toks[k - 1].text in (";", "{", "}", ")")):
                continue
            p, f = toks[k].text, toks[k + 2].text
            st = res.at.get(k + 2)
            if st is None:
                continue
            # a lock held here: taken in fn, or held on entry and released
            # after the store ('head->op = NULL; spin_unlock(...)')
            taken = {n for (e, op, n) in res.events if op == "acquire" and e < k}
            if not any(x != "irqs-off" for x in st.held) and \
                    not any(op == "release" and e > k and n not in taken
                            for (e, op, n) in res.events):
                continue
            if types is None:
                types = self._decl_types(fn)
            ptype = types.get(p)
            # the local that took the object before the store
            r = self._taker(fn, k, p, f, ptype, types, sole)
            if r is not None:
                x, tx, end = r
                out[x] = (k, end, "detached: taken from %s->%s, which is set to NULL here under a "
                          "lock, and %s.%s is the only member that points to a struct %s"
                          % (p, f, ptype, f, tx))
        return out

    def _taker(self, fn, k, p, f, ptype, types, sole):
        """(x, its struct, where fn stops owning it) for the local x that
        took p->f (or the result of a helper handed p) before the store
        'p->f = NULL;' at toks[k] (_stolen()), or None."""
        toks = self.src.toks[fn.file]
        lo, hi = fn.body_start, fn.body_end
        for j in range(k - 1, lo, -1):
            t = toks[j]
            if t.kind != "id" or toks[j + 1].text != "=" or toks[j - 1].text in ("->", "."):
                continue
            x = t.text
            tx = types.get(x)
            if tx is None or sole.get(tx) != (ptype, f):
                continue
            rhs = toks[j + 2:j + 6]
            took = [r.text for r in rhs[:4]] == [p, "->", f, ";"]
            if not took and rhs and rhs[0].kind == "id" and len(rhs) > 2 and \
                    rhs[1].text == "(":
                args = self._call_args(fn.file, j + 2) or ()
                took = any(b - a == 1 and toks[a].text == p for a, b in args)
            if not took:
                continue
            end = hi
            for q in range(k + 6, hi - 1):
                if toks[q].text != x or toks[q - 1].text in ("->", "."):
                    continue
                if toks[q + 1].text == "=" or (toks[q - 1].text == "=" and
                                               toks[q + 1].text not in ("->", "[")):
                    end = q                  # assigned again, or stored
                    break
            return x, tx, end
        return None

    def _detached_at(self, fn, name, k):
        d = self._detached(fn).get(name)
        return d[2] if d is not None and d[0] < k < d[1] else None
