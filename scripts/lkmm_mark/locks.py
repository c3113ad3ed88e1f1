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
import functools

from . import correlate, csrc
from .policy import GUARD, MESSAGE

KEYWORDS = {"if", "else", "while", "for", "do", "switch", "case", "default", "return",
            "goto", "break", "continue", "sizeof", "typeof", "__typeof__", "__typeof",
            "_Alignof", "__alignof__", "asm", "__asm__", "volatile"}


class How:
    """Where a held lock comes from, for the reason text."""
    __slots__ = ("what", "line")

    def __init__(self, what, line):
        self.what = what
        self.line = line

    def text(self):
        return "%s at line %d" % (self.what, self.line)


class State:
    """held: lock -> How, on every path.  cond: lock -> (variable, How),
    held on every path where the local variable is true, after
    'if (!v) unlock(L);' (a lock kept only while a flag says so)."""
    __slots__ = ("held", "killed", "cond")

    def __init__(self, held=None, killed=frozenset(), cond=None):
        self.held = held if held is not None else {}
        self.killed = killed
        self.cond = cond if cond is not None else {}

    def copy(self):
        return State(dict(self.held), self.killed, dict(self.cond))


def merge(a, b):
    if a is None:
        return b.copy() if b is not None else None
    if b is None:
        return a.copy()
    held = {k: v for k, v in a.held.items() if k in b.held}
    killed = a.killed | b.killed
    # a lock released and taken again on one path (held) and untouched on
    # the other is held at the merge exactly when the function is entered
    # with it: not killed ('unlock(L); cond_resched(); lock(L);' in a loop)
    back = {k for x, y in ((a, b), (b, a)) for k in x.held
            if k not in y.held and k not in y.killed}
    if back & killed:
        killed = killed - back
    cond = {}
    if a.cond or b.cond:
        # held when v on one side, held (always, or when v) on the other
        for x, y in ((a, b), (b, a)):
            for k, (v, h) in x.cond.items():
                if k not in held and (k in y.held or y.cond.get(k, ("",))[0] == v):
                    cond[k] = (v, h)
    return State(held, killed, cond)


class FlowResult:
    def __init__(self):
        self.at = {}          # token index -> State (for the indexes asked for)
        self.calls = []       # (token index, callee name, State)
        self.events = []      # (token index, op, lock name)


