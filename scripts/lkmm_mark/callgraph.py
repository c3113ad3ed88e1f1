# SPDX-License-Identifier: GPL-2.0-only
"""Stage 2c: the lock flow of every function and the call graph.

The lock flow (locks.py) gives, at each access and each call site, the
locks held from the function's own entry; the call graph gives each
function's call sites with the lock state there, including the indirect
ones the analysis can see: callbacks handed to synchronous helpers,
functions stored only in the target's ops tables or in stack structs
handed to calls.  It also finds dead code and test-only functions.

Reads .accesses, .src, .P and source_scan()'s result (scan.py).  Sets
.lockfns, .flow_lockfns (with handback.py's), .flows ((file, fn) -> the flow's result: .at, .calls, .events),
.calls (callee name -> [(caller Function, State, token index)]),
.addr_taken, .macro_used, .dead_lines, .dead, .testonly, and each
access's .ctx (the calls around it) and ._guarded (the assertions that
make the condition of their 'if' diagnostic: diagflow.py).  A function
whose call sites are not all seen (address taken, named in a macro) is
entered with no lock held: the false positives of unseen callers start
here.
"""
import collections

from .callctx import call_context
from .correlate import returned_values
from .locks import KEYWORDS, LockFlow
from .lockstate import How, State
from .base import UserError
from .guards import Guards, remembered_errors
from .source import _short
from .tokutil import _designated_init, _call_start


