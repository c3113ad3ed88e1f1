# SPDX-License-Identifier: GPL-2.0-only
"""Lock regions inside one function: a must-hold data-flow over its tokens.

The state at a point is the set of locks held on *every* path reaching it
(intersection at joins).  Lock, unlock and trylock calls come from the
policy data (kernel primitives and subsystem wrappers); a successful
trylock holds the lock only on its success branch; lockdep_assert_held()
adds the lock from that point on.  Locks held by the caller enter as a
symbolic set: `killed` records which of them the function itself released,
so the flow is computed once and combined with the callers' sets later.

Control flow handled: blocks, if/else, loops (including for_each-style
macros; while (1) and for (;;) are left only by break), switch/case,
break/continue, return, forward goto to labels.
Backward gotos end their path (the label's state is already fixed).
"""
from . import correlate, heldobjects, lockobjects, lockraise
from .csrc import remembered
from .lockconds import Conds
from .lockmodes import HANDED, group_lock, hold_also, mode_name
from .lockstate import How, State, merge

KEYWORDS = {"if", "else", "while", "for", "do", "switch", "case", "default", "return",
            "goto", "break", "continue", "sizeof", "typeof", "__typeof__", "__typeof",
            "_Alignof", "__alignof__", "asm", "__asm__", "volatile"}


class FlowResult:
    def __init__(self):
        self.at = {}          # token index -> State (for the indexes asked for)
        self.calls = []       # (token index, callee name, State)
        self.events = []      # (token index, op, lock name)


# _groups_of()'s memo: {lock functions' id: (them, {name: group keys})}
_GROUPS = {}


