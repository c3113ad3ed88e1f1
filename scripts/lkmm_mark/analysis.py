# SPDX-License-Identifier: GPL-2.0-only
"""Stages 2 and 3: lock context, protection inference, verdicts.

Input: the access facts of cocci/facts.cocci and the sources (for token
order).  Output: a Plan, one verdict per access with a rule id from
policies/policies.json and a reason citing the evidence.
"""
import collections

from .locks import How
from .accesses import Accesses
from .callers import Callers, _BY_CALLERS
from .callgraph import CallGraph
from .detach import Detach
from .escapes import Escapes
from .exclusions import Exclusions
from .owners import Owners
from .private import Private
from .scan import SourceScan
from .syntax import Syntax
from .unpublished import Unpublished
from .source import Access, Source, STORE_MACROS

__all__ = ["Analysis", "Access", "Source", "STORE_MACROS", "PHASE_TAG"]


class Analysis(Accesses, Syntax, SourceScan, CallGraph, Callers, Escapes, Private,
               Detach, Unpublished, Owners, Exclusions):
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
