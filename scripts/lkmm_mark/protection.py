# SPDX-License-Identifier: GPL-2.0-only
"""Stage 3a: per-field protection inference.  The accesses of each field
(exclusions aside) give its lock (the one held by more than half of its
writes, LockDoc-style; not a lock held for something else), the locks
every write holds, the lost updates, the racers of a locked write, and
its class (lock-protected, always-locked, handler, context-read,
atomic-bitops, owner, ...); classify() then asks verdicts.py for each
access.  container_held() adds the lock of an entry's container,
data_held() the lock of the buffer that holds data of an on-disk format.

Reads .accesses with their .held and .exclusion, .owner_read,
.declared_owners (owners.py), .any_time and .handover (contexts(),
callers.py), .life, .dead, .dead_lines, .P.  Sets .fields (field -> info),
.race_exprs, .ctx_locked (id(read) -> the locks its calling contexts
hold against every write, or None), .lost_ids, the 'not-markable'
exclusion of RCU pointers, and each access's verdict (infer() copies
the exclusions into rule and reason).  A wrong lock choice or class
here is the source of most false positives and negatives of a field.
"""
import collections

from .callers import _BY_CALLERS
from .lockmodes import HANDED
from .lockstate import How
from .source import NON_STORE_BITOPS, STORE_MACROS
from .verdicts import _holds_any

# what shows a field accessed without a lock while it changes (classify())
_Concurrency = collections.namedtuple("_Concurrency", "wait_reads handed ctx_w atomics m_loads "
                                      "writes_all ctx_r ctx_w_all")


