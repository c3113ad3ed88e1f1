# SPDX-License-Identifier: GPL-2.0-only
"""Loading and checking policies/ (JSON data, no code)."""
import json
import os
import re
from pathlib import Path

from .tree import UserError

REPO = Path(__file__).resolve().parents[2]
DEFAULT_DIR = REPO / "policies"

# keys each file may hold, with the type of the value
SCHEMA = {
    "lock_functions": list, "annotations": dict, "diagnostic_calls": list,
    "diagnostic_prefixes": list, "marking_macros": list, "allocators": list,
    "freers": list, "lifecycle_functions": list, "lifecycle_patterns": list,
    "owners": list, "task_private": list, "handlers": list, "contexts": list, "exceptions": list,
    "atomic_bitops": list, "wait_macros": list, "context_depth": int,
    "policies": list, "rules": list, "subsystem": str, "_comment": str,
    "scalar_typedefs": list, "test_dirs": list, "non_retaining_functions": list,
    "publish_functions": list, "unlink_functions": list, "sync_callers": list,
    "non_calling_macros": list,
    "link_removal_functions": list, "link_test_functions": list, "ops_contexts": list,
    "container_accessors": list, "param_locks": list, "container_locks": list,
    "assertion_calls": list, "new_object_flags": list, "ops_entry_locks": list,
    "phases": list, "pseudo_locks": list,
}


class Policies:
    def __init__(self):
        self.lockfns = {}
        self.diag_calls = set()
        self.diag_prefixes = []
        self.assertions = set()
        self.allocators = set()
        self.freers = set()
        self.lifecycle = set()
        self.lifecycle_re = []
        self.owners = []
        self.task_private = {}
        self.handlers = []
        self.contexts = []
        self.ops_contexts = {}     # ops-table member -> context ('.getattr = fn')
        self.ops_entry_locks = {}  # ops-table member -> lock the caller holds around it
        self.container_accessors = {}  # BTRFS_I -> btrfs_inode: the struct embedding the argument
        self.param_locks = {}      # struct type -> spec: a parameter of that type holds a lock
        self.container_locks = {}  # struct -> spec: entries protected by their container's lock
        self.phases = []           # {struct, before, after, reason}: one object's life-cycle order
        self.pseudo_locks = {}     # name -> {name, struct, reason}: a protocol that acts as a lock
        self.exceptions = []
        self.bitops = {}
        self.wait_macros = set()
        self.context_depth = 1
        self.policies = []
        self.rules = {}
        self.scalar_typedefs = set()
        self.test_dirs = []
        self.non_retaining = set()
        self.publishers = {}       # function -> index of the argument it links in
        self.unlinkers = set()
        self.link_removers = set()  # list_del() and friends: a link taken apart
        self.link_tests = set()     # list_empty() and friends: a link only looked at
        self.sync_callers = set()
        self.non_calling = set()    # ALLOW_ERROR_INJECTION(fn, ..): names fn, adds no caller
        self.new_flags = []         # flags that keep a new object private (I_NEW)
        self.files = []

    def is_lifecycle(self, fn):
        return fn in self.lifecycle or any(r.search(fn) for r in self.lifecycle_re)

    def is_diag(self, name):
        return name in self.diag_calls or any(name.startswith(p) for p in self.diag_prefixes)


def _read(path):
    try:
        with open(path) as f:
            data = json.load(f)
    except json.JSONDecodeError as e:
        raise UserError("%s:%d: malformed policy file: %s" % (path, e.lineno, e.msg))
    except OSError as e:
        raise UserError("%s: cannot read policy file: %s" % (path, e.strerror))
    if not isinstance(data, dict):
        raise UserError("%s: malformed policy file: top level must be an object" % path)
    for k, v in data.items():
        if k not in SCHEMA:
            raise UserError("%s: malformed policy file: unknown key '%s'" % (path, k))
        if not isinstance(v, SCHEMA[k]):
            raise UserError("%s: malformed policy file: '%s' must be a %s"
                            % (path, k, SCHEMA[k].__name__))
    return data


def _need(path, obj, keys, what):
    if not isinstance(obj, dict):
        raise UserError("%s: malformed policy file: %s entry %s is not an object"
                        % (path, what, json.dumps(obj)))
    for k in keys:
        if k not in obj:
            raise UserError("%s: malformed policy file: %s entry without '%s'" % (path, what, k))


