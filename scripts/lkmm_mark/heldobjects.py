# SPDX-License-Identifier: GPL-2.0-only
"""Objects held through a member (policies/ 'held_members'), for the lock
flow (locks.py): a member declared to point to an object that the task
using its struct holds locked (a lookup state's blocks, each read locked
and kept until the state lets it go) carries that lock to where its value
goes.

- A call handed the member's load as a whole argument ('f(s->blk.m)')
  holds the lock there, for the callee.
- A local of the function that only ever holds NULL or such an object is
  held wherever the function uses it: its declaration gives it NULL or
  nothing, every store gives it NULL or the member's load ('v = s->m;'),
  and '&v' is handed only to a lock call that takes the same lock and
  hands the object back in it ('acquire_ret0'); no release call is handed
  it, nor is it stepped or stored any other way.  An access through it
  ('v->f') and a call handed it bare hold the lock.  This follows the
  object, where the must-hold flow loses a lock at the join of a path that
  took it with one that kept the value it had before (a loop that reads a
  block only when the one it has is not the one it needs).

A list can hold locked objects too (policies/ 'locked_lists'): a function
declared to return with every object it put on the list its argument
'arg' points to held locked by its caller's task (a batched write-back
that locks each buffer, moves it to the wait list and submits it).  A
local list head of the caller ('LIST_HEAD(l);') handed to it as '&l',
and otherwise only tested ('list_empty(&l)') and taken from
('v = list_first_entry(&l, T, m);', after the call), holds nothing else:
the take acquires the lock, which the release handed v drops.  A loop
'while (!list_empty(&l))' must take each entry off the list, or it never
ends, so an entry released is not taken again.

Reads: the member tokens the accesses say load a declared member
(callgraph.py).  Sets nothing."""
from .csrc import base_start, remembered
from .lockstate import How

_STEPS = {"++", "--", "+=", "-=", "|=", "&=", "^="}


def _member_end(t, lo, hi, held):
    """The lock of the held member whose load is exactly toks[lo:hi], or
    None."""
    k = hi - 1
    if k not in held or k - 1 <= lo or t[k - 1].text not in ("->", "."):
        return None
    return held[k] if base_start(t, k - 1) == lo else None


def _call_pos(t, j, lo):
    """(the '(' or '[' whose list toks[j] is directly in, or None; the
    number of the item toks[j] is in)."""
    depth, n = 0, 0
    while j > lo:
        j -= 1
        x = t[j].text
        if x in (")", "]"):
            depth += 1
        elif x in ("(", "["):
            if depth == 0:
                return j, n
            depth -= 1
        elif x == "," and depth == 0:
            n += 1
    return None, n


def _callee(t, j, lo):
    """The name of the call whose argument list toks[j] is in, or None."""
    o = _call_pos(t, j, lo)[0]
    return t[o - 1].text if o is not None and t[o].text == "(" and t[o - 1].kind == "id" \
        else None


def _use_ok(t, j, lo, lock, lockfns):
    """toks[j], a use of the local, keeps it NULL or a held object."""
    before, after = t[j - 1].text, t[j + 1].text
    if before in _STEPS or after in _STEPS:
        return False
    whole = before in ("(", ",") and after in (")", ",")
    if before == "&":
        spec = lockfns.get(_callee(t, j, lo)) if t[j - 2].text in ("(", ",") and \
            after in (")", ",") else None
        return bool(spec) and spec.get("op") == "acquire_ret0" and spec.get("lock") == lock
    if whole:
        spec = lockfns.get(_callee(t, j, lo))
        return not spec or spec.get("op") != "release"
    return True


def _store_ok(t, j, hi, lock, held):
    """'v = X;' at toks[j]: X is NULL or a load of a member held with lock."""
    s = j + 2
    e = s
    while e < hi and t[e].text != ";":
        e += 1
    if e - s == 1 and t[s].text in ("NULL", "0"):
        return True
    return _member_end(t, s, e, held) == lock


def held_locals(t, lo, hi, held, lockfns):
    """local -> the lock every value it holds is held with (see above), in
    the body toks[lo:hi]; held: member token -> lock."""
    cands = {}
    for k, lock in held.items():
        b = base_start(t, k - 1) if t[k - 1].text in ("->", ".") else None
        if b is not None and k + 1 < hi and t[k + 1].text == ";" and b >= lo + 2 and \
                t[b - 1].text == "=" and t[b - 2].kind == "id" and \
                t[b - 3].text not in ("->", ".", "*"):
            cands.setdefault(t[b - 2].text, set()).add(lock)
    out = {}
    for v, locks in cands.items():
        if len(locks) == 1 and _only_held(t, lo, hi, v, next(iter(locks)), held, lockfns):
            out[v] = next(iter(locks))
    return out


