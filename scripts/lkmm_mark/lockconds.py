# SPDX-License-Identifier: GPL-2.0-only
"""The conditions of the lock flow (locks.LockFlow, of which Conds is a
part): a try-lock, a state guard or a remembered flag in an 'if' or a
loop condition gives a state when it is true and another when it is
false; '&&' and '||' decide them in order."""
from . import correlate, lockraise
from .lockmodes import hold_also, mode_name
from .lockstate import How, merge

ERR_TESTS = ("IS_ERR", "IS_ERR_OR_NULL")


# the tests of 'v = f()' (f takes its lock when it returns 0) that find
# v 0 on one branch, false or true, and not 0 on the other; the flow takes
# f's locks as held on both, the non-zero one being an error path
_ZERO_IF_FALSE = (["v"], ["v", "!=", "0"], ["v", "<", "0"])
_ZERO_IF_TRUE = (["!", "v"], ["v", "==", "0"])


class Conds:
    def _jumped_back(self, at):
        """A goto after toks[at] jumps back to a label before it (a loop of
        a label and a goto: a flag set in one round is set in the next)."""
        lg = self.__dict__.get("_labels_gotos")
        if lg is None:
            t, lo, hi = self.t, self.lo, self.hi
            lg = self._labels_gotos = (
                [(k, t[k].text) for k in range(lo + 1, hi) if t[k].kind == "id" and
                 t[k + 1].text == ":" and t[k - 1].text in (";", "{", "}")],
                [(k, t[k + 1].text) for k in range(lo, hi - 1) if t[k].text == "goto"])
        before = {name for k, name in lg[0] if k < at}
        return any(k >= at and name in before for k, name in lg[1])

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

    def cond(self, lo, hi, st):
        """A condition: returns (state if true, state if false)."""
        t = self.t
        if hi - lo > 3 and t[lo].text in ("likely", "unlikely") and t[lo + 1].text == "(" and \
                self._match(lo + 1) == hi - 1:
            return self.cond(lo + 2, hi - 1, st)
        yes, no = self._cond(lo, hi, st)
        return self._ret0_tested(lo, hi, yes, no) if self.ret0 else (yes, no)

    def note_ret0(self, k, c, before, st):
        """'v = f(.., &p, ..)' at toks[k] of a lock function that takes its
        lock when it returns 0 (self.ret0): the locks it took, and p, the
        one local handed by address that is NULL at the call
        (_null_before(), the call in no loop): f hands the locked object back there when it succeeds, so
        p is not NULL after the call exactly when f took them."""
        t = self.t
        if k < 3 or t[k - 1].text != "=" or t[k - 2].kind != "id" or \
                t[k - 3].text in (".", "->"):
            return
        outs = [t[j + 1].text for j in range(k + 2, c) if t[j].text == "&" and
                t[j - 1].text in ("(", ",") and t[j + 1].kind == "id" and
                t[j + 2].text in (",", ")")]
        nulls = [x for x in outs if self._null_before(x, k)] \
            if not self.loops and not self._jumped_back(k) else []
        self.ret0[t[k - 2].text] = ([n for n in st.held if n not in before.held],
                                    nulls[0] if len(nulls) == 1 else None)

    def _null_before(self, p, k):
        """The local p is NULL at toks[k]: its last store before is 'p =
        NULL' (or its declaration 'T *p = NULL'), in a block that encloses
        toks[k], and it is not handed by address between."""
        t = self.t
        for q in range(k - 1, self.lo, -1):
            if t[q].text != p or t[q - 1].text in (".", "->"):
                continue
            if t[q - 1].text in ("&", "++", "--"):
                return False
            if t[q + 1].text in correlate.STORES:
                break
        else:
            return False
        if [x.text for x in t[q + 1:q + 4]] not in (["=", "NULL", ";"], ["=", "NULL", ","]):
            return False
        depth = 0
        for j in range(q, k):
            depth += {"{": 1, "}": -1}.get(t[j].text, 0)
            if depth < 0:
                return False
        return True

    def _ret0_tested(self, lo, hi, yes, no):
        """A test of v ('v = f()', f takes its lock when it returns 0)
        that finds v 0 on neither branch ('if (v && v != -ENOENT)'): the
        locks f took are held on neither, but where v is 0, or where the
        local f handed them back in is not NULL (note_ret0()); a later
        test that finds v 0 finds them held again."""
        t = self.t
        words = [x.text for x in t[lo:hi]]
        for v, (got, p) in self.ret0.items():
            if not any(t[j].text == v and t[j - 1].text not in (".", "->", "&")
                       for j in range(lo, hi)):
                # (a call handed &v, 'if (!check(&v))', may find v 0: not
                # followed, as before)
                continue
            ors, ands = [[[("v" if w == v else w) for w in x] for x in _operands(words, op)]
                         for op in ("||", "&&")]
            key = p or correlate.PREFIX + "! " + v
            if any(x in _ZERO_IF_FALSE for x in ors):
                # 'if (v || !p)': v is 0 where it is false
                no = _held_again(no, v)
                yes = yes if len(ors) == 1 else _kept_while(yes, got, key)
            elif any(x in _ZERO_IF_TRUE for x in ands):
                yes = _held_again(yes, v)
                no = no if len(ands) == 1 else _kept_while(no, got, key)
            else:
                yes, no = [_kept_while(s, got, key) for s in (yes, no)]
        return yes, no

    def _cond(self, lo, hi, st):
        t = self.t
        # find a trylock-like call directly in the condition
        k = lo
        neg = False
        opened = 0
        while k < hi:
            x = t[k].text
            if x == "!":
                neg = not neg
                k += 1
                continue
            if x == "(":
                k += 1
                opened += 1
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
            after = self._after_call(k, hi, opened)
            if after == "== 0":
                # 'if (trylock(L) == 0) return;': true means it failed
                taken_if_true = not taken_if_true
            elif after is None or after in ("&&", "||") and (after == "&&") != taken_if_true:
                # 'trylock(L) || a', 'trylock(L) > 0': neither outcome of
                # the condition says how it went
                taken_if_true = None
            return self._trylock_states(hi, k, self.expr(lo, k, st, skip_events=True),
                                        taken_if_true)
        tail = self._tail_trylock(lo, hi)
        if tail is not None:
            k, taken_if_true = tail
            return self._trylock_states(hi, k, self.expr(lo, k, st), taken_if_true)
        got = self._flag_states(lo, hi, st) if st.cond else None
        if got is not None:
            return got
        s = self.expr(lo, hi, st)
        if st.cond:
            self._short_circuit(lo, hi, st)
        g = self.guards.test(self.t, lo, hi, self.resolve) if self.guards.any else None
        if g is not None:
            # a state guard: each branch knows the state it tested
            line = self.t[lo].line
            return self.guards.enter(s, g, True, line), self.guards.enter(s.copy(), g, False, line)
        return lockraise.tested(t, lo, hi, s) or (s, s.copy())

    def _flag_states(self, lo, hi, st):
        """(state if true, state if false) of a condition that tests a
        flag some locks are kept with ('if (v)', 'if (v && ...)'), or that
        repeats a test whose branch took locks; None for any other."""
        t = self.t
        if hi == lo + 2 and t[lo].text == "!" and t[lo + 1].kind == "id":
            # 'if (!v)': held where it is false
            v = t[lo + 1].text
            ks = {k: h for k, (x, h) in st.cond.items() if x == v}
            if ks:
                s0 = self.expr(lo, hi, st)
                s1 = s0.copy()
                for k, h in ks.items():
                    s1.held[k] = How("%s (kept while '%s' is true)" % (h.what, v), h.line)
                return s0, s1
        if t[lo].kind == "id" and (lo + 1 == hi or t[lo + 1].text == "&&"):
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
        again = correlate.held_when(st.cond, correlate.key_of(t, lo, hi))
        if again:
            # the condition tested before, unchanged: the locks its branch
            # took are held in this one (correlate.py)
            s = self.expr(lo, hi, st)
            s1 = s.copy()
            for k, h in again.items():
                s1.held.setdefault(k, How("%s (the same test at line %d was true)"
                                          % (h.what, h.line), h.line))
            return s1, s
        return None

    def _after_call(self, k, hi, opened):
        """How the condition goes on after the call toks[k](...), inside
        the 'opened' parentheses before it: 'end' (nothing but those
        parentheses), '== 0' or '!= 0' (a comparison with 0 that ends
        it), '&&' or '||' (at the top level, every operator there the
        same one), else None."""
        t = self.t
        j = self._match(k + 1) + 1
        if j + 1 < hi and t[j].text in ("==", "!=") and t[j + 1].text in ("0", "false", "NULL"):
            cmp, j = t[j].text + " 0", j + 2
        else:
            cmp = "end"
        rest = [x.text for x in t[j:hi]]
        if rest == [")"] * opened:
            return cmp
        if cmp != "end" or opened:
            return None
        ops, depth = set(), 0
        for x in rest:
            if x in ("(", "["):
                depth += 1
            elif x in (")", "]"):
                depth -= 1
            elif depth == 0 and x in ("||", "&&", "?", ":", ","):
                ops.add(x)
        return ops.pop() if ops in ({"&&"}, {"||"}) and rest[0] in ops else None

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
        before: the state the call is made in; taken_if_true None: the
        condition does not say how it went, nothing held in either."""
        t = self.t
        spec = self.lockfns[t[k].text]
        c = self._match(k + 1)
        picks = self._picks(spec, k + 2, c)
        self._record_range(k, c + 1, before)
        self.res.calls.append((k, t[k].text, before))
        rest = self.expr(c + 1, hi, before)
        got = rest.copy()
        if taken_if_true is None:
            return rest, got
        for sp, name in picks:
            got.held[mode_name(name, sp)] = How(sp["name"] + " succeeded", t[k].line)
            hold_also(got, sp, How(sp["name"] + " succeeded", t[k].line))
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


def _operands(words, op):
    """The operands of the condition words at its top level, split at
    op ('||' or '&&'); the whole condition if it has another operator
    there."""
    out, depth = [[]], 0
    for w in words:
        if w in ("(", "["):
            depth += 1
        elif w in (")", "]"):
            depth -= 1
        elif depth == 0 and w in ("||", "&&", "?", ",") and w != op:
            return [words]
        if depth == 0 and w == op:
            out.append([])
            continue
        out[-1].append(w)
    return out


def _kept_while(s, got, key):
    """s without the locks got held, but held where key (State.cond: a
    local not NULL, or a condition) is true."""
    if s is None or not got or not any(n in s.held for n in got):
        return s
    s = s.copy()
    for n in got:
        h = s.held.pop(n, None)
        if h is not None:
            s.cond[n] = (key, h)
    return s


def _held_again(s, v):
    """s where v is found 0: the locks kept while it is (_kept_while())."""
    key = correlate.PREFIX + "! " + v
    if s is None or not any(x == key for x, _ in s.cond.values()):
        return s
    s = s.copy()
    for n, (x, h) in list(s.cond.items()):
        if x == key:
            del s.cond[n]
            s.held[n] = How("%s (returned 0)" % h.what, h.line)
    return s
