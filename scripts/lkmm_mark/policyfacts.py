# SPDX-License-Identifier: GPL-2.0-only
"""The fact kinds of policies/, one loader each (policy.py LOADERS reads
a file's keys through them): each checks its entries and gives a
malformed one a one-line error naming the file, then adds them to the
Policies object.  The lock facts' loaders are in policylocks.py, the
checks they share in policycheck.py."""
import json
import re

from .policycheck import _err, _keyed, _names, _need
from .policylocks import (_container_locks, _data_locks, _io_locks, _lock_functions,
                          _ops_entry_locks, _param_locks, _pseudo_locks)
from .tree import UserError


def _owners(P, f, entries):
    for o in entries:
        _need(f, o, ("field", "functions", "reason"), "owners")
        # one entry may name several fields one owner holds
        fields = [o["field"]] if isinstance(o["field"], str) else o["field"]
        if not (isinstance(fields, list) and fields and
                all(isinstance(x, str) and "." in x for x in fields)) or \
                not (isinstance(o["functions"], list) and o["functions"] and
                     all(isinstance(x, str) for x in o["functions"])):
            raise _err(f, "owners entry: 'field' must be struct.field or a list of them, "
                       "'functions' a list of function names")
        through = o.get("through", [])
        if not (isinstance(through, list) and all(isinstance(x, str) and "->" in x
                                                     for x in through)):
            raise _err(f, "owners entry: 'through' must be a list of paths such as 'p->obj'")
        P.owners.append(dict(o, field=fields))


def _flags(f, c, name, what, keys=("any_time", "callees")):
    for b in keys:
        if not isinstance(c.get(b, False), bool):
            raise _err(f, "%s %s: %s must be true or false", what, name, b)


def _contexts(P, f, entries):
    for c in entries:
        _need(f, c, ("call", "args", "context"), "contexts")
        _flags(f, c, c["call"], "context")
        h = c.get("hands_over")
        if h is not None and not (isinstance(h, dict) and isinstance(h.get("struct"), str)
                                  and isinstance(h.get("reason"), str)):
            raise _err(f, "context %s: hands_over must be an object with \"struct\" "
                       "and \"reason\"", c["call"])
        P.contexts.append(c)


def _ops_contexts(P, f, entries):
    for c in entries:
        _need(f, c, ("member", "context"), "ops_contexts")
        _flags(f, c, c["member"], "ops context")
        P.ops_contexts[c["member"]] = c


def _phases(P, f, entries):
    for c in entries:
        _need(f, c, ("struct", "before", "reason"), "phases")
        if "after" not in c and "after_wait" not in c:
            raise _err(f, "phases %s: needs 'after' or 'after_wait'", c["struct"])
        _names(f, c, "before", "phases " + c["struct"])
        if "after" in c:
            _names(f, c, "after", "phases " + c["struct"])
        if "after_wait" in c:
            _after_waits(f, c)
        if set(c["before"]) & set(c.get("after", ())):
            raise _err(f, "phases %s: %s is both before and after", c["struct"],
                       sorted(set(c["before"]) & set(c["after"]))[0])
        P.phases.append(c)


def _after_waits(f, c):
    """A phases entry's 'after_wait': [{"call", "arg", "args"?}], a wait
    call on the object its argument number 'arg' passes, with the tokens
    'args' names at other argument numbers ({"1": "1"})."""
    v = c["after_wait"]
    ok = isinstance(v, list) and v and all(
        isinstance(w, dict) and isinstance(w.get("call"), str) and w["call"] and
        isinstance(w.get("arg"), int) and w["arg"] >= 0 and
        set(w) <= {"call", "arg", "args"} and
        isinstance(w.get("args", {}), dict) and
        all(isinstance(k, str) and k.isdigit() and isinstance(x, str) and x
            for k, x in w.get("args", {}).items()) for w in v)
    if not ok:
        raise _err(f, "phases %s: 'after_wait' must be a non-empty list of "
                   "{\"call\": name, \"arg\": number, \"args\": {number: token}}",
                   c["struct"])


