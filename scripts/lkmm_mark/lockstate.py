# SPDX-License-Identifier: GPL-2.0-only
"""The state of the lock flow (locks.py) at a point: the locks held on
every path to it, with where each comes from, and the merge at a join."""


class How:
    """Where a held lock comes from, for the reason text."""
    __slots__ = ("what", "line")

    def __init__(self, what, line):
        self.what = what
        self.line = line

    def text(self):
        return "%s at line %d" % (self.what, self.line)


class OnObjects(How):
    """A hold of a lock on the objects named (argument texts), after the
    release of those in gone, if any (lockobjects.py)."""
    __slots__ = ("objects", "gone")

    def __init__(self, what, line, objects, gone):
        How.__init__(self, what, line)
        self.objects = objects
        self.gone = gone


def _joined(x, y):
    """The hold at a join of holds x and y of one lock: a hold on objects
    keeps those both paths hold (one with no object named holds every
    one); None when none is left."""
    if type(x) is not OnObjects:
        if type(y) is OnObjects:
            return y
        # where one path's How is a plain one and the other's a subclass
        # (a state that outlives a release), the plain one
        return y if type(x) is not How and type(y) is How else x
    if type(y) is not OnObjects:
        return x
    objs = x.objects & y.objects
    return OnObjects(x.what, x.line, objs, x.gone | y.gone) if objs else None


class State:
    """held: lock -> How, on every path.  cond: lock -> (variable, How),
    held on every path where the local variable is true, after
    'if (!v) unlock(L);' (a lock kept only while a flag says so).  zero:
    the local variables known 0 on every path (locks.py)."""
    __slots__ = ("held", "killed", "cond", "zero")

    def __init__(self, held=None, killed=frozenset(), cond=None, zero=frozenset()):
        self.held = held if held is not None else {}
        self.killed = killed
        self.cond = cond if cond is not None else {}
        self.zero = zero

    def copy(self):
        return State(dict(self.held), self.killed, dict(self.cond), self.zero)


def merge(a, b):
    if a is None:
        return b.copy() if b is not None else None
    if b is None:
        return a.copy()
    # held on both paths (_joined())
    held = {k: _joined(v, b.held[k]) for k, v in a.held.items() if k in b.held}
    held = {k: v for k, v in held.items() if v is not None}
    killed = a.killed | b.killed
    # a lock released and taken again on one path (held) and untouched on
    # the other is held at the merge exactly when the function is entered
    # with it: not killed ('unlock(L); cond_resched(); lock(L);' in a loop)
    back = {k for x, y in ((a, b), (b, a)) for k in x.held
            if k not in y.held and k not in y.killed}
    if back & killed:
        killed = killed - back
    cond = {}
    if a.cond or b.cond:
        # held when v on one side, held (always, or when v) on the other,
        # or v is 0 there
        for x, y in ((a, b), (b, a)):
            for k, (v, h) in x.cond.items():
                if k not in held and (k in y.held or y.cond.get(k, ("",))[0] == v or
                                      v in y.zero):
                    cond[k] = (v, h)
    if a.zero != b.zero:
        _state_when_nonzero(a, b, held, cond)
    return State(held, killed, cond, a.zero & b.zero)


def _state_when_nonzero(a, b, held, cond):
    """A guard's state (guards.py) held on one path, where a local
    variable is known 0 on the other, is held at the merge wherever that
    variable is not 0: 'ret = -ENOMEM; goto out;' against a path that
    published with ret 0, both reaching 'out: if (ret) ...'."""
    for x, y in ((a, b), (b, a)):
        vs = sorted(y.zero - x.zero)
        if not vs:
            continue
        for k, h in x.held.items():
            if "{=" in k and k not in held and k not in y.held and k not in cond:
                cond[k] = (vs[0], h)
