# SPDX-License-Identifier: GPL-2.0-only
"""Stage 3d: execution contexts, the entry points the code reveals, and
which of them may run in parallel.

An entry point is a function the code hands to someone else to call:
a method of an ops table ('.fsync = foo_fsync', 'bio->bi_end_io =
end_fn'), a function passed to a registration call (kthread_run(fn, ...),
foo_init_work(&w, fn, ...), FOO_ATTR(..., show_fn)), or a function no
code of the target calls (called from outside it: module init, VFS).
The contexts of a function are the entry points from which the call
graph reaches it; each is named by the entry point and the function just
below it on a shortest path ('->unlocked_ioctl: foo_ioctl_resize()').

May happen in parallel: any two contexts, a context with itself included
(two tasks in one ioctl), except the one thread a kthread_run() starts:
accesses reached only from that thread run one after the other.  Other
orders are not here: locks and pseudo-locks (locks.py, guards.py),
life-cycle phases (races.py), init and teardown (exclusions.py).

The calling contexts of a function (caller_contexts()) are the locksets
it is entered with, one per chain of call sites up to an entry point;
those of an access come from the call sites that can reach it
(flagargs.py).

Reads .src, .calls and sites_of() (callgraph.py), .P.contexts, .entry
(callers.py).  Sets nothing on the accesses; pairs.py asks context_of(),
lockset_chains() (same_thread(): threads.py).
"""
import collections

from .callers import _excluding, _own_guards
from .lockmodes import without_covering
from .locks import KEYWORDS
from .lockstate import How
from .source import _short

_THREAD_CALLS = ("kthread_run", "kthread_create")


