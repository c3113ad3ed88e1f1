# SPDX-License-Identifier: GPL-2.0-only
"""Facts checked against the code: every name policies/ states (functions,
macros, structs, fields, locks) must exist in the tree it is applied to.

A fact whose name the code lacks (a typo, or code that moved since the fact
was written) would silently do nothing; here it is an error naming the
file, the entry and the name.  With --allow-stale-facts it is a warning,
for trees of other versions.

Where a name is looked for:
- the subsystem's files (policies/<subsystem>/): in the target's sources
  (any identifier; a struct.field as a member of the struct when the
  target defines the struct);
- the kernel-wide files (kernel.json): in the target and in the tree's
  include/ (arch/x86/include too), searched with one grep for the names
  the target lacks.
"""
import json
import re
import subprocess
from pathlib import Path

from .base import UserError, log

_ID = re.compile(r"^[A-Za-z_]\w*$")
_WORD = re.compile(r"[A-Za-z_]\w*")
_NOISE = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"', re.S)

# Per key of a policy file: which values are names, as (path, kind).
# A path is a key of the entry (a list of names is checked name by name);
# "" is the entry itself (lists of names).  Kinds: "id" an identifier
# (function, macro, member, flag), "struct" a struct name, "field"
# struct.field, "lock" a lock as the analysis names it (struct.field or
# a variable), "file" a path below the tree.
NAMES = {
    "lock_functions": [("name", "id"), ("lock", "lock"), ("when_field.1", "field"),
                       ("when_mentions.1", "field"), ("when_arg.1", "id")],
    "diagnostic_calls": [("", "id")], "assertion_calls": [("", "id")],
    "output_calls": [("", "id")],
    "state_assertions": [("call", "id")], "work_items": [("call", "id")],
    "unlink_waits": [("call", "id")],
    "thread_lifetimes": [("thread", "id"), ("stop", "id"), ("also", "id"), ("held", "lock")],
    "teardown_contexts": [("entry", "id"), ("object.function", "id"), ("reached_by", "id")],
    "init_time_flags": [("field", "field"), ("bit", "id")],
    "io_locks": [("lock", "lock"), ("submit", "id"), ("completion", "id"), ("handoff", "id")],
    "lifetime_counts": [("field", "field")],
    "held_members": [("member", "field"), ("lock", "lock")],
    "locked_lists": [("function", "id"), ("lock", "lock")],
    "variants": [("field", "field"), ("lookups.0.call", "id"), ("lookups.1.call", "id"),
                 ("bit", "id"), ("made_lists.0.list", "field"), ("made_lists.0.call", "id"),
                 ("made_lists.1.list", "field"), ("made_lists.1.call", "id")],
    "allocators": [("", "id")], "freers": [("", "id")],
    "lifecycle_functions": [("", "id")], "marking_macros": [("", "id")],
    "owners": [("field", "field"), ("functions", "id")],
    "task_private": [("struct", "struct"), ("handed_to", "id")],
    "handlers": [("functions", "id"), ("fields", "field")],
    "contexts": [("call", "id")],
    "exceptions": [("file", "file"), ("field", "field")],
    "atomic_bitops": [("name", "id")], "wait_macros": [("", "id")], "teardown_ops": [("", "id")],
    "owned_structs": [("struct", "struct"), ("owner", "struct")],
    "non_retaining_functions": [("", "id")], "publish_functions": [("name", "id")],
    "unlink_functions": [("", "id")], "sync_callers": [("", "id")],
    "non_calling_macros": [("", "id")], "link_removal_functions": [("", "id")],
    "link_test_functions": [("", "id")], "initialisers": [("", "id")],
    "ops_contexts": [("member", "id")],
    "ops_entry_locks": [("member", "id"), ("lock", "lock"), ("also.0.lock", "lock"),
                        ("also.1.lock", "lock")],
    "container_accessors": [("name", "id"), ("struct", "struct")],
    "param_locks": [("struct", "struct"), ("lock", "lock"), ("weak_sources", "id"),
                    ("pin.lock", "lock")],
    "container_locks": [("struct", "struct"), ("locks", "lock")],
    "data_locks": [("member_types", "id"), ("also_types", "id"), ("lock", "lock")],
    "new_object_flags": [("member", "id"), ("flag", "id"), ("publish", "id"),
                         ("set_by", "id"), ("shared_after", "id"), ("tested_by", "id"),
                         ("handed_back_by.0.function", "id"),
                         ("handed_back_by.1.function", "id")],
    "phases": [("struct", "struct"), ("before", "id"), ("after", "id"),
               ("after_wait.0.call", "id"), ("after_wait.1.call", "id"),
               ("after_wait.2.call", "id")],
    "drains": [("struct", "struct"), ("lock", "lock"), ("drained_params.0.function", "id"),
               ("drained_params.1.function", "id"), ("same_while.lock", "lock")],
    "pseudo_locks": [("struct", "struct"), ("covers", "struct")],
    "instances": [("struct", "struct")],
    "guards": [("field", "field"), ("call", "id"), ("when_mentions.1", "field"),
               ("under", "lock"), ("remembered_in.field", "field"),
               ("empty_lookups.calls", "id")],
}