def _drains(P, f, entries):
    """policies/ 'drains': {"struct", "lock", "counter", "through": [path],
    "drained_params"?: [{"function", "arg"}], "reason"}."""
    for c in entries:
        _need(f, c, ("struct", "lock", "counter", "through", "reason"), "drains")
        v, dp, sw = c["through"], c.get("drained_params", []), c.get("same_while")
        if not (isinstance(v, list) and v and all(isinstance(p, str) and "->" in p for p in v)) \
                or not (isinstance(dp, list) and all(
                    isinstance(p, dict) and isinstance(p.get("function"), str) and
                    isinstance(p.get("arg"), int) and p["arg"] >= 0 for p in dp)) or \
                not (sw is None or isinstance(sw, dict) and isinstance(sw.get("lock"), str) and
                     isinstance(sw.get("paths"), list) and
                     all(isinstance(p, str) and p for p in sw["paths"])):
            raise _err(f, "drains %s: 'through' must be a non-empty list of paths "
                       "('h->obj'), 'drained_params' a list of {\"function\": name, "
                       "\"arg\": number} and 'same_while' {\"paths\": [path], \"lock\": "
                       "lock}", c["struct"])
        P.drains.append(c)


def _instances(P, f, entries):
    """Objects of one struct in distinct roles: what the pointer fields of
    one role point to is never what those of another role point to;
    'params' {role: [{"function", "arg"}]}: every caller hands that
    parameter an object of the role; 'calls' {role: [function]}: what a
    call of the function returns is one."""
    for c in entries:
        _need(f, c, ("struct", "roles", "reason"), "instances")
        roles = c["roles"]
        if not isinstance(roles, dict) or len(roles) < 2 or not all(
                isinstance(v, list) and v and all(isinstance(x, str) and "." in x for x in v)
                for v in roles.values()):
            raise _err(f, "instances %s: roles must map at least two role names to lists "
                       "of pointer fields (struct.field)", c["struct"])
        for role, fields in roles.items():
            for x in fields:
                P.roles[x] = (c["struct"], role)
        params = c.get("params", {})
        if not isinstance(params, dict) or not all(
                r in roles and isinstance(v, list) and all(
                    isinstance(p, dict) and isinstance(p.get("function"), str) and
                    isinstance(p.get("arg"), int) for p in v)
                for r, v in params.items()):
            raise _err(f, "instances %s: params must map role names of roles to lists of "
                       "{\"function\": name, \"arg\": number}", c["struct"])
        for role, ps in params.items():
            for p in ps:
                P.param_roles[(p["function"], p["arg"])] = (c["struct"], role)
        calls = c.get("calls", {})
        if not isinstance(calls, dict) or not all(
                r in roles and isinstance(v, list) and all(isinstance(x, str) for x in v)
                for r, v in calls.items()):
            raise _err(f, "instances %s: calls must map role names of roles to lists of "
                       "function names", c["struct"])
        for role, fns in calls.items():
            for x in fns:
                P.call_roles[x] = (c["struct"], role)


_GUARD_STATES = {"field": ("set", "null"), "call": ("true", "false")}


