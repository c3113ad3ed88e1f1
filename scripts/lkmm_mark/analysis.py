# SPDX-License-Identifier: GPL-2.0-only
"""Stages 2 and 3: lock context, protection inference, verdicts.

Input: the access facts of cocci/facts.cocci and the sources (for token
order).  Output: a Plan, one verdict per access with a rule id from
policies/policies.json and a reason citing the evidence.
"""
import collections
import re

from . import csrc
from .locks import How, KEYWORDS
from .accesses import Accesses
from .callers import Callers, _BY_CALLERS
from .callgraph import CallGraph
from .scan import SourceScan
from .syntax import Syntax
from .source import Access, Source, STORE_MACROS, _short
from .tokutil import _in_loop, _is_label, _stmt_end, _reaches, _root, \
    _split, _returns

__all__ = ["Analysis", "Access", "Source", "STORE_MACROS", "PHASE_TAG"]


class Analysis(Accesses, Syntax, SourceScan, CallGraph, Callers):
    def __init__(self, tree, target, facts, policies, files, src=None):
        self.tree = tree
        self.target = target.rstrip("/")
        self.P = policies
        self.src = src if src is not None else Source(tree, files)
        self.facts = facts
        self.accesses = []
        self.not_analysed = []
        self.fields = {}
        self._idcache = {}
        self._argcache = {}
        self._ppcache = {}
        self._ctxmemo = {}
        self.ctx_locked = {}
        self._stackunl_cache = {}
        self._wxmemo = {}
        self._paramcache = {}
        self._ftypes = {}
        self._stackcache = {}
        self._unpubcache = {}
        self._zhcache = {}
        self.owner_read = {}
        self.lost_ids = set()

    def param_escapes(self):
        """(file, function, index) of parameters whose object may outlive
        the call or reach other threads: stored, returned, or passed to code
        outside the target (fixed point over the target's call graph)."""
        keep = self.P.non_retaining
        esc = set()
        deps = {}
        for key, fn in self.src.funcs.items():
            for n, p in enumerate(self.params(fn)):
                if not p:
                    esc.add(key + (n,))
                    continue
                d = []
                toks = self.src.toks[fn.file]
                for k1 in self._ids(fn).get(p, ()):
                    # &p->node linked into a shared list or tree
                    k = k1 - 1
                    if toks[k].text == "&" and k1 + 1 < fn.body_end - 1 and \
                            toks[k1 + 1].text in ("->", ".") and \
                            self._published(toks, k, fn.body_start):
                        esc.add(key + (n,))
                for kind, info in self._bare_uses(fn, p):
                    if kind in ("stored", "returned"):
                        esc.add(key + (n,))
                    elif kind == "other-arg" and info not in keep:
                        esc.add(key + (n,))
                    elif kind == "arg":
                        callee, m = info
                        if callee in keep:
                            continue
                        targets = self._callee(fn, callee)
                        if not targets or callee in self.addr_taken:
                            esc.add(key + (n,))
                        d += [(t.file, t.name, m) for t in targets]
                deps[key + (n,)] = d
        changed = True
        while changed:
            changed = False
            for k, d in deps.items():
                if k not in esc and any(x in esc for x in d):
                    esc.add(k)
                    changed = True
        self.escaping = esc

    def _arg_escapes(self, caller, callee, n):
        keep = self.P.non_retaining
        if callee in keep or callee in self.lockfns:
            return False
        targets = self._callee(caller, callee)
        if not targets or callee in self.addr_taken:
            return True
        return any((t.file, t.name, n) in self.escaping for t in targets)

    def _arg_private(self, caller, k, n):
        """Why argument n of the call at toks[k] is an object private to
        the caller, with the kind of its origin; or None."""
        toks = self.src.toks[caller.file]
        args = self._call_args(caller.file, k)
        if args is None or n >= len(args):
            return None
        a, b = args[n]
        if b - a == 1 and toks[a].text == "NULL":
            return ("no object (NULL)", "alloc")
        if b - a == 2 and toks[a].text == "&":
            r = self._private_name(caller, toks[a + 1].text)
            if r is not None and r[1] == "alloc" and not r[0].startswith("detached"):
                # &x of a pointer to a private object: the callee reaches
                # that object through '*p' (btrfs_add_extent_mapping(...,
                # &em, ...) on an em btrfs_get_extent() just allocated)
                return ("the address of '%s', which is %s" % (toks[a + 1].text, r[0]), "ptr")
            if r is None:
                # a struct on the caller's stack before the first statement
                # that may let another task reach it: the callee, which
                # does not keep the address (else this call would be that
                # statement), runs while it is still the caller's alone
                # (btrfs_init_log_ctx(&ctx, inode) before the fsync links
                # ctx into the root's log_ctxs)
                w = self._unpublished_stack_cut(caller).get(toks[a + 1].text)
                if w is not None and w[0] < a < w[1]:
                    return ("'%s', a struct on %s()'s stack, %s" % (
                        toks[a + 1].text, caller.name,
                        w[2].replace("a stack object not yet published: ",
                                     "not yet published: ")), "stack")
            return r if r is not None and r[0] == "stack object" else None
        if b - a == 4 and toks[a].text == "&" and toks[a + 1].kind == "id" and \
                toks[a + 2].text in ("->", ".") and toks[a + 3].kind == "id":
            # &x->member / &x.member: a struct inside the private object
            # x (init_delayed_ref_common(fs_info, &ref->node, ...) on a
            # ref just allocated)
            r = self._private_name(caller, toks[a + 1].text)
            if r is not None and (r[0] == "stack object") == (toks[a + 2].text == ".") and \
                    self._fresh_at(caller, toks[a + 1].text, a):
                return r
            return None
        if b - a == 1:
            r = self._private_name(caller, toks[a].text)
            if r is not None and not self._fresh_at(caller, toks[a].text, a):
                return None
            if r is None:
                why = self._detached_at(caller, toks[a].text, k)
                return (why, "alloc") if why else None
            return r if r[0] != "stack object" else None
        return None

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
            r = self._ptr_locals(fn).get(name)
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
        (copy_free_space_cache() empties a stack ctl)."""
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
        # device list into a new fs_devices) may still be reachable from
        # other structures: only containers filled with their own entries
        for k in range(lo, hi - 2):
            if toks[k].text.startswith(("list_splice", "list_move", "list_add")) and \
                    toks[k + 1].text == "(":
                for a, b in self._call_args(fn.file, k) or ():
                    x = head(a)
                    if x is not None:
                        priv = {n: w for n, w in priv.items() if n != x}
        nodes, out = {}, {}
        for k in range(lo, hi - 4):
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
        for k in range(lo, hi - 2):
            n = self._FOREACH.get(toks[k].text)
            if n is None or toks[k + 1].text != "(":
                continue
            args = self._call_args(fn.file, k)
            if args and len(args) > n and args[0][1] - args[0][0] == 1:
                x = head(args[n][0])
                if x is not None:
                    out[toks[args[0][0]].text] = (
                        "an entry of the list of %s, which is %s" % (x, priv[x][0]), priv[x][1])
        return out

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
        detached to its end (_detachers(): btrfs_delete_ref_head()) is an
        unlink of the argument.  Links are rb_nodes and the list members
        the target links as entries; a list head the object anchors is no
        way to it.  Before the unlink the object is shared as usual."""
        key = (fn.file, fn.body_start)
        c = self._detcache.get(key)
        if c is not None:
            return c
        out = {}
        self._detcache[key] = out
        toks = self.src.toks[fn.file]
        lo, hi = fn.body_start, fn.body_end
        res = self.flows.get((fn.file, fn.name))

        def end_of(name, k, links):
            """Where fn stops owning the object it detached at toks[k]."""
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

        types = []

        def links_of(name):
            """The struct of the variable name and its links."""
            if not types:
                types.append(self._decl_types(fn))
            struct = types[0].get(name)
            return struct, self._struct_links(fn, struct)

        for k in range(lo + 1, hi - 5):
            t = toks[k]
            if not (t.text in self.P.unlinkers and toks[k + 1].text == "(" and
                    toks[k + 2].text == "&" and toks[k + 3].kind == "id" and
                    toks[k + 4].text == "->" and toks[k + 5].kind == "id"):
                continue
            name = toks[k + 3].text
            st = res.at.get(k + 5) if res is not None else None
            if name in out or st is None or not any(x != "irqs-off" for x in st.held):
                continue
            struct, links = links_of(name)
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
            end = end_of(name, k, links)
            out[name] = (k, end, "detached: unlinked here by %s() under a lock, and no list "
                         "or tree link of struct %s is left" % (t.text, struct))
        # a call to a function that detaches the object it is passed
        # (btrfs_delete_ref_head(): rb_erase_cached() of the head's only
        # link under the locks it asserts) detaches the argument here
        for k in range(lo + 1, hi - 2):
            if toks[k].kind != "id" or toks[k + 1].text != "(" or toks[k - 1].text in (".", "->"):
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
                struct, links = links_of(name)
                if not links:
                    continue
                out[name] = (k, end_of(name, k + 1, links),
                             "detached: unlinked here by %s() under a lock, which takes it "
                             "off every list or tree of struct %s" % (toks[k].text, struct))
        for name, d in self._new_windows(fn).items():
            out.setdefault(name, d)
        for name, d in self._unpublished_params(fn).items():
            out.setdefault(name, d)
        for name, d in self._unpublished_stack(fn).items():
            out.setdefault(name, d)
        for name, d in self._stolen(fn).items():
            out.setdefault(name, d)
        for name, d in self._asserted_off_list(fn).items():
            out.setdefault(name, d)
        return self._cut_at_labels(fn, out)

    def _cut_at_labels(self, fn, out):
        """A window is a range of tokens: it ends at a label that a goto
        from outside it jumps to (a path that did not unlink the object
        joins there: 'goto out' before the rb_erase(); a path that
        published it jumps back: 'goto again' after the list_add())."""
        toks = self.src.toks[fn.file]
        lo, hi = fn.body_start, fn.body_end
        gotos = [(g, toks[g + 1].text) for g in range(lo, hi - 1) if toks[g].text == "goto"]
        for name, (a, b, why) in list(out.items()):
            for i in range(a + 1, b):
                if _is_label(toks, i) and any(
                        lbl == toks[i].text and not a <= g < b for g, lbl in gotos):
                    out[name] = (a, i, why)
                    break
        return out

    def _stack_unlinked(self, fn):
        """name -> (from, to, why), apart from _detached() (the same struct
        has its not-yet-published window there): a struct on fn's stack
        that fn itself takes off its only list under a lock (btrfs_sync_log()'s
        root_log_ctx).  Other tasks reached it only through that link and,
        as it lives on this task's stack, hold no reference that outlives
        their critical section; fn owns it again up to the end of the
        block that holds the unlink (a path that skipped it joins after),
        until it links it or hands its address anew.  Not when the unlink
        is the body of an if, else or loop without braces, or in a loop."""
        key = (fn.file, fn.body_start)
        c = self._stackunl_cache.get(key)
        if c is not None:
            return c
        out = {}
        self._stackunl_cache[key] = out
        toks = self.src.toks[fn.file]
        lo, hi = fn.body_start, fn.body_end
        res = self.flows.get((fn.file, fn.name))
        types = self._decl_types(fn)
        stack = self._stack_structs(fn)
        for k in range(lo + 1, hi - 6):
            t = toks[k]
            if not ((t.text in self.P.unlinkers or t.text in self.P.link_removers) and
                    toks[k + 1].text == "(" and toks[k + 2].text == "&" and
                    toks[k + 3].text in stack and toks[k + 4].text == "." and
                    toks[k + 5].kind == "id" and toks[k + 6].text == ")"):
                continue
            name, link = toks[k + 3].text, toks[k + 5].text
            st = res.at.get(k + 5) if res is not None else None
            if name in out or st is None or not any(x != "irqs-off" for x in st.held) or \
                    _in_loop(toks, lo, k):
                continue
            struct = types.get(name)
            if self._struct_links(fn, struct) != {link}:
                continue
            depth, j = 0, k - 1
            while j > lo and not (toks[j].text in (";", "{", "}") and depth == 0):
                depth += {")": 1, "(": -1}.get(toks[j].text, 0)
                j -= 1
            if toks[j + 1].text in ("if", "else", "for", "while", "do") or \
                    toks[k - 1].text in (")", "else"):
                continue
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
            out[name] = (k, end, "detached: a struct on this task's stack, taken off its only "
                         "list by %s() under a lock: other tasks reached it only through "
                         "that link" % t.text)
        return self._cut_at_labels(fn, out)

    def _new_windows(self, fn):
        """name -> (from, to, why): an object fn holds while a flag says it
        is new (policies 'new_object_flags': an inode marked I_NEW, which
        iget5_locked() and every lookup wait on), from the test of the
        flag to the call that publishes it (unlock_new_inode()) or the end
        of the block: 'if (x->i_state & I_NEW) { ... }', or after
        'if (!(x->i_state & I_NEW)) return ...;'."""
        out = {}
        if not self.P.new_flags:
            return out
        toks = self.src.toks[fn.file]
        lo, hi = fn.body_start, fn.body_end
        for spec in self.P.new_flags:
            for k in range(lo + 1, hi - 8):
                if toks[k].text != "if" or toks[k + 1].text != "(":
                    continue
                neg = toks[k + 2].text == "!" and toks[k + 3].text == "("
                a = k + 4 if neg else k + 2
                if not (toks[a].kind == "id" and toks[a + 1].text == "->" and
                        toks[a + 2].text == spec["member"] and toks[a + 3].text == "&" and
                        toks[a + 4].text == spec["flag"] and toks[a + 5].text == ")"):
                    continue
                name = toks[a].text
                close = a + 5 if not neg else a + 6
                if neg:
                    if toks[close].text != ")" or toks[close + 1].text != "return":
                        continue
                    start = close + 1
                    while start < hi and toks[start].text != ";":
                        start += 1
                    end = hi
                else:
                    if toks[close + 1].text != "{":
                        continue
                    start = close + 1
                    end = csrc.match_paren(toks, start)
                for j in range(start, end):
                    if toks[j].text in spec["publish"] and toks[j + 1].text == "(":
                        args = self._call_args(fn.file, j) or []
                        if any(b - a2 == 1 and toks[a2].text == name for a2, b in args):
                            end = j
                            break
                out.setdefault(name, (start, end, "new: %s is set in %s->%s until %s() (%s)" % (
                    spec["flag"], name, spec["member"], spec["publish"][0], spec["reason"])))
        return out

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

    def _asserted_off_list(self, fn):
        """name -> (from, to, why): an object the calling task owns (an
        owner parameter, _owned_params()) whose struct has one link, which
        fn asserts empty without holding a lock: 'ASSERT(list_empty(
        &ticket->list))' in handle_reserve_ticket().  Other tasks reach
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
                continue
            end = hi
            for j in range(k + 10, hi):
                if toks[j].text != name or toks[j - 1].text in (".", "->"):
                    continue
                if handed(j) is not None or toks[j + 1].text == "=" or (
                        toks[j - 1].text == "&" and self._call_of(toks, j - 1, lo) not in
                        self.P.link_tests | self.P.link_removers | self.P.unlinkers):
                    end = j                 # handed on, reassigned or linked anew
                    break
            out[name] = (start[0], end, "detached: the lockless %s(%s(&%s->%s)) at line %d "
                         "says it is off its only list for good once the calls it was handed "
                         "to before (the last: %s()) returned, and the task owns it (%s)" % (
                             toks[k].text, toks[k + 2].text, name, link, toks[k].line,
                             start[1], owned[name]))
        return out

    def _unpublished_params(self, fn):
        """name -> (from, to, why): a parameter of a struct nothing points
        to, which fn links into a list or tree (rb_link_node(&p->node,
        ...)): it was on none on entry, so no other task can reach it
        before that call (tree_mod_log_insert() stores tm->seq first)."""
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
            # (relink_bitmap_entry() moves an entry that stays in the
            # offset tree)
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
        list_add_tail(&ticket.list, ...) in __reserve_bytes()).  Not when
        that statement is in a loop or the object is an array; a goto
        jumping back ends the window at its label (_detached())."""
        out = {}
        toks = self.src.toks[fn.file]
        lo, hi = fn.body_start, fn.body_end
        stack = self._stack_structs(fn)
        if not stack:
            return out
        first = {}
        for k in range(lo + 1, hi - 2):
            name = toks[k + 1].text
            if name not in stack or name in first or toks[k + 1].kind != "id" or \
                    toks[k].text in (".", "->"):
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

    def _unpublished_stack_cut(self, fn):
        """_unpublished_stack(), each window ending at a label a goto from
        outside it jumps to (cached: private_params() asks for it at every
        call site)."""
        key = (fn.file, fn.body_start)
        c = self._unpubcache.get(key)
        if c is None:
            c = self._unpubcache[key] = self._cut_at_labels(fn, self._unpublished_stack(fn))
        return c

    def _member_addr_escapes(self, fn, k):
        """&x.m (or &x.m.n) at toks[k]: linked into a shared list or tree,
        or handed to a call that may keep it, or used any other way than as
        a whole call argument (stored, returned)."""
        toks = self.src.toks[fn.file]
        lo = fn.body_start
        if self._published(toks, k, lo):
            return True
        e = k + 2
        while toks[e].text == "." and toks[e + 1].kind == "id":
            e += 2
        c = self._call_arg(toks, k, lo)
        if c is None or toks[e].text not in (",", ")") or toks[k - 1].text not in (",", "("):
            return True
        return c[0] in KEYWORDS or self._arg_escapes(fn, c[0], c[1])

    def _detachers(self):
        """(file, function) -> indices of the parameters the function
        detaches and keeps detached to its end (not reassigned, linked
        again or handed on)."""
        c = getattr(self, "_detachcache", None)
        if c is not None:
            return c
        c = self._detachcache = {}
        for key, fn in self.src.funcs.items():
            names = self.params(fn)
            if not names or not any(self.P.unlinkers & set(
                    t.text for t in self.src.toks[fn.file][fn.body_start:fn.body_end])):
                continue
            d = self._detached(fn)
            idx = {n for n, p in enumerate(names) if p and p in d and d[p][1] == fn.body_end
                   and not self._reassigned(fn, p)}
            if idx:
                c[key] = idx
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
        for k in range(lo + 1, hi - 5):
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
            # after the store ('head->extent_op = NULL; spin_unlock(...)')
            taken = {n for (e, op, n) in res.events if op == "acquire" and e < k}
            if not any(x != "irqs-off" for x in st.held) and \
                    not any(op == "release" and e > k and n not in taken
                            for (e, op, n) in res.events):
                continue
            if types is None:
                types = self._decl_types(fn)
            ptype = types.get(p)
            # the local that took the object before the store
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
                out[x] = (k, end, "detached: taken from %s->%s, which is set to NULL here under a "
                          "lock, and %s.%s is the only member that points to a struct %s"
                          % (p, f, ptype, f, tx))
                break
        return out

    def _detached_at(self, fn, name, k):
        d = self._detached(fn).get(name)
        return d[2] if d is not None and d[0] < k < d[1] else None

    def private_params(self):
        """Parameters that only ever receive a private object: every call
        site passes a stack object, a fresh allocation, an object a
        constructor returned, or a private parameter of its own (fixed
        point).  Such a parameter is as private as the caller's object."""
        self._privcache = {}
        self._pofcache = {}
        self._mixedcache = {}
        self._pmixed = {}
        self._detcache = {}
        self.priv_params = {}
        # a failed parameter is looked at again only when the private
        # parameters of the caller that failed it have changed since
        version = collections.Counter()
        blocked = {}
        for _ in range(20):
            changed = False
            for key, fn in self.src.funcs.items():
                if fn.name in self.addr_taken or fn.name in self.macro_used or key in self.dead:
                    continue
                sites = self.sites_of(fn)
                if not sites:
                    continue
                names = self.params(fn)
                mine = self.priv_params.get(key, {})
                for n, p in enumerate(names):
                    if not p or p in mine:
                        continue
                    ak = key + (p,)
                    if self._reassigned(fn, p) and self._param_mixed(fn, p) is None:
                        continue
                    b = blocked.get(ak)
                    if b is not None and version[b[0]] == b[1]:
                        continue
                    why = []
                    for (caller, st, k) in sites:
                        r = self._arg_private(caller, k, n)
                        if r is None:
                            ck = (caller.file, caller.name)
                            blocked[ak] = (ck, version[ck])
                            break
                        why.append((caller, k, r))
                    else:
                        caller, k, r = why[0]
                        self.priv_params.setdefault(key, {})[p] = (
                            "a parameter every caller passes its own private object "
                            "(%d call%s, e.g. %s() at %s:%d)" % (
                                len(why), "s" if len(why) > 1 else "", caller.name,
                                _short(caller.file), self.src.toks[caller.file][k].line), r[1])
                        mine = self.priv_params[key]
                        version[key] += 1
                        changed = True
            if not changed:
                break

    def _fresh_call(self, toks, k):
        """The allocator or constructor whose call starts at toks[k]
        ('kzalloc(...)', 'btrfs_new_subvol_inode(...)'), or None."""
        f = toks[k].text
        if toks[k + 1].text == "(" and (f in self.P.allocators or f in self.constructors):
            return f
        return None

    def _fresh_value(self, toks, k):
        """Is the value starting at toks[k] no object or a fresh one?"""
        return toks[k].text in ("NULL", "ERR_PTR") or self._fresh_call(toks, k) is not None

    def _param_mixed(self, fn, p):
        """For a parameter fn assigns again: its assignments as (token,
        fresh), headed by the entry value (fresh when every caller passes
        a private object), or None when one is not a plain 'p = ...;'."""
        key = (fn.file, fn.name, p)
        if key in self._pmixed:
            return self._pmixed[key]
        toks = self.src.toks[fn.file]
        out = [(fn.body_start, True)]
        for kind, k in self._bare_uses(fn, p):
            if kind != "assigned":
                continue
            if toks[k + 1].text != "=" or toks[k - 1].text not in (";", "{", "}", ")", "else"):
                out = None
                break
            out.append((_stmt_end(toks, k, fn.body_end), self._fresh_value(toks, k + 2)))
        self._pmixed[key] = out
        return out

    def _reassigned(self, fn, p):
        """Does fn assign to its parameter p (so p may name another object)?"""
        key = (fn.file, fn.body_start, p)
        c = self._stackcache.get(key)
        if c is None:
            c = self._stackcache[key] = any(kind == "assigned"
                                            for kind, _ in self._bare_uses(fn, p))
        return c

    def _stack_structs(self, fn):
        """Names of the structs on fn's stack ('struct x name;'), whether or
        not their address escapes: the task running fn owns them."""
        key = (fn.file, fn.body_start)
        c = self._stackcache.get(key)
        if c is None:
            toks = self.src.toks[fn.file]
            c = {}                                  # an ordered set
            hi = fn.body_end
            for k in range(fn.body_start, hi - 3):
                if toks[k].text in ("struct", "union") and toks[k + 1].kind == "id" and \
                        toks[k + 2].kind == "id" and toks[k + 3].text in (";", "=", ",", "["):
                    c[toks[k + 2].text] = None
            self._stackcache[key] = c
        return c

    def owner_params(self):
        """Parameters that always point to an object the calling task owns:
        every call site passes the address of a struct on its own stack, or
        such a parameter of its own.  A direct call runs in the caller's
        task, so an access through such a parameter is made by the object's
        owner, even when the object is linked into a shared list.  Greatest
        fixed point: recursive helpers that hand the object back and forth
        (btrfs_log_inode() and log_conflicting_inodes()) stay owners, and
        any call site passing something else removes the parameter."""
        cand = {}
        for key, fn in self.src.funcs.items():
            if fn.name in self.addr_taken or fn.name in self.macro_used or key in self.dead:
                continue
            if not self.sites_of(fn):
                continue
            for n, p in enumerate(self.params(fn)):
                if p and not self._reassigned(fn, p):
                    cand.setdefault(key, {})[p] = n
        own = {key: set(ps) for key, ps in cand.items()}
        changed = True
        while changed:
            changed = False
            for key, ps in cand.items():
                fn = self.src.funcs[key]
                for p in sorted(own[key]):
                    if not all(self._arg_owned(caller, k, ps[p], own)
                               for (caller, st, k) in self.sites_of(fn)):
                        own[key].discard(p)
                        changed = True
        out = {}
        for key, ps in own.items():
            fn = self.src.funcs[key]
            sites = self.sites_of(fn)
            for p in ps:
                caller, st, k = sites[0]
                out.setdefault(key, {})[p] = (
                    "every caller passes a struct on its own stack or such a parameter "
                    "of its own (%d call%s, e.g. %s() at %s:%d)" % (
                        len(sites), "s" if len(sites) > 1 else "", caller.name,
                        _short(caller.file), self.src.toks[caller.file][k].line))
        self.owned_params = out

    def _arg_owned(self, caller, k, n, own):
        """Is argument n of the call at toks[k] in caller an object the
        caller's task owns (&stack_struct, or an owner parameter)?"""
        toks = self.src.toks[caller.file]
        args = self._call_args(caller.file, k)
        if args is None or n >= len(args):
            return False
        a, b = args[n]
        if b - a == 2 and toks[a].text == "&" and toks[a + 1].text in self._stack_structs(caller):
            return True
        return b - a == 1 and toks[a].text in own.get((caller.file, caller.name), ())

    def owner_reads(self):
        """P1: a field whose every store is made by the task that owns the
        object (through a struct on that task's stack or an owner
        parameter) cannot change under that task's feet: the owner's loads
        stay plain.  Only the owner's own reads are taken out; the stores
        and other tasks' reads are classified as usual."""
        def owner_root(a):
            if a.func is None or a.struct is None:
                return None
            root = _root(a.base)
            if root is None:
                return None
            what = None
            if root in self._stack_structs(a.func):
                what = "a struct on the stack of %s()" % a.fn
            else:
                w = self.owned_params.get((a.file, a.fn), {}).get(root)
                if w is not None:
                    what = "a parameter of %s() that %s" % (a.fn, w)
            if what is None or self._private_root(a, {root: None}) is None:
                return None
            return root, what

        self.owner_read = {}
        self.owner_acc = {}
        self.declared_owners = self._declared_owners()
        byfield = collections.defaultdict(list)
        for a in self.accesses:
            if a.test:
                continue
            if a.exclusion is None or (a.exclusion[0] == "already-marked" and a.macro and
                                       a.kind == "marked"):
                byfield[(a.struct, a.field)].append(a)
                r = owner_root(a)
                if r is not None:
                    # made by the task that owns the object: two such
                    # accesses never run side by side (_kept_apart())
                    self.owner_acc[id(a)] = r
        for (st, fld), accs in byfield.items():
            stores = [a for a in accs if a.kind in ("write", "rmw") or
                      (a.kind == "marked" and a.macro in STORE_MACROS)]
            if not stores:
                continue
            own = {}
            for a in accs:
                r = owner_root(a)
                if r is not None:
                    own[id(a)] = r
            if any(id(w) not in own for w in stores):
                continue
            w = stores[0]
            if all(id(a) in own for a in accs):
                # nobody but the owner touches the field at all
                for a in accs:
                    if a.exclusion is None:
                        root, what = own[id(a)]
                        a.exclusion = ("owner-only", "every access to %s.%s is made by the "
                                       "task that owns the object; '%s' here is %s" % (
                                           st, fld, root, what))
                continue
            # the owner's loads stay in the field's evidence (a load under
            # the lock shows which lock protects it) but race with no store
            for a in accs:
                if a.exclusion is None and a.kind == "read" and id(a) in own:
                    root, what = own[id(a)]
                    self.owner_read[id(a)] = (
                        "every store to %s.%s is made by the task that owns the object "
                        "(e.g. %s() at %s); '%s' here is %s, so this is the owner's "
                        "read" % (st, fld, w.fn, w.where(), root, what))
        # declared owners (policies/ 'owners'): the field belongs to the
        # task running those functions, and every store another task makes
        # comes before that task starts or after it ends: its loads race
        # with no store
        for a in self.accesses:
            d = self.declared_owners.get("%s.%s" % (a.struct, a.field))
            if not d or a.exclusion is not None or a.test or a.kind != "read":
                continue
            if (a.file, a.fn) in d[1]:
                self.owner_read[id(a)] = "read by the owner of %s.%s: %s()%s (%s)" % (
                    a.struct, a.field, a.fn, "" if a.fn in d[0]["functions"] else
                    ", which only the owner's functions call", d[0]["reason"])
                continue
            lk = self._owner_or_locked(a, byfield.get((a.struct, a.field), []), d[1])
            if lk:
                self.owner_read[id(a)] = "%s() is called by the owner of %s.%s or with %s " \
                    "held, which every store of the field holds: its loads race with no " \
                    "store (owner: %s)" % (a.fn, a.struct, a.field, lk, d[0]["reason"])

    def _owner_or_locked(self, a, accs, owner_fns):
        """The lock every call site of a's function holds that is not in
        one of the owner's functions, when every store of the field holds
        it exclusively (btrfs_dev_replace_progress(), called by the
        resuming replace kthread, which owns srcdev, and under the replace
        rwsem by the status ioctl); else None, and None when no call site
        is the owner's (the lock alone says it then)."""
        stores = [w for w in accs if w.kind in ("write", "rmw") or
                  (w.kind == "marked" and w.macro in STORE_MACROS)]
        if not stores or a.func is None or a.fn in self.addr_taken or \
                a.fn in self.macro_used:
            return None
        common = set.intersection(*[{h for h in w.held if not h.endswith(":r") and
                                     not h.startswith("?") and h != "irqs-off"}
                                    for w in stores])
        sites = [s_ for s_ in self.sites_of(a.func) if s_[0] is not a.func]
        if not sites or not common:
            return None
        used = set()
        others = 0
        for (caller, st, k) in sites:
            if (caller.file, caller.name) in owner_fns:
                continue
            others += 1
            h = set(st.held) | set(self.entry.get((caller.file, caller.name), {}))
            hit = sorted(lk for lk in common if lk in h or lk + ":r" in h)
            if not hit:
                return None
            used.add(hit[0])
        return " or ".join(sorted(used)) if others and others < len(sites) else None

    def _declared_owners(self):
        """field -> (declaration, {(file, fn)}) for each field an entry of
        policies/ 'owners' names: the functions it names, and those only
        they call (a fixed point over the call graph: a function whose
        every live call site is in one of them runs in the owner's task
        too; a function whose address is taken never qualifies)."""
        out = {}
        for o in self.P.owners:
            fns = self._only_called_from(
                {key for key, fn in self.src.funcs.items() if fn.name in o["functions"]},
                skip=self.dead)
            for name in o["field"]:
                out[name] = (o, fns)
        return out

    # ----------------------------------------------------------- exclusions
    def lifecycle_functions(self):
        """Declared init/teardown functions, and functions only they call."""
        return self._only_called_from(
            {k for k, fn in self.src.funcs.items() if self.P.is_lifecycle(fn.name)})

    def _only_called_from(self, keys, also=frozenset(), skip=frozenset()):
        """keys and, to a fixed point, every function whose live call sites
        are all in that set or in also (at least one in the set):
        functions that run only inside the ones named.  Recursive calls do
        not count (the outermost call decides); a function whose address
        is taken, or that a macro body names, never qualifies (its callers
        are not all visible); nor does one in skip."""
        mine = set(keys)
        changed = True
        while changed:
            changed = False
            for key, fn in self.src.funcs.items():
                if key in mine or key in skip or fn.name in self.addr_taken or \
                        fn.name in self.macro_used:
                    continue
                sites = [(s[0].file, s[0].name) for s in self.sites_of(fn) if s[0] is not fn]
                if any(c in mine for c in sites) and all(c in mine or c in also for c in sites):
                    mine.add(key)
                    changed = True
        return mine

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
        for k in range(lo, hi if not stack_only else lo):
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
        # a pointer that is also assigned something else than a fresh
        # object ('bctl = fs_info->balance_ctl' on one path, kzalloc() on
        # another: btrfs_ioctl_balance()) names the fresh object only
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
                    # 'split = split2;': another fresh object of this function
                    (v.text in priv and v.text != n and toks[k + 3].text == ";" and
                     priv[v.text] != "stack object"))))
            if not all(f for _, f in seen):
                mixed[n] = sorted(seen)
        if not stack_only:
            self._mixedcache[(fn.file, fn.name)] = mixed
        # a stack object whose address escapes (&obj stored, passed to a
        # callback or to code that keeps it) is not private any more; nor
        # is one linked into a shared list or tree (&obj.node published)
        for k in range(lo, hi - 2):
            if toks[k].text == "&" and toks[k + 1].text in priv and \
                    priv[toks[k + 1].text] == "stack object":
                if toks[k + 2].text not in (".", "->", "["):
                    if self._addr_escapes(fn, k):
                        priv.pop(toks[k + 1].text)
                elif toks[k + 2].text == "." and self._published(toks, k, lo):
                    priv.pop(toks[k + 1].text)
        if not stack_only and priv:
            # 'args.inode = btrfs_new_subvol_inode(...);': a fresh object
            # kept in a member of a stack struct, which is assigned nothing
            # else but NULL in fn (create_subvol()'s new_inode_args)
            fresh, other = {}, set()
            for k in range(lo + 1, hi - 5):
                if toks[k].text in priv and priv[toks[k].text] == "stack object" and \
                        toks[k + 1].text == "." and toks[k + 2].kind == "id" and \
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
            # 'rsv = &pending->block_rsv;' with pending private: a pointer
            # to a struct embedded in a private object, assigned once, is
            # as private as the object (create_snapshot()'s block_rsv)
            types = None
            for k in range(lo + 1, hi - 6):
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
        return priv

    def _published(self, toks, k, lo):
        """&x.node / &x->node at toks[k] is the object a list/tree insertion
        links in."""
        c = self._call_arg(toks, k, lo)
        return c is not None and self.P.publishers.get(c[0], -1) == c[1]

    def _addr_escapes(self, fn, k):
        """&obj at toks[k]: does the address leave fn?  Not when it is a
        whole argument of a call that does not keep it."""
        toks = self.src.toks[fn.file]
        if not hasattr(self, "escaping"):
            return True
        callee = self._call_of(toks, k, fn.body_start)
        if callee is None and toks[k - 1].text == "=" and toks[k - 2].kind == "id" and \
                toks[k - 3].text == "->" and toks[k - 4].kind == "id" and \
                toks[k - 5].text in (";", "{", "}") and \
                csrc.struct_name(self._decl_types(fn).get(toks[k - 4].text) or "") in \
                self.P.task_private:
            # 'trans->block_rsv = &block_rsv': stored in an object that
            # belongs to this task (policies 'task_private'), so the
            # address stays with the task
            return False
        if callee is None or callee in KEYWORDS:
            return True
        j = k - 1
        depth = 0
        while toks[j].text != "(" or depth:
            if toks[j].text == ")":
                depth += 1
            elif toks[j].text == "(":
                depth -= 1
            j -= 1
        for n, (a, b) in enumerate(_split(toks, j + 1, csrc.match_paren(toks, j))):
            if a == k:
                return b - a != 2 or self._arg_escapes(fn, callee, n)
        return True

    def apply_exclusions(self):
        life = self.life = self.lifecycle_functions()
        exc = {}
        file_exc = {}
        for e in self.P.exceptions:
            if e.get("file"):
                file_exc[e["file"]] = e
            else:
                exc[e["field"]] = e
        for a in self.accesses:
            fieldname = "%s.%s" % (a.struct, a.field)
            if a.kind == "sizeof" or any(c in ("typeof", "__typeof__", "__typeof", "sizeof")
                                         for c in a.ctx):
                a.exclusion = ("sizeof", "operand of sizeof/typeof")
                continue
            if a.kind == "marked":
                a.exclusion = ("already-marked", "already marked with %s()" % a.macro)
                continue
            if a.func is None:
                a.exclusion = ("unknown-type", "not inside a function definition")
                continue
            if a.struct is None:
                a.exclusion = ("unknown-type", "type of '%s' not inferred" % a.base)
                continue
            if a.struct not in self.src.structs:
                a.exclusion = ("outside-target", "struct %s is not defined under %s"
                               % (a.struct, self.target))
                continue
            m = self.src.member(a.struct, a.field, a.file)
            if m is None:
                a.exclusion = ("unknown-type", "no member %s in struct %s" % (a.field, a.struct))
                continue
            cat = m.category
            if cat.startswith("opaque:") and cat[7:] in self.P.scalar_typedefs:
                cat = "scalar"
            if cat != "scalar":
                what = {"bitfield": "a bitfield", "array": "an array", "rcu": "an __rcu pointer",
                        "aggregate": "a struct or union (%s)" % m.type}.get(
                            cat, "of type %s" % m.type)
                a.exclusion = ("not-markable", "%s is %s" % (fieldname, what))
                continue
            if a.kind == "address":
                bit = self._bitop(a)
                if bit:
                    a.kind = "atomic"
                    a.macro = bit
                    a.exclusion = ("already-marked", "atomic %s() on its address" % bit)
                else:
                    a.exclusion = ("address-taken", "address taken")
                continue
            if a.file in file_exc:
                a.exclusion = ("declared-exception", file_exc[a.file]["reason"])
                continue
            if fieldname in exc:
                e = exc[fieldname]
                if not e.get("functions") or a.fn in e["functions"]:
                    a.exclusion = ("declared-exception", e["reason"])
                    continue
            tp = self.P.task_private.get(a.struct)
            if tp is not None:
                a.exclusion = ("task-private", "struct %s belongs to one task: %s" % (
                    a.struct, tp["reason"]))
                continue
            if (a.file, a.fn) in life:
                a.exclusion = ("lifecycle", "%s() is an init/teardown function%s" % (
                    a.fn, "" if self.P.is_lifecycle(a.fn) else
                    " (only called from init/teardown functions)"))
                continue
            key = (a.file, a.fn)
            if key in self.dead:
                a.exclusion = ("dead-code", self.dead[key])
                continue
            if a.line in self.dead_lines.get(a.file, ()):
                a.exclusion = ("dead-code", "inside a preprocessor block that is never compiled")
                continue
            if key in self.testonly and not a.test:
                a.exclusion = ("test-only", self.testonly[key])
                continue
            why = self._private_why(a)
            if why is not None:
                a.exclusion = ("private", why)
                continue
            if a.tok is not None and a.kind in ("write", "rmw"):
                why = self._zero_holders_at(a)
                if why:
                    a.exclusion = ("refcount-guarded", why)
                    continue
        self._zero_holder_uses()

    def _zero_holder_uses(self):
        """A store made when a count says 'no holder' (the '== 0' and
        dec-and-test forms, where the count may be a resource's, not the
        object's own) races with no task that holds a count: the field
        points to something that exists only while the count is not zero,
        so a task that uses it holds one.  A task that only tests it
        ('f->workers != NULL') needs no count and may race: then the
        stores of that field are judged as usual."""
        tests = set()
        for a in self.accesses:
            if a.kind != "read" or a.tok is None or a.exclusion is not None or \
                    a.struct is None:
                continue
            if any(h != "irqs-off" and not h.startswith("?") and h not in self.phase_locks
                   and h[:-2] not in self.phase_locks for h in (a.held or ())):
                continue                         # under a lock: races with no store
            toks = self.src.toks[a.file]
            k = a.tok
            if toks[k + 1].text in ("->", "["):
                continue                         # dereferenced: a use
            j = k - 1
            while j > 1 and toks[j].text in ("->", ".") and toks[j - 1].kind == "id":
                j -= 2
            if toks[k + 1].text in (",", ")") and toks[j + 1].kind == "id" and \
                    toks[j].text in ("(", ",") and \
                    self._call_arg(toks, k, a.func.body_start) is not None:
                continue                         # handed to a call as is
            tests.add((a.struct, a.field))
        for a in self.accesses:
            if a.exclusion and a.exclusion[0] == "refcount-guarded" and \
                    "no reference is held" in a.exclusion[1] and \
                    (a.struct, a.field) in tests:
                a.exclusion = None

    # refcount_t calls whose true branch means 'no reference is left'
    _REF_ZERO = ("refcount_dec_and_test", "refcount_dec_and_lock",
                 "refcount_dec_and_lock_irqsave", "refcount_dec_and_mutex_lock")

    def _zero_holders(self, fn):
        """Regions of fn where a reference count shows that no other task
        holds a reference to the object X that embeds it: after 'if
        (refcount_read(&X->refs) > N) return;' (nobody beyond the N known
        holders), inside 'if (refcount_read(&X->refs) == 0) {...}', and
        inside the true branch of refcount_dec_and_test() and friends.
        [(X, lo, hi, why)]: token range, X not assigned inside."""
        key = (fn.file, fn.body_start)
        c = self._zhcache.get(key)
        if c is not None:
            return c
        out = []
        toks = self.src.toks[fn.file]
        lo, hi = fn.body_start, fn.body_end
        for k in range(lo + 1, hi - 8):
            if toks[k].text != "if" or toks[k + 1].text != "(":
                continue
            close = csrc.match_paren(toks, k + 1)
            j = k + 2
            neg = toks[j].text == "!"
            if neg:
                j += 1
            call = toks[j].text
            if toks[j + 1].text != "(" or toks[j + 2].text != "&" or toks[j + 3].kind != "id" \
                    or toks[j + 4].text != "->" or toks[j + 5].kind != "id":
                continue
            x, cnt = toks[j + 3].text, toks[j + 5].text
            cend = csrc.match_paren(toks, j + 1)
            rest = [t.text for t in toks[cend + 1:close]]
            region = None
            if call == "refcount_read" and not neg and len(rest) == 2 and \
                    rest[0] in (">", ">=", "!=") and _returns(toks, close + 1, hi):
                # 'if (refcount_read(&x->refs) > 2) return;': below it, the
                # object has no holder but the ones the function knows of
                end = _returns(toks, close + 1, hi)
                region = (end + 1, hi, "after '%s' returns when other tasks hold "
                          "references at line %d" % ("if (refcount_read(&%s->%s) %s %s)"
                                                     % (x, cnt, rest[0], rest[1]), toks[k].line))
            elif (call == "refcount_read" and ((not neg and rest == ["==", "0"]) or
                                               (neg and not rest))) or \
                    (call in self._REF_ZERO and not neg and not rest):
                # the true branch: no reference is held
                b = close + 1
                if toks[b].text == "{":
                    e = csrc.match_paren(toks, b)
                else:
                    e = b
                    while e < hi and toks[e].text != ";":
                        e += 1
                region = (b, e, "in the branch where %s(&%s->%s) says no reference is "
                          "held (line %d)" % (call, x, cnt, toks[k].line))
            if region is None:
                continue
            rlo, rhi, why = region
            for q in range(rlo, rhi - 1):
                if toks[q].text == x and toks[q + 1].text == "=" and \
                        toks[q - 1].text not in ("->", "."):
                    rhi = q
                    break
            out.append((x, rlo, rhi, why))
        self._zhcache[key] = out
        return out

    def _zero_holders_at(self, a):
        """Why the store a to X->f cannot race with a task holding a
        reference to X (the only tasks that may touch X without its
        lock), or None."""
        if a.base is None or not re.fullmatch(r"\w+", a.base.strip()):
            return None
        x = a.base.strip()
        for (name, lo, hi, why) in self._zero_holders(a.func):
            if name == x and lo <= a.tok < hi:
                return "store to %s->%s %s: tasks that read it without the lock hold " \
                    "a reference" % (x, a.field, why)
        return None

    def _private_root(self, a, priv):
        """The private object a's base lies inside: the root itself
        (p->f, x.f, arr[i].f) or structs embedded in it (p->emb.f), not
        objects it points to (p->ptr->f)."""
        root = _root(a.base)
        acc = self.P.container_accessors.get(root)
        if root not in priv and acc is None:
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
            # BTRFS_I(inode)->f: the struct that embeds the private inode;
            # BTRFS_I(args.inode)->f with a fresh inode in a stack struct
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
            if len(p) != 1 or st is None:
                return None
            m = self.src.member(st, p[0].text)
            path += "." + p[0].text
            if m is not None and m.pointer and path in priv and not m.array:
                # x.ptr->f where x.ptr holds an object fresh in this function
                root = path
            elif m is None or m.pointer or m.array:
                return None
            st = csrc.struct_name(m.type)
        return root

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
            det = {n: (d[2], "alloc") for n, d in self._stack_unlinked(a.func).items()
                   if d[0] < a.tok < d[1]}
            root = self._private_root(a, det) if det else None
            if root is not None:
                return "'%s' is %s" % (root, det[root][0])
        return None

    def _bitop(self, a):
        for c in reversed(a.ctx):
            if c in self.P.bitops:
                return c
            if c:
                return None
        return None

    # ------------------------------------------------------------ inference
    def container_held(self):
        """policies/ 'container_locks': the entries of a struct are protected
        by the lock of whichever container holds them (btrfs free-space
        entries: the ctl's tree_lock or a cluster's lock; they move between
        the two with both held).  An access holding one of those locks holds
        the entry's lock."""
        if not self.P.container_locks:
            return
        names = {c["name"] for c in self.P.container_locks.values()}
        for a in self.accesses:
            if not a.held:
                continue
            c = self.P.container_locks.get(a.struct)
            name = c["name"] if c else None
            # held by every caller: only an entry's own fields have it
            drop = [h for h in a.held if (h[:-2] if h.endswith(":r") else h) in names
                    and (name is None or h not in (name, name + ":r"))]
            if drop:
                a.held = {k: v for k, v in a.held.items() if k not in drop}
            if c is None or name in a.held or name + ":r" in a.held:
                continue
            for lk in c["locks"]:
                m = lk if lk in a.held else (lk + ":r" if lk + ":r" in a.held else None)
                if m is not None:
                    a.held = dict(a.held)
                    a.held[name + m[len(lk):]] = How(
                        "%s held (%s: %s)" % (lk, a.struct, c["reason"]), a.held[m].line)
                    break

    def infer(self):
        # data_race() around an expression with the field: the tree's own
        # note that it is read while it changes (no marking of the access)
        self.race_exprs = collections.defaultdict(list)
        byfield = collections.defaultdict(list)
        marked = collections.defaultdict(list)
        rcu = {}
        for a in self.accesses:
            # a marked access in init/teardown or dead code shows no
            # concurrency (a cmpxchg() that publishes a table at mount)
            if a.exclusion and a.exclusion[0] == "already-marked" and not a.test \
                    and a.struct is not None and a.macro and not self._quiet(a):
                if a.macro.startswith("rcu_"):
                    rcu.setdefault((a.struct, a.field), a)
                elif a.macro != "data_race-expr":
                    marked[(a.struct, a.field)].append(a)
                else:
                    self.race_exprs[(a.struct, a.field)].append(a)
            elif a.kind == "atomic" and not a.test:
                marked[(a.struct, a.field)].append(a)
        for a in self.accesses:
            r = rcu.get((a.struct, a.field))
            if r is not None and a.exclusion is None:
                a.exclusion = ("not-markable", "%s.%s is an RCU pointer (%s() at %s)"
                               % (a.struct, a.field, r.macro, r.where()))
        for a in self.accesses:
            if a.exclusion is None and not a.test:
                byfield[(a.struct, a.field)].append(a)
        ctxfns = self.contexts()
        for (st, fld), accs in sorted(byfield.items()):
            name = "%s.%s" % (st, fld)
            self.fields[name] = self.classify(name, accs, marked.get((st, fld), []),
                                              self.declared_owners.get(name, (None,))[0],
                                              ctxfns)
        # test code: verdict of its field, reported separately
        for a in self.accesses:
            if a.exclusion is None and a.test:
                info = self.fields.get("%s.%s" % (a.struct, a.field))
                if info:
                    self.verdict(a, info)
                else:
                    a.rule, a.reason = "no-lock-evidence", "field not shared outside tests"
        for a in self.accesses:
            if a.exclusion is not None:
                a.rule, a.reason = a.exclusion
                a.action = "none"

    def _quiet(self, a):
        """a runs where nothing else can run at the same time: an
        init/teardown function, or code that is never compiled."""
        key = (a.file, a.fn)
        return key in self.life or key in self.dead or \
            a.line in self.dead_lines.get(a.file, ())

    def classify(self, name, accs, marked, owner, ctxfns):
        writes = [a for a in accs if a.kind in ("write", "rmw")]
        reads = [a for a in accs if a.kind in ("read", "rmw")]
        info = {"field": name, "accesses": len(accs), "writes": len(writes),
                "reads": len(reads), "lock": None, "share": None, "class": None,
                "owner": owner, "evidence": [], "marked": marked}
        # the lock held by the most writes; stores already marked
        # (WRITE_ONCE() and friends) are writes too, so a field keeps its
        # lock once its writes are marked (a second run asks for nothing)
        stores = [m for m in marked if m.macro in STORE_MACROS and m.held is not None]
        cnt = collections.Counter()
        first = {}
        phase = self.phase_locks
        for w in writes + stores:
            for lk in w.held:
                if lk.endswith(":r") or lk.startswith("?") or lk in phase:
                    # a phase lock (policies/ 'param_locks': held shared by
                    # nearly every function) orders accesses only through
                    # its exclusive side, below; it is no field's own lock
                    continue
                cnt[lk] += 1
                first.setdefault(lk, w)
        if cnt:
            n = max(cnt.values())
            # among the locks held by the most writes, the one the most
            # reads hold explains the most accesses
            rcnt = collections.Counter()
            for r in reads:
                for h in r.held:
                    rcnt[h[:-2] if h.endswith(":r") else h] += 1
            # (a lock of the field's own struct first: a lock every caller
            # of an ops method holds, the VFS inode lock, is no field's lock
            # because one write holds it as well as the field's own)
            own = name.split(".")[0] + "."
            lk = max(sorted(k for k, v in cnt.items() if v == n),
                     key=lambda k: (k.startswith(own), rcnt[k]))
        # LockDoc-style: a lock protects the field when it is held by more
        # than half of its writes, or by exactly half with other evidence
        # (below); with fewer it is not the field's lock.
        if cnt and 2 * n == len(writes) + len(stores) and not self._tie_evidence(
                name, reads, marked):
            # a tie: as many writes hold the lock as do not.  Either half
            # may be the exception (stores made while the object is not yet
            # or no longer shared, which the analysis did not see), so the
            # lock is the field's lock only when something else shows the
            # field is accessed locklessly while it changes: a wait
            # condition, a marked access, a data_race() of the tree, a
            # handler that runs at any time (the seed commit's
            # blocking_writers: one store under the tree lock, one in the
            # unlock path, and wait_event() loads)
            info["tie"] = [n, len(writes) + len(stores), lk, first[lk].where()]
        elif cnt and 2 * n >= len(writes) + len(stores):
            info["lock"] = lk
            info["share"] = (n, len(writes) + len(stores))
            info["lock_site"] = first[lk]
        lk = info["lock"]
        # locks every write holds: a read holding any of them cannot race
        # with a write, whichever lock is the field's main one
        wl = None
        for w in writes + stores:
            h = {x for x in w.held if not x.endswith(":r") and not x.startswith("?")}
            wl = h if wl is None else wl & h
        info["write_locks"] = sorted(wl or ())
        # locks every write holds in some mode (a read side counts): a read
        # holding one of them exclusively cannot race with a write either
        # (the rwsem case: writers share it, this reader excludes them all)
        wa = None
        for w in writes + stores:
            h = {x[:-2] if x.endswith(":r") else x for x in w.held if not x.startswith("?")}
            wa = h if wa is None else wa & h
        info["excl_locks"] = sorted(x + "!x" for x in (wa or ()) if x not in (wl or ()))

        def holds1(a):
            return lk is not None and _holds_any(a, [lk] + info["write_locks"] +
                                                 info["excl_locks"])

        def holds(a):
            if holds1(a):
                return True
            if lk is None or a.kind != "read":
                return False
            if id(a) not in self.ctx_locked:
                self.ctx_locked[id(a)] = self._ctx_excluded(
                    a, writes, info["write_locks"] + info["excl_locks"])
            return bool(self.ctx_locked[id(a)])

        locked_r = [r for r in reads if holds(r)]
        info["ctx_reads"] = sum(1 for r in locked_r if not holds1(r))
        other_r = [r for r in locked_r if lk not in r.held and lk + ":r" not in r.held
                   and holds1(r)]
        if other_r:
            r = other_r[0]
            xl = [x[:-2] for x in info["excl_locks"] if _holds_any(r, [x])]
            info["other_read"] = "%s() at %s holds %s" % (
                r.fn, r.where(), ("%s exclusively, which every write holds at least shared"
                                  % xl[0]) if xl and not _holds_any(r, info["write_locks"])
                else "%s, which every write holds" % [x for x in info["write_locks"]
                                                      if _holds_any(r, [x])][0])
        # A lock of another struct that no reader takes is no evidence
        # of how the field is protected when it is held for something
        # else: when no read of the field holds it, or when the only reads
        # under it are in the writing functions themselves and every write
        # holds it only because its callers took it (a coarse mutex around
        # a long operation: relocation's cleaner_mutex, the tree lock of
        # the block being COWed).
        # (A read kept from the writes by another lock, or by its calling
        # contexts, does not take this one.)
        wfns = {w.fn for w in writes}
        taking_r = [r for r in locked_r if lk and _holds_any(r, [lk])]
        if lk and not lk.startswith(name.split(".")[0] + ".") and (
                not taking_r or
                (not [r for r in taking_r if r.fn not in wfns] and
                 all(w.held[lk].what.startswith(_BY_CALLERS)
                     for w in writes + stores if lk in w.held))):
            info["coincidental_lock"] = lk
            info["coincidental_why"] = None if not taking_r else (
                "outside the functions that write it, and every write holds it "
                "only because its callers took it (a lock around a long operation)")
            info["lock"] = lk = None
        locked_w = [w for w in writes if lk and lk in w.held]
        # lost updates: read-modify-writes without the lock that every
        # other write holds.  A locked update running beside one of them
        # is lost, which READ_ONCE()/WRITE_ONCE() cannot fix and the lock
        # can: they are reported apart (rule lost-update), and they do not
        # count as the lockless reads that would make the locked writes
        # racy (marking those would not fix the race either).
        lost = []
        if lk and locked_w and not marked and not self.handler_of(name):
            lost = [w for w in writes if w.kind == "rmw" and not holds(w)]
            if len(locked_w) + len(lost) != len(writes):
                lost = []
        lost_ids = {id(w) for w in lost}
        self.lost_ids |= lost_ids
        if lost:
            writes = [w for w in writes if id(w) not in lost_ids]
            reads = [r for r in reads if id(r) not in lost_ids]
            info["lost_updates"] = ["%s() at %s" % (w.fn, w.where()) for w in lost]
        unlocked_r = [r for r in reads if not holds(r) and id(r) not in self.owner_read]
        # what a locked write can race with: the reads without the lock
        # (plain or already marked) and the writes without it
        info["racers"] = [r for r in unlocked_r if not r.test] + [
            m for m in marked if m.macro not in STORE_MACROS and m.kind != "atomic" and
            not m.test and lk and lk not in m.held and lk + ":r" not in m.held] + [
            w for w in writes if lk and lk not in w.held and not w.test]
        info["owner_reads"] = sum(1 for r in reads if id(r) in self.owner_read)
        # evidence of concurrency without a lock
        wait_reads = [r for r in reads if any(c in self.P.wait_macros for c in r.ctx)]
        # a handler's stores to the object its context hands it (the bio a
        # completion receives) race with nothing its submitter did
        handed = [w for w in writes if w.fn in ctxfns and
                  self.handover.get(w.fn, {}).get("struct") == w.struct]
        if handed:
            info["handed_over"] = "%s() at %s: %s" % (
                handed[0].fn, handed[0].where(), self.handover[handed[0].fn]["reason"])
        ctx_w = [w for w in writes if w.fn in ctxfns and w not in handed]
        atomics = [m for m in marked if m.kind == "atomic" and
                   not m.macro.startswith(("test_bit", "wait_on_bit"))]
        m_loads = [m for m in marked if m.kind != "atomic" and m.macro not in STORE_MACROS]
        writes_all = writes + [m for m in marked if m.macro in STORE_MACROS]
        ctx_r = [r for r in reads + m_loads if r.fn in self.any_time]
        ctx_w_all = [w for w in writes_all if w.fn in ctxfns and w not in handed]
        handler = self.handler_of(name)
        info["handler"] = handler
        if handler:
            info["class"] = "handler"
        elif not writes and not marked:
            info["class"] = "read-only"
        elif not reads and not marked and not self.P.handlers:
            info["class"] = "write-only"
        elif lk and not unlocked_r and len(locked_w) == len(writes) and not wait_reads \
                and not [m for m in marked if lk not in m.held and lk + ":r" not in m.held]:
            info["class"] = "always-locked"
        elif lk and len(locked_w) == len(writes) and not wait_reads and \
                all(self._is_diag_read(r) for r in unlocked_r) and \
                not [m for m in marked if lk not in m.held and lk + ":r" not in m.held
                     and m.macro != "data_race"]:
            # lock protection with lockless diagnostic access only (plain,
            # or already data_race(): a marked tree keeps its verdicts)
            info["class"] = "diagnostic-only"
            d = unlocked_r[0] if unlocked_r else \
                [m for m in marked if lk not in m.held and lk + ":r" not in m.held][0]
            info["diag_site"] = "%s() at %s" % (d.fn, d.where())
        elif owner:
            # declared (policies/ 'owners'): the owner's loads are plain
            # (owner_reads()), its stores and other tasks' loads are judged
            # as usual, but never found unraced by their calling contexts
            info["class"] = "owner"
        elif lk:
            info["class"] = "lock-protected"
        elif atomics and reads:
            info["class"] = "atomic-bitops"
            info["evidence"].append("changed with %s() at %s" % (atomics[0].macro,
                                                                 atomics[0].where()))
            # locks every bit operation that changes the field holds
            # exclusively (those on objects not yet published aside), when
            # every plain write holds them too: a read holding one of them
            # races with no change of the field
            live = [m for m in atomics if m.func is None or self._private_why(m) is None]
            bl = None
            for m in live + writes:
                h = {x for x in m.held if not x.endswith(":r") and not x.startswith("?")
                     and x != "irqs-off" and x not in self.phase_locks}
                bl = h if bl is None else bl & h
            if live and bl:
                info["bitop_locks"] = sorted(bl)
                info["bitop_sites"] = (len(live), len(atomics) - len(live))
        elif ctx_r and not ctx_w_all and \
                any(w.fn not in {r.fn for r in ctx_r} for w in writes_all):
            # read by a handler that runs at any time (a sysfs show
            # handler) and written elsewhere: the handler's loads race with
            # those stores.  Marked loads and stores count, so a patched
            # tree keeps the class.
            info["class"] = "context-read"
            a = ctx_r[0]
            info["ctx_read_fns"] = sorted({r.fn for r in ctx_r})
            info["evidence"].append("read in %s(), %s" % (a.fn, _a(ctxfns[a.fn])))
        elif marked:
            info["class"] = "marked-elsewhere"
            m = marked[0]
            info["evidence"].append("already marked with %s() at %s" % (m.macro, m.where()))
        elif wait_reads:
            info["class"] = "wait-condition"
            info["evidence"].append("read in a %s() condition at %s" % (
                [c for c in wait_reads[0].ctx if c in self.P.wait_macros][-1],
                wait_reads[0].where()))
        elif ctx_w and any(r.fn not in {w.fn for w in ctx_w} for r in reads):
            info["class"] = "context-shared"
            a = ctx_w[0]
            info["evidence"].append("written in %s(), %s" % (a.fn, _a(ctxfns[a.fn])))
        else:
            info["class"] = "no-lock-evidence"
        info["locked_writes"] = len(locked_w)
        for a in accs:
            if id(a) in lost_ids:
                a.action, a.rule = "none", "lost-update"
                a.reason = "%s is written under %s at %s and every other write holds " \
                    "it (%d of %d); this read-modify-write does not, so an update " \
                    "made beside it is lost: it needs the lock, which no marking " \
                    "can replace" % (name, lk, locked_w[0].where(), len(locked_w),
                                     len(locked_w) + len(lost))
                continue
            self.verdict(a, info)
            if a.action != "none" and not a.test and info["class"] not in (
                    "handler", "atomic-bitops") and a.rule in (
                    "unlocked-read", "unlocked-write", "diagnostic-read"):
                # an owner's field: only a declared life-cycle order
                # (policies/ 'phases') says another task's access races
                # with none; the calling contexts' locks do not
                self._unraced(a, name, writes_all if a.kind == "read" else
                              writes_all + reads + m_loads,
                              phases_only=info["class"] == "owner")
        del info["racers"]
        return info

    def _kept_apart(self, a, others, phases_only=False):
        """The locks that keep access a from every access of others (the
        tests aside and a itself), one shared in every pair of their
        calling contexts, exclusive on one side (or in two groups that
        exclude each other); _OWNER_PAIR for an access of others that,
        like a, the task owning the object makes; None when some access
        of others can run beside a, or others holds none."""
        locks = set()
        n = 0
        for b in others:
            if b is a or b.test or id(b) in self.lost_ids:
                continue
            if id(a) in self.owner_acc and id(b) in self.owner_acc:
                # both made by the task that owns the object they touch
                # (a struct on its stack, or a parameter every caller
                # passes such a struct in): one task, or two objects
                locks.add(_OWNER_PAIR)
                n += 1
                continue
            ph = self._phase_apart(b, a)
            if ph is not None:
                # ordered by the object's declared life cycle, not a lock
                locks.add(ph)
                n += 1
                continue
            if phases_only:
                return None
            x = self._pair_excluded(b, a)
            if x is None:
                return None
            locks |= set(x)
            n += 1
        return sorted(locks) if n else None

    def _phase_sets(self):
        """policies/ 'phases': per entry, the functions of its 'before' and
        'after' phases, each with the functions only that phase calls
        (fixed point, as for the life-cycle functions).  A call from an
        init or teardown function (policies/ 'lifecycle_functions') does
        not count against a phase: nothing else runs on the object then
        (btrfs_destroy_inode() removes the ordered extents it finds, as
        btrfs_finish_ordered_io() does)."""
        sets = getattr(self, "_phsets", None)
        if sets is not None:
            return sets
        sets = []
        for ph in self.P.phases:
            two = [self._only_called_from({k for k, fn in self.src.funcs.items()
                                           if fn.name in ph[side]}, also=self.life)
                   for side in ("before", "after")]
            # a function both phases reach is in neither
            both = two[0] & two[1]
            sets.append((ph, two[0] - both, two[1] - both))
        self._phsets = sets
        return sets

    def _phase_apart(self, b, a):
        """A sentinel naming the policies/ 'phases' entry that orders
        accesses b and a (one in its 'before' phase, the other in its
        'after' phase, both to the entry's struct), or None."""
        if not self.P.phases or a.struct != b.struct or a.func is None or b.func is None:
            return None
        ka, kb = (a.file, a.fn), (b.file, b.fn)
        for i, (ph, before, after) in enumerate(self._phase_sets()):
            if ph["struct"] != a.struct:
                continue
            if (kb in before and ka in after) or (ka in before and kb in after):
                return _phase_key(i, ph)
        return None

    def _unraced(self, a, name, others, phases_only=False):
        """Access a, made without the field's lock (or to a field with no
        lock of its own), needs no mark when every conflicting access in
        others (each write, for a read; every other access, for a write)
        is kept apart from it (rule unraced-in-every-context)."""
        locks = self._kept_apart(a, others, phases_only)
        if locks is None:
            return
        a.action, a.rule = "none", "unraced-in-every-context"
        a.reason = "%s: every %s of it %s: it races with none" % (
            name, "write" if a.kind == "read" else "other access",
            _apart_text(locks, a, self.P.phases))

    def _tie_evidence(self, name, reads, marked):
        st, fld = name.split(".", 1)
        return bool(marked or self.race_exprs.get((st, fld)) or self.handler_of(name) or
                    [r for r in reads if r.fn in self.any_time or
                     any(c in self.P.wait_macros for c in r.ctx)])

    def handler_of(self, name):
        for h in self.P.handlers:
            if name in h.get("fields", []):
                return h
        return None

    def verdict(self, a, info):
        cls = info["class"]
        lk = info["lock"]
        name = info["field"]
        if id(a) in self.owner_read:
            a.action, a.rule = "none", "owner-read"
            a.reason = self.owner_read[id(a)]
            return
        ctxl = self.ctx_locked.get(id(a)) if a.kind == "read" else None
        if cls == "always-locked" and ctxl and not _holds_any(
                a, [lk] + info.get("write_locks", []) + info.get("excl_locks", [])):
            a.action, a.rule = "none", "locked-in-every-caller"
            a.reason = "every write of %s holds %s, and %s() is entered holding, in each of " \
                "its calling contexts, a lock that excludes every write in each of theirs " \
                "(%s): this read races with none" % (name, lk, a.fn,
                                                     " or ".join(sorted(set(ctxl))))
            return
        if cls in ("read-only", "write-only", "always-locked", "no-lock-evidence"):
            a.action = "none"
            a.rule = cls
            if cls == "always-locked" and info.get("owner_reads") and info["owner"]:
                a.reason = "every access to %s holds %s, except the loads of its declared " \
                    "owner, the task running %s() (policies/ 'owners'), which race " \
                    "with no store" % (name, lk, "(), ".join(info["owner"]["functions"]))
            elif cls == "always-locked" and info.get("owner_reads"):
                a.reason = "every access to %s holds %s, except the loads of the task " \
                    "that owns the object, which is the only one that stores it" % (name, lk)
            elif cls == "always-locked" and info.get("ctx_reads"):
                a.reason = "every write of %s holds %s; every read holds it or, in each " \
                    "of its calling contexts, a lock that excludes the writes " \
                    "(locked-in-every-caller)" % (name, lk)
            elif cls == "always-locked" and info.get("other_read"):
                a.reason = "every write of %s holds %s, and every read holds a lock " \
                    "that excludes the writes (e.g. %s)" % (name, lk, info["other_read"])
            elif cls == "always-locked":
                a.reason = "every access to %s holds %s" % (name, lk)
            elif cls == "write-only":
                a.reason = "%s is never read outside initialisation: no load can " \
                    "observe a torn store" % name
            elif cls == "read-only":
                a.reason = "%s is not written outside initialisation" % name
            elif info.get("coincidental_lock"):
                cl = info["coincidental_lock"]
                a.reason = "%s is written under %s (%s), a lock of another struct " \
                    "that no reader of it takes%s: it is held for something else, " \
                    "and nothing else shows the field is shared" % (
                        name, cl, info["lock_site"].where(),
                        "" if info.get("coincidental_why") is None
                        else " " + info["coincidental_why"])
            elif info.get("tie"):
                n, m, tl, w = info["tie"]
                a.reason = "%s is written under %s at %s by %d of its %d writes and " \
                    "without it by as many: a tie, so it is not the field's lock, " \
                    "and nothing else (a wait condition, a marked access, a data_race() " \
                    "of the tree, a handler that runs at any time) shows the field is " \
                    "read while it changes" % (name, tl, w, n, m)
            elif info.get("handed_over"):
                a.reason = "no access to %s holds a lock, and its only handler stores " \
                    "are to the object the handler's context hands it (%s): nothing " \
                    "shows it is shared" % (name, info["handed_over"])
            else:
                a.reason = "no access to %s holds a lock and nothing shows it is shared" % name
            return
        if cls == "diagnostic-only" and (a.kind in ("write", "rmw") or
                                         not self._is_diag_read(a)):
            a.action, a.rule = "none", "diagnostic-only"
            a.reason = "every write of %s holds %s; it is read without it only for " \
                "diagnostics (%s, data_race()): plain accesses under the lock " \
                "are fine" % (name, lk, info["diag_site"])
            return
        if cls == "handler":
            h = info["handler"]
            pol = "P5" if h.get("restores") else "P4"
            if a.fn in h["functions"] or "irqs-off" in a.held:
                a.action, a.rule = "none", "handler-plain"
                a.reason = "%s: %s" % (name, "in the handler" if a.fn in h["functions"]
                                       else "interrupts blocked (%s)" % a.held["irqs-off"].text())
            elif a.kind in ("write", "rmw"):
                a.action = "WRITE_ONCE"
                a.rule = "handler-restores-write" if pol == "P5" else "handler-access"
                a.reason = "%s is shared with %s (%s); written here with the handler enabled" % (
                    name, ", ".join(h["functions"]), h["reason"])
            elif pol == "P5":
                a.action, a.rule = "none", "handler-plain"
                a.reason = "%s: the handler restores it (%s), plain loads are fine" % (
                    name, h["reason"])
            else:
                a.action, a.rule = "READ_ONCE", "handler-access"
                a.reason = "%s is shared with %s (%s); read here with the handler enabled" % (
                    name, ", ".join(h["functions"]), h["reason"])
            return
        held = a.held
        locks = ([lk] + info.get("write_locks", []) + info.get("excl_locks", [])) if lk else []
        holds = lk is not None and _holds_any(a, locks)
        holds_x = lk is not None and lk in held
        share = info.get("share")
        lsite = info.get("lock_site")
        if lk:
            ev = "written under %s at %s" % (lk, lsite.where())
            if share and share[1] > 1:
                ev += " and %d other site%s (%d of %d writes)" % (
                    share[1] - 1, "s" if share[1] > 2 else "", share[0], share[1])
        else:
            ev = "; ".join(info["evidence"]) or "shared without a lock"
        owner = info["owner"]
        is_owner = owner is not None and \
            (a.file, a.fn) in self.declared_owners[name][1]
        if a.kind in ("write", "rmw"):
            a.action = "WRITE_ONCE"
            xl = self._kept_apart(a, info["racers"]) if holds_x else None
            if xl is not None:
                a.action, a.rule = "none", "locked-write-unraced"
                b = info["racers"][0]
                a.reason = "%s is %s without %s elsewhere (e.g. %s() at %s), but each " \
                    "of them %s: nothing races with this locked write" % (
                        name, "written" if b.kind in ("write", "rmw") else "read", lk,
                        b.fn, b.where(), _apart_text(xl, a, self.P.phases))
                return
            if holds_x:
                a.rule = "locked-write"
                other = self._first_unlocked_read(name, locks)
                if other is None:
                    m = [m for m in info["marked"] if lk not in m.held]
                    other = ("%s() at %s" % (m[0].fn, m[0].where())) if m else None
                if other:
                    a.reason = "%s is read without %s elsewhere (e.g. %s); locked write here" \
                        % (name, lk, other)
                else:
                    a.reason = "%s is also written without %s; locked write here" % (name, lk)
            else:
                a.rule = "unlocked-write"
                phase = self.phase_locks
                other = sorted(h for h in held if h != "irqs-off" and not h.startswith("?")
                               and h.split(":")[0] not in phase)
                if lk:
                    a.reason = "%s is %s; written without it here" % (name, ev)
                elif other:
                    a.reason = "%s: %s; written here holding %s, which no other access " \
                        "of the field shares" % (name, ev, other[0].split(":")[0])
                else:
                    a.reason = "%s: %s; written without a lock here" % (name, ev)
                if other:
                    # the seed commit's "Unlocked write" comment would be
                    # wrong on a store made under some other lock
                    a.evidence = "holds-lock"
            if is_owner:
                a.reason += " (owner: %s)" % owner["reason"]
            return
        # reads
        bl = info.get("bitop_locks")
        if cls == "atomic-bitops" and bl and _holds_any(a, bl):
            lb = [x for x in bl if _holds_any(a, [x])][0]
            n, fresh = info["bitop_sites"]
            a.action, a.rule = "none", "locked-read"
            a.reason = "%s is changed only with atomic bit operations, and every one of " \
                "them holds %s (%d site%s%s), which this read holds: no bit can change " \
                "while it reads" % (name, lb, n, "s" if n > 1 else "",
                                     ("; %d more on objects not yet published" % fresh)
                                     if fresh else "")
            return
        if cls == "context-read" and a.fn not in info["ctx_read_fns"]:
            a.action, a.rule = "none", "context-read-plain"
            a.reason = "%s: %s; this read is not in a handler, and nothing shows it " \
                "concurrent with the stores" % (name, ev)
            return
        ctxl = self.ctx_locked.get(id(a)) if not holds else None
        if ctxl:
            a.action, a.rule = "none", "locked-in-every-caller"
            a.reason = "%s() is entered holding, in each of its calling contexts, a lock " \
                "that excludes every write of %s in each of theirs (%s): this read " \
                "races with none" % (a.fn, name, " or ".join(sorted(set(ctxl))))
            return
        if holds:
            # mixed within this function: an unlocked read before the lock.
            # The commit's field also had a store without the lock; when
            # every store holds a lock this read holds, the re-read races
            # with nothing (the unlocked read before it is marked itself).
            if self._unlocked_read_before(a, locks) and \
                    not _holds_any(a, (info.get("write_locks") or []) +
                                   info.get("excl_locks", [])):
                a.action, a.rule = "READ_ONCE", "refetch-after-lock"
                a.reason = "%s is read without %s earlier in %s() and re-read under it here" % (
                    name, lk, a.fn)
            else:
                a.action, a.rule = "none", "locked-read"
                wl = [x for x in info["write_locks"] if _holds_any(a, [x])]
                xl = [x[:-2] for x in info.get("excl_locks", []) if _holds_any(a, [x])]
                if not _holds_any(a, [lk] + wl) and xl:
                    a.reason = "read holding %s exclusively, which every write of %s " \
                        "holds at least shared" % (xl[0], name)
                elif self._unlocked_read_before(a, locks):
                    w = wl[0]
                    a.reason = "re-read under %s after a read without it in %s(); every " \
                        "write of %s holds %s, so this read races with none" % (
                            w, a.fn, name, w)
                elif not _holds_any(a, [lk]):
                    w = wl[0]
                    a.reason = "read under %s, which every write of %s holds" % (w, name)
                else:
                    a.reason = "read under %s, which every write of %s holds" % (lk, name) \
                        if share and share[0] == share[1] else \
                        "read under %s (%d of %d writes hold it)" % (lk, share[0], share[1])
            return
        diag = [c for c in a.ctx if self.P.is_diag(c)]
        if diag and lk and diag[-1] in self.P.assertions and \
                not self._fn_reads_unlocked(a, locks, diagnostic=False):
            # an assertion of a lock-protected field without the lock:
            # the code relies on no store running here (an assertion that
            # raced with the stores would fire or miss at random); nothing
            # shows a racing store, so there is no data race to document
            a.action, a.rule = "none", "assertion-read"
            a.reason = "%s is %s; the %s() here checks it without the lock at a point " \
                "where no store is expected, and %s() reads it without the lock " \
                "nowhere else" % (name, ev, diag[-1], a.fn)
            return
        if diag:
            a.action, a.rule = "data_race", "diagnostic-read"
            a.reason = "%s is %s; read without it only for %s() here" % (
                name, ev if lk else "shared (" + ev + ")", diag[-1]) if lk else \
                "%s: %s; read only for %s() here" % (name, ev, diag[-1])
            return
        a.action, a.rule = "READ_ONCE", "unlocked-read"
        if lk:
            a.reason = "%s is %s; read without it here" % (name, ev)
        else:
            a.reason = "%s: %s; read without a lock here" % (name, ev)

    def _pair_excluded(self, b, a):
        """The locks that keep accesses b and a from running side by side,
        one shared in every pair of their calling contexts (exclusive on
        one side, or in two groups that exclude each other), or None:
        _ctx_excluded() for one access."""
        memo = self._wxmemo
        k = (id(b), id(a))
        if k not in memo:
            memo[k] = None if b.func is None or a.func is None else \
                self._ctx_excluded(b, [a], [])
        return memo[k]

    def _is_diag_read(self, a):
        return any(self.P.is_diag(c) for c in a.ctx)

    def _unlocked_read_before(self, a, locks):
        for b in self._fn_field_reads(a):
            if b.tok is not None and a.tok is not None and b.tok < a.tok and \
                    not _holds_any(b, locks):
                return True
        return False

    def _fn_reads_unlocked(self, a, locks, diagnostic=True):
        """Does a.fn read a's field without locks anywhere (only counting
        non-diagnostic reads unless diagnostic)?"""
        idx = getattr(self, "_fmr", None)
        if idx is None:
            # loads already marked (READ_ONCE(), data_race()) count too: a
            # patched tree keeps its verdicts
            idx = collections.defaultdict(list)
            for b in self.accesses:
                if b.exclusion and b.exclusion[0] == "already-marked" and b.macro and \
                        b.macro not in STORE_MACROS:
                    idx[(b.file, b.fn, b.struct, b.field)].append(b)
            self._fmr = idx
        for b in self._fn_field_reads(a) + idx[(a.file, a.fn, a.struct, a.field)]:
            if b is a or _holds_any(b, locks):
                continue
            if diagnostic or not self._is_diag_read(b):
                return True
        return False

    def _fn_field_reads(self, a):
        idx = getattr(self, "_ffr", None)
        if idx is None:
            idx = collections.defaultdict(list)
            for b in self.accesses:
                if b.exclusion is None and b.kind in ("read", "rmw"):
                    idx[(b.file, b.fn, b.struct, b.field)].append(b)
            self._ffr = idx
        return idx[(a.file, a.fn, a.struct, a.field)]

    def _first_unlocked_read(self, name, locks):
        """'f() at x.c:N' for the first read of name holding none of locks,
        or None."""
        idx = getattr(self, "_fur", None)
        if idx is None:
            idx = {}
            for b in self.accesses:
                if b.exclusion is None and b.kind in ("read", "rmw") and not b.test and \
                        id(b) not in self.owner_read:
                    k = "%s.%s" % (b.struct, b.field)
                    if k not in idx:
                        idx[k] = []
                    idx[k].append(b)
            self._fur = idx
        for b in idx.get(name, []):
            if not _holds_any(b, locks) and id(b) not in self.lost_ids and \
                    not self.ctx_locked.get(id(b)):
                return "%s() at %s" % (b.fn, b.where())
        return None

    def run(self, scan=None):
        """scan: a callable giving source_scan()'s result, called after the
        lock flow (commands.analyse() computes it in another process)."""
        self.build_accesses()
        self.run_flow()
        self.call_graph(scan() if scan is not None else None)
        self.constructors = self.find_constructors()
        # owner parameters first: _detached() (_asserted_off_list()) needs them
        self.owner_params()
        self.param_escapes()
        self.private_params()
        self.entry_locks()
        self.cond_params()
        self.attach_held()
        self.apply_exclusions()
        self.owner_reads()
        self.container_held()
        self.infer()
        return self


