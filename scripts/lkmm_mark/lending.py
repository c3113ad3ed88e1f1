# SPDX-License-Identifier: GPL-2.0-only
"""Stage 2d, part of the entry locks (callers.py): the locks a task lends
with an object it hands over.  A struct its task hands whole to other
functions while it waits for them (policies/ 'task_private' with
'handed_to') may also say "lends_locks": those functions run only on
objects handed to them, each while the task that handed it over waits,
so the locks every such task holds where it waits are held, for them,
by whichever task runs them (a commit that creates the snapshots the
tasks waiting for it queued: their lock keeps out what it keeps out of
their own code).

The tasks that hand one over are the functions (not those of
'handed_to') with a parameter or local of the struct's type that call
a function reaching one of 'handed_to'; where they wait is each such
call, with the locks held there (their own, and those they are entered
with and did not release).  Reads .P.task_private, .calls, .flows,
_decl_types(), _callers_of(); callers.entry_locks() asks lent_locks()
with the entry locks found so far and adds what it returns to the
functions of 'handed_to'.
"""
from . import csrc
from .lockstate import How
from .source import _short
from .tokutil import _scan_decls


class Lending:
    def lent_locks(self, entry):
        """{function key: {lock: How}}: for each function of 'handed_to'
        of a struct that "lends_locks", the locks held at every call
        where a task that holds one of the struct waits for it."""
        out = {}
        for tp in self.P.task_private.values():
            if not tp.get("lends_locks"):
                continue
            targets = set(tp["handed_to"])
            waits = self._lender_waits(tp["struct"], targets, entry)
            if not waits:
                continue
            common = set.intersection(*(set(h) for _, _, h in waits))
            fn, line, held = waits[0]
            for name in sorted(targets):
                for f2 in self.src.by_name.get(name, ()):
                    out.setdefault((f2.file, f2.name), {}).update({
                        n: How("%s, lent by %s() where it waits at %s:%d for the %s it "
                               "handed to %s()" % (held[n].what, fn.name, _short(fn.file),
                                                    line, tp["struct"], name), f2.line)
                        for n in common})
        return out

    def _lender_waits(self, struct, targets, entry):
        """[(function, line, {lock: How})]: each call by which a function
        holding a struct (its parameter or local) reaches a function of
        targets, with the locks held there."""
        reach = self._reaching(targets)
        out = []
        for callee in sorted(reach):
            for (caller, st, k) in self.calls.get(callee, ()):
                if caller.name in targets or caller.name in self._reached_from(targets):
                    continue
                if struct not in _own_types(self.src.toks[caller.file], caller):
                    continue
                held = dict(st.held)
                for n, how in entry.get((caller.file, caller.name), {}).items():
                    if n not in st.killed:
                        held.setdefault(n, how)
                out.append((caller, self.src.toks[caller.file][k].line, held))
        return out

    def _reaching(self, targets):
        """The functions of targets and those that call one, at any depth."""
        seen, todo = set(targets), list(targets)
        while todo:
            for c in self._callers_of(todo.pop()):
                if c not in seen:
                    seen.add(c)
                    todo.append(c)
        return seen

    def _reached_from(self, targets):
        """The functions a function of targets calls, at any depth."""
        memo = self.__dict__.setdefault("_lentbelow", {})
        key = frozenset(targets)
        if key not in memo:
            below = {}
            for callee, sites in self.calls.items():
                for (caller, _, _) in sites:
                    below.setdefault(caller.name, set()).add(callee)
            seen, todo = set(), list(targets)
            while todo:
                for c in below.get(todo.pop(), ()):
                    if c not in seen:
                        seen.add(c)
                        todo.append(c)
            memo[key] = seen
        return memo[key]


def _own_types(toks, fn):
    """The structs fn's parameters and locals point to (not the file's
    declarations, which are also the members of its structs)."""
    i = fn.body_start - 1
    while i > 0 and not (toks[i].kind == "id" and toks[i].text == fn.name
                         and toks[i + 1].text == "("):
        i -= 1
    types = {}
    _scan_decls(toks, i, fn.body_end, fn.body_start, types)
    return {csrc.struct_name(t) for t in types.values()}