def _guards(P, f, entries):
    for c in entries:
        _need(f, c, ("reason",), "guards")
        kinds = [k for k in ("field", "call") if isinstance(c.get(k), str)]
        if len(kinds) != 1 or (kinds[0] == "field" and "." not in c["field"]):
            raise _err(f, "guards entry %s: it needs either \"field\" (struct.field) or "
                       "\"call\" (a predicate's name)", json.dumps(c)[:60])
        states = _GUARD_STATES[kinds[0]]
        w = c.get("when_mentions")
        if w is not None and not (kinds[0] == "call" and isinstance(w, list) and len(w) == 2
                                  and isinstance(w[0], int) and isinstance(w[1], str)):
            raise _err(f, "guards %s: when_mentions must be [argument number, struct.field] "
                       "of a call guard", c[kinds[0]])
        imp = c.get("implies", {})
        if not isinstance(imp, dict) or any(k not in states for k in imp) or any(
                not isinstance(v, list) or not all(
                    isinstance(x, dict) and isinstance(x.get("lock"), str) and
                    x.get("mode") in ("read", "exclusive") for x in v) for v in imp.values()):
            raise _err(f, "guards %s: implies must map %s to lists of {\"lock\", "
                       "\"mode\": read or exclusive}", c[kinds[0]], " or ".join(states))
        under, pinned = c.get("under"), c.get("pinned")
        if under is not None and not (kinds[0] == "field" and (isinstance(under, str) or (
                isinstance(under, list) and under and all(isinstance(x, str) for x in under)))):
            raise _err(f, "guards %s: under must be a lock name or a list of them, on a "
                       "field guard", c[kinds[0]])
        if pinned is not None and not (under and isinstance(pinned, list) and
                                       all(x in states for x in pinned)):
            raise _err(f, "guards %s: pinned must list states (%s) of a guard with under",
                       c[kinds[0]], " or ".join(states))
        r = c.get("remembered_in")
        if r is not None and not (
                kinds[0] == "call" and w is None and isinstance(r, dict) and
                isinstance(r.get("field"), str) and "." in r["field"] and
                isinstance(r.get("values"), dict) and len(r["values"]) >= 2 and
                all(v in states for v in r["values"].values())):
            raise _err(f, "guards %s: remembered_in must be {\"field\": struct.field, "
                       "\"values\": {enumerator: true or false, ...}} on a call guard",
                       c[kinds[0]])
        e = c.get("empty_lookups")
        if e is not None and not (
                kinds[0] == "call" and w is None and isinstance(e, dict) and
                e.get("state") in states and isinstance(e.get("calls"), list) and e["calls"]
                and all(isinstance(x, str) for x in e["calls"])):
            raise _err(f, "guards %s: empty_lookups must be {\"state\": true or false, "
                       "\"calls\": [lookup, ...]} on a call guard", c[kinds[0]])
        P.guards.append(c)


def _task_private(P, f, entries):
    """Structs that never leave their task; with 'handed_to', the
    functions a task hands one to while it waits for them, and with
    'lends_locks', the task's locks held for them (lending.py)."""
    _keyed("task_private", "struct", "task_private", ("struct", "reason"))(P, f, entries)
    for c in entries:
        h = c.get("handed_to", ["x"])
        if not isinstance(h, list) or not h or not all(isinstance(x, str) for x in h):
            raise UserError("%s: malformed policy file: task_private entry %s: 'handed_to' "
                            "is not a list of function names" % (f, c["struct"]))
        if c.get("lends_locks", True) is not True or ("lends_locks" in c and "handed_to" not in c):
            raise UserError("%s: malformed policy file: task_private entry %s: 'lends_locks' "
                            "must be true, beside 'handed_to'" % (f, c["struct"]))


def _owned_structs(P, f, entries):
    """Structs only objects of their owner reach: their accesses race with
    nothing in a context only the owner's teardown gives, or one handed a
    new owner (pairs.py _owned_apart())."""
    _keyed("owned_structs", "struct", "owned_structs", ("struct", "owner", "reason"))(
        P, f, entries)
    for c in entries:
        if not all(isinstance(c[k], str) and c[k] and "." not in c[k] for k in ("struct", "owner")):
            raise UserError("%s: malformed policy file: owned_structs entry %s: 'struct' and "
                            "'owner' must be struct names" % (f, json.dumps(c["struct"])))


def _listed(attr, fields, what):
    def load(P, f, entries):
        for c in entries:
            _need(f, c, fields, what)
            getattr(P, attr).append(c)
    return load


def _updated(attr):
    def load(P, f, names):
        getattr(P, attr).update(names)
    return load


def _extended(attr):
    def load(P, f, names):
        getattr(P, attr).extend(names)
    return load