class Contexts:
    def entry_points(self):
        """{function name: (kind, description)} of the functions the code
        hands to a caller it does not see (first use in file order)."""
        c = getattr(self, "_entries", None)
        if c is not None:
            return c
        c = {}
        names = self.src.by_name
        for f in sorted(self.src.toks):
            toks = self.src.toks[f]
            for i in range(2, len(toks) - 1):
                t = toks[i]
                if t.kind != "id" or t.text not in names or t.text in c or \
                        toks[i + 1].text == "(":
                    continue
                use = _callback_use(toks, i)
                if use is not None and use[2] in self.P.non_calling:
                    continue                    # ALLOW_ERROR_INJECTION(fn, ...)
                if use is not None:
                    c[t.text] = (use[0], "%s (%s:%d)" % (use[1], _short(f), t.line))
        self._entries = c
        return c

    def _callers_of(self, name):
        # remembered with sites_of()'s own, which call_graph() resets
        # whenever it changes a call site
        key = ("callers of", name)
        out = self._sites.get(key)
        if out is None:
            out = set()
            for fn in self.src.by_name.get(name, ()):
                for (caller, _, _) in self.sites_of(fn):
                    out.add(caller.name)
            out.discard(name)
            out = self._sites[key] = frozenset(out)
        return out

    def context_of(self, name, avoid=frozenset()):
        """The nearest entry point above function name, as one phrase;
        avoid: the lockset of the other side of a racing pair, which an
        entry point entered with a lock that excludes it cannot race
        with (the VFS freezing the file system, against an ioctl that
        holds write access), unless no other is found."""
        found, prev = self._head_of(name, avoid)
        entries = self.entry_points()
        return _describe(found, prev, entries) if found else "%s()" % name

    def _head_of(self, name, avoid=frozenset()):
        """context_of()'s entry point above name (None when there is
        none), with the BFS tree that reaches it: a live one before a
        teardown method, and either before a path through a life-cycle
        function (init or teardown: it runs beside nothing)."""
        memo = self.__dict__.setdefault("_ctxname", {})
        avoid = frozenset(avoid)
        if (name, avoid) not in memo:
            found, prev = self._bfs_head(name, avoid, self._alone_names())
            memo[(name, avoid)] = (found, prev) if found is not None else \
                self._bfs_head(name, avoid, ())
        return memo[(name, avoid)]

    def _bfs_head(self, name, avoid, life):
        """_head_of()'s search, going up through no function of life."""
        entries = self.entry_points()
        prev = {name: None}
        todo = collections.deque([name])
        found = fallback = None
        while todo and found is None:
            x = todo.popleft()
            if x in life and x != name:
                continue
            callers = self._callers_of(x)
            if (x in entries or not callers) and x != name and (
                    self._is_teardown(x) or self._path_excludes(x, prev, avoid)):
                # a live context names the race better than a teardown
                fallback = fallback or x
                continue
            if x in entries or not callers:
                found = x
                break
            for y in sorted(callers):
                if y not in prev:
                    prev[y] = x
                    todo.append(y)
        return found or fallback, prev

    def _alone_names(self):
        """The names of the functions that run alone (owners.py
        alone_functions()), every function of that name one."""
        got = self.__dict__.get("_alonenames")
        if got is None:
            if not hasattr(self, "life"):
                return frozenset()
            alone = self.alone_functions()
            got = self._alonenames = frozenset(
                n for n, fns in self.src.by_name.items()
                if all((f.file, f.name) in alone for f in fns))
        return got

    def head_locks(self, chain, avoid=frozenset()):
        """The entry locks of the entry point that names chain
        (describe_chain()): the other side of a pair is named by one that
        can run beside it (two commits of the VFS freezing the file
        system, which holds the freeze protection for write, are one
        freeze)."""
        found, prev = self._head_of(chain[0], avoid)
        return self._path_locks(found, prev) if found else frozenset()

    def _path_excludes(self, x, prev, avoid):
        """The path from entry point x down to the function asked about
        (_head_of()'s BFS tree) holds a lock that excludes lockset avoid:
        the entry's own (the VFS freezing the file system, against an
        ioctl holding write access) or one taken on the way (an
        exclusive operation)."""
        return bool(avoid) and _excluding(self._path_locks(x, prev), avoid) is not None

    def _path_locks(self, x, prev):
        """The locks held from entry point x along the BFS tree prev down
        to its root: x's entry locks and, at each call on the way, those
        every call of that callee there holds."""
        fns = self.src.by_name.get(x, ())
        held = set(self.entry.get((fns[0].file, fns[0].name), ())) if fns else set()
        cur = x
        while prev.get(cur) is not None:
            callee = prev[cur]
            common, killed = None, set()
            for fn in self.src.by_name.get(callee, ()):
                for (caller, st, _) in self.sites_of(fn):
                    if caller.name == cur:
                        common = set(st.held) if common is None else common & set(st.held)
                        killed |= st.killed
            held = (held - killed) | (common or set())
            cur = callee
        return frozenset(held)

    def _is_teardown(self, entry):
        """entry is a teardown method (policies/ 'teardown_ops')."""
        how = self.entry_points().get(entry, ("", ""))[1]
        return any(how.startswith("->%s " % m) for m in self.P.teardown_ops)

    # ------------------------------------------- the contexts of a pair
    def context_chain(self, key, lockset):
        """The call chain (function names, outermost first) of the calling
        context of function key that has lockset (caller_contexts())."""
        return getattr(self, "_ctxchain", {}).get((key, lockset), (key[1],))

    # distinct locksets kept per function before it counts as entered from
    # anywhere: 64 names the calling contexts that race for most functions
    # (16 named the nearest entry point for about 250 more sites); past it,
    # an access's own function gets one context per call site
    # (_site_contexts()), which 1024 would not better: it flagged the same
    # sites in the three targets measured, in up to five times the time;
    # those per call site may be up to _SITE_MAX (each caller's own)
    _CTX_MAX = 64
    _SITE_MAX = 256

    def caller_contexts(self, key, _visiting=None):
        """The locksets fn (key) is entered with, one per calling context:
        each call site's locks and, transitively, each context of its
        caller.  entry_locks() keeps what all of them share; a read that
        shares a lock with every context of every write (_ctx_excluded())
        races with no write even when no single lock is common to its
        callers (the commit holds one mutex around one call, the
        relocation task holds another lock around the others).  None when
        not known: an entry point, a recursive cycle, or more than
        _CTX_MAX contexts."""
        return self._contexts_from(key, None, _visiting)

    def _contexts_from(self, key, sites, _visiting=None, need=(), drop=()):
        """caller_contexts() of key from the call sites that reach one
        access (None: all) and what key's parameters need (madeflags.py);
        drop: (teardown methods, owner structs) for the contexts of an
        owned struct's access (live_apart(), _context_sites())."""
        memo = self._ctxmemo
        mkey = (key, need, drop) if sites is None else \
            (key, tuple(x[2] for x in sites), need, drop)
        if mkey in memo:
            return memo[mkey]
        fn = self.src.funcs.get(key)
        if fn is None or fn.name in self.addr_taken or fn.name in self.macro_used and not (
                drop and fn.name in self.wrapped):
            memo[mkey] = None
            return None
        sites = self._context_sites(fn, sites, drop)
        if not sites:
            memo[mkey] = sites
            return sites
        visiting = _visiting if _visiting is not None else set()
        if key in visiting:
            return None
        visiting.add(key)
        own = set(self.entry.get(key, {}))
        out = self._site_locksets(fn, sites, need, own, visiting, drop)
        visiting.discard(key)
        res = sorted(out, key=sorted) if out is not None else None
        if _visiting is None or res is not None:
            memo[mkey] = res
            for h in res or () if not drop else ():
                self._ctxchain.setdefault((key, h), out[h])
        return res

    def _site_contexts(self, key, sites, need):
        """_contexts_from() for an access's own function, or past _CTX_MAX
        contexts those of each call site: its locks with each of its
        caller's contexts (a helper whose callers hold different locks),
        or where they are too many, the locks the caller is entered with
        in all of them (which lose a lock held around one call only);
        None when those are too many too (up to _SITE_MAX)."""
        res = self._contexts_from(key, sites, need=need)
        fn = self.src.funcs.get(key)
        if res is not None or fn is None or fn.name in self.addr_taken or \
                fn.name in self.macro_used:
            return res
        mkey = ("by-site", key, need) if sites is None else \
            ("by-site", key, tuple(x[2] for x in sites), need)
        memo = self._ctxmemo
        if mkey not in memo:
            live = self._context_sites(fn, sites, ())
            out = self._site_locksets(fn, live, need, set(self.entry.get(key, {})), {key},
                                      by_site=True) if live else None
            memo[mkey] = sorted(out, key=sorted) if out else None
            for h in memo[mkey] or ():
                self._ctxchain.setdefault((key, h), out[h])
        return memo[mkey]

    def _site_locksets(self, fn, sites, need, own, visiting, drop=(), by_site=False):
        """{lockset: call chain} of fn's calling contexts through sites,
        each caller's own contexts (visiting: the functions on the way,
        None: only the caller's entry locks), or None past _CTX_MAX;
        by_site: a caller whose contexts do not fit (with one for each
        site after it) gives its entry locks, which all of them hold."""
        clocks = list(self.P.container_locks.values())
        covered = fn.name in self._covering()
        out = {}
        for i, (caller, st, k) in enumerate(sites):
            base = set(st.held)
            ck = (caller.file, caller.name)
            # the calls that reach this one, and their needs (flagargs.py, madeflags.py)
            rs, up = self.carried_sites(fn, caller, k, need)
            if rs is not None and not rs:
                continue                # a call no caller's call reaches (flagargs.py)
            cc = self._contexts_from(ck, rs, visiting, up, drop) \
                if visiting is not None else None
            if cc is None or by_site and len(out) + len(cc) + len(sites) - i > self._SITE_MAX + 1:
                cc = [frozenset(self.entry.get(ck, {}))]
            for c in cc:
                h = _context_set(base | {n for n in c if n not in st.killed} | own,
                                 clocks, covered)
                if _config_clash(h):
                    continue            # found a configuration true and false
                # the call chain of this context, first found (pairs.py
                # names the contexts that race, not the nearest entry)
                out.setdefault(frozenset(h), self.context_chain(ck, c) + (fn.name,))
            if len(out) > (self._SITE_MAX if by_site else self._CTX_MAX):
                return None
        return out

    def _context_sites(self, fn, sites, drop):
        """The call sites of fn (sites, None: all) that give it a calling
        context: None when none does, [] when only calls from drop do."""
        if sites is None and fn.name in self.macro_used and fn.name in self.wrapped:
            # named only in wrapper macros: their calls (scan.py)
            sites = [s for m in self.wrapped[fn.name] for s in self.calls.get(m, ())]
        elif sites is None:
            sites = self.sites_of(fn)
        sites = self.without_private(self.live_sites(sites))
        if not sites:
            return None
        live = self._live_calls(sites)
        if not live and self._alone_calls(sites):
            return []           # only what runs alone reaches fn: it races with nothing
        sites = live or sites
        if not drop:
            return sites
        kept = [x for x in sites if x[0].name not in drop[0] and
                not self._hands_own_owner(fn, x, drop[1])]
        return kept or []

    def _live_calls(self, sites):
        """sites less the calls from init or teardown (exclusions.py: the
        life-cycle functions) and those in an init branch (initflags.py):
        a context in which nothing else runs races with no other, so it
        adds no lockset the others must exclude (when all are such, only
        those that run alone give none: _alone_calls())."""
        life, init = getattr(self, "life", ()), getattr(self, "init_sites", ())
        return [x for x in sites if (x[0].file, x[0].name) not in life and
                (x[0].file, x[2]) not in init]

    def _hands_own_owner(self, fn, site, owners):
        """The call site hands fn, as its one parameter of an owner struct,
        an object its caller owns outright (a new one, one on its stack, a
        parameter only given those: escapes.py): what fn reaches through
        it is the caller's alone."""
        types = self._decl_types(fn)
        idx = [n for n, p in enumerate(self.params(fn)) if p and types.get(p) in owners]
        if len(idx) != 1:
            return False
        r = self._arg_private(site[0], site[2], idx[0])
        return r is not None and (r[1] == "stack" or r[0].startswith("new: ") or
                                  self.own_arg(site[0], site[2], idx[0]))

    def lockset_chains(self, a):
        """_locksets(a), each with the call chain of its context (frozen
        sets, remembered: asked once the contexts are complete)."""
        memo = self.__dict__.setdefault("_lcmemo", {})
        got = memo.get(id(a))
        if got is None or got[0] is not a:
            got = memo[id(a)] = (a, [(frozenset(x), c) for x, c in self._lockset_chains(a)])
        return got[1]

    def _lockset_chains(self, a, drop=()):
        """lockset_chains() of a; drop: _contexts_from()'s ([] when only
        dropped calls reach a: live_apart())."""
        key = (a.file, a.fn)
        ctxs = None
        if drop and a.fn in drop[0]:
            return []
        if a.func is not None:
            # the calls that can reach a (flagargs.py), or all
            # (none: a branch no call reaches, judged as if all did)
            sites = (self.reaching_sites(a) or None) if a.tok is not None else None
            need = self.access_needs(a.func, a.tok) if a.tok is not None else ()
            ctxs = self._contexts_from(key, sites, need=need, drop=drop) if drop else \
                self._site_contexts(key, sites, need)
            if ctxs == [] and (drop or self._life_only(a.func, sites)):
                return []
        res = self.flows.get(key)
        st = res.at.get(a.tok) if res and a.tok is not None else None
        if not ctxs or st is None:
            return [(_own_guards(set(a.held), a.struct), (a.fn,))]
        local = set(st.held)
        return [(self._entry_lock(_own_guards(local | {n for n in c if n not in st.killed},
                                              a.struct), a.struct),
                 self.context_chain(key, c)) for c in ctxs]

    def _life_only(self, fn, sites):
        """Every call of fn that can reach the access (sites, None: all)
        is made by init or teardown (_live_calls()), its callers all seen."""
        if fn.name in self.addr_taken or fn.name in self.macro_used:
            return False
        sites = self.without_private(self.live_sites(
            self.sites_of(fn) if sites is None else sites))
        return self._alone_calls(sites)

    def _alone_calls(self, sites):
        """sites are calls made where nothing else runs (owners.py
        alone_functions())."""
        alone = self.alone_functions() if hasattr(self, "life") else ()
        return bool(sites) and all((x[0].file, x[0].name) in alone for x in sites)

    def _entry_lock(self, held, struct):
        """held with the lock of an entry's container (policies/
        'container_locks', as protection.container_held() gives an
        access's own locks): named for the entries' own fields when one of
        the container locks is held, here or by a caller, and for no
        other struct's."""
        clocks = self.P.container_locks
        if not clocks:
            return held
        names = {c["name"] for c in clocks.values()}
        out = {h for h in held if (h[:-2] if h.endswith(":r") else h) not in names}
        c = clocks.get(struct)
        if c is not None:
            for lk in c["locks"]:
                for m in (lk, lk + ":r"):
                    if m in held:
                        out.add(c["name"] + m[len(lk):])
            out |= {h for h in held if h in (c["name"], c["name"] + ":r")}
        return out

    def racing_chains(self, a, b, locksets=False):
        """The call chains of a pair of calling contexts of a and b that
        share no excluding lock (the first, outermost entry first), or
        None; with locksets, (lockset, chain) of each."""
        first = None
        for x, cx in self.lockset_chains(a):
            for y, cy in self.lockset_chains(b):
                if _excluding(x, y) is None:
                    got = ((x, cx), (y, cy)) if locksets else (cx, cy)
                    if not self.teardown_chain(cx) and not self.teardown_chain(cy):
                        return got
                    first = first or got
        return first

    def live_apart(self, a, da, b, db):
        """Every pair of calling contexts of a and b shares an excluding
        lock, less the contexts only calls from the functions da (for a)
        and db (for b) give: teardown methods whose own objects a and b
        touch (pairs.py _owned_drop()).  True as well when no pair is
        left."""
        xs = [x for x, _ in self._lockset_chains(a, da)] if da else self._locksets(a)
        ys = [y for y, _ in self._lockset_chains(b, db)] if db else self._locksets(b)
        return all(_excluding(frozenset(x), frozenset(y)) is not None for x in xs for y in ys)

    def teardown_chain(self, chain):
        """The chain starts in a teardown method (policies/ 'teardown_ops'):
        a context no reference holder runs beside."""
        head = self.context_of(chain[0]).split("(", 1)[0]
        return self._is_teardown(head)

    def describe_chain(self, chain, avoid=frozenset()):
        """A calling context as one phrase: the nearest entry point above
        the chain's outermost function (not one that excludes lockset
        avoid: context_of()), then the chain ('x() as ->m (file:line) ->
        f() -> ... -> g()'), the middle elided past four."""
        head = self.context_of(chain[0], avoid)
        below = (head.rsplit(" -> ", 1)[-1] if " -> " in head else head).split("(", 1)[0]
        if below == chain[0]:
            rest = list(chain[1:])
        elif below in self._callers_of(chain[0]):
            rest = list(chain)
        else:
            rest = ["..."] + list(chain)      # the path from head is longer
        if len(rest) > 4:
            rest = rest[:1] + ["..."] + rest[-2:]
            if rest[0] == "...":
                rest = rest[1:]
        return " -> ".join([head] + ["%s()" % f if f != "..." else f for f in rest])

    def roots_of(self, name, limit=64):
        """The entry points the call graph reaches name from (None when
        there are more than limit)."""
        memo = self.__dict__.setdefault("_roots", {})
        if name in memo:
            return memo[name]
        entries = self.entry_points()
        seen, roots, todo = {name}, set(), [name]
        while todo:
            x = todo.pop()
            callers = self._callers_of(x)
            if x in entries or not callers:
                roots.add(x)
                if len(roots) > limit:
                    memo[name] = None
                    return None
            for y in callers:
                if y not in seen:
                    seen.add(y)
                    todo.append(y)
        memo[name] = frozenset(roots)
        return memo[name]

    def handed_locks(self):
        """{function key: {lock: How}}: the pseudo-locks declared handed to
        threads (policies/ 'pseudo_locks', "handed_to_threads") that a
        caller holds where it starts fn with kthread_run(fn, ...), held
        by every such start: the thread runs the operation its starter
        claimed, and ends it (the dev-replace and balance threads)."""
        handed = {n for n, spec in self.P.pseudo_locks.items() if spec.get("handed_to_threads")}
        out = {}
        if not handed:
            return out
        for call in _THREAD_CALLS:
            for (caller, st, k) in self.calls.get(call, ()):
                toks = self.src.toks[caller.file]
                fn = toks[k + 2].text if toks[k + 1].text == "(" else None
                keep = {n: h for n, h in st.held.items() if n.split("{")[0].split(":")[0] in handed}
                for f2 in self.src.by_name.get(fn, ()):
                    key = (f2.file, f2.name)
                    new = {n: How("%s, held by %s() where it starts this thread at %s:%d"
                                  % (h.what, caller.name, _short(caller.file), toks[k].line),
                                  toks[k].line) for n, h in keep.items()}
                    out[key] = new if key not in out else \
                        {n: h for n, h in out[key].items() if n in new}
        return out

    def handed_states(self):
        """{function key: {state: How}}: the configuration states (guards
        of a call, policies/ 'guards') every registration of fn holds,
        where kthread_run() starts it or a work item is made with it
        (policies/ 'work_items'), when those are its only uses: the
        configuration is fixed for the mount, so the thread or work item
        a path made after finding it false runs in that configuration
        too ('if (foo_is_zoned(fs)) return 0; ... INIT_WORK(&w, fn)')."""
        config = {g["call"] + "()" for g in self.P.guards if g.get("call")}
        if not config:
            return {}
        regs = [(c, 0) for c in _THREAD_CALLS] + \
            [(s["call"], s["fn"]) for s in self.P.work_items]
        found = collections.defaultdict(list)
        for call, n in regs:
            for (caller, st, k) in self.calls.get(call, ()):
                args = self._call_args(caller.file, k) or []
                toks = self.src.toks[caller.file]
                if n < len(args) and args[n][1] - args[n][0] == 1:
                    keep = {x: h for x, h in st.held.items() if x.split("{")[0] in config}
                    found[toks[args[n][0]].text].append((caller, toks[k].line, keep))
        out = {}
        for name, regs_ in found.items():
            if len(regs_) != self.addr_uses.get(name, 0):
                continue
            common = set.intersection(*(set(r[2]) for r in regs_))
            for f2 in self.src.by_name.get(name, ()) if common else ():
                caller, line, keep = regs_[0]
                out[(f2.file, f2.name)] = {x: How(
                    "%s, held by %s() where it registers %s() at %s:%d" % (
                        keep[x].what, caller.name, name, _short(caller.file), line),
                    line) for x in common}
        return out