def _values(entry, path):
    if path == "":
        v = entry
    else:
        v = entry
        for k in path.split("."):
            if isinstance(v, dict):
                v = v.get(k)
            elif isinstance(v, list) and k.isdigit() and int(k) < len(v):
                v = v[int(k)]
            else:
                return []
    if v is None:
        return []
    return [x for x in (v if isinstance(v, list) else [v]) if isinstance(x, str)]


def _entry_name(key, entry):
    if isinstance(entry, dict):
        for k in ("name", "struct", "member", "call", "field", "file"):
            if isinstance(entry.get(k), str):
                return "%s %s" % (key, entry[k])
    return key


def _role_fields(data):
    out = []
    for c in data.get("instances", []) if isinstance(data.get("instances"), list) else []:
        for fields in (c.get("roles") or {}).values() if isinstance(c, dict) else ():
            out += [("instances", "instances %s" % c.get("struct"), "field", x)
                    for x in fields if isinstance(x, str)]
        for ps in (c.get("params") or {}).values() if isinstance(c, dict) else ():
            out += [("instances", "instances %s" % c.get("struct"), "id", p["function"])
                    for p in ps if isinstance(p, dict) and isinstance(p.get("function"), str)]
        for fns in (c.get("calls") or {}).values() if isinstance(c, dict) else ():
            out += [("instances", "instances %s" % c.get("struct"), "id", x)
                    for x in fns if isinstance(x, str)]
    return out


def wanted(path, data=None):
    """(key, entry label, kind, name) for every name of one policy file
    (data: its facts as loaded, a version's replaced ones taken out)."""
    if data is None:
        with open(path) as f:
            data = json.load(f)
    out = []
    for key, specs in NAMES.items():
        for entry in data.get(key, []) if isinstance(data.get(key), list) else []:
            for p, kind in specs:
                for v in _values(entry, p):
                    out.append((key, _entry_name(key, entry), kind, v))
    return out + _role_fields(data)


class Universe:
    """The names a tree defines or uses: the target's identifiers, struct
    members, and (on demand) identifiers of the tree's include/."""

    def __init__(self, tree, src):
        self.tree = Path(tree)
        self.src = src
        ids = set()
        for text in src.text.values():
            # identifiers of the code, #define lines included (the tokens
            # leave preprocessor lines out), comments and strings not
            ids.update(_WORD.findall(_NOISE.sub(" ", text)))
        self.ids = ids

    def include_ids(self, names):
        """The subset of names that occur as words in include/ (one grep)."""
        names = sorted({n for n in names if _ID.match(n)})
        dirs = [d for d in ("include", "arch/x86/include") if (self.tree / d).is_dir()]
        if not names or not dirs:
            return set()
        r = subprocess.run(["grep", "-rhowF", "--include=*.h", "-f", "-"] + dirs,
                           input="\n".join(names) + "\n", cwd=str(self.tree),
                           capture_output=True, text=True)
        return set(r.stdout.split())

    def has(self, kind, name, wide):
        """True, False, or None: not in the target, look in include/
        (kernel-wide facts only)."""
        miss = None if wide else False
        if kind == "file":
            return (self.tree / name).exists()
        if name == "*":
            return True
        if kind in ("field", "lock") and "." in name:
            st, fld = name.split(".", 1)
            fld = fld.split(".")[0]
            defs = [d[st] for d in self.src.file_structs.values() if st in d]
            if defs:
                # several files may define a struct of that name
                return fld == "*" or any(fld in d for d in defs)
            return True if st in self.ids and fld in self.ids | {"*"} else miss
        if not _ID.match(name):
            return True                 # a pseudo-lock ('irqs-off'), not a C name
        return True if name in self.ids or (kind == "struct" and name in self.src.structs) \
            else miss


def check(P, tree, src, allow_stale=False):
    """Every name of every policy file of P, looked up in the tree: a list
    of 'file: entry: name' for the missing ones.  Raises UserError on the
    first file with missing names unless allow_stale (then logs each)."""
    u = Universe(tree, src)
    missing, pending = [], []
    headers = any((Path(tree) / "include" / "linux").glob("*.h"))
    for f in P.files:
        wide = Path(f).name in ("kernel.json", "policies.json")
        if wide and not headers:
            continue        # a tree without the kernel's headers: nothing to look in
        for key, label, kind, name in wanted(f, P.data.get(f)):
            # a declared pseudo-lock names a protocol, not a member
            ok = True if kind == "lock" and name in P.pseudo_locks else u.has(kind, name, wide)
            if ok is None:
                pending.append((f, label, kind, name))
            elif not ok:
                missing.append((f, label, name))
    if pending:
        words = set()
        for _, _, kind, name in pending:
            words.update(x for x in name.split(".") if _ID.match(x))
        found = u.include_ids(words)
        for f, label, kind, name in pending:
            parts = [x for x in name.split(".") if x not in ("*", "?")]
            if not all(x in found or x in u.ids for x in parts):
                missing.append((f, label, name))
    lines = ["%s: %s: '%s' is not in %s" % (_rel(f), label, name, tree)
             for f, label, name in missing]
    if lines and not allow_stale:
        raise UserError("stale fact: %s (%d in all; --allow-stale-facts makes this "
                        "a warning)" % (lines[0], len(lines)))
    for x in lines:
        log("warning: stale fact: " + x)
    return lines


def _rel(f):
    p = Path(f)
    return "/".join(p.parts[-2:]) if p.parent.name != "policies" else "policies/" + p.name
