# SPDX-License-Identifier: GPL-2.0-only
"""Lock names and modes: the held-set key of a lock taken in a mode
(exclusive 'L', shared 'L:r', a group 'L{g}:r'), which holds exclude which
(groups of one lock, locks declared to exclude others), which accesses a
pseudo-lock keeps apart (the structs it covers), and the extra locks a
lock function takes with its own."""
import functools


def group_lock(name, spec):
    """The name a lock taken in a group mode is held under: 'L{group}'.

    A lock with group modes (a drew lock: any number of writers or
    any number of readers, never both; a pause handshake: the pausers
    against the running workers) is held shared, under one name per
    group, so that every test made for shared locks stays right (two
    holders of one group do not exclude each other, and no group is any
    field's own lock); only _ctx_excluded() knows that two different
    groups of the same lock exclude each other (groups_exclude())."""
    if spec.get("mode") == "group":
        return "%s{%s}" % (name, spec["group"])
    return name


def mode_name(name, spec):
    """The held-set key of lock name taken as spec says: 'L:r' for a read
    or group mode (a shared hold), 'L' for an exclusive one."""
    return name + ":r" if spec.get("mode") in ("read", "group") else name


@functools.lru_cache(maxsize=1 << 16)
def _groups_in(y):
    """The group holds of the frozen lockset y, as _group_of() gives them
    (remembered: the same locksets are asked about again and again)."""
    return tuple(o for o in map(_group_of, sorted(y)) if o is not None)


def _group_of(n):
    """'L{g}:r' -> ('L', 'g'); None for any other held-set key."""
    if not n.endswith("}:r") or "{" not in n:
        return None
    base, _, g = n[:-3].rpartition("{")
    return base, g


# locks declared to exclude others (policies/ 'pseudo_locks' "excludes":
# a transaction's pseudo-lock is the lock of every object it changes);
# set for each analysis by declare_exclusions()
_EXCLUDES = {}


def declare_exclusions(pairs):
    """{pseudo-lock: [locks it excludes]} for declared_excluding()."""
    _EXCLUDES.clear()
    _EXCLUDES.update(pairs)


# pseudo-locks that keep apart only accesses to the structs they cover
# (policies/ 'pseudo_locks' "covers": a range's hold says nothing about
# the other objects its holder touches); set by declare_covers()
_COVERS = {}


def declare_covers(covers):
    """{pseudo-lock: [structs it covers]} for uncovered()."""
    _COVERS.clear()
    _COVERS.update(covers)


def uncovered(held, struct):
    """held without the holds of pseudo-locks that cover other structs
    only: for an access to struct, such a hold keeps nothing apart."""
    if not _COVERS:
        return held
    drop = {n for n in held if struct not in _COVERS.get(lock_base(n), (struct,))}
    return held - drop if drop else held


def without_covering(held):
    """held without the holds of every pseudo-lock that covers structs."""
    if not _COVERS:
        return held
    drop = {n for n in held if lock_base(n) in _COVERS}
    return held - drop if drop else held


@functools.lru_cache(maxsize=1 << 16)
def lock_base(n):
    """The lock a held-set key holds: 'L{g}:r', 'L:r', 'L' -> 'L'
    (remembered: a few hundred keys, asked about a third of a million
    times)."""
    n = n[:-2] if n.endswith(":r") else n
    return n.rpartition("{")[0] if n.endswith("}") else n


def declared_excluding(x, y):
    """A lock one of the locksets x and y holds exclusively that is
    declared to exclude a lock the other holds, in any mode; or None."""
    hit = handed_excluding(x, y)
    if hit is not None or not _EXCLUDES:
        return hit
    for a, b in ((x, y), (y, x)):
        for n in a:
            for e in _EXCLUDES.get(n, ()):
                if any(e + m in b for m in ("", ":r", HANDED, HANDED + ":r")):
                    return n
    return None


def sole_groups(held):
    """The group holds of held (a lockset) whose group admits no second
    holder, not even of its own kind (a name ending in '!')."""
    return [g for g in _groups_in(frozenset(held)) if g[1].endswith("!")]


# the held-set key of a lock a wrapper handed back through a parameter
# (handback.py): 'L@handed'.  It keeps accesses apart as L does, but no
# field takes it for its own lock (protection.py): the lock is inferred
# from the calls, not seen taken
HANDED = "@handed"


def handed_base(n):
    """'L' for the held-set key 'L@handed' or 'L@handed:r'; None for any other."""
    return n.split(HANDED)[0] if HANDED in n else None


def handed_excluding(x, y):
    """A handed-back lock of lockset x or y that excludes the same lock
    the other holds (exclusive on one side); or None."""
    for a, b in ((x, y), (y, x)):
        for n, base in _handed_in(a):
            if base in b or not n.endswith(":r") and base + ":r" in b:
                return n
    return None


@functools.lru_cache(maxsize=1 << 16)
def _handed_in(x):
    """The handed-back locks of lockset x (a frozenset), with their base:
    found once per lockset, not once per pair of locksets."""
    return tuple((n, handed_base(n)) for n in x if HANDED in n)


def groups_exclude(n, y):
    """Lock n (a held-set key) is a group hold and the lockset y holds the
    same lock in another group, or in the same group when its name ends
    with '!' (one holder at a time: an exclusive operation of a type that
    admits no second one), so the two cannot run side by side: the lock's
    name, or None."""
    g = _group_of(n)
    if g is None:
        return None
    for o in _groups_in(frozenset(y)):
        if o[0] == g[0] and (o[1] != g[1] or g[1].endswith("!")):
            if g[1].startswith("="):
                # a state guard (guards.py)
                return "the state of %s (%s against %s)" % (g[0], g[1][1:], o[1][1:])
            return "%s (%s against %s)" % (g[0], g[1], o[1])
    return None


def hold_also(st, spec, how):
    """The other locks a lock function takes with its own ('also': a
    try-lock that enters an exclusive operation and returns with the
    spin lock that guards it held)."""
    for extra in spec.get("also", ()):
        st.held[mode_name(group_lock(extra["lock"], extra), extra)] = how
