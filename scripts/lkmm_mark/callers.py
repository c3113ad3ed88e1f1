# SPDX-License-Identifier: GPL-2.0-only
"""Stage 2d: what holds when a function runs, from its callers and its
registrations: the locks held on entry (annotations, assertions, lock
parameters, ops methods, the lock a submitter hands to its I/O (lending.py),
and those every caller holds: a fixed point),
the locksets of each calling context, the locks each access holds, and
the execution contexts (handlers, what runs at any time).

Reads .flows, .calls (sites_of()), .lockfns, .addr_taken, .macro_used,
.P, and asks ownership.py whether a call passes a private object
(escapes.without_private(): such a call says nothing about shared objects)
and which macros are each one call of a function (owners.macro_sites():
their calls are its calls).
Sets .entry ((file, fn) -> lock -> How), each access's .held
(attach_held()), .any_time and .handover (contexts(), which returns the
context of each handler and of its callees).  An access whose callers'
locks are not all seen here ends as a false 'unlocked' in
protection.py; _ctx_excluded() (with contexts.caller_contexts()) is where a read is
found apart from every write by its callers' locks alone.
"""
import collections
import functools

from . import csrc
from .lockmodes import HANDED, declared_excluding, group_lock, groups_exclude, mode_name, \
    uncovered, without_covering
from .lockstate import How
from .guards import guard_struct
from .source import _short
from .forksplit import by_group, fork_map
from .tokutil import _split

# how entry_locks() names a lock every caller holds
_BY_CALLERS = "held by all"


