# SPDX-License-Identifier: GPL-2.0-only
"""The loaders of the lock facts of policies/ (policyfacts.py LOADERS
names them): lock functions, the locks an ops table's methods, a
parameter, a container or the data are entered with, the lock an I/O
keeps, pseudo-locks.  Each checks its entries (policycheck.py)."""
import json

from .policycheck import _err, _keyed, _need


def _selector(f, spec, key, what):
    w = spec.get(key)
    if w is not None and not (isinstance(w, list) and len(w) == 2 and
                              isinstance(w[0], int) and isinstance(w[1], str)):
        raise _err(f, "lock function %s: %s must be [argument number, %s]",
                   spec["name"], key, what)
    return w is not None


def _lock_functions(P, f, specs):
    for spec in specs:
        _need(f, spec, ("name", "op"), "lock_functions")
        if spec["op"] not in ("acquire", "acquire_ret0", "trylock", "release",
                              "downgrade", "assert"):
            raise _err(f, "lock function %s has unknown op '%s'", spec["name"], spec["op"])
        sel = _selector(f, spec, "when_arg", "token")
        sel = _selector(f, spec, "when_field", "struct.field") or sel
        sel = _selector(f, spec, "when_mentions", "struct.field") or sel
        _objects(f, spec)
        _raised_where(f, spec)
        for lk in [spec] + list(spec.get("also", ())):
            if not isinstance(lk, dict) or (lk is not spec and not isinstance(lk.get("lock"), str)):
                raise _err(f, "lock function %s: also must be a list of {\"lock\", "
                           "\"mode\"}", spec["name"])
            mode = lk.get("mode", "exclusive")
            if mode not in ("exclusive", "read", "group"):
                raise _err(f, "lock function %s: mode must be exclusive, read or group",
                           spec["name"])
            if (mode == "group") != isinstance(lk.get("group"), str):
                raise _err(f, "lock function %s: a group mode needs a group name, and only it",
                           spec["name"])
        prev = P.lockfns.get(spec["name"])
        if prev is None:
            P.lockfns[spec["name"]] = spec
        elif _selects(prev) and sel:
            # one entry per lockdep map of a wrapper that takes several
            # (foo_state_lockdep_release(fs, STATE)), or per
            # exclusive operation: the call's argument picks the entry
            prev.setdefault("variants", []).append(spec)
        else:
            raise _err(f, "lock function %s listed twice (only entries with when_arg, "
                       "when_field or when_mentions may share a name)", spec["name"])


def _objects(f, spec):
    """'objects' (an acquire: the arguments naming the objects it locks)
    and 'object' (a release: the argument naming the one it unlocks)."""
    o, n = spec.get("objects"), spec.get("object")
    if o is not None and not (isinstance(o, list) and len(o) >= 2 and
                              all(isinstance(x, int) and x >= 0 for x in o)):
        raise _err(f, "lock function %s: objects must be a list of two or more "
                   "argument numbers", spec["name"])
    if n is not None and not (isinstance(n, int) and n >= 0 and spec["op"] == "release"):
        raise _err(f, "lock function %s: object must be an argument number, "
                   "on a release", spec["name"])


def _raised_where(f, spec):
    """'raised_where' (lockraise.py): {"call": P, "mode_arg": [n, TOKEN]},
    on an acquire in read mode."""
    r = spec.get("raised_where")
    if r is None:
        return
    m = r.get("mode_arg") if isinstance(r, dict) else None
    if not (isinstance(r, dict) and isinstance(r.get("call"), str) and r["call"] and
            isinstance(m, list) and len(m) == 2 and isinstance(m[0], int) and m[0] > 0 and
            isinstance(m[1], str) and m[1] and spec["op"] in ("acquire", "acquire_ret0") and
            spec.get("mode") == "read"):
        raise _err(f, "lock function %s: raised_where must be {\"call\": predicate, "
                   "\"mode_arg\": [argument number > 0, token]}, on an acquire in read mode",
                   spec["name"])


def _selects(spec):
    return any(spec.get(k) for k in ("when_arg", "when_field", "when_mentions"))


