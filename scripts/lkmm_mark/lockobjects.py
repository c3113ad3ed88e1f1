# SPDX-License-Identifier: GPL-2.0-only
"""Holds of one lock on several objects (locks.py): a lock function that
takes a lock on two objects its parameters name ('objects', the argument
numbers), and a release that names the object it drops ('object').

A lock is held by name, not by object, so a release of one object's lock
would drop the other's too.  A hold taken by such a function remembers
the objects (the argument texts); a release of one of them keeps the lock
held on the others only (lockstate.OnObjects with 'gone' set).  Such a
restricted hold covers only an access whose base expression is one of
the objects still held (or starts with it: 'x->m.f'), and only a call
handed one of them and none of those released; any other access or call
does not see it.  A hold with no object named covers every object (the
by-name view), so a join keeps the objects both paths hold
(lockstate.merge())."""
from .csrc import base_start
from .lockstate import OnObjects


def _text(t, lo, hi):
    return " ".join(x.text for x in t[lo:hi])


def taken(spec, how, t, args):
    """The How of a hold spec takes, the objects it names recorded when
    it declares them ('objects': argument numbers)."""
    ns = spec.get("objects")
    if not ns or any(n >= len(args) for n in ns):
        return how
    return OnObjects(how.what, how.line, frozenset(_text(t, *args[n]) for n in ns),
                     frozenset())


def released(spec, st, keys, t, args):
    """Restrict, in st (a copy the caller owns), the holds among keys that
    are on several objects one of which the release spec names
    ('object'): the lock stays held on the others.  The keys kept."""
    n = spec.get("object")
    if n is None or n >= len(args):
        return set()
    obj = _text(t, *args[n])
    kept = set()
    for k in keys:
        h = st.held.get(k)
        if type(h) is OnObjects and obj in h.objects and len(h.objects) > 1:
            st.held[k] = OnObjects(h.what, h.line, h.objects - {obj}, h.gone | {obj})
            kept.add(k)
    return kept


def _restricted(st):
    return [k for k, h in st.held.items() if type(h) is OnObjects and h.gone]


def _on(text, objs):
    return any(text == o or text.startswith(o + " ->") or text.startswith(o + " .")
               for o in objs)


def _mentions(text, objs):
    return any((" %s " % text).find(" %s " % o) >= 0 for o in objs)


def _without(st, keys):
    st = st.copy()
    for k in keys:
        del st.held[k]
    return st


def at_access(t, k, st):
    """st as it covers the member access whose member is toks[k]: without
    the restricted holds whose objects the access's base is not."""
    keys = _restricted(st) if st is not None else ()
    if not keys:
        return st
    b = base_start(t, k - 1) if k > 0 and t[k - 1].text in ("->", ".") else None
    base = _text(t, b, k - 1) if b is not None else None
    drop = [x for x in keys if base is None or not _on(base, st.held[x].objects)]
    return _without(st, drop) if drop else st


def at_call(t, k, st, call_args):
    """st as the call toks[k](...) enters its callee (call_args(k): its
    argument ranges):
    without the restricted holds none of whose objects it is handed, or
    that it is handed a released object of."""
    keys = _restricted(st)
    if not keys:
        return st
    texts = [_text(t, *a) for a in call_args(k)]
    drop = [x for x in keys
            if not any(_on(a, st.held[x].objects) for a in texts) or
            any(_mentions(a, st.held[x].gone) for a in texts)]
    return _without(st, drop) if drop else st
