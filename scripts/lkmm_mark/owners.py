# SPDX-License-Identifier: GPL-2.0-only
"""Ownership, part 5: owners and life cycles.  Owner parameters (every
caller passes a struct on its own stack, or such a parameter of its
own: a greatest fixed point), the owner's reads (P1: a field only its
owner stores is read plainly by that owner; 'owner-only' when nobody
else touches it), the declared owners of policies/ 'owners' and the
functions only they call, and the life-cycle functions (declared
init/teardown and the functions only they call).

Reads .src, .accesses (with their exclusions), .calls (sites_of()),
.addr_taken, .macro_used, .dead, .entry, .P (owners, lifecycle).  Sets
.owned_params, .owner_read (id(access) -> reason), .owner_quiet (the
declared owners' loads, which race with no store), .owner_acc (the
accesses an owner makes: races.py keeps two of them apart) and
.declared_owners, and 'owner-only' exclusions; .made (made_params():
the parameters and, through _made_locals(), the locals that hold an
object the task allocated itself).  A wrong owner here
hides the races of that field's loads.
"""
import collections

from . import csrc
from .scan import _pasted
from .source import STORE_MACROS, _short
from .newobjects import _call_macros
from .tokutil import _root, _stmt_end


class Owners:
    def owner_params(self):
        """Parameters that always point to an object the calling task owns:
        every call site passes the address of a struct on its own stack, or
        such a parameter of its own.  A direct call runs in the caller's
        task, so an access through such a parameter is made by the object's
        owner, even when the object is linked into a shared list.  Greatest
        fixed point: recursive helpers that hand the object back and forth
        (foo_log_inode() and foo_log_parents()) stay owners, and
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
        self.owner_read = {}
        self.owner_quiet = set()        # the declared owners' loads: race with no store
        self.owner_acc = {}
        self.declared_owners = self._declared_owners()
        byfield = collections.defaultdict(list)
        for a in self.accesses:
            if a.test:
                continue
            if a.exclusion is None or (a.exclusion[0] == "already-marked" and a.macro and
                                       a.kind == "marked"):
                byfield[(a.struct, a.field)].append(a)
                r = self._owner_root(a)
                if r is not None:
                    # made by the task that owns the object: two such
                    # accesses never run side by side (_kept_apart())
                    self.owner_acc[id(a)] = r
        for (st, fld), accs in byfield.items():
            self._owner_stores(st, fld, accs)
        self._declared_owner_paths()
        self._declared_owner_reads(byfield)

    def _owner_root(self, a):
        """(root, what) when access a is made through an object its task
        owns (a struct on its stack, or an owner parameter), else None."""
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
            else:
                what = self._made_root(a.func, root)
        if what is None or self._private_root(a, {root: None}) is None:
            return None
        return root, what

    def _owner_stores(self, st, fld, accs):
        """When every store to st.fld is made by the task that owns the
        object: owner-only for its accesses if nobody else touches it,
        else owner-read for the owner's loads."""
        stores = [a for a in accs if a.kind in ("write", "rmw") or
                  (a.kind == "marked" and a.macro in STORE_MACROS)]
        if not stores:
            return
        own = {}
        for a in accs:
            r = self._owner_root(a)
            if r is not None:
                own[id(a)] = r
        if any(id(w) not in own for w in stores):
            return
        w = stores[0]
        if all(id(a) in own for a in accs):
            # nobody but the owner touches the field at all
            for a in accs:
                if a.exclusion is None:
                    root, what = own[id(a)]
                    a.exclusion = ("owner-only", "every access to %s.%s is made by the "
                                   "task that owns the object; '%s' here is %s" % (
                                       st, fld, root, what))
            return
        # the owner's loads stay in the field's evidence (a load under
        # the lock shows which lock protects it) but race with no store
        for a in accs:
            if a.exclusion is None and a.kind == "read" and id(a) in own:
                root, what = own[id(a)]
                self.owner_read[id(a)] = (
                    "every store to %s.%s is made by the task that owns the object "
                    "(e.g. %s() at %s); '%s' here is %s, so this is the owner's "
                    "read" % (st, fld, w.fn, w.where(), root, what))

    def _declared_owner_reads(self, byfield):
        """owner-read for the loads a declared owner (policies/ 'owners')
        makes, and for those of functions that run only in the owner's
        task or under the lock every store holds."""
        # declared owners (policies/ 'owners'): the field belongs to the
        # task running those functions, and every store another task makes
        # comes before that task starts or after it ends: its loads race
        # with no store
        for a in self.accesses:
            d = self.declared_owners.get("%s.%s" % (a.struct, a.field))
            if not d or a.exclusion is not None or a.test or a.kind != "read":
                continue
            if (a.file, a.fn) in d[1]:
                self.owner_quiet.add(id(a))
                self.owner_read[id(a)] = "read by the owner of %s.%s: %s()%s (%s)" % (
                    a.struct, a.field, a.fn, "" if a.fn in d[0]["functions"] else
                    ", which only the owner's functions call", d[0]["reason"])
                continue
            lk = self._owner_or_locked(a, byfield.get((a.struct, a.field), []), d[1])
            if lk:
                self.owner_quiet.add(id(a))
                self.owner_read[id(a)] = "%s() is called by the owner of %s.%s or with %s " \
                    "held, which every store of the field holds: its loads race with no " \
                    "store (owner: %s)" % (a.fn, a.struct, a.field, lk, d[0]["reason"])

    def _declared_owner_paths(self):
        """policies/ 'owners' with "through": the owner's accesses are
        those its functions make through the object it owns, named by a
        path ('h->tx'), a local assigned only such paths
        ('cur = h->tx;'), or a
        parameter every call passes such an object in.  Two of them never
        run side by side (each task owns its own object; pairs.py), while
        the owner's accesses to other objects of the struct are judged as
        usual (the commit reads the previous transaction's state).  The
        owner's loads through it stay plain; the field's class is not the
        owner's (other objects of the struct have no owner)."""
        for o in self.P.owners:
            paths = set(o.get("through", ()))
            if not paths:
                continue
            fields = set(o["field"])
            fns = self._only_called_from({key for key, fn in self.src.funcs.items()
                                          if fn.name in o["functions"]}, skip=self.dead)
            for a in self.accesses:
                if (a.file, a.fn) not in fns or "%s.%s" % (a.struct, a.field) not in fields \
                        or a.func is None or a.test or a.exclusion is not None:
                    continue
                if self._owner_path(a.func, (a.base or "").replace(" ", ""), paths, fns, 0):
                    why = "the object %s() owns (%s)" % (a.fn, o["reason"])
                    self.owner_acc[id(a)] = (a.base, why)
                    if a.kind == "read":
                        self.owner_read[id(a)] = "read by the owner of this %s: %s" % (
                            a.struct, why)

    def _owner_path(self, fn, base, paths, fns, depth):
        """base, in owner function fn, names the owned object."""
        if base in paths:
            return True
        if not base.isidentifier() or depth > 2:
            return False
        toks = self.src.toks[fn.file]
        where = [j for j in self._ids(fn).get(base, ())
                 if toks[j + 1].text == "=" and toks[j - 1].text not in (".", "->")]
        if where:
            return all("".join(t.text for t in toks[j + 2:_stmt_end(toks, j + 2, fn.body_end)])
                       in paths for j in where)
        args = self.param_arguments(fn, base)
        return bool(args) and all(
            (caller.file, caller.name) in fns and self._owner_path(
                caller, "".join(t.text for t in self.src.toks[caller.file][lo:hi]),
                paths, fns, depth + 1)
            for (caller, lo, hi) in args)

    def _owner_or_locked(self, a, accs, owner_fns):
        """The lock every call site of a's function holds that is not in
        one of the owner's functions, when every store of the field holds
        it exclusively (a progress function called by the kthread that
        owns the object, and under the object's rwsem by a status ioctl);
        else None, and None when no call site
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
            if o.get("through"):
                continue        # an owner of objects, not of the field (_declared_owner_paths())
            fns = self._only_called_from(
                {key for key, fn in self.src.funcs.items() if fn.name in o["functions"]},
                skip=self.dead)
            for name in o["field"]:
                out[name] = (o, fns)
        return out

    def lifecycle_functions(self):
        """Declared init/teardown functions, and functions only they call
        or the init branches of policies/ 'init_time_flags' call (initflags.py)."""
        life = self.__dict__.get("_lifefns")
        if life is None:
            life = self._lifefns = self.with_init_branches(self._only_called_from(
                {k for k, fn in self.src.funcs.items() if self.P.is_lifecycle(fn.name)}))
        return life

    def alone_functions(self):
        """The life-cycle functions that run while nothing else does: those
        whose callers the target does not see or that it never calls (the
        mount and unmount, the module's init and exit) and, to a fixed
        point, those only such functions call, directly or through an ops
        table whose calls the target makes (log recovery's item methods).
        Not one live code calls (an object's constructor, a lookup that
        reads an inode from disk: it runs beside everything else)."""
        alone = self.__dict__.get("_alonefns")
        if alone is None:
            life = self.lifecycle_functions()
            callers, _ = self._call_keys()
            alone = {k for k in life if not callers.get(k)}
            grow = True
            while grow:
                new = {k for k in life - alone if all(c in alone for c in callers[k])}
                alone |= new
                grow = bool(new)
            self._alonefns = frozenset(alone)
        return alone

    def _only_called_from(self, keys, also=frozenset(), skip=frozenset()):
        """keys and, to a fixed point, every function whose live call sites
        are all in that set or in also (at least one in the set):
        functions that run only inside the ones named.  Recursive calls do
        not count (the outermost call decides); a function whose address
        is taken, or that a macro body names, never qualifies (its callers
        are not all visible); nor does one in skip."""
        callers, callees = self._call_keys()
        mine = set(keys)
        todo = list(mine)
        while todo:
            for key in callees.get(todo.pop(), ()):
                if key in mine or key in skip:
                    continue
                sites = callers[key]
                if sites is not None and all(c in mine or c in also for c in sites):
                    mine.add(key)
                    todo.append(key)
        return mine

    def _call_keys(self):
        """(callers, callees): function key -> the keys of the functions
        that call it, other than itself (None for one whose address is
        taken or that a macro body names, but for the calls of a macro
        that is one call of it: _macro_call_sites()), and function key ->
        the keys of
        those it calls (remembered: the call graph is complete here)."""
        c = self.__dict__.get("_callkeys")
        if c is None:
            callers, callees = {}, collections.defaultdict(set)
            for key, fn in self.src.funcs.items():
                sites = [(s[0].file, s[0].name) for s in self.sites_of(fn) if s[0] is not fn]
                for ck in sites:
                    callees[ck].add(key)
                msites = self._macro_call_sites(fn.name) if fn.name in self.macro_used else []
                for ck in msites or ():
                    callees[ck].add(key)
                callers[key] = None if fn.name in self.addr_taken or msites is None \
                    else tuple(sites + msites)
            c = self._callkeys = (callers, callees)
        return c

    def _macro_call_sites(self, name):
        """The keys of the functions that call name through the macros
        that name it (macro_sites()), or None."""
        sites = self.macro_sites(name)
        return None if sites is None else [(s[0].file, s[0].name) for s in sites]

    def macro_sites(self, name):
        """The call sites (caller, state, index) of the macros that name
        function name, when every definition of each is one call of name
        ('#define foo(a, m) __foo((a), __func__, (m))', in any
        configuration) and no macro body names those macros; else None
        (a caller hidden in a macro, or a name pasted together).  Also
        asked by callers.py for the locks such a function is entered with."""
        memo = self.__dict__.setdefault("_macronaming", {})     # the sources alone
        if name not in memo:
            defs = _call_macros(self.src)
            naming = {m for m, _, ids in defs if name in ids}
            bad = not naming or any(c != name for m, c, _ in defs if m in naming) or \
                any(naming & ids for _, _, ids in defs) or \
                any(name.startswith(x) or name.endswith(x) for _, x in self._pasted_parts())
            memo[name] = None if bad else sorted(naming)
        return None if memo[name] is None else \
            [s for m in memo[name] for s in self.calls.get(m, ())]

    def _pasted_parts(self):
        """What macro bodies paste names from (scan.py _pasted())."""
        c = self.__dict__.get("_pastedparts")
        if c is None:
            c = self._pastedparts = set()
            for text in self.src.text.values():
                for body in csrc.macro_bodies(text):
                    c |= _pasted(body)
        return c

    # ------------------------------------------------ objects the task made
    def made_params(self):
        """Parameters that always point to an object the calling task made
        itself: every call passes a local whose every assignment is a
        fresh allocation (an allocator or a constructor), or 'y->p' with y
        such an object and p a field every store of which is
        'x->p = v' for a fresh x and such a v (the task's object, stored
        in the task's new object), or such a parameter, or an owner
        parameter's object.  A direct call runs in the caller's task, so
        two accesses through them are made by the task that made the
        object: never side by side (another task's path to it, a worker's
        'w->obj', is not one of them).  A greatest fixed point, as
        owner_params(); kept apart from owner_params(), whose objects other
        tasks reach only through the links they find them by."""
        cand = {}
        for key, fn in self.src.funcs.items():
            if fn.name in self.addr_taken or fn.name in self.macro_used or key in self.dead:
                continue
            if self.sites_of(fn):
                for n, p in enumerate(self.params(fn)):
                    if p and not self._reassigned(fn, p) and \
                            p not in self.owned_params.get(key, {}):
                        cand.setdefault(key, {})[p] = n
        own = {key: set(ps) for key, ps in cand.items()}
        for key, ps in self.owned_params.items():
            own.setdefault(key, set()).update(ps)
        changed = True
        while changed:
            changed = False
            self._madememo = {}
            for key, ps in cand.items():
                fn = self.src.funcs[key]
                for p in sorted(own[key] & set(ps)):
                    if not all(self._arg_made(caller, k, ps[p], own)
                               for (caller, st, k) in self.sites_of(fn)):
                        own[key].discard(p)
                        changed = True
        self.made = own

    def _arg_made(self, caller, k, n, own):
        """Argument n of the call at toks[k] is an object caller's task
        made (or owns)."""
        if self._arg_owned(caller, k, n, own):
            return True
        args = self._call_args(caller.file, k)
        if args is None or n >= len(args) or args[n][1] - args[n][0] != 1:
            return False
        return self.src.toks[caller.file][args[n][0]].text in self._made_locals(caller, own)

    def _made_locals(self, fn, own):
        """Locals of fn that only ever hold an object fn's task made."""
        memo = self.__dict__.setdefault("_madememo", {})
        key = (fn.file, fn.name)
        if key not in memo:
            memo[key] = frozenset()     # a cycle through a creator field
            fresh = set(self.constructors) | set(self.P.allocators)
            mine = own.get(key, set()) | set(self._stack_structs(fn))
            types = self._decl_types(fn)
            made = set()
            for v, vs in self._local_values(fn).items():
                if vs and all(x is not None and (
                        x == ["NULL"] or (len(x) > 1 and x[0] in fresh and x[1] == "(") or
                        (len(x) == 3 and x[1] == "->" and x[0] in mine and
                         self._creator_field(types.get(x[0]), x[2], own)))
                        for x in vs):
                    made.add(v)
            memo[key] = frozenset(made)
        return memo[key]

    def _local_values(self, fn):
        """local -> the token texts of each value assigned to it (None: its
        address taken, or a loop macro's cursor); the same in every round
        of made_params(), so kept."""
        memo = self.__dict__.setdefault("_localvals", {})
        key = (fn.file, fn.name)
        if key in memo:
            return memo[key]
        toks = self.src.toks[fn.file]
        types = self._decl_types(fn)
        params = set(self.params(fn))
        vals = collections.defaultdict(list)
        for v, ks in self._ids(fn).items():
            if v in params or v not in types:
                continue
            for j in ks:
                if toks[j - 1].text in (".", "->"):
                    continue                    # a member of that name
                c = self._call_arg(toks, j, fn.body_start)
                if (toks[j - 1].text == "&" and toks[j + 1].text not in ("->", "[")) or \
                        (c is not None and ("for_each" in c[0] or c[0] == "swap")):
                    # its address, the cursor of a loop macro
                    vals[v].append(None)
                elif toks[j + 1].text == "=":
                    e = _stmt_end(toks, j + 2, fn.body_end)
                    vals[v].append([t.text for t in toks[j + 2:e]])
        memo[key] = vals
        return vals

    def _creator_field(self, t, fld, own):
        """Every store of the pointer field fld of struct type t is
        'x->fld = v;' with x a fresh allocation of the storing function
        and v an object its task made, and its address is never taken."""
        from .csrc import struct_name
        st = struct_name(t or "")
        seen = False
        for b in self._accesses_of(st, fld):
            if b.kind == "address" or (b.kind == "marked" and b.macro in STORE_MACROS):
                return False
            if b.kind in ("write", "rmw"):
                toks = self.src.toks[b.file]
                if b.func is None or b.kind == "rmw" or toks[b.tok + 1].text != "=" or \
                        toks[b.tok + 3].text not in (";", ",") or \
                        toks[b.tok - 3].text not in (";", "{", "}"):
                    return False
                x, v = toks[b.tok - 2].text, toks[b.tok + 2].text
                fresh = self._made_locals(b.func, own)
                if x not in fresh or not (v in fresh or v in own.get((b.file, b.fn), ())):
                    return False
                seen = True
        return seen

    def _accesses_of(self, st, fld):
        """The accesses of st.fld, in their order in self.accesses (an
        index made once per length of that list)."""
        idx = self.__dict__.get("_byfield")
        if idx is None or idx[0] != len(self.accesses):
            d = collections.defaultdict(list)
            for b in self.accesses:
                d[(b.struct, b.field)].append(b)
            idx = self._byfield = (len(self.accesses), d)
        return idx[1].get((st, fld), ())

    def _made_root(self, fn, root):
        """'a parameter/local of fn that holds an object its task made'
        (made_params(), _made_locals()), or None."""
        key = (fn.file, fn.name)
        if root in self.made.get(key, ()) and root not in self.owned_params.get(key, {}):
            return "a parameter of %s() that every caller passes an object its task made " \
                "itself (a fresh allocation, or such a parameter)" % fn.name
        # the memo of made_params()'s last pass holds for the final sets
        if root in self._made_locals(fn, self.made):
            return "a local of %s() that only ever holds an object its task made itself " \
                "(a fresh allocation, or one stored in such an object by its maker)" % fn.name
        return None
