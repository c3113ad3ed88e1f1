# SPDX-License-Identifier: GPL-2.0-only
"""Stage 3c: the verdict of each access (action, rule, reason), from the
class, lock and evidence classify() found for its field (info) and the
locks the access holds: the quiet classes, handlers, locked and
unlocked writes and reads, diagnostics and assertions, the re-read after
an unlocked read.  The reason texts are here.

Reads info (protection.py), .owner_read and .declared_owners
(owners.py), .ctx_locked (protection.py), .accesses, .lost_ids, .P, and
asks races.py whether a locked write's racers are kept apart.  Sets each
access's .action, .rule, .reason (and .evidence 'holds-lock' on a store
made under another lock).
"""
import collections

from .races import _apart_text
from .source import STORE_MACROS


class Verdicts:
    def verdict(self, a, info):
        """The action, rule and reason of access a, from what classify()
        found of its field (info)."""
        if id(a) in self.owner_read:
            a.action, a.rule = "none", "owner-read"
            a.reason = self.owner_read[id(a)]
            return
        if self._class_verdict(a, info):
            return
        lk = info["lock"]
        locks = ([lk] + info.get("write_locks", []) + info.get("excl_locks", [])) if lk else []
        holds = lk is not None and _holds_any(a, locks)
        ev = _evidence(info)
        if a.kind in ("write", "rmw"):
            self._write_verdict(a, info, locks, ev)
        else:
            self._read_verdict(a, info, locks, holds, ev)

    def _class_verdict(self, a, info):
        """The verdicts the field's class gives every access (the quiet
        classes, diagnostic-only, handler; and a read kept from every write
        by its callers' locks in an always-locked field): True when a has
        one."""
        cls = info["class"]
        lk = info["lock"]
        name = info["field"]
        ctxl = self.ctx_locked.get(id(a)) if a.kind == "read" else None
        if cls == "always-locked" and ctxl and not _holds_any(
                a, [lk] + info.get("write_locks", []) + info.get("excl_locks", [])):
            a.action, a.rule = "none", "locked-in-every-caller"
            a.reason = "every write of %s holds %s, and %s() is entered holding, in each of " \
                "its calling contexts, a lock that excludes every write in each of theirs " \
                "(%s): this read races with none" % (name, lk, a.fn,
                                                     " or ".join(sorted(set(ctxl))))
            return True
        if cls in ("read-only", "write-only", "always-locked", "no-lock-evidence"):
            a.action = "none"
            a.rule = cls
            a.reason = _quiet_reason(info)
            return True
        if cls == "diagnostic-only" and (a.kind in ("write", "rmw") or
                                         not self._is_diag_read(a)):
            a.action, a.rule = "none", "diagnostic-only"
            a.reason = "every write of %s holds %s; it is read without it only for " \
                "diagnostics (%s, data_race()): plain accesses under the lock " \
                "are fine" % (name, lk, info["diag_site"])
            return True
        if cls == "handler":
            self._handler_verdict(a, info)
            return True
        return False

    def _handler_verdict(self, a, info):
        """An access to a field shared with a handler (policies 4 and 5)."""
        name = info["field"]
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

    def _write_verdict(self, a, info, locks, ev):
        """A store: WRITE_ONCE() unless it holds the field's lock and every
        racer is kept apart from it."""
        lk = info["lock"]
        name = info["field"]
        held = a.held
        holds_x = lk is not None and lk in held
        a.action = "WRITE_ONCE"
        xl = self._kept_apart(a, info["racers"]) if holds_x else None
        if xl is not None:
            a.action, a.rule = "none", "locked-write-unraced"
            b = info["racers"][0]
            a.reason = "%s is %s without %s elsewhere (e.g. %s() at %s), but each " \
                "of them %s: nothing races with this locked write" % (
                    name, "written" if b.kind in ("write", "rmw") else "read", lk,
                    b.fn, b.where(), _apart_text(xl, a, self.P.phases, self.P.drains))
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
        owner = info["owner"]
        if owner is not None and (a.file, a.fn) in self.declared_owners[name][1]:
            a.reason += " (owner: %s)" % owner["reason"]

    def _read_verdict(self, a, info, locks, holds, ev):
        """A load."""
        cls = info["class"]
        name = info["field"]
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
            self._locked_read(a, info, locks)
            return
        self._unlocked_read(a, info, locks, ev)

    def _locked_read(self, a, info, locks):
        """A load holding a lock that excludes the field's writes."""
        lk = info["lock"]
        name = info["field"]
        share = info.get("share")
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

    def _unlocked_read(self, a, info, locks, ev):
        """A load holding no lock that excludes the field's writes: a
        diagnostic (data_race()), an assertion, or READ_ONCE()."""
        lk = info["lock"]
        name = info["field"]
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
            a.diag = diag[-1]
            use = self.P.diag_phrase(diag[-1])
            a.reason = "%s is %s; read without it only for %s here" % (
                name, ev if lk else "shared (" + ev + ")", use) if lk else \
                "%s: %s; read only for %s here" % (name, ev, use)
            return
        a.action, a.rule = "READ_ONCE", "unlocked-read"
        if lk:
            a.reason = "%s is %s; read without it here" % (name, ev)
        else:
            a.reason = "%s: %s; read without a lock here" % (name, ev)

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