def _lifecycle_patterns(P, f, pats):
    for pat in pats:
        try:
            P.lifecycle_re.append(re.compile(pat))
        except re.error as e:
            raise _err(f, "bad pattern %r: %s", pat, e)


def _arg_map(attr, what):
    def load(P, f, entries):
        for b in entries:
            _need(f, b, ("name", "arg"), what)
            getattr(P, attr)[b["name"]] = b["arg"]
    return load


def _new_object_flags(P, f, entries):
    for b in entries:
        _need(f, b, ("member", "flag", "publish", "reason"), "new_object_flags")
        # empty: a flag that is never cleared, tested by an assertion
        if not isinstance(b["publish"], list) or \
                not all(isinstance(x, str) and x for x in b["publish"]):
            raise _err(f, "new_object_flags %s: publish must be a list of functions",
                       b["flag"])
        sb = b.get("set_by", [])
        if not isinstance(sb, list) or not all(isinstance(x, str) and x for x in sb):
            raise _err(f, "new_object_flags %s: set_by must be a list of functions", b["flag"])
        for key in ("shared_after", "tested_by"):
            sa = b.get(key, [])
            if not isinstance(sa, list) or not all(isinstance(x, str) and x for x in sa):
                raise _err(f, "new_object_flags %s: %s must be a list of functions",
                           b["flag"], key)
        hb = b.get("handed_back_by", [])
        if not isinstance(hb, list) or not all(
                isinstance(x, dict) and isinstance(x.get("function"), str) and
                isinstance(x.get("arg"), int) and x["arg"] >= 0 for x in hb):
            raise _err(f, "new_object_flags %s: handed_back_by must be a list of "
                       "{\"function\", \"arg\"} (an argument index)", b["flag"])
        P.new_flags.append(dict(b, handed_back_by={x["function"]: x["arg"] for x in hb}))


def _state_assertions(P, f, entries):
    for c in entries:
        _need(f, c, ("call", "holds", "reason"), "state_assertions")
        if not isinstance(c["holds"], bool):
            raise _err(f, "state_assertions %s: holds must be true or false", c["call"])
        P.state_assertions.append(c)


def _work_items(P, f, entries):
    for c in entries:
        _need(f, c, ("call", "work", "fn", "reason"), "work_items")
        if not isinstance(c["work"], int) or not isinstance(c["fn"], int):
            raise _err(f, "work_items %s: work and fn must be argument numbers", c["call"])
        P.work_items.append(c)


def _waited_work(P, f, entries):
    for c in entries:
        _need(f, c, ("call", "work", "fn", "queue", "wait", "signal", "reason"), "waited_work")
        if not all(isinstance(c[k], int) and not isinstance(c[k], bool) and c[k] >= 0
                   for k in ("work", "fn")) or \
                not all(isinstance(c[k], list) and c[k] for k in ("queue", "wait", "signal")):
            raise _err(f, "waited_work %s: work and fn must be argument numbers, "
                       "queue, wait and signal lists of calls", c["call"])
        P.waited_work[c["call"]] = c


def _unlink_waits(P, f, entries):
    for c in entries:
        _need(f, c, ("call", "arg", "reason"), "unlink_waits")
        if not isinstance(c["arg"], int) or isinstance(c["arg"], bool) or c["arg"] < 0:
            raise _err(f, "unlink_waits %s: arg must be an argument number", c["call"])
        P.unlink_waits[c["call"]] = c["arg"]


def _thread_lifetimes(P, f, entries):
    for c in entries:
        _need(f, c, ("thread", "stop", "reason"), "thread_lifetimes")
        if not all(isinstance(c[k], str) and c[k].isidentifier() for k in ("thread", "stop")):
            raise _err(f, "thread_lifetimes %s: thread and stop must be function names",
                       c["thread"])
        also = c.get("also", [])
        if not isinstance(also, list) or not all(isinstance(t, str) and t.isidentifier()
                                                 for t in also):
            raise _err(f, "thread_lifetimes %s: also must be a list of function names",
                       c["thread"])
        if "held" in c and not (isinstance(c["held"], str) and
                                re.fullmatch(r"\w+\.\w+", c["held"])):
            raise _err(f, "thread_lifetimes %s: held must be a lock (struct.field)",
                       c["thread"])
        P.thread_lifetimes.append(c)


