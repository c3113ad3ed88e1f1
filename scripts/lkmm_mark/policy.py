# SPDX-License-Identifier: GPL-2.0-only
"""Loading and checking policies/ (JSON data, no code)."""
import json
from pathlib import Path

from . import target as _target
from .policyfacts import LOADERS
from .tree import UserError

# the marks callctx.call_context() puts after a callee's name: its value
# only goes into the message of that call, or only decides whether that
# assertion runs
MESSAGE, GUARD = ":message", ":guard"

REPO = Path(__file__).resolve().parents[2]
DEFAULT_DIR = REPO / "policies"

# keys each file may hold, with the type of the value
SCHEMA = {
    "lock_functions": list, "annotations": dict, "diagnostic_calls": list,
    "diagnostic_prefixes": list, "marking_macros": list, "allocators": list,
    "freers": list, "lifecycle_functions": list, "lifecycle_patterns": list,
    "owners": list, "task_private": list, "handlers": list, "contexts": list, "exceptions": list,
    "atomic_bitops": list, "wait_macros": list, "teardown_ops": list, "context_depth": int,
    "policies": list, "rules": list, "subsystem": str, "_comment": str,
    "scalar_typedefs": list, "test_dirs": list, "non_retaining_functions": list,
    "publish_functions": list, "unlink_functions": list, "sync_callers": list,
    "non_calling_macros": list,
    "link_removal_functions": list, "link_test_functions": list, "ops_contexts": list,
    "container_accessors": list, "param_locks": list, "container_locks": list,
    "assertion_calls": list, "new_object_flags": list, "ops_entry_locks": list,
    "phases": list, "pseudo_locks": list, "guards": list, "instances": list,
    "state_assertions": list, "variants": list, "work_items": list, "default_target": str, "seed": str,
    "replaces": list, "initialisers": list, "data_locks": list, "output_calls": list,
    "unlink_waits": list, "drains": list, "owned_structs": list, "thread_lifetimes": list,
    "teardown_contexts": list,
    "init_time_flags": list,
    "io_locks": list,
    "lifetime_counts": list,
    "held_members": list,
    "locked_lists": list,
    "waited_work": list,
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
        self.ops_table_locks = {}  # member -> [the same, for the methods of some tables]
        self.container_accessors = {}  # FOO_I -> foo_inode: the struct embedding the argument
        self.param_locks = {}      # struct type -> spec: a parameter of that type holds a lock
        self.container_locks = {}  # struct -> spec: entries protected by their container's lock
        self.data_locks = []       # {member_types, lock, reason}: on-disk format data and its lock
        self.phases = []           # {struct, before, after, reason}: one object's life-cycle order
        self.drains = []           # {struct, lock, counter, through, ...}: a drain of an object's holders
        self.output_calls = set()  # format calls whose output the user reads (not a message)
        self.pseudo_locks = {}     # name -> {name, struct, reason}: a protocol that acts as a lock
        self.guards = []           # {field or call, reason, implies, under, pinned}: guards.py
        self.state_assertions = []  # {call, holds, reason}: an assertion of a guard's state
        self.variants = {}         # struct -> {field, lookups, reason}: two kinds of object (variants.py)
        self.work_items = []       # {call, work, fn, reason}: a non-reentrant work item's registration
        self.waited_work = {}      # call -> {call, work, fn, queue, wait, signal, reason}: waitedwork.py
        self.roles = {}            # pointer field -> (struct, role): objects of distinct roles
        self.param_roles = {}      # (function, arg number) -> (struct, role): what every caller passes
        self.call_roles = {}       # function -> (struct, role): what it returns
        self.exceptions = []
        self.bitops = {}
        self.wait_macros = set()
        self.teardown_ops = set()  # ops members that tear an object down (->evict_inode)
        self.owned_structs = {}    # struct -> entry: the owner only whose objects reach it
        self.context_depth = 1
        self.policies = []
        self.rules = {}
        self.scalar_typedefs = set()
        self.test_dirs = []
        self.non_retaining = set()
        self.publishers = {}       # function -> index of the argument it links in
        self.unlinkers = set()
        self.unlink_waits = {}      # wait -> argument: a member of a stack struct another task unlinks
        self.init_time_flags = []       # {field, bit, reason}: a flag bit only init sets
        self.thread_lifetimes = []  # {thread, stop, reason}: one thread per object, started when none runs
        self.teardown_contexts = []  # {entry, object: {function, arg}, reached_by, reason}
        self.io_locks = []          # {lock, submit, completion, reason}: a lock an I/O keeps (lending.py)
        self.lifetime_counts = {}   # struct.field -> reason: an object's own reference count
        self.held_members = {}      # struct.field -> lock: what the member points to its user holds
        self.locked_lists = {}      # function -> lock spec: it hands back on a list objects it locked
        self.link_removers = set()  # list_del() and friends: a link taken apart
        self.link_tests = set()     # list_empty() and friends: a link only looked at
        self.sync_callers = set()
        self.non_calling = set()    # ALLOW_ERROR_INJECTION(fn, ..): names fn, adds no caller
        self.new_flags = []         # flags that keep a new object private (I_NEW)
        self.initialisers = set()   # spin_lock_init() and friends: a lock made, not taken
        self.files = []
        self.data = {}              # file -> its facts as loaded (a version's replaced out)
        self.replaced = []          # (key, name) a version's override took out

    def is_lifecycle(self, fn):
        return fn in self.lifecycle or any(r.search(fn) for r in self.lifecycle_re)

    def is_diag(self, name):
        return name in self.diag_calls or any(name.startswith(p) for p in self.diag_prefixes) \
            or name.endswith((MESSAGE, GUARD))

    @staticmethod
    def diag_phrase(name):
        """How a reason names the diagnostic use (callctx.call_context())."""
        if name.endswith(MESSAGE):
            return "the message of %s()" % name[:-len(MESSAGE)]
        if name.endswith(GUARD):
            return "the test that decides whether %s() runs" % name[:-len(GUARD)]
        return "%s()" % name


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


def subsystem_of(target):
    """The policies/ subdirectory for a target directory: its last
    component (fs/foofs -> foofs)."""
    return _target.subsystem_of(target)


def load(pdir=None, subsystem=None, series=None):
    """The policies of pdir (policies/): the kernel-wide files and those of
    the subsystem (the default target's without one).  verify.json is
    verify's description of the subsystem (target.py), not a policy.
    series ('6.12'): the kernel version of the tree, whose overrides
    (<subsystem>/<series>/*.json, overrides.py) replace and add facts."""
    from . import overrides
    pdir = Path(pdir) if pdir else DEFAULT_DIR
    if not pdir.is_dir():
        raise UserError("%s: no such policies directory" % pdir)
    files = [pdir / "policies.json", pdir / "kernel.json"]
    sub = pdir / (subsystem or _target.subsystem_of())
    if sub.is_dir():
        files += sorted(f for f in sub.glob("*.json") if f.name != _target.VERIFY_FILE)
    P = Policies()
    base = []
    for f in files:
        if not f.exists():
            if f.name in ("policies.json", "kernel.json"):
                raise UserError("%s: missing policy file" % f)
            continue
        base.append((f, _read(f)))
    over = [(f, _read(f)) for f in overrides.version_files(sub, series)]
    P.replaced = overrides.apply(base, over)
    for f, d in base + over:
        P.files.append(str(f))
        P.data[str(f)] = d
        for key, value in d.items():
            loader = LOADERS.get(key)
            if loader is not None:
                loader(P, f, value)
    return P


def digest(P):
    """Content of all policy files, for cache keys."""
    import hashlib
    h = hashlib.sha256()
    for f in P.files:
        h.update(f.encode())
        h.update(open(f, "rb").read())
    return h.hexdigest()