def _evidence(info):
    """How a reason cites the field's lock, or its evidence of sharing."""
    lk = info["lock"]
    share = info.get("share")
    lsite = info.get("lock_site")
    if lk:
        ev = "written under %s at %s" % (lk, lsite.where())
        if share and share[1] > 1:
            ev += " and %d other site%s (%d of %d writes)" % (
                share[1] - 1, "s" if share[1] > 2 else "", share[0], share[1])
    else:
        ev = "; ".join(info["evidence"]) or "shared without a lock"
    return ev


def _quiet_reason(info):
    """The reason of an access to a field of a quiet class (read-only,
    write-only, always-locked, no-lock-evidence)."""
    cls = info["class"]
    lk = info["lock"]
    name = info["field"]
    if cls == "always-locked" and info.get("owner_reads") and info["owner"]:
        return "every access to %s holds %s, except the loads of its declared " \
            "owner, the task running %s() (policies/ 'owners'), which race " \
            "with no store" % (name, lk, "(), ".join(info["owner"]["functions"]))
    if cls == "always-locked" and info.get("owner_reads"):
        return "every access to %s holds %s, except the loads of the task " \
            "that owns the object, which is the only one that stores it" % (name, lk)
    if cls == "always-locked" and info.get("ctx_reads"):
        return "every write of %s holds %s; every read holds it or, in each " \
            "of its calling contexts, a lock that excludes the writes " \
            "(locked-in-every-caller)" % (name, lk)
    if cls == "always-locked" and info.get("other_read"):
        return "every write of %s holds %s, and every read holds a lock " \
            "that excludes the writes (e.g. %s)" % (name, lk, info["other_read"])
    if cls == "always-locked":
        return "every access to %s holds %s" % (name, lk)
    if cls == "write-only":
        return "%s is never read outside initialisation: no load can " \
            "observe a torn store" % name
    if cls == "read-only":
        return "%s is not written outside initialisation" % name
    if info.get("coincidental_lock"):
        cl = info["coincidental_lock"]
        return "%s is written under %s (%s), a lock of another struct " \
            "that no reader of it takes%s: it is held for something else, " \
            "and nothing else shows the field is shared" % (
                name, cl, info["lock_site"].where(),
                "" if info.get("coincidental_why") is None
                else " " + info["coincidental_why"])
    if info.get("tie"):
        n, m, tl, w = info["tie"]
        return "%s is written under %s at %s by %d of its %d writes and " \
            "without it by as many: a tie, so it is not the field's lock, " \
            "and nothing else (a wait condition, a marked access, a data_race() " \
            "of the tree, a handler that runs at any time) shows the field is " \
            "read while it changes" % (name, tl, w, n, m)
    if info.get("handed_over"):
        return "no access to %s holds a lock, and its only handler stores " \
            "are to the object the handler's context hands it (%s): nothing " \
            "shows it is shared" % (name, info["handed_over"])
    return "no access to %s holds a lock and nothing shows it is shared" % name


def _holds_any(a, locks):
    """a holds one of locks, in any mode ('L!x': only exclusively)."""
    return any((lk[:-2] in a.held) if lk.endswith("!x") else
               (lk in a.held or lk + ":r" in a.held) for lk in locks)
