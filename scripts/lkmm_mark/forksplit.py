# SPDX-License-Identifier: GPL-2.0-only
"""A loop over the accesses, half of it in a forked child.

The racing pairs (pairs.py) are looked for field by field, and a field's
answers depend on nothing another field's search changes: after the
facts pass the analysis runs on one core and leaves the other idle, so
the child takes half of the fields.  What the child set on its accesses
comes back pickled, an access it refers to (a counterpart) as its index
in the list, and is set on the same accesses here: the plan is the one a
single loop makes (tests: the plans of the committed series, byte for
byte).  Without fork(), or when the child fails, this process runs the
whole loop itself.
"""
import io
import os
import pickle
import signal

_UNSET = object()


class _Out(pickle.Pickler):
    def __init__(self, f, index):
        super().__init__(f, protocol=pickle.HIGHEST_PROTOCOL)
        self.index = index

    def persistent_id(self, obj):
        return self.index.get(id(obj))


class _In(pickle.Unpickler):
    def __init__(self, f, objs):
        super().__init__(f)
        self.objs = objs

    def persistent_load(self, pid):
        return self.objs[pid]


def _slots(obj):
    return type(obj).__slots__


def _changes(obj, before):
    """The slots of obj whose value is not the object it had before."""
    out = {}
    for name, old in zip(_slots(obj), before):
        new = getattr(obj, name, _UNSET)
        if new is not old and new is not _UNSET:
            out[name] = new
    return out


def _beside(there, here):
    """there() in a forked child while here() runs in this process: the
    bytes there() returns, or None when fork() is not available or the
    child failed (the caller then does the child's work itself)."""
    try:
        r, w = os.pipe()
    except (AttributeError, OSError):
        here()
        return None
    try:
        pid = os.fork()
    except OSError:
        os.close(r)
        os.close(w)
        here()
        return None
    if pid == 0:
        os.close(r)
        code = 1
        try:
            data = there()
            with os.fdopen(w, "wb") as f:
                f.write(data)
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    try:
        here()
    except BaseException:
        # an error here ends the command (or the test): the child, which
        # may wait to write to the pipe, is not left behind
        os.close(r)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        raise
    with os.fdopen(r, "rb") as f:
        data = f.read()
    _, status = os.waitpid(pid, 0)
    return data if status == 0 and data else None


def split_loop(objs, body, in_child):
    """body(o) for every o of objs (objects with __slots__), in the order
    of objs within each half: those in_child(o) in a forked child, the
    rest here.  body may change only o's own slots."""
    theirs = [o for o in objs if in_child(o)]
    mine = [o for o in objs if not in_child(o)]
    index = {id(o): i for i, o in enumerate(objs)}

    def there():
        before = [tuple(getattr(o, n, _UNSET) for n in _slots(o)) for o in theirs]
        for o in theirs:
            body(o)
        buf = io.BytesIO()
        _Out(buf, index).dump([(index[id(o)], _changes(o, b)) for o, b in zip(theirs, before)])
        return buf.getvalue()

    def here():
        for o in mine:
            body(o)

    data = _beside(there, here)
    if data is None:
        # no child, or it failed: its half here (the same answers, one core)
        for o in theirs:
            body(o)
        return
    for i, changed in _In(io.BytesIO(data), objs).load():
        for name, value in changed.items():
            setattr(objs[i], name, value)


def fork_map(items, fn, in_child):
    """[fn(x) for x in items], with the items in_child(x) computed in a
    forked child (fn's results must pickle, and fn may change nothing the
    caller reads afterwards but its own caches)."""
    theirs = [i for i, x in enumerate(items) if in_child(x)]
    skip = set(theirs)
    res = [None] * len(items)

    def here():
        for i, x in enumerate(items):
            if i not in skip:
                res[i] = fn(x)

    data = _beside(lambda: pickle.dumps([fn(items[i]) for i in theirs],
                                        protocol=pickle.HIGHEST_PROTOCOL), here)
    got = pickle.loads(data) if data is not None else [fn(items[i]) for i in theirs]
    for i, v in zip(theirs, got):
        res[i] = v
    return res


def by_group(items, group_of):
    """in_child() for fork_map() and split_loop(): whole groups (a file, a
    field) to one side, shared out by their sizes, largest first, each to
    the side with fewer so far."""
    sizes = {}
    for x in items:
        g = group_of(x)
        sizes[g] = sizes.get(g, 0) + 1
    load, child = [0, 0], set()
    for g, c in sorted(sizes.items(), key=lambda x: (-x[1], str(x[0]))):
        side = 0 if load[0] <= load[1] else 1
        load[side] += c
        if side:
            child.add(g)
    return lambda x: group_of(x) in child