class Callers:
    def entry_locks(self):
        """Locks held at entry: annotations, and held by every caller (fixed point)."""
        annot = {}
        # a method of an ops table the caller calls with a lock held
        # (policies 'ops_entry_locks': the VFS holds i_rwsem around ->unlink)
        ops_entry = self.ops_entry_members()
        for key, fn in self.src.funcs.items():
            annot[key] = self._own_entry_locks(key, fn, ops_entry)
        # a lock a callee handed the parameter on every path asserts
        # (assertentry.py)
        for key, held in self.assert_implied_locks().items():
            for n, how in held.items():
                annot[key].setdefault(n, how)
        # and the lock a submitter hands to its I/O's completion (lending.py)
        io = self.io_lent_locks()
        for handed in (self.handed_locks(), self.handed_states(), io):
            for key, held in handed.items():
                for n, how in held.items():
                    annot[key].setdefault(n, how)
        # the greatest fixed point: a function every caller of which is
        # entered with L is entered with L, also around recursion
        # (a function that logs an inode and the helpers that log other
        # inodes call each other inside one log transaction).  Calls that pass an
        # object private to the caller do not count (_shared_sites()),
        # except for the states of guards.py, which hold whatever object
        # a caller passes.
        entry = self._fixed_point(self._shared_sites(), annot, None)
        # the locks a task lends with an object it hands over and waits
        # for (lending.py): they hold in the functions it hands it to
        lent = self.lent_locks(entry)
        for key, held in lent.items():
            for n, how in held.items():
                annot[key].setdefault(n, how)
        if lent:
            entry = self._fixed_point(self._shared_sites(), annot, None)
        unheld = self._unheld_ops_locks(ops_entry, entry)
        for key, names in self.io_unheld(io, entry).items():
            unheld.setdefault(key, set()).update(
                n for n in names if annot[key].get(n) is io[key][n])
        if unheld:
            for key, names in unheld.items():
                for n in names:
                    annot[key].pop(n, None)
            entry = self._fixed_point(self._shared_sites(), annot, None)
        every = {key: self.live_sites(sites) for key, sites in
                 ((key, self._entry_sites(fn)) for key, fn in self.src.funcs.items()) if sites}
        states = self._fixed_point(every, annot, lambda n: "{=" in n)
        for key, held in states.items():
            for n, how in held.items():
                entry[key].setdefault(n, how)
        self.entry = entry

    def _fixed_point(self, sites_of, annot, keep):
        """{function key: locks it is entered with}: its own (annot) and
        those every call site of sites_of[key] holds, iterated down from
        'every lock' (_TOP); keep: which locks count (None: all).  What is
        still unknown at the end (a cycle no outside caller enters) keeps
        only its own locks."""
        entry = {k: (_TOP if k in sites_of else dict(v)) for k, v in annot.items()}
        clocks = list(self.P.container_locks.values())
        # calls made in a branch some of the caller's own callers do not
        # reach (flagargs.py): the caller's locks there are those of the
        # calls that do
        pruned = {}
        for sites in sites_of.values():
            for (caller, st, k) in sites:
                rs = self.reaching_sites_at(caller, k)
                if rs is not None:
                    pruned[(caller.file, k)] = rs
        # a worklist: a function is looked at again only when the entry of
        # one of its callers changed (the same greatest fixed point as
        # sweeping every function until nothing changes, in a fifth of
        # the work)
        users = _callers_users(sites_of, pruned)
        work = collections.deque(sites_of)
        queued = set(sites_of)
        while work:
            key = work.popleft()
            queued.discard(key)
            sites = sites_of[key]
            common = _held_by_all(sites, entry, clocks, pruned)
            if common is _TOP:
                continue
            if keep is not None:
                common = {n for n in common if keep(n)}
            new = self._with_callers_locks(key, annot[key], common, sites)
            if entry[key] is _TOP or set(new) != set(entry[key]):
                entry[key] = new
                for u in users.get(key, ()):
                    if u not in queued:
                        queued.add(u)
                        work.append(u)
        return {k: (dict(annot[k]) if v is _TOP else v) for k, v in entry.items()}

    def _with_callers_locks(self, key, own, common, sites):
        """own plus the locks common to every call site, each with how the
        callers hold it."""
        fn = self.src.funcs[key]
        new = dict(own)
        if fn.name not in self._covering():
            common = without_covering(set(common or ()))
        for n in sorted(common or ()):
            if n not in new:
                c0 = sites[0]
                new[n] = How(_BY_CALLERS + " %d callers (%s at %s:%d)"
                             % (len(sites), c0[0].name, _short(c0[0].file),
                                self.src.toks[c0[0].file][c0[2]].line), fn.line)
        return new

    def _covering(self):
        """The functions that access a struct a pseudo-lock covers
        (policies/ 'pseudo_locks' "covers") in their own body: only their
        entry locks and calling contexts keep such a lock's holds.  The
        hold is kept down a chain of calls that each work on such objects
        (a range's extent maps); a call into code that touches none (a
        space reservation, a flush, a commit) works on other objects,
        and neither it nor its callees get the hold (it would also only
        multiply the contexts a function counts).  A function handed such
        an object (a parameter 'struct S *p' or 'struct S **pp', as a call
        wrapper 'f(a, p) { g(a, &p, 1); }' is) works on it too, even when
        its own body touches none of its members; so does one that
        accesses a struct embedding such an object by value (its
        container: 'struct C { struct S s; ... }', 'c->s' is one)."""
        got = self.__dict__.get("_covmemo")
        if got is None:
            structs = {s for c in self.P.pseudo_locks.values() for s in c.get("covers", ())}
            if structs:
                structs |= self._containers(structs)
            got = frozenset(a.fn for a in self.accesses if a.struct in structs)
            if structs:
                got |= self._handed_covered(structs)
            self._covmemo = got
        return got

    def _containers(self, structs):
        """The structs with a member of one of structs, by value."""
        types = {"struct " + s for s in structs}
        return {name for name, members in self.src.structs.items()
                if any(not m.pointer and not m.array and m.type in types
                       for m in (members or {}).values())}

    def _handed_covered(self, structs):
        """The names of the functions with a parameter pointing to one of
        structs."""
        return {fn.name for fn in self.src.funcs.values()
                if any(self._decl_types(fn).get(p) in structs for p in self.params(fn) if p)}

    def _own_entry_locks(self, key, fn, ops_entry):
        """The locks fn itself says it is entered with: annotations, a
        declared unlock wrapper, assertions before any acquisition, lock
        parameters, a lock the caller of an ops method holds."""
        held = {}
        for (nm, toks) in fn.annots:
            if nm in ("__must_hold", "__releases"):
                name = self._annot_lock(fn, toks)
                if name:
                    held[name] = How(nm + "() annotation", fn.line)
        # a declared unlock wrapper (policies 'lock_functions', op
        # release) is entered with the lock it releases held
        spec = self.lockfns.get(fn.name)
        if spec is not None and spec.get("op") == "release" and spec.get("lock") and \
                not spec.get("when_arg") and not spec.get("when_field"):
            held[mode_name(group_lock(spec["lock"], spec), spec)] = How(
                "%s() is a declared unlock wrapper of %s, entered with it held"
                % (fn.name, spec["lock"]), fn.line)
        # an assertion with no acquisition before it: held on entry
        res = self.flows.get(key)
        acquired = set()
        for (k, op, name) in (res.events if res else ()):
            if op == "acquire":
                acquired.add(name)
            elif op == "assert" and name not in acquired and name not in held:
                held[name] = How("asserted held in %s()" % fn.name,
                                 self.src.toks[fn.file][k].line)
        if self.P.param_locks:
            for name, how in self._param_held(fn).items():
                held.setdefault(name, how)
        # (when the target also calls fn itself, entry_locks() keeps
        # only those its callers hold too: _unheld_ops_locks())
        for member, f, line, table in ops_entry.get(fn.name, ()):
            for spec, lk in self.ops_locks_of(member, table):
                held.setdefault(mode_name(lk["lock"], lk), How(
                    "held by the caller of ->%s (.%s = %s at %s:%d; %s)" % (
                        member, member, fn.name, _short(f), line, spec["reason"]), fn.line))
        return held

    def _shared_sites(self):
        """function key -> its call sites, less those that pass an object
        private to the caller (all of them if every one does)."""
        # a call passing an object private to the caller (a stack struct, a
        # new object) says nothing about the lock of the shared ones
        live = {}
        for key, fn in self.src.funcs.items():
            sites = self._entry_sites(fn)
            if sites:
                live[key] = self.live_sites(sites)
        self._prefetch_private(live.values())
        return {key: self.without_private(sites) for key, sites in live.items()}

    def _entry_sites(self, fn):
        """fn's call sites, whose locks it is entered with: None when its
        callers are not all seen (its address is taken, a macro body
        names it), but for a function named only by macros each of which
        is one call of it: its own calls and the macros' (owners.py
        macro_sites(); '#define foo(a, e) __foo((a), (e), __func__)')."""
        if fn.name in self.addr_taken:
            return None
        if fn.name not in self.macro_used:
            return self.sites_of(fn)
        msites = self.macro_sites(fn.name)
        return None if msites is None else self.sites_of(fn) + msites

    def _prefetch_private(self, site_lists):
        """The private-argument test of every call site without_private()
        asks about, the calls of half of the files in a forked child
        (forksplit.py; the answers go to its cache)."""
        todo = {}
        for sites in site_lists:
            if len(sites) > 1:
                for (caller, _, k) in sites:
                    if (caller.file, k) not in self._ppcache:
                        todo[(caller.file, k)] = caller
        items = sorted(todo.items(), key=lambda x: x[0])
        got = fork_map(items, lambda x: self._passes_private(x[1], x[0][1]),
                       by_group(items, lambda x: x[0][0]))
        for (key, _), c in zip(items, got):
            self._ppcache[key] = c

    def _locksets(self, a):
        """The locksets of access a, one per calling context of its
        function (its own locks at a with each context's), or just the
        locks it holds when the contexts are not known."""
        return [x for x, _ in self.lockset_chains(a)]

    def racing_contexts(self, a, b):
        """How many pairs of calling contexts of accesses a and b share no
        excluding lock, of how many (pairs.py prefers the counterpart that
        races in the most of its contexts)."""
        xs, ys = tuple(self._locksets(a)), tuple(self._locksets(b))
        memo = self.__dict__.setdefault("_rcmemo", {})
        got = memo.get((xs, ys))
        if got is None:
            # many contexts share a lockset: count each distinct pair once
            # (and many accesses share their contexts' locksets: a fifth
            # of the pairs asked about are distinct)
            cx, cy = collections.Counter(xs), collections.Counter(ys)
            racing = sum(n * m for x, n in cx.items() for y, m in cy.items()
                         if _excluding(x, y) is None)
            got = memo[(xs, ys)] = (racing, len(xs) * len(ys))
        return got

    def _ctx_excluded(self, r, writes, common):
        """Every calling context of read r shares a lock with every calling
        context of every write, exclusive on at least one side (two readers
        of an rwsem do not exclude each other): the locks, or None.  First
        the cheap case, a lock of common (one every write holds: 'L', or
        'L!x' for one every write holds at least shared) in every context of
        r; then the pairs, for fields of at most 16 writes (they grow as the
        product of the contexts).  The commit of a transaction calls a
        cache setup function once from the one task that starts the dirty
        block groups (under their writeout mutex, holding a handle) and
        again inside the critical section, which excludes every handle."""
        rs = self._locksets(r)
        found = []
        for x in rs:
            hit = [lk for lk in common if (lk[:-2] in x or lk[:-2] + HANDED in x
                                           if lk.endswith("!x") else
                                           lk in x or lk + ":r" in x or lk + HANDED in x or
                                           lk + HANDED + ":r" in x)]
            if not hit:
                break
            found.append(hit[0][:-2] if hit[0].endswith("!x") else hit[0])
        else:
            if len(rs) > 1:
                return sorted(set(found))
        if not writes or len(writes) > 16:
            return None
        used = set()
        rs = set(rs)
        for w in writes:
            for y in set(self._locksets(w)):
                for x in rs:
                    hit = _excluding(x, y)
                    if hit is None:
                        return None
                    used.add(hit)
        return sorted(used)

    @property
    def phase_locks(self):
        return {c["lock"] for c in self.P.param_locks.values()} | \
            {c["pin"]["lock"] for c in self.P.param_locks.values() if c.get("pin")}

    def _param_held(self, fn):
        """Locks a parameter of fn stands for (policies/ 'param_locks': a
        transaction handle means its task counts in the transaction's
        writers).  Not when the parameter may be NULL (_null_params()):
        then the function also runs without one."""
        out = {}
        types = self._decl_types(fn)
        for p in self.params(fn):
            spec = self.P.param_locks.get(types.get(p)) if p else None
            if spec is None:
                continue
            kp = ((fn.file, fn.name), p)
            maybe = self._null_params()
            pin = spec.get("pin")
            if pin and kp not in self._nullp_only:
                # a handle from any source, a weak one too, holds the pin
                out[pin["lock"] + ":r"] = How("%s parameter '%s' (%s)" % (
                    spec["struct"], p, pin["reason"]), fn.line)
            if kp in maybe:
                continue
            name = mode_name(spec["lock"], spec)
            out[name] = How("%s parameter '%s' (%s)" % (spec["struct"], p, spec["reason"]),
                            fn.line)
        return out

    def attach_held(self):
        for a in self.accesses:
            if a.func is None or a.tok is None:
                continue
            key = (a.file, a.fn)
            res = self.flows.get(key)
            st = res.at.get(a.tok) if res else None
            held = {}
            if st is not None:
                held.update(st.held)
                for n, how in self._entry_of(a, key).items():
                    if n not in st.killed and n not in held:
                        held[n] = how
            # a pseudo-lock that covers other structs holds nothing here
            kept = uncovered(set(held), a.struct)
            a.held = held if len(kept) == len(held) else {n: held[n] for n in kept}

    def _entry_of(self, a, key):
        """The locks a's function is entered with on the calls that can
        reach a (flagargs.py): those every such call holds, or entry."""
        entry = self.entry.get(key, {})
        sites = self.reaching_sites(a)
        if not sites:
            return entry
        sites = self.without_private(sites)
        common = _held_by_all(sites, self.entry, list(self.P.container_locks.values()))
        if common is _TOP or not common:
            return entry
        return self._with_callers_locks(key, entry, common, sites)

    def contexts(self):
        """Functions registered as concurrent entry points (policies 'contexts'),
        with their callees up to context_depth."""
        roots, any_time, with_callees, handover = self._context_roots()
        for h in self.P.handlers:
            for fn in h["functions"]:
                roots.setdefault(fn, "%s handler (declared)" % h["context"])
        ctx = dict(roots)
        frontier = list(roots)
        for _ in range(self.P.context_depth):
            nxt = []
            for fn in frontier:
                for f2 in self.src.by_name.get(fn, []):
                    res = self.flows.get((f2.file, f2.name))
                    if not res:
                        continue
                    for (_, callee, _) in res.calls:
                        if callee in self.src.by_name and callee not in ctx:
                            ctx[callee] = "called from %s" % roots.get(fn, ctx[fn])
                            if fn in handover:
                                handover[callee] = handover[fn]
                            nxt.append(callee)
            frontier = nxt
        # handlers that run at any time, relative to everything else (a
        # sysfs show handler): their own loads, and those of their direct
        # callees when the context says so ("callees": true; the VFS
        # callbacks: a ->fileattr_get method reads the flags in the helper
        # that converts them).  The sysfs contexts do not: their handlers
        # call shared helpers (a configuration predicate reads a size set
        # at mount), which would add nothing but false positives.
        for fn in sorted(with_callees):
            for f2 in self.src.by_name.get(fn, []):
                res = self.flows.get((f2.file, f2.name))
                for (_, callee, st) in (res.calls if res else ()):
                    if callee in self.src.by_name and callee not in self.lockfns:
                        any_time.add(callee)
        self.any_time = any_time
        self.handover = handover
        return ctx

    def _context_roots(self):
        """(handler -> its context, the handlers that run at any time,
        those whose direct callees do too, handler -> what its context
        hands it), from the registrations in the sources."""
        roots = {}
        any_time = set()
        with_callees = set()
        # handler -> the object its context hands it ('hands_over': a bio's
        # completion gets the bio, which its submitter no longer touches)
        handover = {}
        ops = self.P.ops_contexts
        calls = {c["call"] for c in self.P.contexts}
        for f, toks in self.src.toks.items():
            n = len(toks)
            for i, t in enumerate(toks):
                if t.kind != "id":
                    continue
                fn = self._ops_member_at(toks, i, ops) if t.text in ops else None
                if fn is not None:
                    # '.member = fn' in an ops table the kernel calls through
                    # (ops_contexts: '.getattr = foo_getattr')
                    c = ops[t.text]
                    roots.setdefault(fn, "%s (.%s at %s:%d)" % (c["context"], t.text,
                                                                 _short(f), t.line))
                    if c.get("any_time"):
                        any_time.add(fn)
                        if c.get("callees"):
                            with_callees.add(fn)
                    continue
                if t.text not in calls or i + 1 >= n or toks[i + 1].text != "(":
                    continue
                for c in self.P.contexts:
                    if t.text != c["call"]:
                        continue
                    for name in self._handler_args(toks, i, c):
                        roots.setdefault(name, "%s handler (%s at %s:%d)" % (
                            c["context"], c["call"], _short(f), t.line))
                        if c.get("hands_over"):
                            handover.setdefault(name, c["hands_over"])
                        if c.get("any_time"):
                            any_time.add(name)
                            if c.get("callees"):
                                with_callees.add(name)
        return roots, any_time, with_callees, handover

    def _handler_args(self, toks, i, c):
        """The target's functions that the call of c["call"] at toks[i]
        registers: its arguments c["args"] that are a function's name."""
        out = []
        end = csrc.match_paren(toks, i + 1)
        args = _split(toks, i + 2, end)
        for k in c["args"]:
            if k < len(args):
                a, b = args[k]
                if b - a == 1 and toks[a].kind == "id" and toks[a].text in \
                        self.src.by_name:
                    out.append(toks[a].text)
        return out


