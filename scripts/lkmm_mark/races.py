# SPDX-License-Identifier: GPL-2.0-only
"""Stage 3b: what keeps two accesses of a field apart when no single lock
does.  A pair is kept apart by a lock shared in every pair of their
calling contexts (exclusive on one side, or two groups that exclude each
other: _ctx_excluded() in callers.py), by a declared life-cycle order
(policies/ 'phases': one in the 'before' phase, the other in the 'after'
phase; policies/ 'drains': a holder's access to its own object before the
drainer's, drains.py), or because the task owning the object makes both.  An access kept
apart from every conflicting one is 'unraced-in-every-context'; a locked
write kept apart from every racer is 'locked-write-unraced'.

Reads .owner_acc (owners.py), .lost_ids (protection.py), .life
(exclusions.py), .src, .P.phases and the contexts of callers.py.  Sets
the action, rule and reason of the accesses _unraced() clears, and its
caches (_wxmemo, _phsets).  A lock the callers are wrongly thought to
hold would clear a real race here.
"""

from .drains import DRAIN_PAIR, drain_key
from .waits import plain_store

_OWNER_PAIR = "(the task that owns the object)"
_PHASE_PAIR = "(phase) "
# how a reason names a declared life-cycle order (series.py counts them)
PHASE_TAG = "policies/ 'phases'"


class Races:
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
        (an inode's destroy function removes the pending extents it finds,
        as their finish function does)."""
        sets = getattr(self, "_phsets", None)
        if sets is not None:
            return sets
        sets = []
        for ph in self.P.phases:
            two = [self._only_called_from({k for k, fn in self.src.funcs.items()
                                           if fn.name in ph.get(side, ())}, also=self.life)
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
        if a.struct != b.struct or a.func is None or b.func is None:
            return None
        dr = self.drain_apart(a, b)
        if dr is not None or not self.P.phases:
            return dr
        ka, kb = (a.file, a.fn), (b.file, b.fn)
        for i, (ph, before, after) in enumerate(self._phase_sets()):
            if ph["struct"] != a.struct:
                continue
            if (kb in before and ka in after) or (ka in before and kb in after):
                return _phase_key(i, ph)
            waits = ph.get("after_wait")
            if waits and ((kb in before and plain_store(b) and self.after_wait(a, waits)) or
                          (ka in before and plain_store(a) and self.after_wait(b, waits))):
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
            _apart_text(locks, a, self.P.phases, self.P.drains))

    def _pair_excluded(self, b, a):
        """The locks that keep accesses b and a from running side by side,
        one shared in every pair of their calling contexts (exclusive on
        one side, or in two groups that exclude each other), or None:
        _ctx_excluded() for one access."""
        memo = self._wxmemo
        k = (id(b), id(a))
        if k not in memo:
            if b.func is None or a.func is None:
                memo[k] = None
            else:
                # the answer depends on the two sets of locksets alone,
                # which many pairs share
                k2 = (frozenset(self._locksets(b)), frozenset(self._locksets(a)))
                if k2 not in memo:
                    memo[k2] = self._ctx_excluded(b, [a], [])
                memo[k] = memo[k2]
        return memo[k]


def _phase_key(i, ph):
    """_kept_apart()'s sentinel for entry i of policies/ 'phases'."""
    return "%s%d %s" % (_PHASE_PAIR, i, ph["struct"])


def _apart_text(locks, a, phases=None, drains=None):
    """How _kept_apart()'s locks keep the other accesses from access a,
    for a reason text ('every write of it ...')."""
    this = "read" if a.kind == "read" else "write"
    owner = "is made, as this %s is, by the task that owns the object (a struct on " \
        "its stack, an object it allocated itself, or a parameter every caller passes " \
        "such an object in)" % this
    parts = []
    real = [x for x in locks if x != _OWNER_PAIR and not x.startswith((_PHASE_PAIR, DRAIN_PAIR))]
    if real:
        parts.append("shares a lock with this %s in every pair of their calling contexts "
                     "(%s), exclusive on one side%s" % (
                         this, " or ".join(real),
                         " or held in two groups that exclude each other"
                         if any(" against " in lk for lk in real) else ""))
    for i, ph in enumerate(phases or ()):
        if _phase_key(i, ph) in locks:
            parts.append("is ordered with this %s by the life cycle of a struct %s that "
                         "%s declares (%s() before %s: %s)" % (
                             this, ph["struct"], PHASE_TAG, "(), ".join(ph["before"]),
                             _after_text(ph), ph["reason"]))
    for i, d in enumerate(drains or ()):
        if drain_key(i, d) in locks:
            parts.append("is ordered with this %s by a drain of the holders of a struct %s "
                         "that policies/ 'drains' declares (a holder's accesses to its own "
                         "object before the drainer's after a wait on %s: %s)" % (
                             this, d["struct"], d["counter"], d["reason"]))
    if _OWNER_PAIR in locks:
        parts.append(owner)
    if not locks:
        # no calling context on one side (contexts.py _alone_calls())
        parts.append("runs beside none of this %s's calling contexts: only life-cycle "
                     "functions that run alone (a mount, its log replay) reach one of "
                     "the two" % this)
    return ", or ".join(parts)


def _after_text(ph):
    """The 'after' side of a phases entry, as its reason names it: the
    functions, and the waits ('w(x) returned')."""
    parts = ["%s()" % f for f in ph.get("after", ())]
    parts += ["a wait %s() on the object" % w["call"] for w in ph.get("after_wait", ())]
    return ", ".join(parts)
