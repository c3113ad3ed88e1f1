# SPDX-License-Identifier: GPL-2.0-only
"""Stage 3e: racing pairs.  A site the lockset verdict marks is flagged
only when the analysis exhibits a counterpart: another access to the same
field, at least one of the two a store, that may run at the same time.
Each candidate pair is kept apart, and so not a race, when

- a lock, pseudo-lock or state guard is shared in every pair of their
  calling contexts, exclusive on one side or in two groups that exclude
  each other (callers._ctx_excluded(): locks, exclusive operations, the
  transaction's writers, a configuration predicate, a pointer known NULL
  or set);
- a declared life-cycle order puts one before the other (races.py);
- both are made by the task that owns the object (owners.py);
- both are reached only from one kernel thread (contexts.py);
- both are made through a work item's own object, in every pair of
  their calling contexts no lock keeps apart (workself.py);
- one is made before the start of the thread the other is reached only
  from, which runs once per object (threads.py not_started());
- the access paths show two different objects (instances.py), also per
  calling context: one names the container of its embedded struct, the
  other's parameter is handed another container's member in the
  contexts no lock keeps apart (kindctx.py).

A site with a counterpart is 'paired': its reason names the counterpart
(function, file:line, locks) and the contexts of both.  A site without
one is 'lockset-only': its action becomes none (rule lockset-only, the
mark the lockset asked for kept as its candidate), reported apart and
left out of the series.

Reads the verdicts (verdicts.py), .accesses, .owner_acc, .owner_quiet,
.lost_ids, .constructors, .P.allocators.  Sets each marked access's .tier, .pair,
.contexts, and rewrites its .reason (the lockset reason is kept in
.lockset_reason; a lockset-only site's mark and rule in .candidate and
.lockset_rule); .pair_idx, the accesses that may be counterparts, by
field (doublefetch.py and twostep.py ask _counterpart() about them).
"""
import collections

from .forksplit import by_group, split_loop
from .lockmodes import sole_groups
from .source import NON_STORE_BITOPS, STORE_MACROS

PAIRED = "paired"
LOCKSET_ONLY = "lockset-only"


# marked read-modify-writes on the field's address: stores too
_RMW_MACROS = ("xchg", "cmpxchg", "try_cmpxchg", "xchg_relaxed", "cmpxchg_relaxed")


def is_store(b):
    if b.kind in ("write", "rmw"):
        return True
    if b.kind == "atomic":
        return not (b.macro or "").startswith(NON_STORE_BITOPS)
    return b.kind in ("marked", "address") and b.macro in STORE_MACROS + _RMW_MACROS


def is_load(b):
    return b.kind in ("read", "rmw") or (b.kind == "marked" and b.macro not in STORE_MACROS) \
        or (b.kind == "address" and b.macro in _RMW_MACROS)