def _ops_entry_locks(P, f, entries):
    for c in entries:
        _need(f, c, ("member", "lock", "mode", "reason"), "ops_entry_locks")
        for lk in [c] + list(c.get("also") or ()):
            if not (isinstance(lk, dict) and isinstance(lk.get("lock"), str)
                    and lk.get("mode") in ("read", "exclusive")):
                raise _err(f, "ops entry lock %s: each lock needs a name and a mode, "
                           "read or exclusive", c["member"])
        tables = c.get("tables")
        if tables is None:
            P.ops_entry_locks[c["member"]] = c
        elif isinstance(tables, list) and tables and all(
                isinstance(x, str) and x.isidentifier() for x in tables):
            # the methods of those ops tables only
            P.ops_table_locks.setdefault(c["member"], []).append(c)
        else:
            raise _err(f, "ops entry lock %s: tables must be a list of ops table names",
                       c["member"])


def _param_locks(P, f, entries):
    for c in entries:
        _need(f, c, ("struct", "lock", "mode", "reason"), "param_locks")
        ws = c.get("weak_sources", [])
        if not isinstance(ws, list) or not all(isinstance(x, str) for x in ws):
            raise _err(f, "param lock %s: weak_sources must be a list of function names",
                       c["struct"])
        if c["mode"] not in ("read", "exclusive"):
            raise _err(f, "param_locks %s: mode must be read or exclusive", c["struct"])
        pin = c.get("pin")
        if pin is not None and not (isinstance(pin, dict) and isinstance(pin.get("lock"), str)
                                    and isinstance(pin.get("reason"), str)):
            raise _err(f, "param_locks %s: pin must be {\"lock\", \"reason\"}", c["struct"])
        P.param_locks[c["struct"]] = c


def _container_locks(P, f, entries):
    for c in entries:
        _need(f, c, ("struct", "locks", "reason"), "container_locks")
        if not isinstance(c["locks"], list) or len(c["locks"]) < 2 or \
                not all(isinstance(x, str) for x in c["locks"]):
            raise _err(f, "container_locks %s: locks must be a list of at least two "
                       "lock names", c["struct"])
        # the entry's lock, as it reads in reasons and locks_held
        P.container_locks[c["struct"]] = dict(c, name=" or ".join(c["locks"]))


def _data_locks(P, f, entries):
    for c in entries:
        _need(f, c, ("member_types", "lock", "reason"), "data_locks")
        for k in ("member_types", "also_types"):
            v = c.get(k, [])
            if not (isinstance(v, list) and all(isinstance(x, str) and x for x in v)) or \
                    (k == "member_types" and not v):
                raise _err(f, "data_locks %s: %s must be a list of type names", c["lock"], k)
        P.data_locks.append(c)


def _io_locks(P, f, entries):
    for c in entries:
        _need(f, c, ("lock", "submit", "completion", "reason"), "io_locks")
        ok = isinstance(c["lock"], str) and "." in c["lock"] and \
            c.get("mode", "exclusive") in ("exclusive", "read")
        for k in ("submit", "completion"):
            ok = ok and isinstance(c[k], list) and c[k] != [] and \
                all(isinstance(x, str) and x.isidentifier() for x in c[k])
        if not ok or set(c["submit"]) & set(c["completion"]):
            raise _err(f, "io_locks %s: lock must be struct.field (mode exclusive or read), "
                       "submit and completion two non-empty lists of other function names",
                       json.dumps(c["lock"]))
        h = c.get("handoff", [])
        if not (isinstance(h, list) and all(isinstance(x, str) and x.isidentifier() for x in h)):
            raise _err(f, "io_locks %s: handoff must be a list of function names",
                       json.dumps(c["lock"]))
        P.io_locks.append(c)


def _pseudo_locks(P, f, entries):
    _keyed("pseudo_locks", "name", "pseudo_locks", ("name", "struct", "reason"))(P, f, entries)
    for c in entries:
        ex = c.get("excludes", [])
        if not isinstance(ex, list) or not all(isinstance(x, str) and "." in x for x in ex):
            raise _err(f, "pseudo_locks %s: excludes must be a list of lock names", c["name"])
        cov = c.get("covers", ["x"])
        if not isinstance(cov, list) or not cov or \
                not all(isinstance(x, str) and x.isidentifier() for x in cov):
            raise _err(f, "pseudo_locks %s: covers must be a list of struct names", c["name"])