class LockFlow:
    """Run over toks[lo:hi] (the body including braces)."""

    def __init__(self, toks, lo, hi, lockfns, resolve, want, guards=None):
        self.t = toks
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

    def _jumped_back(self, at):
        """A goto after toks[at] jumps to a label before it (a loop made of
        a label and a goto: a flag set in one round is still set in the
        next)."""
        t = self.t
        before = {t[k].text for k in range(self.lo + 1, at)
                  if t[k].kind == "id" and t[k + 1].text == ":" and
                  t[k - 1].text in (";", "{", "}")}
        return any(t[k].text == "goto" and t[k + 1].text in before
                   for k in range(at, self.hi - 1))

    def _flag_set(self, blo, bhi, at):
        """The first local flag the block toks[blo:bhi] sets to true at its
        top level ('v = true;' or 'v = 1;') that is false everywhere
        before toks[at]: declared 'bool v = false;' (or '= 0') in this
        function and assigned nowhere else before; else None."""
        t = self.t
        depth = 0
        for k in range(blo, bhi - 3):
            x = t[k].text
            if x == "{":
                depth += 1
            elif x == "}":
                depth -= 1
            if depth != 1 or t[k].kind != "id" or t[k + 1].text != "=" or \
                    t[k + 2].text not in ("true", "1") or t[k + 3].text != ";" or \
                    t[k - 1].text not in (";", "{", "}"):
                continue
            v = t[k].text
            decl = None
            for q in range(self.lo + 1, at):
                if t[q].text == v and t[q + 1].text == "=" and t[q - 1].text not in (".", "->"):
                    if decl is not None or t[q + 2].text not in ("false", "0") or \
                            t[q + 3].text != ";" or t[q - 1].text not in ("bool", "int"):
                        decl = None
                        break
                    decl = q
                elif t[q].text == v and t[q - 1].text == "&":
                    decl = None
                    break
            if decl is not None:
                return v
        return None

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
            c = self._match(i + 1)
            st_then, st_else = self.cond(i + 2, c, st)
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
        if tx in ("while", "switch") and i + 1 < end and t[i + 1].text == "(":
            c = self._match(i + 1)
            st_body, st_exit = self.cond(i + 2, c, st)
            if tx == "switch":
                st_exit = None
            forever = tx == "while" and [x.text for x in t[i + 2:c]] in (["1"], ["true"])
            g = self.guards.test(t, i + 2, c, self.resolve) \
                if tx == "while" and self.guards.any else None
            return self._loop_body(c + 1, st_body, st_exit, end, switch=(tx == "switch"),
                                   forever=forever, exit_guard=g)
        if tx == "for" and i + 1 < end and t[i + 1].text == "(":
            c = self._match(i + 1)
            st = self.expr(i + 2, c, st)
            # for (init; ; step): no condition, left only by break/return/goto
            semis = [k for k in range(i + 2, c) if t[k].text == ";"]
            forever = len(semis) == 2 and semis[1] == semis[0] + 1
            return self._loop_body(c + 1, st, st, end, forever=forever)
        if tx == "do":
            self.loops.append([None, None])
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
            return j + 1, merge(st, entry)
        if t[i].kind == "id" and i + 1 < end and t[i + 1].text == ":" and tx not in KEYWORDS:
            return i + 2, merge(st, self.labels.get(tx))
        # for_each-style macro: IDENT ( ... ) followed by a statement, not ';'
        if t[i].kind == "id" and i + 1 < end and t[i + 1].text == "(" and tx not in KEYWORDS:
            c = self._match(i + 1)
            if c + 1 < end and t[c + 1].text == "{" and tx not in self.lockfns:
                st = self.expr(i + 2, c, st)
                return self._loop_body(c + 1, st, st, end)
        j = self._find_semi(i, end)
        st = self.expr(i, j, st)
        return j + 1, st

    def _loop_body(self, i, st_body, st_exit, end, switch=False, forever=False,
                   exit_guard=None):
        frame = [None, None]
        if switch:
            frame.append(st_body)
        self.loops.append(frame)
        j, s = self.stmt(i, st_body, end)
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

    # -- expressions -----------------------------------------------------
    def cond(self, lo, hi, st):
        """A condition: returns (state if true, state if false)."""
        t = self.t
        # find a trylock-like call directly in the condition
        k = lo
        neg = False
        while k < hi:
            x = t[k].text
            if x == "!":
                neg = not neg
                k += 1
                continue
            if x == "(":
                k += 1
                continue
            break
        spec = self.lockfns.get(t[k].text) if k < hi and t[k].kind == "id" else None
        if self.err_ptr and t[k].text in ERR_TESTS and k + 3 < hi and t[k + 1].text == "(" \
                and t[k + 2].text in self.err_ptr and t[k + 3].text == ")":
            # 'if (IS_ERR(trans))' after 'trans = start()': it failed and
            # holds nothing it would have taken
            s = self.expr(lo, hi, st)
            failed = s.copy()
            for name in self.err_ptr[t[k + 2].text]:
                failed.held.pop(name, None)
            return (s, failed) if neg else (failed, s)
        if spec and spec["op"] in ("trylock", "acquire_ret0") and k + 1 < hi and t[k + 1].text == "(":
            # trylock: true means taken; mutex_lock_interruptible: 0 means taken
            taken_if_true = (spec["op"] == "trylock") != neg
            return self._trylock_states(hi, k, self.expr(lo, k, st, skip_events=True),
                                        taken_if_true)
        tail = self._tail_trylock(lo, hi)
        if tail is not None:
            k, taken_if_true = tail
            return self._trylock_states(hi, k, self.expr(lo, k, st), taken_if_true)
        if st.cond and t[lo].kind == "id" and (lo + 1 == hi or t[lo + 1].text == "&&"):
            # 'if (v)' or 'if (v && ...)': the locks held while v is true
            # are held in the rest of the condition and in the branch
            v = t[lo].text
            ks = {k: h for k, (x, h) in st.cond.items() if x == v}
            if ks:
                s0 = self.expr(lo, lo + 1, st)
                s1 = s0.copy()
                for k, h in ks.items():
                    s1.held[k] = How("%s (kept while '%s' is true)" % (h.what, v), h.line)
                if lo + 1 < hi:
                    s1 = self.expr(lo + 2, hi, s1)
                return s1, merge(s0, s1)
        again = correlate.held_when(st.cond, correlate.key_of(t, lo, hi)) if st.cond else {}
        if again:
            # the condition tested before, unchanged: the locks its branch
            # took are held in this one (correlate.py)
            s = self.expr(lo, hi, st)
            s1 = s.copy()
            for k, h in again.items():
                s1.held.setdefault(k, How("%s (the same test at line %d was true)"
                                          % (h.what, h.line), h.line))
            return s1, s
        s = self.expr(lo, hi, st)
        if st.cond:
            self._short_circuit(lo, hi, st)
        g = self.guards.test(self.t, lo, hi, self.resolve) if self.guards.any else None
        if g is not None:
            # a state guard: each branch knows the state it tested
            line = self.t[lo].line
            return self.guards.enter(s, g, True, line), self.guards.enter(s.copy(), g, False, line)
        return s, s.copy()

    def _tail_trylock(self, lo, hi):
        """(k, taken_if_true) when the condition toks[lo:hi] ends in a
        try-lock that is evaluated last and decides it: 'a || !trylock(L)'
        (false: every operand false, so the try-lock ran and succeeded)
        or 'a && trylock(L)' (true: it ran and succeeded); else None."""
        t = self.t
        ops, depth, last = set(), 0, lo
        for k in range(lo, hi):
            x = t[k].text
            if x in ("(", "["):
                depth += 1
            elif x in (")", "]"):
                depth -= 1
            elif depth == 0 and x in ("||", "&&"):
                ops.add(x)
                last = k + 1
            elif depth == 0 and x in ("?", ":", ","):
                return None
        if len(ops) != 1:
            return None
        k, neg, opened = last, False, 0
        while k < hi and t[k].text in ("!", "("):
            neg, opened = (not neg, opened) if t[k].text == "!" else (neg, opened + 1)
            k += 1
        spec = self.lockfns.get(t[k].text) if k + 1 < hi and t[k].kind == "id" else None
        if not spec or spec["op"] != "trylock" or t[k + 1].text != "(" or \
                self._match(k + 1) + 1 + opened != hi:
            return None
        if ops == {"||"} and neg:
            return k, False
        if ops == {"&&"} and not neg:
            return k, True
        return None

    def _trylock_states(self, hi, k, before, taken_if_true):
        """(state if true, state if false) of a condition decided by the
        try-lock call toks[k] (at its start, or last: _tail_trylock()),
        before: the state the call is made in."""
        t = self.t
        spec = self.lockfns[t[k].text]
        c = self._match(k + 1)
        picks = self._picks(spec, k + 2, c)
        self._record_range(k, c + 1, before)
        self.res.calls.append((k, t[k].text, before))
        rest = self.expr(c + 1, hi, before)
        got = rest.copy()
        for sp, name in picks:
            got.held[mode_name(name, sp)] = How(sp["name"] + " succeeded", t[k].line)
            _also(got, sp, How(sp["name"] + " succeeded", t[k].line))
            self.res.events.append((k, "acquire", name))
        return (got, rest) if taken_if_true else (rest, got)

    def _short_circuit(self, lo, hi, st):
        """Operands a condition evaluates only while a flag v is true
        ('v && X', '!v || X', anywhere in it: 'a && (!v || x->f)') see
        the locks kept while v is true (after 'if (!v) unlock(L);')."""
        t = self.t
        for k in range(lo, hi):
            if t[k].kind != "id" or k + 1 >= hi:
                continue
            v = t[k].text
            ks = {n: h for n, (x, h) in st.cond.items() if x == v}
            if not ks:
                continue
            neg = k > lo and t[k - 1].text == "!"
            first = k - 1 if neg else k
            prev = t[first - 1].text if first > lo else "("
            nxt = t[k + 1].text
            if neg and not (nxt == "||" and prev in ("(", "||")):
                continue
            if not neg and not (nxt == "&&" and prev in ("(", "&&", "||")):
                continue
            # the right operand: to the end of the enclosing group, or of
            # the &&-chain for 'v &&' (a later '||' may run with v false)
            stop = ("||", "?", ":", ",") if not neg else ("?", ":", ",")
            depth = 0
            j = k + 2
            while j < hi:
                x = t[j].text
                if x in ("(", "["):
                    depth += 1
                elif x in (")", "]"):
                    if depth == 0:
                        break
                    depth -= 1
                elif depth == 0 and x in stop:
                    break
                if j in self.want and j in self.res.at:
                    cur = self.res.at[j].copy()
                    for n, h in ks.items():
                        cur.held.setdefault(n, How("%s (kept while '%s' is true)"
                                                   % (h.what, v), h.line))
                    self.res.at[j] = cur
                j += 1

    def _picks(self, spec, alo, ahi):
        """The entries of a lock wrapper this call (arguments alo..ahi) is,
        among its variants, with the lock each names: the first that
        matches, or, for entries picked by an argument token, every one
        whose token the argument names ('A | B': a wrapper that takes two
        locks in one call).  Two modes of one lock named together (an
        assertion that either is held) hold the weaker."""
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

    def _lock_name(self, spec, alo, ahi):
        args = self._split_args(alo, ahi)
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
        is the token ('A', 'A | B', '(A|B)')."""
        a, b = arg
        while b - a > 2 and self.t[a].text == "(" and self._match(a) == b - 1:
            a, b = a + 1, b - 1
        ops = [x.text for x in self.t[a:b]]
        if token not in ops:
            return False
        return all(x == "|" for x in ops[1::2]) and \
            all(self.t[a + i].kind == "id" for i in range(0, len(ops), 2))

    def _mentions(self, arg, field):
        from .csrc import mentions
        return mentions(self.t, arg, field, self.resolve)

    def _groups_of(self, name):
        """Held-set keys of every group the lock functions declare for name."""
        out = set()
        for spec in self.lockfns.values():
            for sp in [spec] + spec.get("variants", []):
                if sp.get("lock") == name and sp.get("mode") == "group":
                    out.add("%s{%s}:r" % (name, sp["group"]))
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

    def _record_range(self, lo, hi, st):
        for k in range(lo, hi):
            if k in self.want:
                self.res.at[k] = st

    def expr(self, lo, hi, st, skip_events=False):
        """Tokens lo..hi-1 in order; lock calls change the state."""
        if st is None:
            return None
        t = self.t
        want = self.want
        k = lo
        guards = self.guards if self.guards.any else None
        while k < hi:
            tk = t[k]
            if k in want:
                self.res.at[k] = st
                if guards is not None and tk.text in guards.members:
                    self.res.at[k] = guards.deref_state(t, k, st, self.resolve, self.hi)
            if guards is not None and tk.text in guards.members:
                st = guards.at_member(t, k, hi, st, self.resolve, self.lo, self.hi)
            if st.cond and tk.kind == "id" and k + 1 < hi and t[k + 1].text in correlate.STORES:
                # the flag (or a variable a remembered condition names) is
                # assigned again: what it said is gone
                kept = correlate.assigned(st.cond, tk.text)
                if len(kept) != len(st.cond):
                    st = st.copy()
                    st.cond = kept
            if guards is not None and tk.text in guards.asserts and k + 1 < hi and \
                    t[k + 1].text == "(":
                st = self._asserted(k, st)
            if tk.kind == "id" and k + 1 < hi and t[k + 1].text == "(" and tk.text not in KEYWORDS:
                spec = self.lockfns.get(tk.text)
                self.res.calls.append((k, tk.text, st))
                if spec and not skip_events:
                    c = self._match(k + 1)
                    # record the argument tokens with the state before the call
                    self._record_range(k + 1, c, st)
                    before = st
                    for sp, name in self._picks(spec, k + 2, c):
                        st = self._apply(sp, name, st, tk.line, k)
                    if spec.get("err_ptr") and k >= 2 and t[k - 1].text == "=" and \
                            t[k - 2].kind == "id":
                        # 'v = f()' of a wrapper that returns an error
                        # pointer when it takes nothing ('err_ptr')
                        self.err_ptr[t[k - 2].text] = [n for n in st.held
                                                       if n not in before.held]
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
        return self.guards.enter(st, g, self.guards.asserts[self.t[k].text], self.t[k].line)

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
                st.held[mode_name(name, spec)] = How(spec["name"], line)
                _also(st, spec, How(spec["name"], line))
                self.res.events.append((k, "acquire", name))
        elif op == "release":
            gone = {name, name + ":r"}
            for extra in spec.get("also", ()):
                # the other locks it took with its own ('also') go with it
                gone |= {extra["lock"], extra["lock"] + ":r"}
            if spec.get("mode") != "group":
                # a lock taken in several groups (one per exclusive operation)
                # released without naming one: whichever group is held
                gone |= {k for k in st.held if k.startswith(name + "{")}
                gone |= self._groups_of(name)
            for nm in gone:
                st.held.pop(nm, None)
                st.cond.pop(nm, None)
            st.killed = st.killed | gone
            self.res.events.append((k, "release", name))
        elif op == "assert":
            st.held[mode_name(name, spec)] = How(spec["name"], line)
            self.res.events.append((k, "assert", name))
        elif op == "downgrade":
            st.held.pop(name, None)
            st.held[name + ":r"] = How(spec["name"], line)
        return st


def _also(st, spec, how):
    """The other locks a lock function takes with its own ('also': a
    try-lock that enters an exclusive operation and returns with the
    spin lock that guards it held)."""
    for extra in spec.get("also", ()):
        st.held[mode_name(group_lock(extra["lock"], extra), extra)] = how


ERR_TESTS = ("IS_ERR", "IS_ERR_OR_NULL")


class _NoGuards:
    any = False
    members = frozenset()
    asserts = {}


NO_GUARDS = _NoGuards()


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


def declared_excluding(x, y):
    """A lock one of the locksets x and y holds exclusively that is
    declared to exclude a lock the other holds, in any mode; or None."""
    if not _EXCLUDES:
        return None
    for a, b in ((x, y), (y, x)):
        for n in a:
            for e in _EXCLUDES.get(n, ()):
                if e in b or e + ":r" in b:
                    return n
    return None


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


def call_context(toks, lo, hi, output=frozenset(), guarded=frozenset()):
    """For every token index in lo..hi, the callee names of the enclosing
    parentheses, innermost last ('if', 'while' and friends included).
    An argument after a format string ('"...%llu..."') of a call not in
    output (a buffer or a file the user reads: sysfs_emit(), seq_printf())
    also gets 'f:message' after the callee f: its value only goes into a
    message.  The condition of an 'if' whose whole body is one call of
    guarded (an assertion: 'if (x->state != S) lockdep_assert_held(L);')
    gets 'g:guard' after the 'if': its value only decides whether the
    assertion runs."""
    ctx = {}
    stack = []          # [name, extra names, format seen at this depth]
    cur = ()            # the names of the stack, as ctx gives them
    for k in range(lo, hi):
        x = toks[k].text
        if x == "(":
            prev = toks[k - 1] if k > lo else None
            name = prev.text if prev is not None and prev.kind == "id" else ""
            g = guarded_call(toks, k, guarded) if name == "if" and guarded else None
            stack.append([name, (g + GUARD,) if g else (), False, cur])
            cur = cur + (name,) + stack[-1][1]
        elif x == ")":
            if stack:
                cur = stack.pop()[3]
        elif x in ("{", "}", ";"):
            # statement expressions and blocks reset nothing: keep the stack
            pass
        elif stack and toks[k].kind == "str" and "%" in x and stack[-1][0] and \
                stack[-1][0] not in output and stack[-1][0] not in KEYWORDS:
            stack[-1][2] = True
        elif x == "," and stack and stack[-1][2] and not stack[-1][1]:
            stack[-1][1] = (stack[-1][0] + MESSAGE,)
            cur = cur + stack[-1][1]
        if stack:
            ctx[k] = cur
    return ctx


def guarded_call(toks, o, guarded=None):
    """The call g when the 'if' whose condition opens at toks[o] has a
    body of one statement, 'g(...);', and no else (g in guarded, when
    given: the assertions), else None."""
    b = csrc.match_paren(toks, o) + 1
    if b + 1 >= len(toks) or toks[b].kind != "id" or toks[b + 1].text != "(" or \
            (guarded is not None and toks[b].text not in guarded):
        return None
    e = csrc.match_paren(toks, b + 1)
    if e + 2 < len(toks) and toks[e + 1].text == ";" and toks[e + 2].text != "else":
        return toks[b].text
    return None