class Pairs:
    def racing_pairs(self):
        idx = collections.defaultdict(list)
        for b in self.accesses:
            if b.test or id(b) in self.lost_ids or not (is_store(b) or is_load(b)):
                continue
            if b.exclusion is None or b.exclusion[0] == "already-marked":
                idx[(b.struct, b.field)].append(b)
        self.pair_idx = idx
        for a in self.accesses:
            a.tier, a.pair, a.contexts = None, None, None
        # field by field, half of the fields in a forked child
        # (forksplit.py: a field's search changes only its own accesses)
        todo = [a for a in self.accesses if not a.test]
        split_loop(todo, lambda a: self._pair_of(a, idx.get((a.struct, a.field), ())),
                   by_group([a for a in todo if a.action != "none"],
                            lambda a: (a.struct, a.field)))

    def _pair_of(self, a, cands):
        """a's racing pair among cands (its field's accesses), or a's
        demotion to the candidates when it has none."""
        if a.action == "none":
            self._second_look(a, cands)
            return
        b, why = self._counterpart(a, cands)
        a.lockset_reason = a.reason
        if b is not None:
            self._paired(a, b)
            if a.kind == "rmw":
                a.read_races = self._read_half_races(a, cands)
        else:
            # a candidate: reported apart (report --tier lockset-only),
            # never marked
            a.tier, a.candidate, a.lockset_rule = LOCKSET_ONLY, a.action, a.rule
            a.action, a.rule = "none", LOCKSET_ONLY
            a.reason = "%s; but no racing pair: %s" % (a.reason, _kept_text(why))

    def _paired(self, a, b):
        a.tier, a.pair = PAIRED, b
        chains = self.racing_chains(a, b, locksets=True)
        if chains:
            (x, cx), (y, cy) = chains
            a.contexts = (self.describe_chain(cx, y),
                          self.describe_chain(cy, x | self.head_locks(cx, y)))
        else:
            a.contexts = (self.context_of(a.fn), self.context_of(b.fn))
        a.reason = self._pair_reason(a, b)

    def _second_look(self, a, cands):
        """Loads the lockset left plain that a racing pair shows racy: a
        read under the lock most stores hold, racing with a store made
        without it (racing-locked-read: READ_ONCE()), and an assertion
        read of a locked field racing with a lockless store
        (diagnostic-read: data_race())."""
        if a.rule not in ("locked-read", "assertion-read") or a.kind != "read":
            return
        info = self.fields.get("%s.%s" % (a.struct, a.field)) or {}
        share = info.get("share")
        if a.rule == "locked-read" and not (share and share[0] < share[1]):
            return              # every store holds the lock: nothing races
        b = self._racing_store(a, cands)
        if b is None:
            return
        a.lockset_reason = a.reason
        # a read only for a message or an assertion documents its race
        # with data_race(), whatever lock it holds (policy: diagnostic reads)
        diag = any(self.P.is_diag(c) for c in (a.ctx or ()))
        a.action, a.rule = ("READ_ONCE", "racing-locked-read") \
            if a.rule == "locked-read" and not diag else ("data_race", "diagnostic-read")
        self._paired(a, b)

    def _read_half_races(self, a, cands):
        """The read half of 'x->f += n' races with a store, so the rewrite
        marks it READ_ONCE(): under the lock, a store made without it;
        without a lock, any store, the same statement in another task
        included (not when one work item or kthread is the field's only
        writer there: its own load races with nothing)."""
        if a.rule == "locked-write":
            return self._racing_store(a, cands) is not None
        if self._apart(a, a) is None:
            return True
        return self._counterpart(a, [b for b in cands if is_store(b)])[0] is not None

    def _racing_store(self, a, cands):
        """A store racing with a, made without the lock of a's field.  An
        owner's stores without the lock leave the reads under it plain
        (policy 3: the seed commit's blocking_writers)."""
        info = self.fields.get("%s.%s" % (a.struct, a.field)) or {}
        lk = info.get("lock")
        if not lk or info.get("owner"):
            return None
        stores = [b for b in cands if b is not a and is_store(b) and lk not in b.held]
        return self._counterpart(a, stores)[0]

    def _counterpart(self, a, cands, best_of=16):
        """An access of cands that may race with a, and a Counter of why
        the others cannot.  Candidates come in order of preference (stores
        for a load; loads, then stores, for a store; other functions
        first); of the first best_of that race, the strongest evidence is
        named (_strength())."""
        a_store = is_store(a)
        order = sorted((b for b in cands if b is not a and (a_store or is_store(b))),
                       key=lambda b: (not is_store(b) if not a_store else is_store(b),
                                      b.fn == a.fn, b.file, b.line, b.col))
        why = collections.Counter()
        racing = []
        for b in order:
            apart = self._apart(a, b)
            if apart is not None:
                why[apart] += 1
                continue
            racing.append(b)
            if len(racing) == best_of:
                break
        if not racing:
            return None, why
        if len(racing) == 1:
            return racing[0], why
        return min(racing, key=lambda b: self._strength(a, b) + (racing.index(b),)), why

    def _strength(self, a, b):
        """How weak b is as the counterpart of a (a sort key, smaller is
        stronger): an assertion or a message is weaker than a use; a load
        after a wait that has seen the field's final value is weaker than
        the wait's own reads; a pair whose racing contexts include a
        teardown (policies/ 'teardown_ops') is weaker than two live ones;
        a store's counterpart is a load before another store (the order of
        the candidates, which the share of contexts must not undo: the
        mark a store needs is for the load that may see it half made);
        then the counterpart that races in the larger share of its
        calling contexts (not a cleanup path that races in one context of
        many); last, a counterpart inside an operation that admits no
        other beside it is weaker than one outside, when the site's own
        call chain enters such an operation where the flow does not see
        it hold one (_sole_op_missed())."""
        diag = any(c in self.P.assertions or c in self.P.diag_calls for c in (b.ctx or ()))
        chains = self.racing_chains(a, b)
        teardown = not chains or any(self.teardown_chain(c) for c in chains)
        n, total = self.racing_contexts(a, b)
        return (diag, self._after_wait(b), teardown, is_store(a) and is_store(b),
                -(n / total if total else 0.0),
                self._sole_op_missed(a, b))

    def _sole_op_missed(self, a, b):
        """b holds a group of a pseudo-lock that admits no second holder
        (a name ending in '!', lockmodes.groups_exclude()), and a function
        on a calling chain of a takes a group of that pseudo-lock (itself
        or through a wrapper that returns with it held) though
        a is not found holding one (a paused operation resumed, a
        try-lock whose result the flow does not follow): the operation
        a's own task is in may keep b away."""
        bases = {g[0] for g in sole_groups(b.held or ())}
        if not bases:
            return False
        takers = self.__dict__.get("_takers")
        if takers is None:
            takers = self._takers = self._op_takers()
        return any(f in takers[lk] for lk in bases for _, c in self.lockset_chains(a) for f in c)

    def _op_takers(self):
        """{lock: the functions that take it through a lock function
        (policies/ 'lock_functions'), or call a wrapper that does: one
        that takes it and calls no function releasing it}."""
        got, rel = collections.defaultdict(set), collections.defaultdict(set)
        for name, specs in self.lockfns.items():
            for spec in specs if isinstance(specs, list) else [specs]:
                into = rel if spec.get("op") == "release" else got \
                    if spec.get("op") in ("acquire", "acquire_ret0", "trylock") else None
                for lk in [spec] + list(spec.get("also") or ()) if into is not None else ():
                    into[lk.get("lock")].update(c.name for (c, _, _) in self.calls.get(name, ()))
        for lk, fns in got.items():
            fns.update(*[self._callers_of(f) for f in fns - rel[lk]])
        return got

    def _after_wait(self, b):
        """Load b comes after a wait macro in its function whose condition
        reads the same field (itself, or through a function it calls)."""
        if is_store(b) or b.func is None or b.tok is None:
            return False
        toks = self.src.toks.get(b.file)
        readers = self.__dict__.get("_fieldreaders")
        if readers is None:
            readers = self._fieldreaders = collections.defaultdict(set)
            for x in self.accesses:
                if not is_store(x):
                    readers[(x.struct, x.field)].add(x.fn)
        key = (b.struct, b.field)
        ids = self._ids(b.func)
        for j in sorted(j for n in ids.keys() & set(self.P.wait_macros) for j in ids[n]
                        if j < b.tok):
            if toks[j + 1].text == "(":
                depth, k = 0, j + 1
                while k < b.tok:
                    t = toks[k].text
                    depth += (t == "(") - (t == ")")
                    if depth == 0:
                        break
                    if (t == b.field and toks[k - 1].text in ("->", ".")) or \
                            (t in readers[key] and toks[k + 1].text == "("):
                        return True
                    k += 1
        return False

    def _apart(self, a, b):
        """What keeps a and b apart ('locks', 'order', 'owner', 'alone',
        'thread', 'instance'), or None."""
        if id(a) in self.owner_acc and id(b) in self.owner_acc:
            return "owner"
        if id(a) in self.owner_quiet or id(b) in self.owner_quiet:
            return "owner"              # a declared owner's load races with no store (owners.py)
        if not self.lockset_chains(a) or not self.lockset_chains(b):
            return "alone"              # reached only where nothing else runs (contexts.py)
        if self._phase_apart(b, a) is not None:
            return "order"
        if self.other_instance(a, b):
            return "instance"
        if self.same_thread(a, b):
            return "thread"
        if self.work_apart(a, b):
            return "work"
        if self.not_started(a, b):
            return "started"
        if self.torn_down(a) or self.torn_down(b):
            return "teardown"
        if self._pair_excluded(b, a) or self.io_parts_apart(a, b):
            return "locks"
        if self._owned_apart(a, b) or self.torn_apart(a, b):
            return "teardown"
        if self.kind_apart(a, b):
            return "instance"
        return None

    def _owned_apart(self, a, b):
        """a or b touches a struct that only objects of its owner reach
        (policies/ 'owned_structs': a record inside the owner's own
        storage), and every pair of their calling contexts that no lock
        keeps apart has such a side in a context that only a teardown
        method of the owner gives, or that handed the owner on as an
        object the caller owns outright (a new one): per calling
        context, where torn_down() asks that every context be one."""
        da, db = self._owned_drop(a.struct), self._owned_drop(b.struct)
        return bool(da or db) and self.live_apart(a, da, b, db)

    def _owned_drop(self, struct):
        """contexts.py's drop for an owned struct (policies/
        'owned_structs'): the teardown methods (policies/ 'teardown_ops',
        never called by name) that tear down its owner, and the owner; ()
        for another struct."""
        c = self.P.owned_structs.get(struct)
        if c is None:
            return ()
        memo = self.__dict__.setdefault("_ownmemo", {})
        if struct not in memo:
            memo[struct] = (frozenset(
                r for r, (_, how) in self.entry_points().items()
                if any(how.startswith("->%s " % m) for m in self.P.teardown_ops)
                and not self._callers_of(r) and c["owner"] in self._torn_structs(r)),
                frozenset([c["owner"]]))
        return memo[struct]

    # -------------------------------------------------------- teardown
    def torn_down(self, a):
        """Access a is reached only from teardown methods (policies/
        'teardown_ops': ->evict_inode ...) and its struct is the one the
        method tears down (a parameter's, or the struct a container
        accessor finds around it): no other task holds a reference to the
        object then, and the teardown's own accesses come one after the
        other."""
        memo = self.__dict__.setdefault("_tdmemo", {})
        key = (a.fn, a.struct)
        if key not in memo:
            memo[key] = self._torn_down(a.fn, a.struct)
        return memo[key]

    def _torn_down(self, name, struct):
        if not self.P.teardown_ops:
            return False
        roots = self.roots_of(name)
        entries = self.entry_points()
        if not roots:
            return False
        for r in roots:
            how = entries.get(r, ("", ""))[1]
            if not any(how.startswith("->%s " % m) for m in self.P.teardown_ops):
                return False
            if struct not in self._torn_structs(r):
                return False
        return True

    def _torn_structs(self, name):
        """The structs of name's parameters, and those a container
        accessor (policies/) finds around them."""
        out = set()
        for fn in self.src.by_name.get(name, ()):
            types = self._decl_types(fn)
            for p in self.params(fn):
                if p and types.get(p):
                    out.add(types[p])
        for acc, st in self.P.container_accessors.items():
            out.add(st) if any(self._container_of_param(fn, acc)
                               for fn in self.src.by_name.get(name, ())) else None
        return out

    def _container_of_param(self, fn, acc):
        """fn calls container accessor acc on one of its parameters."""
        toks = self.src.toks[fn.file]
        ps = set(p for p in self.params(fn) if p)
        return any(toks[j].text == acc and toks[j + 1].text == "(" and toks[j + 2].text in ps
                   for j in range(fn.body_start, fn.body_end))

    # ---------------------------------------------------------- reasons
    def _pair_reason(self, a, b):
        ca, cb = a.contexts
        return "%s is %s here in %s() %s, and %s by %s() at %s %s, with nothing " \
            "keeping them apart; this runs in %s, that in %s" % (
                "%s.%s" % (a.struct, a.field), _verb(a), a.fn, _locks_text(a), _verb(b),
                b.fn, b.where(), _locks_text(b), ca, cb)


def _verb(a):
    if a.kind == "rmw":
        return "updated"
    return "stored" if is_store(a) else "loaded"


def _locks_text(a):
    held = sorted(h[:-2] if h.endswith(":r") else h for h in (a.held or {})
                  if h != "irqs-off" and not h.startswith("?") and "{=" not in h)
    return "under %s" % ", ".join(held) if held else "without a lock"


_KEPT = {"locks": "a common lock or protocol", "order": "a declared life-cycle order",
         "owner": "the owning task", "thread": "one kernel thread",
         "instance": "another object", "teardown": "the object's teardown",
         "work": "one work item on its own object",
         "started": "a thread not started yet (policies/ 'thread_lifetimes')",
         "alone": "a life-cycle function that runs alone (mount, log replay)"}


def _kept_text(why):
    if not why:
        return "no other access of the field conflicts with it"
    return "every conflicting access is kept apart from it (%s)" % ", ".join(
        "%d by %s" % (n, _KEPT[k]) for k, n in sorted(why.items()))