_LINK_TYPES = {"struct rb_node", "struct list_head", "struct hlist_node", "struct llist_node"}


def _a(what):
    """'a sysfs handler (...)', but 'called from ...' as it is."""
    return what if what.startswith("called from") else "a " + what


_OWNER_PAIR = "(the task that owns the object)"
_PHASE_PAIR = "(phase) "
# how a reason names a declared life-cycle order (series.py counts them)
PHASE_TAG = "policies/ 'phases'"


def _phase_key(i, ph):
    """_kept_apart()'s sentinel for entry i of policies/ 'phases'."""
    return "%s%d %s" % (_PHASE_PAIR, i, ph["struct"])


def _apart_text(locks, a, phases=None):
    """How _kept_apart()'s locks keep the other accesses from access a,
    for a reason text ('every write of it ...')."""
    this = "read" if a.kind == "read" else "write"
    owner = "is made, as this %s is, by the task that owns the object (a struct on " \
        "its stack, or a parameter every caller passes such a struct in)" % this
    parts = []
    real = [x for x in locks if x != _OWNER_PAIR and not x.startswith(_PHASE_PAIR)]
    if real:
        parts.append("shares a lock with this %s in every pair of their calling contexts "
                     "(%s), exclusive on one side%s" % (
                         this, " or ".join(real),
                         " or held in two groups that exclude each other"
                         if any(" against " in lk for lk in real) else ""))
    for i, ph in enumerate(phases or ()):
        if _phase_key(i, ph) in locks:
            parts.append("is ordered with this %s by the life cycle of a struct %s that "
                         "%s declares (%s() before %s(): %s)" % (
                             this, ph["struct"], PHASE_TAG, "(), ".join(ph["before"]),
                             "(), ".join(ph["after"]), ph["reason"]))
    if _OWNER_PAIR in locks:
        parts.append(owner)
    return ", or ".join(parts)


def _holds_any(a, locks):
    """a holds one of locks, in any mode ('L!x': only exclusively)."""
    return any((lk[:-2] in a.held) if lk.endswith("!x") else
               (lk in a.held or lk + ":r" in a.held) for lk in locks)