def _only_held(t, lo, hi, v, lock, held, lockfns):
    uses = [j for j in range(lo, hi) if t[j].text == v and t[j].kind == "id" and
            t[j - 1].text not in ("->", ".")]
    if not uses:
        return False
    d = uses[0]
    # declared here: 'T *v;' or 'T *v = NULL;'
    if not (t[d - 1].text == "*" and t[d - 2].kind == "id" and
            (t[d + 1].text in (";", ",") or
             (t[d + 1].text == "=" and t[d + 2].text in ("NULL", "0") and
              t[d + 3].text in (";", ",")))):
        return False
    for j in uses[1:]:
        if t[j + 1].text == "=":
            if not _store_ok(t, j, hi, lock, held):
                return False
        elif not _use_ok(t, j, lo, lock, lockfns):
            return False
    return True


def call_lock(t, args, held, locals_):
    """The lock a call with the argument ranges args is handed a held
    object under, or None."""
    for alo, ahi in args:
        if ahi - alo == 1 and t[alo].text in locals_:
            return locals_[t[alo].text]
        got = _member_end(t, alo, ahi, held) if ahi - alo > 2 else None
        if got is not None:
            return got
    return None


def access_lock(t, k, locals_):
    """The lock the access whose member is toks[k] holds through its
    base, a held local ('v->f'), or None."""
    if k >= 2 and t[k - 1].text in ("->", ".") and t[k - 2].text in locals_ and \
            (k < 3 or t[k - 3].text not in ("->", ".")):
        return locals_[t[k - 2].text]
    return None


def _with(st, lock, line):
    if lock is None or lock in st.held:
        return st
    st = st.copy()
    st.held[lock] = How("a held member's object", line)
    return st



def _list_heads(t, lo, hi):
    """The local list heads the body declares: 'LIST_HEAD(l);'."""
    return {t[j + 2].text: j + 2 for j in range(lo, hi - 4)
            if t[j].text == "LIST_HEAD" and t[j + 1].text == "(" and
            t[j + 2].kind == "id" and t[j + 3].text == ")"}


_FILLERS = {}


def _list_fillers(lockfns):
    """The 'locked_lists' entries of lockfns (worked out once per table)."""
    return remembered(_FILLERS, lockfns, lambda: {
        n: sp for n, sp in lockfns.items() if sp.get("op") == "acquire_list"})


def locked_list_takes(t, lo, hi, lockfns):
    """token index of 'list_first_entry' -> the acquire spec of a take from
    a local list only a 'locked_lists' function filled (see above)."""
    fills = _list_fillers(lockfns)
    out = {}
    for name, d in (_list_heads(t, lo, hi) if fills else {}).items():
        uses = [j for j in range(lo, hi) if t[j].text == name and t[j].kind == "id" and
                j != d and t[j - 1].text not in ("->", ".")]
        filled, takes = [], []
        for j in uses:
            fn = _callee(t, j, lo)
            whole = t[j - 1].text == "&" and t[j - 2].text in ("(", ",") and \
                t[j + 1].text in (",", ")")
            if whole and fn in fills and _call_pos(t, j - 1, lo)[1] == fills[fn]["arg"]:
                filled.append((j, fills[fn]))
            elif whole and fn == "list_empty" and t[j + 1].text == ")":
                pass
            elif whole and fn == "list_first_entry" and t[j - 2].text == "(" and \
                    t[j - 4].text == "=" and t[j - 5].kind == "id":
                takes.append(j - 3)
            else:
                # any other use may add an object not locked, or hand
                # the list on
                takes = None
                break
        locks = {(sp["lock"], sp["mode"]) for _, sp in filled}
        if takes and len(locks) == 1 and max(j for j, _ in filled) < min(takes):
            sp = filled[0][1]
            for k in takes:
                out[k] = {"name": sp["name"], "op": "acquire", "lock": sp["lock"],
                          "mode": sp["mode"]}
    return out


class Held:
    """The held objects of one function's body toks[lo:hi] (held: member
    token -> lock, or None), as the lock flow asks about them."""

    def __init__(self, t, lo, hi, held, lockfns):
        self.t = t
        self.members = held or {}
        self.locals = held_locals(t, lo, hi, held, lockfns) if held else {}
        # list_first_entry token -> the lock a take from a locked list takes
        self.takes = locked_list_takes(t, lo, hi, lockfns)

    def at_access(self, k, st):
        """st as it covers the access whose member is toks[k]."""
        if not self.locals or st is None:
            return st
        return _with(st, access_lock(self.t, k, self.locals), self.t[k].line)

    def at_call(self, k, st, call_args):
        """st as the call toks[k](...) (call_args(k): its argument ranges)
        enters its callee."""
        if not self.members:
            return st
        return _with(st, call_lock(self.t, call_args(k), self.members, self.locals),
                     self.t[k].line)