class LockFlow(Conds):
    """Run over toks[lo:hi] (the body including braces)."""

    def __init__(self, toks, lo, hi, lockfns, resolve, want, guards=None, returned=None,
                 held=None):
        self.t = toks
        self.held = heldobjects.Held(toks, lo, hi, held, lockfns)   # held_members
        self.returned = returned    # name -> the flag values it returns, or None
        self.guards = guards or NO_GUARDS   # state guards (guards.py)
        self.lo = lo
        self.hi = hi
        self.lockfns = lockfns      # name -> spec dict
        self.resolve = resolve      # (arg_lo, arg_hi) -> lock name or None
        self.want = want            # set of token indexes to record
        self.res = FlowResult()
        self.labels = {}            # label -> State merged from gotos
        self.loops = []             # stack of [break_state, continue_state]
        self.err_ptr = {}           # v -> locks 'v = f()' took if it is no error pointer
        self.ret0 = {}              # v -> (locks 'v = f()' took if v is 0, the local f hands them in)
        # the locals whose being 0 the flow follows (correlate.py), for
        # the guard states kept while one is not 0
        self.tracked = correlate.tracked_locals(toks, lo, hi) if self.guards.any else ()

    def run(self, entry=None):
        st = entry or State()
        self.block(self.lo, st)
        return self.res

    # -- statements ------------------------------------------------------
    def block(self, i, st):
        """toks[i] is '{'; returns (index after '}', state)."""
        end = self._match(i)
        j = i + 1
        while j < end:
            j, st = self.stmt(j, st, end)
        return end + 1, st

    def _match(self, i):
        from .csrc import match_paren
        return min(match_paren(self.t, i), self.hi)

    def stmt(self, i, st, end):
        t = self.t
        if i >= end:
            return end, st
        tx = t[i].text
        if st is None:
            # unreachable code, unless it is a label
            if t[i].kind == "id" and i + 1 < end and t[i + 1].text == ":" and tx not in KEYWORDS:
                pass
            elif tx in ("case", "default"):
                pass
            else:
                return self._skip_stmt(i, end), None
        if tx == "{":
            return self.block(i, st)
        if tx == ";":
            return i + 1, st
        if tx == "if" and i + 1 < end and t[i + 1].text == "(":
            return self._if_stmt(i, st, end)
        if tx in ("while", "switch", "for") and i + 1 < end and t[i + 1].text == "(":
            return self._loop_stmt(i, st, end)
        if tx == "do":
            return self._do_stmt(i, st, end)
        if tx == "return":
            j = self._find_semi(i, end)
            self.expr(i + 1, j, st)
            return j + 1, None
        if tx == "goto" and i + 1 < end:
            lab = t[i + 1].text
            self.labels[lab] = merge(self.labels.get(lab), st)
            return self._find_semi(i, end) + 1, None
        if tx in ("break", "continue"):
            if self.loops:
                k = 0 if tx == "break" else 1
                self.loops[-1][k] = merge(self.loops[-1][k], st)
            return self._find_semi(i, end) + 1, None
        if tx in ("case", "default"):
            j = i
            while j < end and t[j].text != ":":
                j += 1
            entry = self.loops[-1][2] if self.loops and len(self.loops[-1]) > 2 else None
            if entry is not None and tx == "case" and self.guards.any and self.guards.remembered:
                # 'switch (x->f) case K:' of a field remembering a configuration
                g = self.guards.case(t, *self.loops[-1][3], i + 1, j, self.resolve)
                entry = self.guards.enter(entry, g, True, t[i].line) if g else entry
            return j + 1, merge(st, entry)
        if t[i].kind == "id" and i + 1 < end and t[i + 1].text == ":" and tx not in KEYWORDS:
            st = merge(st, self.labels.get(tx))
            back = [k for k in range(i + 2, self.hi - 1)
                    if t[k].text == "goto" and t[k + 1].text == tx] if st and st.zero else ()
            return i + 2, correlate.forget_in(t, i, back[-1], st) if back else st
        # for_each-style macro: IDENT ( ... ) followed by a statement, not ';'
        if t[i].kind == "id" and i + 1 < end and t[i + 1].text == "(" and tx not in KEYWORDS:
            c = self._match(i + 1)
            if c + 1 < end and t[c + 1].text == "{" and tx not in self.lockfns:
                st = self.expr(i + 2, c, st)
                return self._loop_body(c + 1, st, st, end)
        j = self._find_semi(i, end)
        st = self.expr(i, j, st)
        return j + 1, st

    def _if_stmt(self, i, st, end):
        """'if (...) S [else S]' at toks[i], with the flags a branch leaves
        locks held under ('if (!v) unlock(L);', 'if (c) { lock(L); v = true; }')."""
        t = self.t
        c = self._match(i + 1)
        st_then, st_else = self.cond(i + 2, c, st)
        z = correlate.zero_test(t, i + 2, c, self.tracked) if self.tracked else None
        if z is not None:
            # the branch that finds v 0 knows it
            v, when_true = z
            st_then, st_else = [s if s is None or not w else correlate.known_zero(s, v)
                                for s, w in ((st_then, when_true), (st_else, not when_true))]
        j, s1 = self.stmt(c + 1, st_then, end)
        key = correlate.key_of(t, i + 2, c)
        if j < end and t[j].text == "else":
            j, s2 = self.stmt(j + 1, st_else, end)
            out = merge(s1, s2)
            if out is not None:
                correlate.remember(out, s1, s2, key)
            return j, out
        out = merge(s1, st_else)
        if out is not None:
            correlate.remember(out, s1, st_else, key)
        # 'if (!v) unlock(L);': L stays held on the paths where v is true
        if s1 is not None and st_else is not None and c == i + 4 and \
                t[i + 2].text == "!" and t[i + 3].kind == "id":
            for k, h in st_else.held.items():
                if k not in s1.held and k not in out.held and k != "irqs-off":
                    out.cond[k] = (t[i + 3].text, h)
        # 'if (c) { lock(L); v = true; }' with 'bool v = false': L is
        # held on the paths where v is true
        if s1 is not None and st_else is not None and not self.loops and \
                not self._jumped_back(i):
            got = [k for k in s1.held if k not in st_else.held and k not in out.held
                   and k != "irqs-off"]
            v = self._flag_set(c + 1, j, i) if got else None
            if v is not None:
                for k in got:
                    out.cond[k] = (v, s1.held[k])
        return j, out

    def _loop_stmt(self, i, st, end):
        """'while (...)', 'switch (...)' or 'for (...)' and its body at toks[i]."""
        t = self.t
        tx = t[i].text
        if tx in ("while", "switch"):
            c = self._match(i + 1)
            st_body, st_exit = self.cond(i + 2, c, st)
            if tx == "switch":
                st_exit = None
            forever = tx == "while" and [x.text for x in t[i + 2:c]] in (["1"], ["true"])
            g = self.guards.test(t, i + 2, c, self.resolve) \
                if tx == "while" and self.guards.any else None
            return self._loop_body(c + 1, st_body, st_exit, end,
                                   switch=(i + 2, c) if tx == "switch" else None,
                                   forever=forever, exit_guard=g)
        # 'for'
        c = self._match(i + 1)
        st = self.expr(i + 2, c, st)
        # for (init; ; step): no condition, left only by break/return/goto
        semis = [k for k in range(i + 2, c) if t[k].text == ";"]
        forever = len(semis) == 2 and semis[1] == semis[0] + 1
        return self._loop_body(c + 1, st, st, end, forever=forever)

    def _do_stmt(self, i, st, end):
        """'do S while (...);' at toks[i]."""
        t = self.t
        self.loops.append([None, None])
        j = self._skip_stmt(i + 1, end)
        if j < end and t[j].text == "while" and j + 1 < end and t[j + 1].text == "(":
            st = correlate.forget_in(t, i, self._match(j + 1), st)
        j, s = self.stmt(i + 1, st, end)
        brk, cont = self.loops.pop()
        s = merge(s, cont)
        if j < end and t[j].text == "while" and j + 1 < end and t[j + 1].text == "(":
            c = self._match(j + 1)
            if s is not None:
                s = self.expr(j + 2, c, s)
            j = c + 1
            if j < end and t[j].text == ";":
                j += 1
        return j, merge(s, brk)

    def _loop_body(self, i, st_body, st_exit, end, switch=False, forever=False,
                   exit_guard=None):
        frame = [None, None]
        if switch:
            # [break, continue, entry, the subject's token range]
            frame += [st_body, switch]
        elif st_body is not None and st_body.zero:
            # a variable the body may store is not known in its next round
            st_body = correlate.forget_in(self.t, i, self._skip_stmt(i, end), st_body)
        self.loops.append(frame)
        # a switch body is entered at its labels only (each gets its state)
        j, s = self.block(i, None) if switch and self.t[i].text == "{" else \
            self.stmt(i, st_body, end)
        frame = self.loops.pop()
        if forever:
            # while (1) / for (;;): the only way out is a break
            return j, frame[0]
        if switch:
            return j, merge(merge(st_exit, frame[0]), s)
        out = merge(merge(st_exit, s), frame[1])
        if exit_guard is not None and out is not None:
            # 'while (!list_empty(x))' is left, but by a break, only once the
            # test found the state that ends it (guards.py)
            out = self.guards.enter(out, exit_guard, False, self.t[i].line)
        return j, merge(out, frame[0])

    def _find_semi(self, i, end):
        t = self.t
        depth = 0
        while i < end:
            x = t[i].text
            if x in "([{":
                depth += 1
            elif x in ")]}":
                depth -= 1
                if depth < 0:
                    return i
            elif x == ";" and depth == 0:
                return i
            i += 1
        return end

    def _skip_stmt(self, i, end):
        t = self.t
        if t[i].text == "{":
            return self._match(i) + 1
        if t[i].text in ("if", "while", "for", "switch") and i + 1 < end and t[i + 1].text == "(":
            c = self._match(i + 1)
            j = self._skip_stmt(c + 1, end) if c + 1 < end else end
            if t[i].text == "if" and j < end and t[j].text == "else":
                j = self._skip_stmt(j + 1, end)
            return j
        if t[i].text == "do":
            j = self._skip_stmt(i + 1, end)
            if j < end and t[j].text == "while":
                return self._find_semi(j, end) + 1
            return j
        if t[i].kind == "id" and i + 1 < end and t[i + 1].text == "(":
            c = self._match(i + 1)
            if c + 1 < end and t[c + 1].text == "{":
                return self._match(c + 1) + 1
        return self._find_semi(i, end) + 1

    def _picks(self, spec, alo, ahi):
        """The entries of a lock wrapper this call (arguments alo..ahi) is,
        among its variants, with the lock each names: the first that
        matches, or, for entries picked by an argument token, every one
        whose token the argument names ('A | B': a wrapper that takes two
        locks in one call).  Two modes of one lock named together (an
        assertion that either is held) hold the weaker."""
        vals = self._arg_values(spec, alo, ahi)
        if vals is not None:
            return self._picks_by_values(spec, vals)
        out = {}
        for sp in [spec] + spec.get("variants", []):
            name = self._lock_name(sp, alo, ahi)
            if name is None:
                continue
            if not sp.get("when_arg"):
                return [(sp, name)] if not out else list(out.values())
            if name not in out or mode_name(name, sp) != name:
                out[name] = (sp, name)
        return list(out.values())

    def _arg_values(self, spec, alo, ahi):
        """The values a local handed as the argument that picks the entry
        ('foo_lock(x, mode)' after 'mode = A;' and 'mode = B;') may
        hold (correlate.flag_values()), or None."""
        w = spec.get("when_arg")
        if not w:
            return None
        args = self._split_args(alo, ahi)
        if w[0] >= len(args) or args[w[0]][1] - args[w[0]][0] != 1:
            return None
        a = args[w[0]][0]
        if self.t[a].kind != "id":
            return None
        return correlate.flag_values(self.t, self.lo, self.hi, self.t[a].text, self.returned)

    def _picks_by_values(self, spec, vals):
        """The entries a call takes whichever of the values vals its
        argument holds: a lock every value names, in the weakest mode one
        of them names; a release drops every lock any value names."""
        per = []
        for v in vals:
            got = {}
            for sp in [spec] + spec.get("variants", []):
                w = sp.get("when_arg")
                if not w or not sp.get("lock") or not correlate.names_flag(v, w[1]):
                    continue
                name = group_lock(sp["lock"], sp)
                if name not in got or mode_name(name, sp) != name:
                    got[name] = sp
            per.append(got)
        names = set(per[0]).intersection(*per[1:])
        if spec["op"] == "release":
            names = set().union(*per)
        out = []
        for name in sorted(names):
            sps = [g[name] for g in per if name in g]
            out.append((next((x for x in sps if mode_name(name, x) != name), sps[0]), name))
        return out

    def _lock_name(self, spec, alo, ahi):
        args = self._split_args(alo, ahi)
        w = spec.get("out_arg")
        if w is not None and (w >= len(args) or
                              [x.text for x in self.t[args[w][0]:args[w][1]]] in (["NULL"], ["0"])):
            # a wrapper that hands the locked object back through this
            # argument (handback.py) takes nothing when it is NULL
            return None
        w = spec.get("when_arg")
        if w:
            # only the calls whose argument w[0] is the token w[1] (one
            # lockdep map of several a wrapper takes)
            if w[0] >= len(args):
                return None
            if not self._names_flag(args[w[0]], w[1]):
                return None
        w = spec.get("when_field")
        if w:
            # only the calls whose argument w[0] is the field w[1]
            # (atomic_inc(&fs->scans_running), not every atomic_inc())
            if w[0] >= len(args):
                return None
            a, b = args[w[0]]
            if self.resolve(a, b) != w[1]:
                return None
        w = spec.get("when_mentions")
        if w:
            # only the calls whose argument w[0] reads the field w[1]
            # (wait_event(q, atomic_read(&t->nr_writers) == 0))
            if w[0] >= len(args) or not self._mentions(args[w[0]], w[1]):
                return None
        if spec.get("lock"):
            return group_lock(spec["lock"], spec)
        # argument number spec['arg'] of the call
        n = spec.get("arg", 0)
        if n >= len(args):
            return None
        a, b = args[n]
        name = self.resolve(a, b)
        return group_lock(name, spec) if name is not None else None

    def _names_flag(self, arg, token):
        """Argument arg is the token, or an or-ed set of flags one of which
        is the token ('A', 'A | B', '(A|B)'), or the number the token is
        (correlate.names_flag())."""
        a, b = arg
        while b - a > 2 and self.t[a].text == "(" and self._match(a) == b - 1:
            a, b = a + 1, b - 1
        return correlate.names_flag([x.text for x in self.t[a:b]], token)

    def _mentions(self, arg, field):
        from .csrc import mentions
        return mentions(self.t, arg, field, self.resolve)

    def _groups_of(self, name):
        """Held-set keys of every group the lock functions declare for name
        (remembered for the lock functions of the last flow: every
        function's flow has the same ones)."""
        memo = remembered(_GROUPS, self.lockfns, dict)
        out = memo.get(name)
        if out is None:
            out = set()
            for spec in self.lockfns.values():
                for sp in [spec] + spec.get("variants", []):
                    if sp.get("lock") == name and sp.get("mode") == "group":
                        out.add("%s{%s}:r" % (name, sp["group"]))
            out = memo[name] = frozenset(out)
        return out

    def _split_args(self, lo, hi):
        t = self.t
        out = []
        depth = 0
        start = lo
        for k in range(lo, hi):
            x = t[k].text
            if x in "([{":
                depth += 1
            elif x in ")]}":
                depth -= 1
            elif x == "," and depth == 0:
                out.append((start, k))
                start = k + 1
        if start < hi:
            out.append((start, hi))
        return out

    def _call_args(self, k):
        """The argument ranges of the call toks[k](...)."""
        return self._split_args(k + 2, self._match(k + 1))

    def _record_range(self, lo, hi, st):
        for k in range(lo, hi):
            if k in self.want:
                self.res.at[k] = lockobjects.at_access(self.t, k, st)

    def expr(self, lo, hi, st, skip_events=False):
        """Tokens lo..hi-1 in order; lock calls change the state."""
        if st is None:
            return None
        t = self.t
        want, tracked, ret0, stores = self.want, self.tracked, self.ret0, correlate.STORES
        k = lo
        guards = self.guards if self.guards.any else None
        while k < hi:
            tk = t[k]
            text = tk.text
            if k in want:
                self.res.at[k] = self.held.at_access(k, lockobjects.at_access(t, k, st))
                if guards is not None and text in guards.members:
                    self.res.at[k] = guards.deref_state(t, k, self.res.at[k], self.resolve,
                                                        self.hi)
            if guards is not None and text in guards.members:
                st = guards.at_member(t, k, hi, st, self.resolve, self.lo, self.hi)
            if text in tracked:
                st = correlate.zero_step(t, k, st)
            if text in ret0 and k + 1 < hi and t[k + 1].text in stores and \
                    not correlate.negative_store(t, k):
                del ret0[text]             # what 'v = f()' said is gone
            if tk.kind != "id" or k + 1 >= hi:
                k += 1
                continue
            if st.cond and t[k + 1].text in stores:
                # a local a remembered condition names is assigned again
                kept = correlate.assigned(st.cond, tk.text, correlate.negative_store(t, k))
                if len(kept) != len(st.cond):
                    st = st.copy()
                    st.cond = kept
            if guards is not None and text in guards.asserts and t[k + 1].text == "(":
                st = self._asserted(k, st)
            if t[k + 1].text == "(" and text not in KEYWORDS:
                spec = self.held.takes.get(k) or self.lockfns.get(text)
                self.res.calls.append((k, text, self.guards.for_call(
                    lockobjects.at_call(t, k, self.held.at_call(k, st, self._call_args),
                                        self._call_args))))
                if spec and not skip_events:
                    c = self._match(k + 1)
                    # record the argument tokens with the state before the call
                    self._record_range(k + 1, c, st)
                    before = st
                    for sp, name in self._picks(spec, k + 2, c):
                        st = self._apply(sp, name, st, tk.line, k)
                    if spec.get("err_ptr") and k >= 2 and t[k - 1].text == "=" and \
                            t[k - 2].kind == "id":
                        # 'v = f()': an error pointer when nothing is taken
                        self.err_ptr[t[k - 2].text] = [n for n in st.held
                                                       if n not in before.held]
                    if spec["op"] == "acquire_ret0":
                        self.note_ret0(k, c, before, st)
                    k = c + 1
                    continue
            k += 1
        return st

    def _asserted(self, k, st):
        """st after the assertion call toks[k](...) of a guard's state
        (guards.py): the state it asserts holds from there on."""
        g = self.guards.test(self.t, k + 2, self._match(k + 1), self.resolve)
        if g is None:
            return st
        return self.guards.enter(st, g, self.guards.asserts[self.t[k].text], self.t[k].line,
                                 asserted=True)

    def _apply(self, spec, name, st, line, k):
        op = spec["op"]
        if name is None:
            return st
        st = st.copy()
        if spec.get("irq"):
            if op in ("acquire", "acquire_ret0"):
                st.held["irqs-off"] = How(spec["name"], line)
            elif op == "release":
                st.held.pop("irqs-off", None)
                st.killed = st.killed | {"irqs-off"}
        if op in ("acquire", "acquire_ret0", "trylock"):
            # trylock outside a condition: unknown outcome, nothing held
            if op == "acquire" or op == "acquire_ret0":
                args = self._call_args(k)
                st.held[mode_name(name, spec)] = lockraise.taken(spec, lockobjects.taken(
                    spec, How(spec["name"], line), self.t, args), self.t, self.lo, self.hi,
                    k, args)
                hold_also(st, spec, How(spec["name"], line))
                self.res.events.append((k, "acquire", name))
        elif op == "release":
            # (and the same lock a wrapper handed back: handback.py)
            gone = {name, name + ":r", name + HANDED, name + HANDED + ":r"}
            for extra in spec.get("also", ()):
                # the other locks it took with its own ('also') go with it
                gone |= {extra["lock"], extra["lock"] + ":r"}
            if spec.get("mode") != "group":
                # a lock taken in several groups (one per exclusive operation)
                # released without naming one: whichever group is held
                gone |= {k for k in st.held if k.startswith(name + "{")}
                gone |= self._groups_of(name)
            kept = lockobjects.released(spec, st, gone, self.t, self._call_args(k))
            for nm in gone - kept:
                st.held.pop(nm, None)
                st.cond.pop(nm, None)
            st.killed = st.killed | gone
            self.guards.released(st, gone)
            self.res.events.append((k, "release", name))
        elif op == "assert":
            st.held[mode_name(name, spec)] = How(spec["name"], line)
            self.res.events.append((k, "assert", name))
        elif op == "downgrade":
            st.held.pop(name, None)
            st.held[name + ":r"] = How(spec["name"], line)
        return st


class _NoGuards:
    any = False
    members = frozenset()
    remembered = {}
    asserts = {}

    def released(self, st, gone):
        pass

    def for_call(self, st):
        return st


NO_GUARDS = _NoGuards()
