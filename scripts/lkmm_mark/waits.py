# SPDX-License-Identifier: GPL-2.0-only
"""Stage 3b helper: the program points after a wait for an object's
completion (policies/ 'phases' entries with 'after_wait').

Such an entry says that the stores its 'before' functions make to a
struct come before the object's completion, and names the waits that
return only once the object has completed: a call on the object,
'w(x, 1);', or a wait macro whose whole condition is such a call,
'wait_event(q, w(x));'.  An access to x->f in the same function is
after the wait when every path to it passes the wait: the wait is a
statement of its own (not the unbraced branch of an if or a loop, not an
operand), the innermost block around it also holds the access, no label
or case between them lets another path in, and x is not assigned
between them.  Only the 'before' functions' stores are ordered so: their
loads may still come after the completion (a worker's clean-up after its
final store).

after_drain() finds the same for a drain of an object's holders
(policies/ 'drains', drains.py): a wait macro statement whose condition
reads the object's counter of holders.

Reads .src and .P.wait_macros; sets the cache _waitmemo."""
from . import csrc
from .flagargs import assigned_at
from .source import NON_STORE_BITOPS, STORE_MACROS
from .tokutil import _is_label, _open_blocks, _split


def plain_store(b):
    """A store or read-modify-write of b's field, plain or marked
    (WRITE_ONCE() of a tree the series patched: the wait orders it the
    same; an address is not counted)."""
    if b.kind in ("write", "rmw"):
        return True
    if b.kind == "marked":
        return b.macro in STORE_MACROS
    return b.kind == "atomic" and not (b.macro or "").startswith(NON_STORE_BITOPS)


class Waits:
    def after_wait(self, a, waits):
        """Is access a, through a plain variable, after one of waits (the
        'after_wait' list of a phases entry) on that variable's object?"""
        if a.func is None or a.tok is None or not a.base or not a.base.isidentifier():
            return False
        memo = self.__dict__.setdefault("_waitmemo", {})
        k = (id(a), id(waits))
        if k not in memo:
            toks = self.src.toks.get(a.file)
            memo[k] = toks is not None and any(
                self._waited_before(toks, a, j, waits)
                for j in range(a.func.body_start + 1, a.tok))
        return memo[k]

    def _waited_before(self, toks, a, j, waits):
        """Is toks[j] the name of a wait of waits on a.base, one that every
        path to a passes?"""
        w = next((w for w in waits if w["call"] == toks[j].text), None)
        if w is None or toks[j + 1].text != "(" or toks[j - 1].text in ("->", "."):
            return False
        stmt, end = _statement_call(toks, j, self.P.wait_macros)
        if stmt is None or end >= a.tok or not _args_match(toks, j + 1, w, a.base):
            return False
        return _every_path(toks, a, stmt, end)

    def after_drain(self, a, counter, keeps=None):
        """Is access a, through a plain variable x, after a drain of x's
        holders: a wait macro statement whose condition reads x->counter
        ('wait_event(q, atomic_read(&x->n) == 1);', not one that a signal
        or a timeout ends), on every path?  An
        assignment of x at toks[k] for which keeps(k) is true gives it the
        same object."""
        if a.func is None or a.tok is None or not a.base or not a.base.isidentifier():
            return False
        toks = self.src.toks.get(a.file)
        if toks is None:
            return False
        for j in range(a.func.body_start + 1, a.tok):
            if toks[j].text not in self.P.wait_macros or toks[j + 1].text != "(" or \
                    toks[j - 1].text not in (";", "{", "}") or _may_give_up(toks[j].text):
                continue
            close = csrc.match_paren(toks, j + 1)
            if close + 1 < a.tok and toks[close + 1].text == ";" and \
                    _reads(toks, j + 2, close, a.base, counter) and \
                    _every_path(toks, a, j, close + 1, True, keeps):
                return True
        return False


def _may_give_up(macro):
    """A wait that may return with its condition false (a signal, a
    timeout): no drain."""
    return any(w in macro for w in ("interruptible", "killable", "timeout"))


def _reads(toks, lo, hi, var, field):
    """Does toks[lo:hi] read var->field (var the root of the path)?"""
    return any(toks[k].text == var and toks[k + 1].text in ("->", ".") and
               toks[k + 2].text == field and toks[k - 1].text not in ("->", ".")
               for k in range(lo, hi - 2))


def _every_path(toks, a, stmt, end, members=False, keeps=None):
    """Does every path to access a pass the statement toks[stmt:end+1],
    with a.base not given another object between (members: the address
    of a member, '&x->f', does not count)?"""
    blocks = list(_open_blocks(toks, a.func.body_start - 1, stmt))
    if not blocks or csrc.match_paren(toks, blocks[0]) < a.tok:
        return False
    if any(_is_label(toks, i) or toks[i].text in ("case", "default")
           for i in range(end, a.tok)):
        return False
    return not reassigned(toks, end, a.tok, a.base, members, keeps) and \
        not _iterated(toks, end, a.tok, a.base)


def reassigned(toks, lo, hi, var, members=True, keeps=None):
    """flagargs.assigned_at(), less the addresses of var's members
    ('&x->f', which give x no other object) when members is true, and
    the assignments keeps(k) says give x the object it had."""
    return any(not (members and toks[k - 1].text == "&" and toks[k + 1].text in ("->", ".")) and
               not (keeps is not None and keeps(k))
               for k in assigned_at(toks, lo, hi, var))


def _iterated(toks, lo, hi, var):
    """Is var the cursor of a loop macro in toks[lo:hi]
    ('list_for_each_entry(var, ...)'), which gives it other objects?"""
    return any(toks[k].text == var and toks[k - 1].text == "(" and
               "for_each" in toks[k - 2].text for k in range(lo + 2, hi))


def _statement_call(toks, j, wait_macros):
    """(first token, ';') of the statement toks[j] is the call of:
    'w(...);' itself, or 'M(q, w(...));' for a wait macro M whose last
    argument is the whole call; (None, None) otherwise."""
    start = (";", "{", "}")
    end = csrc.match_paren(toks, j + 1)
    if end + 1 >= len(toks):
        return None, None
    if toks[j - 1].text in start:
        return (j, end + 1) if toks[end + 1].text == ";" else (None, None)
    o = csrc.open_of(toks, end + 1) if toks[end + 1].text == ")" else -1
    if toks[j - 1].text != "," or o < 2 or toks[o - 1].text not in wait_macros or \
            toks[o - 2].text not in start:
        return None, None
    close = csrc.match_paren(toks, o)
    items = _split(toks, o + 1, close)
    if toks[close + 1].text != ";" or not items or items[-1] != (j, end + 1):
        return None, None
    return o - 1, close + 1


def _args_match(toks, lp, w, var):
    """Do the arguments of the call opening at toks[lp] pass var as
    argument w['arg'] and the tokens w['args'] asks for?"""
    items = _split(toks, lp + 1, csrc.match_paren(toks, lp))
    want = dict(w.get("args") or {})
    want[str(w["arg"])] = var
    for i, text in want.items():
        i = int(i)
        if i >= len(items):
            return False
        lo, hi = items[i]
        if " ".join(t.text for t in toks[lo:hi]) != text:
            return False
    return True