@functools.lru_cache(maxsize=1 << 18)
def _excluding(x, y):
    """A lock of lockset x that keeps it from lockset y (exclusive on one
    side, or two groups that exclude each other), or None.  x and y are
    frozensets (lockset_chains()); the answer is remembered: the pairs of
    calling contexts repeat across the accesses of a function and a
    field."""
    for n, group, base, shared in _tests_of(x):
        hit = groups_exclude(n, y) if group else None
        if hit:
            return hit
        if base in y:
            return base
        if shared is not None and shared in y:
            return n
    return declared_excluding(x, y)


@functools.lru_cache(maxsize=1 << 16)
def _tests_of(x):
    """What _excluding() tests for each lock of lockset x, in order: (the
    key, whether it is a group hold, the key it excludes when y holds it,
    and the shared key it excludes too, for an exclusive hold)."""
    out = []
    for n in sorted(x):
        if n[0] == "?" or n == "irqs-off":
            continue
        if n.endswith(":r"):
            out.append((n, n.endswith("}:r"), n[:-2], None))
        else:
            out.append((n, False, n, n + ":r"))
    return tuple(out)


_TOP = object()      # entry_locks(): not known yet, every lock


def _callers_users(sites_of, pruned):
    """caller key -> the functions of sites_of whose entry locks
    _held_by_all() computes from that caller's entry (its call sites, and
    the call sites that reach them, pruned)."""
    users = collections.defaultdict(list)
    for key, sites in sites_of.items():
        deps = set()
        for (caller, st, k) in sites:
            deps.add((caller.file, caller.name))
            for (c2, _st, _k) in pruned.get((caller.file, k)) or ():
                deps.add((c2.file, c2.name))
        for d in sorted(deps):
            users[d].append(key)
    return users


