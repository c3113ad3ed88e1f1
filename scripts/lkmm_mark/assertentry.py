# SPDX-License-Identifier: GPL-2.0-only
"""Entry locks a later assertion implies: a function that, on every path,
hands its parameter bare to a callee that asserts a lock of that
parameter on every path, with nothing taking or dropping the lock in
between, is entered with the lock held.

    void obj_stale(struct obj *p)
    {
            ASSERT(obj_islocked(p));        // an assertion lock function
            ...
    }
    void obj_mark_bad(struct obj *p)
    {
            report(p);                      // entered with p's lock held
            obj_stale(p);
    }

A lock asserted at a callee's start is one its callers hold (callers.py
_own_entry_locks()); this carries the assertion up a chain of such calls,
so that what runs before the assertion holds it too.  Strict: the
assertion and each call are statements of the function body itself (not
in a branch, a loop or after a 'goto', 'return' or '?', '&&', '||' in the
statement), the argument is the parameter itself, never assigned or
taken the address of before, and the function has no lock event on the
lock before the call.

Reads .src, .flows (events, calls), .lockfns, .params(); sets nothing
(callers.py adds the result to each function's own entry locks).
"""
from . import csrc
from .lockmodes import group_lock, mode_name
from .lockstate import How
from .tokutil import _split

# a statement starting with one of these is a branch or a loop
_BRANCHES = frozenset(("if", "else", "for", "while", "do", "switch", "case", "default"))
_JUMPS = frozenset(("return", "goto", "break", "continue", "longjmp"))
_SHORT = frozenset(("?", "&&", "||"))


class AssertEntry:
    def assert_implied_locks(self):
        """(file, fn) -> {held key: How} the function is entered with
        because a callee it hands its parameter to asserts the lock."""
        need = self._own_asserts()
        derived = {}
        for _ in range(16):
            changed = False
            for key, fn in self.src.funcs.items():
                for req, how in self._via_calls(key, fn, need).items():
                    if req not in need.get(key, {}):
                        need.setdefault(key, {})[req] = how
                        derived.setdefault(key, {})[req] = how
                        changed = True
            if not changed:
                break
        return {key: {name: how for (name, _), how in reqs.items()}
                for key, reqs in derived.items()}

    def _own_asserts(self):
        """(file, fn) -> {(held key, parameter index): How}: the locks fn
        asserts on a parameter, unconditionally and before any event on them."""
        out = {}
        for key, fn in self.src.funcs.items():
            res = self.flows.get(key)
            if res is None:
                continue
            toks = self.src.toks[fn.file]
            for (k, op, name) in res.events:
                spec = self.lockfns.get(toks[k].text)
                if op != "assert" or not isinstance(spec, dict) or spec.get("op") != "assert":
                    continue
                held = _held_key(toks, k, spec, name)
                if held is None or not _before_clear(res.events, k, name) or \
                        not _on_every_path(toks, fn, k):
                    continue
                i = self._param_arg(fn, toks, k, spec.get("arg", 0), True)
                if i is not None:
                    out.setdefault(key, {})[(held, i)] = How(
                        "asserted held in %s()" % fn.name, toks[k].line)
        return out

    def _via_calls(self, key, fn, need):
        """The (lock, parameter index) pairs fn's unconditional calls ask
        of their callees' asserted parameters."""
        res = self.flows.get(key)
        out = {}
        if res is None:
            return out
        toks = self.src.toks[fn.file]
        for (k, callee, _) in res.calls:
            defs = self.src.by_name.get(callee, ())
            if len(defs) != 1:
                continue
            reqs = need.get((defs[0].file, defs[0].name))
            if not reqs or not _on_every_path(toks, fn, k):
                continue
            for (name, i), how in reqs.items():
                if (name, i) in out or not _before_clear(res.events, k, name.split(":")[0]):
                    continue
                j = self._param_arg(fn, toks, k, i, False)
                if j is not None:
                    out[(name, j)] = How("%s, which %s() calls on every path (line %d)"
                                         % (how.what.split(", which")[0], fn.name,
                                            toks[k].line), toks[k].line)
        return out

    def _param_arg(self, fn, toks, k, i, member_ok):
        """The index of fn's parameter that argument i of the call at
        toks[k] is (bare, or '&p->f' for an assertion), never assigned
        or its address taken before k; else None."""
        if k + 1 >= len(toks) or toks[k + 1].text != "(":
            return None
        args = _split(toks, k + 2, csrc.match_paren(toks, k + 1))
        if i >= len(args):
            return None
        a, b = args[i]
        if member_ok and b - a == 4 and toks[a].text == "&" and toks[a + 2].text == "->":
            a, b = a + 1, a + 2
        if b - a != 1 or toks[a].kind != "id":
            return None
        texts = [toks[a].text]
        params = self.params(fn)
        if texts[0] not in params or _changed(toks, fn.body_start, k, texts[0]):
            return None
        return params.index(texts[0])


def _before_clear(events, k, name):
    """No lock event on lock name (any mode) before token k."""
    return not any(j < k and op != "assert" and n.split("@")[0].split(":")[0] == name
                   for (j, op, n) in events)


def _changed(toks, lo, hi, p):
    """p assigned, or its address taken, between tokens lo and hi."""
    for j in range(lo + 1, hi):
        if toks[j].text != p:
            continue
        if toks[j - 1].text == "&" or toks[j + 1].text in ("=", "++", "--") or \
                toks[j + 1].text.endswith("=") and toks[j + 1].text not in ("==", "!=", "<=", ">="):
            return True
    return False


def _on_every_path(toks, fn, k):
    """toks[k] is in a statement of fn's body itself (depth 1), not a
    branch or a label, after no jump, nor after a '?', '&&' or '||' of
    its statement."""
    depth, start = 0, fn.body_start + 1
    for j in range(fn.body_start + 1, k):
        x = toks[j].text
        if x in _JUMPS:
            return False
        if x in ("{", "("):
            depth += 1
        elif x in ("}", ")"):
            depth -= 1
        if depth == 0 and x in (";", "{", "}"):
            start = j + 1
    if depth != sum(1 for j in range(start, k) if toks[j].text == "(") - \
            sum(1 for j in range(start, k) if toks[j].text == ")"):
        return False
    if toks[start].text in _BRANCHES:
        return False
    return not any(toks[j].text in _SHORT or toks[j].text == ":" for j in range(start, k))


def _held_key(toks, k, spec, name):
    """The held-set key of lock name the assertion call toks[k](...)
    asserts: 'L:r' when an entry of spec (or a variant the call's flag
    argument names) asserts it shared, as the lock flow's weaker mode of
    two named together; None when no entry names it."""
    c = csrc.match_paren(toks, k + 1)
    args = _split(toks, k + 2, c)
    found = []
    for sp in [spec] + spec.get("variants", []):
        w = sp.get("when_arg")
        if w:
            if w[0] >= len(args) or not any(
                    t.text == w[1] for t in toks[args[w[0]][0]:args[w[0]][1]]):
                continue
        if sp.get("lock") in (None, name) or group_lock(sp["lock"], sp) == name:
            found.append(mode_name(name, sp))
    if not found:
        return None
    return name + ":r" if any(f != name for f in found) else name