def load(pdir=None, subsystem="btrfs"):
    pdir = Path(pdir) if pdir else DEFAULT_DIR
    if not pdir.is_dir():
        raise UserError("%s: no such policies directory" % pdir)
    files = [pdir / "policies.json", pdir / "kernel.json"]
    sub = pdir / subsystem
    if sub.is_dir():
        files += sorted(sub.glob("*.json"))
    P = Policies()
    for f in files:
        if not f.exists():
            if f.name in ("policies.json", "kernel.json"):
                raise UserError("%s: missing policy file" % f)
            continue
        d = _read(f)
        P.files.append(str(f))
        for spec in d.get("lock_functions", []):
            _need(f, spec, ("name", "op"), "lock_functions")
            if spec["op"] not in ("acquire", "acquire_ret0", "trylock", "release",
                                  "downgrade", "assert"):
                raise UserError("%s: malformed policy file: lock function %s has unknown op '%s'"
                                % (f, spec["name"], spec["op"]))
            w = spec.get("when_arg")
            if w is not None and not (isinstance(w, list) and len(w) == 2 and
                                      isinstance(w[0], int) and isinstance(w[1], str)):
                raise UserError("%s: malformed policy file: lock function %s: when_arg must be "
                                "[argument number, token]" % (f, spec["name"]))
            wf = spec.get("when_field")
            if wf is not None and not (isinstance(wf, list) and len(wf) == 2 and
                                       isinstance(wf[0], int) and isinstance(wf[1], str)):
                raise UserError("%s: malformed policy file: lock function %s: when_field must be "
                                "[argument number, struct.field]" % (f, spec["name"]))
            mode = spec.get("mode", "exclusive")
            if mode not in ("exclusive", "read", "group"):
                raise UserError("%s: malformed policy file: lock function %s: mode must be "
                                "exclusive, read or group" % (f, spec["name"]))
            if (mode == "group") != isinstance(spec.get("group"), str):
                raise UserError("%s: malformed policy file: lock function %s: a group mode "
                                "needs a group name, and only it" % (f, spec["name"]))
            sel = w is not None or wf is not None
            prev = P.lockfns.get(spec["name"])
            if prev is None:
                P.lockfns[spec["name"]] = spec
            elif (prev.get("when_arg") or prev.get("when_field")) and sel:
                # one entry per lockdep map of a wrapper that takes several
                # (btrfs_trans_state_lockdep_release(fs_info, STATE)):
                # the call's argument picks the entry
                prev.setdefault("variants", []).append(spec)
            else:
                raise UserError("%s: malformed policy file: lock function %s listed twice "
                                "(only entries with when_arg or when_field may share a name)"
                                % (f, spec["name"]))
        P.diag_calls.update(d.get("diagnostic_calls", []))
        P.diag_prefixes += d.get("diagnostic_prefixes", [])
        P.assertions.update(d.get("assertion_calls", []))
        P.allocators.update(d.get("allocators", []))
        P.freers.update(d.get("freers", []))
        P.lifecycle.update(d.get("lifecycle_functions", []))
        for pat in d.get("lifecycle_patterns", []):
            try:
                P.lifecycle_re.append(re.compile(pat))
            except re.error as e:
                raise UserError("%s: malformed policy file: bad pattern %r: %s" % (f, pat, e))
        for o in d.get("owners", []):
            _need(f, o, ("field", "functions", "reason"), "owners")
            # one entry may name several fields one owner holds
            fields = [o["field"]] if isinstance(o["field"], str) else o["field"]
            if not (isinstance(fields, list) and fields and
                    all(isinstance(x, str) and "." in x for x in fields)) or \
                    not (isinstance(o["functions"], list) and o["functions"] and
                         all(isinstance(x, str) for x in o["functions"])):
                raise UserError("%s: malformed policy file: owners entry: 'field' must be "
                                "struct.field or a list of them, 'functions' a list of "
                                "function names" % f)
            P.owners.append(dict(o, field=fields))
        for t in d.get("task_private", []):
            _need(f, t, ("struct", "reason"), "task_private")
            P.task_private[t["struct"]] = t
        for h in d.get("handlers", []):
            _need(f, h, ("functions", "context", "reason"), "handlers")
            P.handlers.append(h)
        for c in d.get("contexts", []):
            _need(f, c, ("call", "args", "context"), "contexts")
            for b in ("any_time", "callees"):
                if not isinstance(c.get(b, False), bool):
                    raise UserError("%s: malformed policy file: context %s: %s must be "
                                    "true or false" % (f, c["call"], b))
            h = c.get("hands_over")
            if h is not None and not (isinstance(h, dict) and isinstance(h.get("struct"), str)
                                      and isinstance(h.get("reason"), str)):
                raise UserError("%s: malformed policy file: context %s: hands_over must be "
                                "an object with \"struct\" and \"reason\"" % (f, c["call"]))
            P.contexts.append(c)
        for c in d.get("ops_entry_locks", []):
            _need(f, c, ("member", "lock", "mode", "reason"), "ops_entry_locks")
            if c["mode"] not in ("read", "exclusive"):
                raise UserError("%s: malformed policy file: ops entry lock %s: mode must be "
                                "read or exclusive" % (f, c["member"]))
            P.ops_entry_locks[c["member"]] = c
        for c in d.get("ops_contexts", []):
            _need(f, c, ("member", "context"), "ops_contexts")
            for b in ("any_time", "callees"):
                if not isinstance(c.get(b, False), bool):
                    raise UserError("%s: malformed policy file: ops context %s: %s must be "
                                    "true or false" % (f, c["member"], b))
            P.ops_contexts[c["member"]] = c
        for c in d.get("param_locks", []):
            _need(f, c, ("struct", "lock", "mode", "reason"), "param_locks")
            ws = c.get("weak_sources", [])
            if not isinstance(ws, list) or not all(isinstance(x, str) for x in ws):
                raise UserError("%s: malformed policy file: param lock %s: weak_sources must "
                                "be a list of function names" % (f, c["struct"]))
            if c["mode"] not in ("read", "exclusive"):
                raise UserError("%s: malformed policy file: param_locks %s: mode must be "
                                "read or exclusive" % (f, c["struct"]))
            P.param_locks[c["struct"]] = c
        for c in d.get("container_locks", []):
            _need(f, c, ("struct", "locks", "reason"), "container_locks")
            if not isinstance(c["locks"], list) or len(c["locks"]) < 2 or \
                    not all(isinstance(x, str) for x in c["locks"]):
                raise UserError("%s: malformed policy file: container_locks %s: locks must be "
                                "a list of at least two lock names" % (f, c["struct"]))
            # the entry's lock, as it reads in reasons and locks_held
            P.container_locks[c["struct"]] = dict(c, name=" or ".join(c["locks"]))
        for c in d.get("phases", []):
            _need(f, c, ("struct", "before", "after", "reason"), "phases")
            for k in ("before", "after"):
                if not (isinstance(c[k], list) and c[k] and
                        all(isinstance(x, str) and x for x in c[k])):
                    raise UserError("%s: malformed policy file: phases %s: '%s' must be a "
                                    "non-empty list of function names" % (f, c["struct"], k))
            if set(c["before"]) & set(c["after"]):
                raise UserError("%s: malformed policy file: phases %s: %s is both before "
                                "and after" % (f, c["struct"],
                                               sorted(set(c["before"]) & set(c["after"]))[0]))
            P.phases.append(c)
        for c in d.get("pseudo_locks", []):
            _need(f, c, ("name", "struct", "reason"), "pseudo_locks")
            P.pseudo_locks[c["name"]] = c
        for c in d.get("container_accessors", []):
            _need(f, c, ("name", "struct"), "container_accessors")
            P.container_accessors[c["name"]] = c["struct"]
        for e in d.get("exceptions", []):
            _need(f, e, ("field", "reason"), "exceptions")
            P.exceptions.append(e)
        for b in d.get("atomic_bitops", []):
            _need(f, b, ("name", "arg"), "atomic_bitops")
            P.bitops[b["name"]] = b["arg"]
        P.wait_macros.update(d.get("wait_macros", []))
        if "context_depth" in d:
            P.context_depth = d["context_depth"]
        for p in d.get("policies", []):
            _need(f, p, ("id", "text"), "policies")
            P.policies.append(p)
        for r in d.get("rules", []):
            _need(f, r, ("id", "action", "text"), "rules")
            P.rules[r["id"]] = r
        P.scalar_typedefs.update(d.get("scalar_typedefs", []))
        P.test_dirs += d.get("test_dirs", [])
        P.non_retaining.update(d.get("non_retaining_functions", []))
        for b in d.get("publish_functions", []):
            _need(f, b, ("name", "arg"), "publish_functions")
            P.publishers[b["name"]] = b["arg"]
        P.unlinkers.update(d.get("unlink_functions", []))
        P.link_removers.update(d.get("link_removal_functions", []))
        P.link_tests.update(d.get("link_test_functions", []))
        P.sync_callers.update(d.get("sync_callers", []))
        P.non_calling.update(d.get("non_calling_macros", []))
        for b in d.get("new_object_flags", []):
            _need(f, b, ("member", "flag", "publish", "reason"), "new_object_flags")
            if not isinstance(b["publish"], list) or not b["publish"]:
                raise UserError("%s: malformed policy file: new_object_flags %s: publish must "
                                "be a non-empty list of functions" % (f, b["flag"]))
            P.new_flags.append(b)
    return P


def digest(P):
    """Content of all policy files, for cache keys."""
    import hashlib
    h = hashlib.sha256()
    for f in P.files:
        h.update(f.encode())
        h.update(open(f, "rb").read())
    return h.hexdigest()
