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

A lock a task hands to the I/O it submits (policies/ 'io_locks'): the
task holds it where it calls a 'submit' function, and the I/O keeps it
until the 'completion' function, run once the whole I/O is done,
releases it (or wakes the submitter, which still holds it).  So the
callbacks the submission registers that run the completion ('init_work(&w,
fn)' where fn calls it, registered by the submit functions or a function
they reach, or by a callback so registered: a bio's end_io that queues
the work) are entered with it, for the submitter (io_lent_locks()); a
callback of the submission that does not call the completion (a bio's
end_io, one per part, run beside the submitter and the other parts)
gets nothing.  The completion's other callers must hold it themselves
(the fixed point), and the fact holds only where every submit function
is entered with it (io_unheld(), asked after the fixed point; a
completion that resubmits is a caller of the submit function that holds
it when the completion does).  Reads .P.io_locks, .flows, .src.toks.

With 'handoff', the calls that send one part of the I/O out: a part's
callback (registered by a function that calls one) runs only while
the I/O owns the lock, and ends before the completion lets it go, so
io_parts_apart() keeps it apart from whatever holds the lock in every
calling context, except the submitter's own code after a handoff
(_io_post(): past the first call reaching one, in a loop around one,
after a label before one, and whatever it calls there).  Asked by
pairs.py; reads .calls, .entry, _locksets().
"""
import re

from . import csrc
from .accessors import all_macro_defs
from .contexts import _callback_use
from .lockmodes import mode_name
from .lockstate import How
from .source import _short
from .tokutil import _is_label, _stmt_end, own_decls


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

    def io_lent_locks(self):
        """{function key: {lock: How}}: the callbacks each I/O lock's
        submission registers that call its completion (policies/
        'io_locks'), with the lock."""
        out = {}
        for spec in self.P.io_locks:
            name = mode_name(spec["lock"], spec)
            for f2, line, via in self._io_callbacks(spec):
                out.setdefault((f2.file, f2.name), {})[name] = How(
                    "%s, handed to the I/O its caller submits (%s() registers %s() at "
                    "%s:%d, which runs %s(): %s)" % (
                        spec["lock"], via.name, f2.name, _short(via.file), line,
                        "()/".join(spec["completion"]), spec["reason"]), f2.line)
        return out

    def io_unheld(self, lent, entry):
        """{function key: locks}: the locks io_lent_locks() gave (lent)
        whose submit functions are not all entered with them (entry):
        the I/O has no lock of its submitter to keep."""
        bad = set()
        for spec in self.P.io_locks:
            name = mode_name(spec["lock"], spec)
            for s in spec["submit"]:
                for f in self.src.by_name.get(s, ()):
                    e = entry.get((f.file, f.name), ())
                    if name not in e and not (name.endswith(":r") and name[:-2] in e):
                        bad.add(name)
        return {key: {n for n in held if n in bad} for key, held in lent.items()
                if bad & set(held)}

    def _io_callbacks(self, spec, parts=False):
        """[(function, line, registering function)]: the callbacks
        registered by spec's submit functions and what they reach, not
        through the completion, that call the completion (parts: those
        that do not, a part's end_io)."""
        stop = set(spec["completion"])
        seen, todo, out = set(spec["submit"]), list(spec["submit"]), []
        while todo:
            for fn in self.src.by_name.get(todo.pop(), ()):
                res = self.flows.get((fn.file, fn.name))
                nxt = [(c, None) for (_, c, _) in (res.calls if res else ())]
                nxt += _registered(self.src.toks[fn.file], fn, self.src.by_name,
                                   self.P.non_calling)
                for name, line in nxt:
                    if name in stop or name not in self.src.by_name:
                        continue
                    if line is not None and self._calls_any(name, stop) != parts:
                        out += [(f2, line, fn) for f2 in self.src.by_name[name]]
                    if name not in seen:
                        seen.add(name)
                        todo.append(name)
        return out

    def _calls_any(self, name, names):
        for fn in self.src.by_name.get(name, ()):
            res = self.flows.get((fn.file, fn.name))
            if any(c in names for (_, c, _) in (res.calls if res else ())):
                return True
        return False

    def io_parts_apart(self, a, b):
        """a and b are kept apart by an I/O lock handed off part by part
        (policies/ 'io_locks' with 'handoff'): one is in a part's
        callback (a bio's end_io), the other holds the lock in every
        calling context and is not the submitter's after a handoff."""
        parts = self._io_parts()
        for x, y in ((a, b), (b, a)):
            if (x.file, x.fn) not in parts or (y.file, y.fn) in parts:
                continue
            for name, post in parts[(x.file, x.fn)]:
                sets = self._locksets(y)
                if sets and not _io_post_at(post, y) and all(name in s for s in sets):
                    return True
        return False

    def _io_parts(self):
        """{callback key: [(lock, _io_post() of its spec)]}: the part
        callbacks of each I/O lock with 'handoff' whose submit functions
        are all entered with it."""
        memo = self.__dict__.get("_iopartsmemo")
        if memo is not None:
            return memo
        memo = self.__dict__["_iopartsmemo"] = {}
        for spec in self.P.io_locks:
            name = mode_name(spec["lock"], spec)
            if not spec.get("handoff") or name.endswith(":r") or any(
                    name not in self.entry.get((f.file, f.name), ())
                    for s in spec["submit"] for f in self.src.by_name.get(s, ())):
                continue
            edges = self._io_edges()
            # a part's callback: registered where the part is handed off
            found = [(f2, via.name) for f2, _, via in self._io_callbacks(spec, parts=True)
                     if any(c in spec["handoff"] for c, _, _ in edges.get(via.name, ()))]
            post = self._io_post(spec, {v for _, v in found})
            for f2, _ in found:
                memo.setdefault((f2.file, f2.name), []).append((name, post))
        return memo

    def _io_post(self, spec, handing):
        """{function name: None (all of it) or [(file, lo, hi)] token ranges}:
        where the submission (spec's submit functions and what they
        call, not the completion) may run after a handoff call of one of
        handing (the functions that register a part's callback): past
        the first call that reaches one, in a loop around one, after a
        label before one, and all of a function called there."""
        edges = self._io_edges()
        stop, hand = set(spec["completion"]), set(spec["handoff"])
        reach, todo = set(spec["submit"]), list(spec["submit"])
        while todo:
            for c, _, _ in edges.get(todo.pop(), ()):
                if c not in stop and c not in reach:
                    reach.add(c)
                    todo.append(c)
        hands, grew = set(), True
        while grew:
            new = {n for n in reach if any(c in hands or c in hand and n in handing
                                           for c, _, _ in edges.get(n, ()))}
            grew, hands = new != hands, new
        post, todo = {n: [] for n in spec["submit"]}, list(spec["submit"])
        while todo:
            n = todo.pop()
            rng = post[n]
            if rng is not None:
                for f in self.src.by_name.get(n, ()):
                    rng += [(f.file, lo, hi) for lo, hi in _post_ranges(
                        self.src.toks[f.file], f, [k for c, fl, k in edges.get(n, ())
                                                   if fl == f.file and (c in hands or c in hand
                                                                        and n in handing)])]
            for c, fl, k in edges.get(n, ()):
                if c in stop or c not in reach:
                    continue
                late = rng is None or any(x == fl and lo <= k <= hi for x, lo, hi in rng)
                if c not in post or (late and post[c] is not None):
                    post[c] = None if late else []
                    todo.append(c)
        return post

    def _io_edges(self):
        """{caller name: [(callee name, caller's file, call token)]},
        a call of a function-like macro standing for the functions its
        body names."""
        memo = self.__dict__.get("_ioedges")
        if memo is None:
            macros = {}
            for _, (m, _, body) in all_macro_defs(self.src):
                macros.setdefault(m, set()).update(
                    re.findall(r"\b(\w+)\s*\(", " ".join(t for _, t in body[1:]) +
                               body[0][1].split(")", 1)[-1]))
            memo = self.__dict__["_ioedges"] = {}
            for callee, sites in self.calls.items():
                for name in _expand(callee, macros, self.src.by_name):
                    for (caller, _, k) in sites:
                        memo.setdefault(caller.name, []).append((name, caller.file, k))
        return memo


def _registered(toks, fn, names, non_calling):
    """[(name, line)]: the target's functions fn's body hands on as a
    callback ('x->m = f', 'reg(&w, f)'), not calls."""
    out = []
    for i in range(max(fn.body_start, 3), min(fn.body_end, len(toks) - 1)):
        t = toks[i]
        if t.kind != "id" or t.text not in names or toks[i + 1].text == "(":
            continue
        use = _callback_use(toks, i)
        if use is not None and use[0] != "thread" and use[2] not in non_calling:
            out.append((t.text, t.line))
    return out


def _own_types(toks, fn):
    """The structs fn's parameters and locals point to (not the file's
    declarations, which are also the members of its structs)."""
    return {csrc.struct_name(t) for t in own_decls(toks, fn).values()}


def _expand(name, macros, names, depth=4):
    """The functions a call of name runs: itself, or those a macro's body
    names (nested macros a few levels down)."""
    if name in names or name not in macros or depth == 0:
        return {name}
    out = set()
    for n in macros.get(name, ()):
        if n != name:
            out |= _expand(n, macros, names, depth - 1)
    return out


def _post_ranges(toks, fn, calls):
    """[(lo, hi)]: the token ranges of fn that may run after one of calls
    (token indexes of handoff calls): past the first, a loop whose body
    holds one (its condition too), and from a label before the last."""
    if not calls:
        return []
    end = fn.body_end
    out = [(min(calls) + 1, end)]
    out += [(i, end) for i in range(fn.body_start, max(calls)) if _is_label(toks, i)]
    for i in range(fn.body_start, max(calls)):
        if toks[i].text in ("for", "while", "do") or \
                toks[i].text.startswith(("list_for_each", "for_each")):
            j = i + 1 if toks[i].text == "do" else csrc.match_paren(toks, i + 1) + 1
            if toks[i].text != "do" and toks[i + 1].text != "(":
                continue
            e = csrc.match_paren(toks, j) if toks[j].text == "{" else _stmt_end(toks, j, end)
            if any(i <= k <= e for k in calls):
                out.append((i, _stmt_end(toks, e + 1, end) if toks[i].text == "do" else e))
    return out


def _io_post_at(post, acc):
    """Is access acc where the submission may run after a handoff
    (post: _io_post())?"""
    if acc.fn not in post:
        return False
    rng = post[acc.fn]
    return rng is None or any(f == acc.file and lo <= acc.tok <= hi for f, lo, hi in rng)