class Protection:
    def container_held(self):
        """policies/ 'container_locks': the entries of a struct are protected
        by the lock of whichever container holds them (free-space entries:
        the lock of the tree or of the cluster they are in; they move
        between the two with both held).  An access holding one of those locks holds
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

    def data_held(self):
        """policies/ 'data_locks': a struct whose members have the declared
        types of an on-disk format (big-endian words, and bytes beside
        them) is the content of a buffer, read and written only with the
        buffer's lock held (or in a copy one task owns): every access to
        it holds that lock."""
        specs = self.P.data_locks
        if not specs:
            return
        hold = {}
        for name, members in self.src.structs.items():
            for spec in specs:
                if members and _format_struct(members, spec):
                    hold[name] = spec
                    break
        for a in self.accesses:
            spec = hold.get(a.struct)
            if spec is not None:
                lk = spec["lock"] + (":r" if spec.get("mode") == "read" else "")
                a.held = dict(a.held or {})
                a.held.setdefault(lk, How("%s held (struct %s: %s)" % (
                    spec["lock"], a.struct, spec["reason"]), a.line))

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
        votes = collections.defaultdict(list)
        for a in self.accesses:
            if a.exclusion is None and not a.test:
                byfield[(a.struct, a.field)].append(a)
            elif a.exclusion and a.exclusion[0] == "private" and a.held and \
                    a.kind in ("write", "rmw") and not a.test and self.in_new_window(a):
                # a store to a new object (its flag set) races with
                # nothing, but the lock its maker takes is the lock the
                # field's writers take: it still says which lock that is
                votes[(a.struct, a.field)].append(a)
        self.new_votes = votes
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
        """The protection of field name (struct.field), from its plain
        accesses accs, its marked ones and its declared owner: the lock,
        the class and the evidence (the info of the plan's fields); then
        each access's verdict."""
        writes = [a for a in accs if a.kind in ("write", "rmw")]
        reads = [a for a in accs if a.kind in ("read", "rmw")]
        info = {"field": name, "accesses": len(accs), "writes": len(writes),
                "reads": len(reads), "lock": None, "share": None, "class": None,
                "owner": owner, "evidence": [], "marked": marked}
        # the lock held by the most writes; stores already marked
        # (WRITE_ONCE() and friends) are writes too, so a field keeps its
        # lock once its writes are marked (a second run asks for nothing)
        stores = [m for m in marked if m.macro in STORE_MACROS and m.held is not None]
        st, _, fld = name.partition(".")
        votes = getattr(self, "new_votes", {}).get((st, fld), [])
        self._field_lock(info, writes + stores + votes, reads, marked)
        self._write_locks(info, writes + stores)
        locked_r = self._locked_reads(info, reads, writes)
        lk = self._coincidental(info, writes, stores, locked_r)
        locked_w = [w for w in writes if lk and lk in w.held]
        lost = self._lost_updates(info, writes, marked, locked_w)
        lost_ids = {id(w) for w in lost}
        self.lost_ids |= lost_ids
        if lost:
            writes = [w for w in writes if id(w) not in lost_ids]
            reads = [r for r in reads if id(r) not in lost_ids]
            info["lost_updates"] = ["%s() at %s" % (w.fn, w.where()) for w in lost]
        unlocked_r = [r for r in reads if not self._holds(r, lk, info, writes) and
                      id(r) not in self.owner_read]
        # what a locked write can race with: the reads without the lock
        # (plain or already marked) and the writes without it
        info["racers"] = [r for r in unlocked_r if not r.test] + [
            m for m in marked if m.macro not in STORE_MACROS and m.kind != "atomic" and
            not m.test and lk and lk not in m.held and lk + ":r" not in m.held] + [
            w for w in writes if lk and lk not in w.held and not w.test]
        info["owner_reads"] = sum(1 for r in reads if id(r) in self.owner_read)
        ev = self._concurrency(info, writes, reads, marked, ctxfns)
        handler = self.handler_of(name)
        info["handler"] = handler
        if handler:
            info["class"] = "handler"
        elif not writes and not marked:
            info["class"] = "read-only"
        elif not reads and not marked and not self.P.handlers:
            info["class"] = "write-only"
        elif not self._locked_class(info, ev, writes, marked, unlocked_r, locked_w):
            self._shared_class(info, ev, writes, reads, marked, ctxfns)
        info["locked_writes"] = len(locked_w)
        self._judge(info, accs, lost, locked_w, ev, reads)
        del info["racers"]
        return info

    def _field_lock(self, info, ws, reads, marked):
        """The field's lock (info lock, share, lock_site), or a tie: the
        lock held by the most of its writes ws (marked stores included)."""
        name = info["field"]
        cnt = collections.Counter()
        first = {}
        phase = self.phase_locks
        for w in ws:
            for lk in w.held:
                if lk.endswith(":r") or lk.startswith("?") or lk in phase or \
                        HANDED in lk:
                    # a phase lock (policies/ 'param_locks': held shared by
                    # nearly every function) orders accesses only through
                    # its exclusive side, below; it is no field's own lock;
                    # nor is one a wrapper handed back (handback.py)
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
        if cnt and 2 * n == len(ws) and not self._tie_evidence(
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
            info["tie"] = [n, len(ws), lk, first[lk].where()]
        elif cnt and 2 * n >= len(ws):
            info["lock"] = lk
            info["share"] = (n, len(ws))
            info["lock_site"] = first[lk]

    def _write_locks(self, info, ws):
        """info write_locks and excl_locks: the locks every write of ws
        holds (exclusively; in some mode)."""
        # locks every write holds: a read holding any of them cannot race
        # with a write, whichever lock is the field's main one
        wl = None
        for w in ws:
            h = {x for x in w.held if not x.endswith(":r") and not x.startswith("?")}
            wl = h if wl is None else wl & h
        info["write_locks"] = sorted(wl or ())
        # locks every write holds in some mode (a read side counts): a read
        # holding one of them exclusively cannot race with a write either
        # (the rwsem case: writers share it, this reader excludes them all)
        wa = None
        for w in ws:
            h = {x[:-2] if x.endswith(":r") else x for x in w.held if not x.startswith("?")}
            wa = h if wa is None else wa & h
        info["excl_locks"] = sorted(x + "!x" for x in (wa or ()) if x not in (wl or ()))

    def _holds1(self, a, lk, info):
        """a holds the field's lock lk or a lock every write holds."""
        return lk is not None and _holds_any(a, [lk] + info["write_locks"] +
                                             info["excl_locks"])

    def _holds(self, a, lk, info, writes):
        """_holds1(), or a read whose calling contexts each hold a lock that
        excludes the writes (_ctx_excluded(), kept in .ctx_locked)."""
        if self._holds1(a, lk, info):
            return True
        if lk is None or a.kind != "read":
            return False
        if id(a) not in self.ctx_locked:
            self.ctx_locked[id(a)] = self._ctx_excluded(
                a, writes, info["write_locks"] + info["excl_locks"])
        return bool(self.ctx_locked[id(a)])

    def _locked_reads(self, info, reads, writes):
        """The reads kept from the writes by a lock (info ctx_reads: how
        many only by their calling contexts; other_read: one holding
        another lock than the field's)."""
        lk = info["lock"]
        locked_r = [r for r in reads if self._holds(r, lk, info, writes)]
        info["ctx_reads"] = sum(1 for r in locked_r if not self._holds1(r, lk, info))
        other_r = [r for r in locked_r if lk not in r.held and lk + ":r" not in r.held
                   and self._holds1(r, lk, info)]
        if other_r:
            r = other_r[0]
            xl = [x[:-2] for x in info["excl_locks"] if _holds_any(r, [x])]
            info["other_read"] = "%s() at %s holds %s" % (
                r.fn, r.where(), ("%s exclusively, which every write holds at least shared"
                                  % xl[0]) if xl and not _holds_any(r, info["write_locks"])
                else "%s, which every write holds" % [x for x in info["write_locks"]
                                                      if _holds_any(r, [x])][0])
        return locked_r

    def _coincidental(self, info, writes, stores, locked_r):
        """The field's lock, or None when it is held for something else
        (info coincidental_lock)."""
        name = info["field"]
        lk = info["lock"]
        # A lock of another struct that no reader takes is no evidence
        # of how the field is protected when it is held for something
        # else: when no read of the field holds it, or when the only reads
        # under it are in the writing functions themselves and every write
        # holds it only because its callers took it (a coarse mutex around
        # a long operation: a mutex the relocation holds throughout, the
        # tree lock of the block being copied on write).
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
        return lk

    def _lost_updates(self, info, writes, marked, locked_w):
        """The read-modify-writes without the lock every other write holds."""
        lk = info["lock"]
        # lost updates: read-modify-writes without the lock that every
        # other write holds.  A locked update running beside one of them
        # is lost, which READ_ONCE()/WRITE_ONCE() cannot fix and the lock
        # can: they are reported apart (rule lost-update), and they do not
        # count as the lockless reads that would make the locked writes
        # racy (marking those would not fix the race either).
        lost = []
        if lk and locked_w and not marked and not self.handler_of(info["field"]):
            lost = [w for w in writes if w.kind == "rmw" and not self._holds(w, lk, info, writes)]
            if len(locked_w) + len(lost) != len(writes):
                lost = []
        return lost

    def _concurrency(self, info, writes, reads, marked, ctxfns):
        """What shows the field is accessed without a lock while it changes
        (info handed_over: a handler's stores to the object handed to it)."""
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
                   not m.macro.startswith(NON_STORE_BITOPS)]
        m_loads = [m for m in marked if m.kind != "atomic" and m.macro not in STORE_MACROS]
        writes_all = writes + [m for m in marked if m.macro in STORE_MACROS]
        ctx_r = [r for r in reads + m_loads if r.fn in self.any_time]
        ctx_w_all = [w for w in writes_all if w.fn in ctxfns and w not in handed]
        return _Concurrency(wait_reads, handed, ctx_w, atomics, m_loads, writes_all,
                            ctx_r, ctx_w_all)

    def _locked_class(self, info, ev, writes, marked, unlocked_r, locked_w):
        """The classes a lock decides (always-locked, diagnostic-only,
        lock-protected) and a declared owner: True when one is the field's."""
        lk = info["lock"]
        if lk and not unlocked_r and len(locked_w) == len(writes) and not ev.wait_reads \
                and not [m for m in marked if lk not in m.held and lk + ":r" not in m.held]:
            info["class"] = "always-locked"
        elif lk and len(locked_w) == len(writes) and not ev.wait_reads and \
                all(self._is_diag_read(r) for r in unlocked_r) and \
                not [m for m in marked if lk not in m.held and lk + ":r" not in m.held
                     and m.macro != "data_race"]:
            # lock protection with lockless diagnostic access only (plain,
            # or already data_race(): a marked tree keeps its verdicts)
            info["class"] = "diagnostic-only"
            d = unlocked_r[0] if unlocked_r else \
                [m for m in marked if lk not in m.held and lk + ":r" not in m.held][0]
            info["diag_site"] = "%s() at %s" % (d.fn, d.where())
        elif info["owner"]:
            # declared (policies/ 'owners'): the owner's loads are plain
            # (owner_reads()), its stores and other tasks' loads are judged
            # as usual, but never found unraced by their calling contexts
            info["class"] = "owner"
        elif lk:
            info["class"] = "lock-protected"
        else:
            return False
        return True

    def _shared_class(self, info, ev, writes, reads, marked, ctxfns):
        """The classes of a field without a lock of its own: what shows it
        shared (atomic bit operations, handlers, marked accesses, wait
        conditions), else no-lock-evidence."""
        if ev.atomics and reads:
            info["class"] = "atomic-bitops"
            info["evidence"].append("changed with %s() at %s" % (ev.atomics[0].macro,
                                                                 ev.atomics[0].where()))
            self._bitop_locks(info, ev.atomics, writes)
        elif ev.ctx_r and not ev.ctx_w_all and \
                any(w.fn not in {r.fn for r in ev.ctx_r} for w in ev.writes_all):
            # read by a handler that runs at any time (a sysfs show
            # handler) and written elsewhere: the handler's loads race with
            # those stores.  Marked loads and stores count, so a patched
            # tree keeps the class.
            info["class"] = "context-read"
            a = ev.ctx_r[0]
            info["ctx_read_fns"] = sorted({r.fn for r in ev.ctx_r})
            info["evidence"].append("read in %s(), %s" % (a.fn, _a(ctxfns[a.fn])))
        elif marked:
            info["class"] = "marked-elsewhere"
            m = marked[0]
            info["evidence"].append("already marked with %s() at %s" % (m.macro, m.where()))
        elif ev.wait_reads:
            info["class"] = "wait-condition"
            info["evidence"].append("read in a %s() condition at %s" % (
                [c for c in ev.wait_reads[0].ctx if c in self.P.wait_macros][-1],
                ev.wait_reads[0].where()))
        elif ev.ctx_w and any(r.fn not in {w.fn for w in ev.ctx_w} for r in reads):
            info["class"] = "context-shared"
            a = ev.ctx_w[0]
            info["evidence"].append("written in %s(), %s" % (a.fn, _a(ctxfns[a.fn])))
        else:
            info["class"] = "no-lock-evidence"

    def _bitop_locks(self, info, atomics, writes):
        """info bitop_locks: the locks every bit operation changing the
        field and every plain write hold."""
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

    def _judge(self, info, accs, lost, locked_w, ev, reads):
        """The verdict of each access of the field, lost updates first; an
        unlocked one may then be found unraced (races.py)."""
        name = info["field"]
        lk = info["lock"]
        lost_ids = {id(w) for w in lost}
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
                self._unraced(a, name, ev.writes_all if a.kind == "read" else
                              ev.writes_all + reads + ev.m_loads,
                              phases_only=info["class"] == "owner")

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


def _a(what):
    """'a sysfs handler (...)', but 'called from ...' as it is."""
    return what if what.startswith("called from") else "a " + what


def _format_struct(members, spec):
    """members (csrc.Member by name) are those of an on-disk format: one
    has a type of spec's member_types, and each other one such a type,
    one of its also_types, an array or a nested struct."""
    kinds = set(spec["member_types"])
    also = kinds | set(spec.get("also_types", ()))
    return any(m.type in kinds for m in members.values()) and all(
        m.type in also or m.array or m.category == "aggregate" for m in members.values())