class CallGraph:
    def annotated_lockfns(self):
        """The declared lock wrappers (policies 'lock_functions') and the
        functions sparse annotations show to be ones: __acquires(x) alone
        returns with x held (foo_lock_cache() returning with the cache's
        lock), __releases(x) alone returns with it released; both
        (a function that drops the lock and takes it again) change
        nothing for the caller."""
        out = dict(self.P.lockfns)
        for key, fn in self.src.funcs.items():
            if fn.name in out:
                continue
            kinds = {}
            for (nm, toks) in fn.annots:
                if nm in ("__acquires", "__releases"):
                    kinds.setdefault(nm, []).append(toks)
            if len(kinds) != 1:
                continue
            nm, toks = next(iter(kinds.items()))
            name = self._annot_lock(fn, toks[0])
            if not name or name.startswith("?"):
                continue
            out[fn.name] = {"name": fn.name, "lock": name, "mode": "exclusive",
                            "op": "acquire" if nm == "__acquires" else "release",
                            "reason": "%s(%s) annotation of %s()" % (nm, name, fn.name)}
        return out

    def run_flow(self):
        self.lockfns = self.annotated_lockfns()
        self.guards = Guards(self.P.guards, self.P.state_assertions)
        # and, for the lock flow only, the wrappers that hand a locked
        # object back through a parameter (handback.py)
        self.flow_lockfns = dict(self.lockfns, **self.handed_back_lockfns(), **self.P.locked_lists)
        by_func = collections.defaultdict(list)
        for a in self.accesses:
            if a.func is not None and a.tok is not None:
                by_func[(a.file, a.fn)].append(a)
        # the loads of members policies/ 'held_members' declares (heldobjects.py)
        self._held_toks = collections.defaultdict(dict)
        for a in self.accesses:
            lock = self.P.held_members.get("%s.%s" % (a.struct, a.field))
            if lock is not None and a.kind == "read" and a.tok is not None:
                self._held_toks[(a.file, a.fn)][a.tok] = lock
        self.flows = {}
        self.calls = collections.defaultdict(list)     # callee -> [(caller Function, State)]
        self._sites = {}                               # sites_of() cache, reset with calls
        self._want = {}
        # an 'if' whose body is one assertion: its condition is diagnostic
        self._guarded = self.guarded_calls()
        if not self.__dict__.get("call_contexts"):
            self.call_contexts = {}
        pre = self.call_contexts
        for key, fn in self.src.funcs.items():
            want = self._want[key] = {a.tok for a in by_func.get(key, ())}
            res = self._flow(fn, want, State())
            self.flows[key] = res
            ctx = pre.get(key)
            if ctx is None:
                ctx = self.call_contexts[key] = self.function_call_context(fn)
            for a in by_func.get(key, ()):
                a.ctx = ctx.get(a.tok, ())
            for (k, callee, st) in res.calls:
                self.calls[callee].append((fn, st, k))
        self._check_remembered(by_func)

    def guarded_calls(self):
        """The calls an 'if' whose body is one of them makes a diagnostic
        condition: the assertions (policies only; computed once, it is
        asked for each function's call context)."""
        g = self.__dict__.get("_guarded_calls")
        if g is None:
            g = self._guarded_calls = frozenset(self.P.assertions) | {
                n for n, spec in self.P.lockfns.items() if _asserts(spec)}
        return g

    def function_call_context(self, fn):
        """callctx.call_context() of fn's body (the sources and the policies
        only: commands.analyse() has it computed while spatch runs)."""
        return call_context(self.src.toks[fn.file], fn.body_start, fn.body_end + 1,
                            self.P.output_calls, self.guarded_calls())

    def all_call_contexts(self):
        """function key -> function_call_context(), for every function."""
        return {key: self.function_call_context(fn) for key, fn in self.src.funcs.items()}

    def _check_remembered(self, by_func):
        """A configuration a field remembers (guards.py) holds only if its
        stores keep to the fact: otherwise a one-line error."""
        if not self.guards.remembered:
            return
        stores = [(self.src.toks[a.file], a.tok, self.flows[key].at[a.tok],
                   lambda x, y, f=a.file: self.lock_name_of(f, self.src.toks[f], x, y))
                  for key, accs in by_func.items() for a in accs
                  if "%s.%s" % (a.struct, a.field) in self.guards.remembered and
                  a.kind in ("write", "rmw", "address") and a.tok in self.flows[key].at]
        errs = remembered_errors(self.guards, stores)
        if errs:
            raise UserError("guards remembered_in: " + errs[0])

    def _flow(self, fn, want, entry):
        f = fn.file
        toks = self.src.toks[f]

        def resolve(x, y):
            return self.lock_name_of(f, toks, x, y)

        return LockFlow(toks, fn.body_start, fn.body_end + 1, self.flow_lockfns, resolve,
                        want, self.guards, self.returned_flags,
                        self.__dict__.get("_held_toks", {}).get((f, fn.name))).run(entry)

    def returned_flags(self, name):
        """The flag values every definition of the function name returns
        (correlate.returned_values(): a wrapper that takes a lock in a mode
        it picks and returns that mode, which its caller keeps in a local
        and hands to the unlock), or None."""
        memo = self.__dict__.setdefault("_returned", {})
        if name not in memo:
            memo[name] = None           # a cycle returns nothing known
            out = []
            for fn in self.src.by_name.get(name) or ():
                vals = returned_values(self.src.toks[fn.file], fn.body_start,
                                       fn.body_end + 1, self.returned_flags)
                if vals is None:
                    return None
                out.extend(vals)
            memo[name] = out or None
        return memo[name]

    def cond_params(self):
        """A conditionally kept lock handed on as a flag: after 'if (!v)
        up_read(L);' the caller passes v to f(), and f() tests its
        parameter (foo_map() -> foo_pick_mirror(..., v)).  When every
        call site passes such a flag in the same position, L is held in f()
        wherever that parameter is true: f()'s flow is run again with it."""
        for key, fn in self.src.funcs.items():
            if fn.name in self.addr_taken or fn.name in self.macro_used:
                continue
            sites = self.sites_of(fn)
            if not sites or not self._want.get(key):
                continue
            names = self.params(fn)
            common = None
            for (caller, st, k) in sites:
                found = {}
                if st.cond:
                    toks = self.src.toks[caller.file]
                    for n, (a, b) in enumerate(self._call_args(caller.file, k) or ()):
                        if b - a != 1 or n >= len(names) or not names[n]:
                            continue
                        for lk, (v, h) in st.cond.items():
                            if v == toks[a].text:
                                found[lk] = (names[n], How(
                                    "%s, passed as '%s' by %s() at %s:%d" % (
                                        h.what, names[n], caller.name, _short(caller.file),
                                        toks[k].line), h.line))
                common = found if common is None else \
                    {lk: x for lk, x in common.items() if found.get(lk, (None,))[0] == x[0]}
                if not common:
                    break
            if common:
                self.flows[key] = self._flow(fn, self._want[key], State(cond=common))

    def _is_test_file(self, f):
        return any(f.startswith(t) for t in self.test_prefixes)

    def live_sites(self, sites):
        """sites less the calls from test code (self-tests run at module
        load, before any mount: beside nothing), or all of them when every
        one is."""
        live = [s for s in sites if not self._is_test_code(s[0])]
        return live or sites

    def _is_test_code(self, fn):
        """fn is in a test file, or every call of it is from test code (a
        helper the self-tests alone call, kept beside the code it tests);
        a function reached through a pointer or a cycle is not."""
        memo = self.__dict__.setdefault("_testcode", {})
        key = (fn.file, fn.name)
        if key not in memo:
            memo[key] = False           # a cycle: not test code
            sites = self.sites_of(fn) if fn.name not in self.addr_taken else ()
            memo[key] = self._is_test_file(fn.file) or (
                bool(sites) and all(self._is_test_code(s[0]) for s in sites))
        return memo[key]

    def sites_of(self, fn):
        """Call sites of fn by name: a static function outside a header is
        called from its own file only (and through the ops tables it is
        stored in, from anywhere); a static inline in a header from every
        file that includes it."""
        c = self._sites.get(id(fn))
        if c is not None and c[0] is fn:
            return c[1]
        sites = self.calls.get(fn.name, [])
        if fn.static and not fn.file.endswith(".h"):
            # a call by name from another file is another function's;
            # an indirect call through an ops table's member
            # ('bp->b_ops->verify_read(bp)') reaches the static method
            # from any file
            sites = [s for s in sites if s[0].file == fn.file or
                     self.src.toks[s[0].file][s[2]].text != fn.name]
        self._sites[id(fn)] = (fn, sites)
        return sites

    def param_arguments(self, fn, v):
        """[(caller, lo, hi)]: the argument, toks[lo:hi] of the caller's
        file, that each call of fn passes as its parameter v; None when v
        is not a parameter of fn, fn's address is taken or a macro body
        names it (its callers are not all seen), it has no call, or a call
        passes fewer arguments."""
        names = self.params(fn)
        if v not in names or fn.name in self.addr_taken or fn.name in self.macro_used:
            return None
        n = names.index(v)
        out = []
        for (caller, _, k) in self.sites_of(fn):
            args = self._call_args(caller.file, k)
            if args is None or n >= len(args):
                return None
            out.append((caller,) + tuple(args[n]))
        return out or None

    def call_graph(self, scan=None):
        """Address-taken functions, functions named in macro bodies (their
        callers are not visible), dead code (preprocessor-disabled blocks,
        functions nothing live calls) and functions only test code calls.
        Calls from dead code are dropped from the call graph.  scan: the
        result of source_scan(), if it was computed elsewhere."""
        src = self.src
        if scan is None:
            scan = self.source_scan()
        self.addr_taken = self._indirect_calls(scan)
        self.dead_lines = scan["dead_lines"]
        self.macro_used = scan["macro_used"]
        self.wrapped = scan.get("wrapped", {})
        calls = collections.defaultdict(list)
        for callee, sites in self.calls.items():
            for s in sites:
                if src.toks[s[0].file][s[2]].line not in self.dead_lines.get(s[0].file, ()):
                    calls[callee].append(s)
        self.calls = calls
        self._sites = {}
        dead, testonly = self._dead_code(scan["outside"], scan["declared"])
        self.dead = dead
        self.testonly = testonly
        for callee in list(self.calls):
            self.calls[callee] = [s for s in self.calls[callee]
                                  if (s[0].file, s[0].name) not in dead]
        self._sites = {}

    def _indirect_calls(self, scan):
        """The names of the functions whose address is taken (scan's addr),
        less the callbacks whose call sites are known, which get them in
        .calls: a callback handed to a synchronous helper, a function
        stored only in the ops tables the target calls, one stored only in
        members of structs on its storers' stacks."""
        addr_taken, sync, not_sync, ops, not_ops = self._callback_uses(scan)
        # how many times each name is used other than in a call
        # (contexts.handed_states(): every use a registration)
        self.addr_uses = collections.Counter(u[0] for u in scan["addr"])
        for name, sites in sync.items():
            if name not in not_sync:
                addr_taken.discard(name)
                self.calls[name] = self.calls.get(name, []) + sites
        self._ops_sites(ops, not_ops, addr_taken)
        # a function stored only in members of structs on its storers'
        # stacks runs only inside the calls those storers hand the struct
        # to: 'wc.process_func = foo_replay; foo_walk_tree(.., &wc)'
        for name, sites in self._stack_callbacks(addr_taken).items():
            addr_taken.discard(name)
            self.calls[name] = self.calls.get(name, []) + sites
        return addr_taken

    def _callback_uses(self, scan):
        """scan's addr sorted out: (every name used other than in a call;
        name -> the synchronous helpers' calls it is handed to, as call
        sites; the names used any other way; name -> {(ops struct, member)}
        of the target's ops tables that hold it; the names used any other
        way than there)."""
        src = self.src
        addr_taken = set()
        # a callback handed to a synchronous helper (list_sort()...) runs inside
        # that call, its call site; so does a waited-for work item's (waitedwork.py)
        sync, not_sync = collections.defaultdict(list), set()
        state_at = {}
        for key, res in self.flows.items():
            for (k, name, st) in res.calls:
                state_at[(key[0], k)] = st
        ops, not_ops = collections.defaultdict(set), set()  # name -> {(ops struct, member)}
        for name, f, owner, jcall, member in scan["addr"]:
            addr_taken.add(name)
            if jcall is not None:
                st = state_at.get((f, jcall[0]))
                helper = src.toks[f][jcall[0]].text
                if helper in self.P.waited_work:
                    st = self.waited_state(f, owner, jcall, state_at)
                elif st is not None and helper not in self.P.sync_callers:
                    c = self._call_arg(src.toks[f], jcall[1], src.funcs[owner].body_start)
                    if c is None or not self._keeps_locks(helper, c[1], src.funcs[owner]):
                        st = None
                if st is not None:
                    # the site is the callback's name in the helper's
                    # arguments: toks[k] is no call, so the helper's
                    # arguments are not taken for the callback's
                    sync[name].append((src.funcs[owner], st, jcall[1]))
                    not_ops.add(name)
                    continue
            not_sync.add(name)
            if member is not None and src.member(member[0], member[1]) is not None:
                ops[name].add(tuple(member))
            else:
                not_ops.add(name)
        return addr_taken, sync, not_sync, ops, not_ops

    def _ops_sites(self, ops, not_ops, addr_taken):
        """Call sites for the functions stored only in ops tables of the
        target (_callback_uses()), taken out of addr_taken."""
        src = self.src
        # a function stored only in members of ops tables whose struct the
        # target defines runs only where the target calls those members:
        # 'ctl->op->use_map(...)' for '.use_map = foo_use_map' in a
        # 'struct foo_space_op' (no code outside the target knows the
        # type).  Those member calls are its call sites.
        for name, members in ops.items():
            if name in not_ops:
                continue
            sites = []
            for (st_name, m) in sorted(members):
                for s_ in self.calls.get(m, []):
                    toks = src.toks[s_[0].file]
                    if toks[s_[2] - 1].text in ("->", "."):
                        sites.append(s_)
            if sites:
                addr_taken.discard(name)
                direct = [s_ for s_ in self.calls.get(name, [])
                          if src.toks[s_[0].file][s_[2] - 1].text not in ("->", ".")]
                self.calls[name] = direct + sites

    def _dead_code(self, outside, declared):
        """(dead, testonly): function key -> why it is dead code (inside a
        disabled preprocessor block, or no live caller and its address not
        taken), and -> why only test code calls it (fixed points)."""
        src = self.src
        addr_taken, macro_used = self.addr_taken, self.macro_used
        dead = {}
        for key, fn in src.funcs.items():
            if fn.line in self.dead_lines.get(fn.file, ()):
                dead[key] = "inside a preprocessor block that is never compiled"
        testonly = {}
        for _ in range(30):
            changed = False
            for key, fn in src.funcs.items():
                if key in dead or key in testonly or fn.name in addr_taken or \
                        fn.name in macro_used or self.P.is_lifecycle(fn.name) or \
                        self._is_test_file(fn.file) or \
                        (not fn.static and (fn.name in outside or fn.name not in declared)):
                    continue
                sites = [s for s in self.sites_of(fn)
                         if (s[0].file, s[0].name) not in dead and s[0] is not fn]
                if not sites:
                    dead[key] = "%s() has no live caller and its address is not taken" % fn.name
                    changed = True
                elif all(self._is_test_file(s[0].file) or (s[0].file, s[0].name) in testonly
                         for s in sites):
                    c = sites[0][0]
                    testonly[key] = "%s() is called only from test code (%s() in %s)" % (
                        fn.name, c.name, _short(c.file))
                    changed = True
            if not changed:
                break
        return dead, testonly

    def _keeps_locks(self, helper, n, caller, _seen=None):
        """A callback handed as argument n of the target's function helper
        runs there with the locks of the helper's caller only if helper
        releases none of them before it calls the callback, or hands it on
        to a function that keeps them too (the lock flow's 'killed': locks
        the function released that its callers may hold)."""
        seen = _seen if _seen is not None else set()
        for fn in self._callee(caller, helper):
            key = (fn.file, fn.name, n)
            if key in seen:
                continue
            seen.add(key)
            names = self.params(fn)
            if n >= len(names) or not names[n]:
                return False
            p = names[n]
            toks = self.src.toks[fn.file]
            for (k, callee, st) in self.flows[(fn.file, fn.name)].calls:
                if callee == p:
                    if st.killed:
                        return False
                    continue
                for m, (a, b) in enumerate(self._call_args(fn.file, k) or ()):
                    if b - a == 1 and toks[a].text == p:
                        if st.killed or not self._keeps_locks(callee, m, fn, seen):
                            return False
        return True

    def _stack_callbacks(self, addr_taken):
        """{name: call sites} for the address-taken functions whose every
        mention (outside their own calls) stores them into a member of a
        struct on the stack of the function doing it, 'wc.m = name;' or
        '.m = name' in the initialiser of 'struct t wc = {...}', where that
        function uses the struct only through its members and by handing
        '&wc' whole to calls that keep it to themselves (_handed_escapes()).
        Such a pointer dies with the storer's frame and reaches no other
        task, so the function runs only inside those calls (or a direct
        'wc.m(...)'): they are its call sites, with the locks the storer
        holds there."""
        found, bad, members = self._stack_stores(addr_taken)
        # a member call 'wc->process_func(.., wc, ..)' calls one of the
        # functions stored in that member, when every one of them is such a
        # callback: it runs in the same task
        good = set(found) - bad
        calls_of = {m: fns for m, fns in members.items() if fns <= good}
        # the members each such callback is stored in (memberflags.py)
        self.stack_cb_members = {n: {m for m, fns in members.items() if n in fns}
                                 for n in good}
        out = {}
        for name, storers in found.items():
            if name in bad:
                continue
            sites = []
            for key, var in storers:
                s = self._storer_sites(key, var, calls_of)
                if s is None:
                    sites = None
                    break
                sites += s
            if sites:
                out[name] = sites
        return out

    def _stack_stores(self, addr_taken):
        """(name -> {(storer key, stack struct)}, the names stored or used
        any other way, member -> the names stored in it) for the
        address-taken functions (_stack_callbacks())."""
        src = self.src
        found = {}
        bad = set()
        members = collections.defaultdict(set)          # member -> functions stored in it
        for key, fn in src.funcs.items():
            toks = src.toks[fn.file]
            lo, hi = fn.body_start, fn.body_end
            stack = None
            for i in range(lo + 1, hi):
                t = toks[i]
                if t.kind != "id" or t.text not in addr_taken or toks[i + 1].text == "(" or \
                        toks[i - 1].text in (".", "->"):
                    continue
                if stack is None:
                    stack = self._stack_structs(fn)
                var = None
                if toks[i - 1].text == "=" and toks[i - 3].text in (".", "->"):
                    members[toks[i - 2].text].add(t.text)
                if toks[i - 1].text == "=" and toks[i + 1].text == ";" and \
                        toks[i - 3].text == "." and toks[i - 4].kind == "id" and \
                        toks[i - 5].text not in (".", "->"):
                    var = toks[i - 4].text                       # wc.m = name;
                else:
                    d = _designated_init(toks, i)                 # .m = name in {...}
                    var = d[1] if d else None
                if var is None or var not in stack:
                    bad.add(t.text)
                    continue
                found.setdefault(t.text, set()).add((key, var))
        return found, bad, members

    def _storer_sites(self, key, var, calls_of):
        """The call sites in the function key of the callbacks stored in
        its stack struct var: the calls handed '&var' and the member calls
        'var.m(...)'; None when var is used any other way (it may escape)."""
        src = self.src
        fn = src.funcs[key]
        toks = src.toks[fn.file]
        handed = {}
        for i in range(fn.body_start + 1, fn.body_end):
            if toks[i].text != var or toks[i].kind != "id" or \
                    toks[i - 1].text in (".", "->"):
                continue
            if toks[i + 1].text == "." or toks[i - 1].text in ("struct", "union") or \
                    toks[i - 2].text in ("struct", "union"):
                continue                         # wc.m, the declaration
            if toks[i - 1].text == "&" and toks[i - 2].text in (",", "(") and \
                    toks[i + 1].text in (",", ")"):
                c = self._call_arg(toks, i, fn.body_start)
                if c is not None and c[0] not in KEYWORDS and \
                        not self._handed_escapes(fn, c[0], c[1], calls_of):
                    handed[_call_start(toks, i - 1, fn.body_start)] = i - 1
                    continue
            return None                          # any other use: it may escape
        sites = []
        for (k, callee, st) in self.flows[key].calls:
            if k in handed:
                # the site is the '&wc' argument: toks[k] is no call,
                # so the helper's arguments are not taken for the
                # callback's (_call_args() gives None)
                sites.append((fn, st, handed[k]))
            elif callee in self._stack_members(toks, k, var):
                sites.append((fn, st, k))
        return sites

    def _handed_escapes(self, caller, callee, n, calls_of):
        """May the object caller hands as argument n of callee reach another
        task or outlive the call?  Followed through the target's functions:
        stored, returned, linked into a list or tree, or handed to code
        outside the target (but not to the functions calls_of says a member
        call may reach) is escaping.  A stricter cousin of param_escapes()
        that can be asked before the call graph is complete."""
        keep = self.P.non_retaining
        seen = set()
        todo = [(caller, callee, n)]
        while todo:
            fn, c, m = todo.pop()
            if c in keep:
                continue
            targets = self._callee(fn, c) if c not in calls_of else \
                [f for x in calls_of[c] for f in self.src.by_name.get(x, [])]
            if not targets:
                return True
            for t in targets:
                key = (t.file, t.name, m)
                if key in seen:
                    continue
                seen.add(key)
                names = self.params(t)
                if m >= len(names) or not names[m]:
                    return True
                p = names[m]
                toks = self.src.toks[t.file]
                for k1 in self._ids(t).get(p, ()):
                    if toks[k1 - 1].text == "&" and toks[k1 + 1].text in ("->", "."):
                        # &p->work handed to queue_work(): the member
                        # reaches code that may keep it
                        a = self._call_arg(toks, k1, t.body_start)
                        if a is not None and a[0] not in KEYWORDS and \
                                a[0] not in self.lockfns and a[0] not in keep:
                            return True
                        if self._published(toks, k1 - 1, t.body_start):
                            return True
                for kind, info in self._bare_uses(t, p):
                    if kind in ("stored", "returned") or kind == "other-arg" and info not in keep:
                        return True
                    if kind == "arg":
                        todo.append((t, info[0], info[1]))
                # the callback is called through p ('p->fn(..)') or p is handed
                # on: a lock t released before (the flow's 'killed') is not
                # the storer's any more there
                for (k, c2, st) in self.flows[(t.file, t.name)].calls:
                    if st.killed and (toks[k - 2].text == p and toks[k - 1].text in ("->", ".")
                                      or any(b - a == 1 and toks[a].text == p for a, b in
                                             self._call_args(t.file, k) or ())):
                        return True
        return False

    @staticmethod
    def _stack_members(toks, k, var):
        """The member name when toks[k] is the member of 'var.m(...)'."""
        if toks[k - 1].text == "." and toks[k - 2].text == var:
            return (toks[k].text,)
        return ()


def _asserts(spec):
    """A lock function entry (or its variants) that asserts a lock."""
    return any(x.get("op") == "assert" for x in (spec if isinstance(spec, list) else [spec]))