def _teardown_contexts(P, f, entries):
    for c in entries:
        _need(f, c, ("entry", "object", "reached_by", "reason"), "teardown_contexts")
        o = c["object"]
        if not (isinstance(c["entry"], str) and c["entry"].isidentifier() and
                isinstance(o, dict) and set(o) == {"function", "arg"} and
                isinstance(o["function"], str) and o["function"].isidentifier() and
                isinstance(o["arg"], int) and not isinstance(o["arg"], bool) and o["arg"] >= 0):
            raise _err(f, "teardown_contexts %s: 'entry' is a function, 'object' "
                       "{function, arg: a parameter's index}", c["entry"])
        _names(f, c, "reached_by", "teardown_contexts %s" % c["entry"], nonempty=False)
        P.teardown_contexts.append(c)


def _init_time_flags(P, f, entries):
    for c in entries:
        _need(f, c, ("field", "bit", "reason"), "init_time_flags")
        if not isinstance(c["field"], str) or c["field"].count(".") != 1 or \
                not isinstance(c["bit"], str) or not c["bit"].isidentifier():
            raise _err(f, "init_time_flags %s: 'field' must be struct.field and 'bit' a flag name",
                       c["field"])
        P.init_time_flags.append(c)


def _lifetime_counts(P, f, entries):
    for c in entries:
        _need(f, c, ("field", "reason"), "lifetime_counts")
        if not isinstance(c["field"], str) or not re.fullmatch(r"\w+\.\w+", c["field"]):
            raise _err(f, "lifetime_counts %s: 'field' must be struct.field", c["field"])
        P.lifetime_counts[c["field"]] = c["reason"]


def _held_members(P, f, entries):
    for c in entries:
        _need(f, c, ("member", "lock", "reason"), "held_members")
        if not all(isinstance(c[k], str) and re.fullmatch(r"\w+\.\w+", c[k])
                   for k in ("member", "lock")):
            raise _err(f, "held_members %s: 'member' and 'lock' must be struct.field",
                       json.dumps(c["member"]))
        P.held_members[c["member"]] = c["lock"]


def _locked_lists(P, f, entries):
    for c in entries:
        _need(f, c, ("function", "arg", "lock", "reason"), "locked_lists")
        if not (isinstance(c["function"], str) and isinstance(c["arg"], int) and
                c["arg"] >= 0 and isinstance(c["lock"], str) and
                re.fullmatch(r"\w+\.\w+", c["lock"]) and
                c.get("mode", "exclusive") in ("exclusive", "read")):
            raise _err(f, "locked_lists %s: it needs \"function\", \"arg\" (an argument "
                       "number), \"lock\" (struct.field) and a mode exclusive or read",
                       json.dumps(c.get("function")))
        # for the lock flow (heldobjects.py): a call of the function
        # changes nothing, a take from a list it filled acquires
        P.locked_lists[c["function"]] = {"name": c["function"], "op": "acquire_list",
                                         "arg": c["arg"], "lock": c["lock"],
                                         "mode": c.get("mode", "exclusive")}