def _context_set(h, clocks, covered):
    """Lockset h of a calling context with the lock of each container
    (policies/ 'container_locks') whose entry lock it holds, and without
    the holds of pseudo-locks that cover structs unless the function
    accesses one (callers._covering())."""
    for cl in clocks:
        for lk in cl["locks"]:
            for m in (lk, lk + ":r"):
                if m in h:
                    h.add(cl["name"] + m[len(lk):])
    return h if covered else without_covering(h)


def _config_clash(held):
    """held has both states of one configuration guard ('f(){=true}' and
    'f(){=false}', guards.py): a chain of calls no mount takes."""
    seen = {}
    for n in held:
        if "(){=" in n:
            base, state = n.split("{=", 1)
            if seen.setdefault(base, state.split("}")[0]) != state.split("}")[0]:
                return True
    return False


def _callback_use(toks, i):
    """How toks[i], a function's name not called here, is handed on:
    (kind, phrase, the call it is passed to or None) or None."""
    p1 = toks[i - 1].text
    if p1 == "=" and toks[i - 2].kind == "id" and i >= 3 and toks[i - 3].text in (".", "->"):
        return ("method", "->%s" % toks[i - 2].text, None)
    if p1 in (",", "("):
        depth, j = 0, i - 1
        while j > 0:
            x = toks[j].text
            if x == ")":
                depth += 1
            elif x == "(":
                if depth == 0:
                    break
                depth -= 1
            j -= 1
        if j > 0 and toks[j - 1].kind == "id" and toks[j - 1].text not in KEYWORDS:
            call = toks[j - 1].text
            kind = "thread" if call in _THREAD_CALLS else "callback"
            return (kind, "%s of %s()" % ("thread" if kind == "thread" else "callback", call),
                    call)
    return None


def _describe(root, prev, entries):
    """'root() as ->m (file:line) -> f()': the entry point, and the function
    just below it on the path found (prev: function -> the one it was
    reached from)."""
    below = prev.get(root)
    if root in entries:
        head = "%s() as %s" % (root, entries[root][1])
    else:
        head = "%s(), called from outside the target" % root
    return head if below is None else "%s -> %s()" % (head, below)