def _held_by_all(sites, entry, clocks, pruned=None):
    """The locks every one of sites holds at its call (with those its
    caller is entered with and does not release before it, and a
    container's lock for the container lock the caller holds); _TOP
    while every caller's own entry is still unknown.  pruned: (file,
    token) of a call -> the caller's call sites that reach it, where
    not all do (flagargs.py)."""
    common = _TOP
    for (caller, st, k) in sites:
        ce = entry.get((caller.file, caller.name), {})
        if ce is _TOP:
            continue
        rs = pruned.get((caller.file, k)) if pruned else None
        if rs is not None and not rs:
            continue                    # a call no caller's call reaches
        if rs is not None:
            more = _held_by_all(rs, entry, clocks)
            if more is not _TOP:
                ce = set(ce) | more
        h = set(st.held)
        h |= {n for n in ce if n not in st.killed}
        for c in clocks:
            # a container's lock: whichever one the caller holds
            for lk in c["locks"]:
                for m in (lk, lk + ":r"):
                    if m in h:
                        h.add(c["name"] + m[len(lk):])
        common = h if common is _TOP else (common & h)
        if not common:
            break
    return common


def _own_guards(held, struct):
    """held without the state guards of other structs' fields (guards.py:
    a field's state keeps apart only accesses to its own object), and
    without the pseudo-locks that cover only other structs (uncovered())."""
    drop = {n for n in held if "{" in n and guard_struct(n) not in (None, struct)}
    return uncovered(held - drop if drop else held, struct)