def _variants(P, f, entries):
    for c in entries:
        _need(f, c, ("field", "reason"), "variants")
        if not isinstance(c["field"], str) or c["field"].count(".") != 1:
            raise _err(f, "variants %s: 'field' must be struct.field", c["field"])
        kinds = set(c.get("values", {}).values()) or {"set", "null"}
        for key in ("values", "lists"):
            if not isinstance(c.get(key, {}), dict) or \
                    any(not isinstance(v, str) for v in c.get(key, {}).values()):
                raise _err(f, "variants %s: '%s' maps names to variants", c["field"], key)
        if c.get("values") and len(kinds) != 2 or set(c.get("lists", {}).values()) - kinds:
            raise _err(f, "variants %s: 'values' names two variants, 'lists' only those",
                       c["field"])
        if "bit" in c and (not isinstance(c["bit"], str) or c.get("values")):
            raise _err(f, "variants %s: 'bit' names one flag, without 'values'", c["field"])
        for ml in c.get("made_lists", []):
            if not isinstance(ml, dict) or set(ml) != {"list", "call", "variant"} or \
                    ml["variant"] not in kinds or str(ml["list"]).count(".") != 1:
                raise _err(f, "variants %s: a made list is {list: struct.member, call, "
                           "variant: one of %s}", c["field"], ", ".join(sorted(kinds)))
        for lk in c.get("lookups", []):
            if not isinstance(lk, dict) or set(lk) != {"call", "arg", "value", "variant"} or \
                    not isinstance(lk["arg"], int) or lk["variant"] not in kinds:
                raise _err(f, "variants %s: a lookup is {call, arg, value, variant: one of %s}",
                           c["field"], ", ".join(sorted(kinds)))
        P.variants[c["field"].split(".", 1)[0]] = c


def _container_accessors(P, f, entries):
    for c in entries:
        _need(f, c, ("name", "struct"), "container_accessors")
        P.container_accessors[c["name"]] = c["struct"]


def _context_depth(P, f, n):
    P.context_depth = n


def _rules(P, f, entries):
    for r in entries:
        _need(f, r, ("id", "action", "text"), "rules")
        P.rules[r["id"]] = r


LOADERS = {
    "lock_functions": _lock_functions,
    "diagnostic_calls": _updated("diag_calls"),
    "output_calls": _updated("output_calls"),
    "diagnostic_prefixes": _extended("diag_prefixes"),
    "assertion_calls": _updated("assertions"),
    "allocators": _updated("allocators"),
    "freers": _updated("freers"),
    "lifecycle_functions": _updated("lifecycle"),
    "lifecycle_patterns": _lifecycle_patterns,
    "owners": _owners,
    "task_private": _task_private,
    "handlers": _listed("handlers", ("functions", "context", "reason"), "handlers"),
    "contexts": _contexts,
    "ops_entry_locks": _ops_entry_locks,
    "ops_contexts": _ops_contexts,
    "param_locks": _param_locks,
    "container_locks": _container_locks,
    "data_locks": _data_locks,
    "phases": _phases,
    "drains": _drains,
    "guards": _guards,
    "state_assertions": _state_assertions,
    "variants": _variants,
    "work_items": _work_items,
    "waited_work": _waited_work,
    "unlink_waits": _unlink_waits,
    "thread_lifetimes": _thread_lifetimes,
    "teardown_contexts": _teardown_contexts,
    "init_time_flags": _init_time_flags,
    "io_locks": _io_locks,
    "lifetime_counts": _lifetime_counts,
    "held_members": _held_members,
    "locked_lists": _locked_lists,
    "instances": _instances,
    "pseudo_locks": _pseudo_locks,
    "container_accessors": _container_accessors,
    "exceptions": _listed("exceptions", ("field", "reason"), "exceptions"),
    "atomic_bitops": _arg_map("bitops", "atomic_bitops"),
    "wait_macros": _updated("wait_macros"),
    "teardown_ops": _updated("teardown_ops"),
    "owned_structs": _owned_structs,
    "context_depth": _context_depth,
    "policies": _listed("policies", ("id", "text"), "policies"),
    "rules": _rules,
    "scalar_typedefs": _updated("scalar_typedefs"),
    "test_dirs": _extended("test_dirs"),
    "non_retaining_functions": _updated("non_retaining"),
    "publish_functions": _arg_map("publishers", "publish_functions"),
    "unlink_functions": _updated("unlinkers"),
    "link_removal_functions": _updated("link_removers"),
    "link_test_functions": _updated("link_tests"),
    "sync_callers": _updated("sync_callers"),
    "non_calling_macros": _updated("non_calling"),
    "new_object_flags": _new_object_flags,
    "initialisers": _updated("initialisers"),
}
