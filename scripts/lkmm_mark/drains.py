# SPDX-License-Identifier: GPL-2.0-only
"""Stage 3b helper: a drain of an object's holders (policies/ 'drains').

Such an entry says that a task holding a handle (a 'param_locks'
parameter, its lock held at the access) is counted in a counter of the
object it reaches by one of the 'through' paths ('h->tx'), and that a
wait for that counter to drop (a wait macro statement whose condition
reads 'x->counter') returns only once no holder of x but the waiting
task is left, none coming back: a holder's accesses to its own object
come before the drain, and the drainer's accesses to x after it, on
every path (waits.py after_drain()), come after.  A drained_params entry
names a function every caller of which hands it an object with no holder
left but the caller, as after a drain.  same_while: {"paths", "lock"}:
while the drainer holds that lock exclusively, those paths
('fs->running') name the object it drained, so 'x = fs->running;' there
keeps x's object.  An access a holder makes to an
object reached another way (another object of the struct, the running
one, one found on a list) is not ordered so, nor is one made through a
handle that may be NULL or weak: that handle may be counted in nothing.

Reads .P.drains, .P.param_locks, .src, the handles nullargs.py finds
maybe NULL or weak (_null_params()), owners.py's _owner_path(); sets the
cache _drainmemo."""
from .lockmodes import lock_base
from .tokutil import _root
from .waits import reassigned

DRAIN_PAIR = "(drain) "


class Drains:
    def drain_apart(self, a, b):
        """A sentinel naming the policies/ 'drains' entry that orders
        accesses a and b (one a holder's access to its own object, the
        other the drainer's after the drain), or None."""
        if not self.P.drains or a.struct != b.struct:
            return None
        for i, d in enumerate(self.P.drains):
            if d["struct"] != a.struct:
                continue
            if (self._drain_holder(a, i, d) and self._drained(b, i, d)) or \
                    (self._drain_holder(b, i, d) and self._drained(a, i, d)):
                return drain_key(i, d)
        return None

    def _drain_holder(self, a, i, d):
        """Is a made through its own handle's object (a 'through' path,
        or a local assigned only such paths), with the handle's lock held
        and the handle a parameter no NULL or weak handle reaches?"""
        memo = self.__dict__.setdefault("_drainmemo", {})
        k = ("h", id(a), i)
        if k not in memo:
            memo[k] = a.func is not None and bool(a.base) and \
                any(lock_base(n) == d["lock"] for n in a.held) and \
                self._drain_holder_path(a, d)
        return memo[k]

    def _drain_holder_path(self, a, d):
        fn = a.func
        types = self._decl_types(fn)
        params = self.params(fn)
        maybe = self._null_params()
        paths = {p for p in d["through"]
                 if _root(p) in params and types.get(_root(p)) in self.P.param_locks and
                 ((fn.file, fn.name), _root(p)) not in maybe}
        return bool(paths) and self._owner_path(fn, a.base.replace(" ", ""), paths,
                                                frozenset(), 0)

    def _drained(self, a, i, d):
        """Is a made through a plain variable whose object has no holder
        left but a's task: after a drain of it on every path, or a
        drained_params parameter not given another object before a?"""
        memo = self.__dict__.setdefault("_drainmemo", {})
        k = ("d", id(a), i)
        if k not in memo:
            memo[k] = a.func is not None and a.tok is not None and bool(a.base) and \
                a.base.isidentifier() and (self._drained_param(a, d) or self.after_drain(
                    a, d["counter"], lambda j: self._same_object(a, d, j)))
        return memo[k]

    def _same_object(self, a, d, k):
        """Is the assignment of a.base at toks[k] one of 'x = path;' with
        a path of the entry's same_while, made where its lock is held
        exclusively: that path names the drained object then?"""
        same = d.get("same_while")
        toks = self.src.toks[a.file]
        if not same or toks[k + 1].text != "=":
            return False
        end = k + 2
        while end < len(toks) and toks[end].text not in (";", "{", "}"):
            end += 1
        if "".join(t.text for t in toks[k + 2:end]) not in same["paths"]:
            return False
        return any(r.file == a.file and r.tok is not None and k < r.tok < end and
                   same["lock"] in r.held for r in self._drain_accesses(a.fn))

    def _drain_accesses(self, fn):
        memo = self.__dict__.setdefault("_drainmemo", {})
        if ("fn", fn) not in memo:
            for r in self.accesses:
                memo.setdefault(("fn", r.fn), []).append(r)
        return memo.get(("fn", fn), ())

    def _drained_param(self, a, d):
        params = self.params(a.func)
        toks = self.src.toks.get(a.file)
        return toks is not None and any(
            p["function"] == a.fn and p["arg"] < len(params) and params[p["arg"]] == a.base and
            not reassigned(toks, a.func.body_start, a.tok, a.base)
            for p in d.get("drained_params", ()))


def drain_key(i, d):
    """_kept_apart()'s sentinel for entry i of policies/ 'drains'."""
    return "%s%d %s" % (DRAIN_PAIR, i, d["struct"])
