# SPDX-License-Identifier: GPL-2.0-only
"""State guards: a test of a declared state splits the paths of a
function, and each branch knows the state it tested (policies/ 'guards').

Two kinds:
- a configuration predicate, a call such as foo_is_zoned(fs): the
  configuration is fixed for the life of the mount, so a path that found
  it true never runs beside one that found it false;
- a pointer field whose being set or NULL is a state of the protocol
  (fs->trans NULL: no transaction is running; fs->quota_ctl NULL:
  quotas are off), tested as 'x->f', '!x->f', 'x->f == NULL', or through
  a local assigned from it.  A load whose value is dereferenced without a
  test ('x->f->g', or 'v = x->f;' and then 'v->g') relies on the field
  being set: it knows the state too.  A store to the field on the path
  sets what the path knows ('= NULL': null, another value: set).

A field guard may name the lock every store of the field holds
("under": L, or a list of such locks): a state a test finds then holds
only while L is held (its release ends it, unless another of the list is
still held, and ends it in a callee entered with it), a test made without
L tells nothing, and a test that finds the other state while the first
is known is a branch never taken (the flow leaves it out); a store
through '++' or '--' makes the state unknown, and a test of '!--x->f'
sees the new value.  Such a guard may
name states an assertion pins ("pinned": an assertion of the state says
the function's caller keeps it so, e.g. holds a count it took): that
state holds for the rest of the asserting function, without L, but is
not handed to its callees, which may work on other objects.

A configuration predicate may be remembered in a field ("remembered_in":
{"field": S.f, "values": {K: state}}): the one function that tests it
stores the enumerator K in the object it fills, and the code dispatches
on the field later ('switch (x->f) case K:', 'x->f == K', 'x->f != K'):
the branch of a value knows the configuration state it stands for, and
hands it to its callees as a test of the predicate would.  Every store
of the field must be a listed value, made where the flow knows its state
or overridden right after by a test of the predicate (remembered_ok()).

A configuration predicate may name lookups that find nothing in one of
its states ("empty_lookups": {"state": S, "calls": [f]}: what f searches
is only ever filled in the other state): after 'v = f(...);', the
branch of the 'if' right after it that finds v set knows the other
state; the NULL branch learns nothing.

A known state is held as a group of a pseudo-lock named after the guard
('S.f{=set}:r' against 'S.f{=null}:r', 'f(){=true}:r' against
'f(){=false}:r'): two groups of one lock exclude each other
(lockmodes.groups_exclude()), so the accesses of the two branches never race.
A guard entry may also say which locks a state implies
("implies": {"null": [{"lock": L, "mode": "exclusive"}]}: no running
transaction means no open handle).  A field guard keeps apart only
accesses to its own struct (callers._locksets()): two objects' states say
nothing of a third object.

The LockFlow (locks.py) calls test() on each condition, at_member() and
deref_state() on the tokens naming a guarded member.
"""
from .csrc import base_start, match_paren, mentions, open_of
from .lockmodes import mode_name
from .lockstate import How
from .tokutil import _split

ASSIGN = {"=", "+=", "-=", "|=", "&=", "^=", "<<=", ">>="}
STEP = ("++", "--")
_MARKED = ("READ_ONCE", "data_race", "rcu_access_pointer")


class Pinned(How):
    """A guard state an assertion pinned for the rest of its function."""
    __slots__ = ()


class Guards:
    def __init__(self, specs, assertions=()):
        self.fields = {g["field"]: g for g in specs if g.get("field")}
        # lock -> the guard fields whose states hold only while it is held
        self.scoped = {}
        for f, g in self.fields.items():
            for lock in unders(g):
                self.scoped.setdefault(lock, []).append(f)
        self.calls = {}
        for g in specs:
            if g.get("call"):
                self.calls.setdefault(g["call"], []).append(g)
        self.members = frozenset(f.rsplit(".", 1)[-1] for f in self.fields)
        # a remembered field -> (the predicate's key, its entry, value -> state)
        self.remembered = {g["remembered_in"]["field"]: (g["call"] + "()", g,
                                                        g["remembered_in"]["values"])
                           for g in specs if g.get("call") and g.get("remembered_in")}
        # a lookup that finds nothing in one state of a configuration
        # ("empty_lookups"): call name -> (key, entry, the state a found
        # object tells)
        self.lookups = {}
        for g in specs:
            e = g.get("call") and g.get("empty_lookups")
            for c in (e or {}).get("calls", ()):
                self.lookups[c] = (g["call"] + "()", g,
                                   "false" if e["state"] == "true" else "true")
        self.any = bool(self.fields or self.calls)
        # an assertion of a condition (policies/ 'state_assertions'):
        # after ASSERT(!foo_is_zoned(fs)) the function is in that state,
        # as in the branch of a test
        self.asserts = {a["call"]: a["holds"] for a in assertions} if self.any else {}

    # ------------------------------------------------------------ tests
    def test(self, t, lo, hi, resolve):
        """The guard a condition toks[lo:hi] tests: (key, spec, state when
        true, state when false), or None."""
        neg = False
        if self.lookups:
            g = self._found(t, lo, hi)
            if g is not None:
                return g
        while lo < hi and t[lo].text in ("!", "(") or (
                lo + 1 < hi and t[lo].text in _MARKED and t[lo + 1].text == "(" and
                match_paren(t, lo + 1) in (hi - 1, hi - 3)):
            if t[lo].text in _MARKED:
                # READ_ONCE(x->f) tests the same state (a patched tree)
                close = match_paren(t, lo + 1)
                if close == hi - 1:
                    lo, hi = lo + 2, hi - 1
                    continue
                if t[hi - 2].text not in ("==", "!=") or t[hi - 1].text != "NULL":
                    break
                return self._compare(t, lo + 2, close, t[hi - 2].text, neg, resolve)
            if t[lo].text == "(":
                if match_paren(t, lo) != hi - 1:
                    break
                hi -= 1
            else:
                neg = not neg
            lo += 1
        if lo + 3 < hi and t[lo].text in STEP:
            # '!--x->f': the test sees the value the step stored
            lo += 1
        if lo >= hi:
            return None
        if t[lo].text in self.calls and t[lo + 1].text == "(" and match_paren(t, lo + 1) == hi - 1:
            spec = self._call_spec(t, lo, hi - 1, resolve)
            if spec is None:
                return None
            w = spec.get("when_mentions")
            key = "%s(%s)" % (t[lo].text, w[1] if w else "")
            return (key, spec, "false", "true") if neg else (key, spec, "true", "false")
        eq = None
        if self.remembered and hi - lo >= 5 and t[hi - 2].text in ("==", "!="):
            g = self.case(t, lo, hi - 2, hi - 1, hi, resolve)
            if g is not None:
                other = self._other(g, t[hi - 1].text)
                if other is None:
                    return None
                pos, neg2 = (g[2], other) if (t[hi - 2].text == "==") != neg else (other, g[2])
                return (g[0], g[1], pos, neg2)
        for k in range(lo, hi):
            if t[k].text in ("==", "!=") and k + 2 == hi and t[k + 1].text == "NULL":
                eq, hi = t[k].text, k
                break
        return self._compare(t, lo, hi, eq, neg, resolve)

    def case(self, t, lo, hi, klo, khi, resolve):
        """The configuration state the value toks[klo:khi] of the member
        expression toks[lo:hi] stands for, when the field remembers one:
        (key, spec, state, None), or None."""
        if khi - klo != 1 or hi - lo < 3 or t[hi - 2].text not in ("->", "."):
            return None
        if base_start(t, hi - 2) != lo:
            return None
        r = self.remembered.get(resolve(lo, hi))
        if r is None or t[klo].text not in r[2]:
            return None
        return (r[0], r[1], r[2][t[klo].text], None)

    def _other(self, g, value):
        """The state every other value of the remembered field stands for,
        or None when they differ."""
        f = [x for x in self.remembered.values() if x[1] is g[1]][0]
        others = {s for k, s in f[2].items() if k != value}
        return others.pop() if len(others) == 1 else None

    def _found(self, t, lo, hi):
        """The condition toks[lo:hi] of the 'if' right after 'v =
        lookup(...);', of a lookup that finds nothing in one state of a
        configuration, tests v ('v', '!v', 'v == NULL', 'v != NULL', also
        as the first operand of '&&' or '||'): the branch that knows v set
        knows the other state, the other branch nothing (None)."""
        if lo < 6 or t[lo - 1].text != "(" or t[lo - 2].text != "if" or \
                t[lo - 3].text != ";" or t[lo - 4].text != ")":
            return None
        # the statement before the 'if': 'v = lookup(...);', unconditional
        o = open_of(t, lo - 4)
        if o < 4 or t[o - 1].text not in self.lookups or t[o - 2].text != "=" or \
                t[o - 4].text not in (";", "{", "}"):
            return None
        v = t[o - 3].text
        first, op = _first_operand(t, lo, hi)
        x = [tk.text for tk in t[lo:first]]
        if x in ([v], [v, "!=", "NULL"]):
            is_set = True
        elif x in (["!", v], [v, "==", "NULL"]):
            is_set = False
        else:
            return None
        if op is not None and (op == "&&") != is_set:
            # 'v && a' is true only with v set, '!v || a' false only so;
            # the other branch of either tells nothing
            return None
        key, spec, state = self.lookups[t[o - 1].text]
        return (key, spec, state, None) if is_set else (key, spec, None, state)

    def _compare(self, t, lo, hi, eq, neg, resolve):
        """'x->f' (eq None), 'x->f == NULL' or 'x->f != NULL', negated or
        not: the guard it tests, or None."""
        g = self._field_at(t, lo, hi, resolve)
        if g is None:
            return None
        key, spec = g
        is_set = (eq != "==") != neg
        return (key, spec, "set", "null") if is_set else (key, spec, "null", "set")

    def _call_spec(self, t, k, close, resolve):
        """The guard entry a call toks[k](...) (closing at close) is: one
        without an argument selector, or one whose argument reads its
        field ('list_empty(&fs->pending_list)')."""
        for spec in self.calls[t[k].text]:
            w = spec.get("when_mentions")
            if not w:
                return spec
            args = _split(t, k + 2, close)
            if w[0] < len(args) and mentions(t, args[w[0]], w[1], resolve):
                return spec
        return None

    def _field_at(self, t, lo, hi, resolve):
        """(field, spec) when toks[lo:hi] is a member expression naming a
        guarded field, or a local assigned from one earlier."""
        if hi - lo == 1 and t[lo].kind == "id":
            return self._alias(t, lo, resolve)
        if hi - lo < 3 or t[hi - 1].text not in self.members or t[hi - 2].text not in ("->", "."):
            return None
        b = base_start(t, hi - 2)
        if b != lo:
            return None
        f = resolve(lo, hi)
        return (f, self.fields[f]) if f in self.fields else None

    def _alias(self, t, k, resolve):
        """'v' assigned from a guarded field by the last 'v = x->f;' before
        toks[k] (within the last 400 tokens), with no other assignment
        of v in between."""
        v = t[k].text
        for j in range(k - 1, max(k - 400, 0), -1):
            if t[j].text != v or t[j + 1].text != "=" or t[j - 1].text in (".", "->"):
                continue
            end = j + 2
            while end < len(t) and t[end].text != ";":
                end += 1
            lo = j + 2
            if t[lo].text in _MARKED and t[lo + 1].text == "(" and \
                    match_paren(t, lo + 1) == end - 1:
                # 'v = READ_ONCE(x->f);' (a patched tree)
                lo, end = lo + 2, end - 1
            return self._field_at(t, lo, end, resolve) if end - lo >= 3 else None
        return None

    # ----------------------------------------------------------- states
    def enter(self, st, g, true_branch, line, asserted=False):
        """st with the state the branch knows (key, spec, when-true,
        when-false), or the state an assertion states."""
        key, spec, yes, no = g
        state = yes if true_branch else no
        if state is None:
            # the branch of a lookup that found nothing learns nothing
            return st
        pinned = asserted and state in spec.get("pinned", ())
        if not asserted and spec.get("under") and any(
                k.startswith(key + "{=") and k != "%s{=%s}:r" % (key, state) for k in st.held):
            # a state known while a lock every store holds is still held
            # cannot be tested otherwise: the branch is never taken
            return None
        return self._with(st, key, spec, state, "asserted" if asserted else "tested", line,
                          pinned)

    def _with(self, st, key, spec, state, how, line, pinned=False):
        under = [u for u in unders(spec) if u in st.held or u + ":r" in st.held]
        if spec.get("under") and not pinned and not under:
            # known only under a lock every store holds: nothing learnt
            return st
        st = _forget(st, key)
        what = "%s %s: %s" % (key, how, state)
        if under and not pinned:
            what += " (while %s is held)" % " or ".join(under)
        st.held["%s{=%s}:r" % (key, state)] = (Pinned if pinned else How)(what, line)
        for imp in spec.get("implies", {}).get(state, ()):
            st.held[mode_name(imp["lock"], imp)] = How(
                "%s is %s (%s)" % (key, state, spec["reason"]), line)
        return st

    def at_member(self, t, k, hi, st, resolve, flo, fhi):
        """A store to a guarded field (toks[k] its member name): the path
        now knows the state it stored ('= NULL': null, any other value:
        set); a compound assignment, '++' or '--' leaves it unknown."""
        if k + 1 >= len(t) or t[k - 1].text not in ("->", "."):
            return st
        b = base_start(t, k - 1)
        marked = t[k + 1].text == "," and b is not None and b > 1 and \
            t[b - 1].text == "(" and t[b - 2].text == "WRITE_ONCE"
        if t[k + 1].text not in ASSIGN and t[k + 1].text not in STEP and not marked and not (
                b is not None and b > 0 and t[b - 1].text in STEP):
            return st
        f = resolve(b, k + 1) if b is not None else None
        if f not in self.fields:
            return st
        if marked:
            # WRITE_ONCE(x->f, v) of a patched tree: as 'x->f = v', and
            # unknown when v reads the field ('x->f + 1')
            close = match_paren(t, b - 1)
            v = [x.text for x in t[k + 2:close]]
            if t[k].text in v:
                return _forget(st, f)
            return self._with(st, f, self.fields[f], "null" if v == ["NULL"] else "set",
                              "stored", t[k].line)
        if t[k + 1].text == "=":
            null = t[k + 2].text == "NULL" and t[k + 3].text == ";"
            return self._with(st, f, self.fields[f], "null" if null else "set", "stored",
                              t[k].line)
        return _forget(st, f)

    def deref_state(self, t, k, st, resolve, fhi):
        """The state at a load of a guarded field (toks[k] its member
        name): set, when the value is dereferenced without a test."""
        if t[k - 1].text not in ("->", ".") or (k + 1 < len(t) and t[k + 1].text in ASSIGN):
            return st
        b = base_start(t, k - 1)
        f = resolve(b, k + 1) if b is not None else None
        if f not in self.fields:
            return st
        deref = t[k + 1].text == "->"
        if t[k + 1].text == ")" and b >= 2 and t[b - 1].text == "(" and t[b - 2].text in _MARKED:
            # READ_ONCE(x->f)->g, or 'v = READ_ONCE(x->f);' (a patched tree)
            k, b = k + 1, b - 2
            deref = t[k + 1].text == "->"
        if not deref and t[k + 1].text == ";" and b >= 2 and t[b - 1].text == "=" and \
                t[b - 2].kind == "id":
            v = t[b - 2].text
            for j in range(k + 2, fhi):
                if t[j].text == v and t[j - 1].text not in (".", "->"):
                    deref = t[j + 1].text == "->"
                    break
        if not deref:
            return st
        return self._with(st, f, self.fields[f], "set", "dereferenced", t[k].line)

    # ------------------------------------------------------- lock scope
    def released(self, st, gone):
        """st (a copy the caller owns) after the locks gone were released:
        the states known only under them are gone, also from the locks a
        callee is entered with (killed)."""
        for name in gone:
            for f in self.scoped.get(name, ()):
                # the states the function found hold while another lock
                # every store holds is still held; the caller's may not
                if not any(u in st.held or u + ":r" in st.held
                           for u in unders(self.fields[f]) if u not in gone):
                    for k in [k for k, h in st.held.items()
                              if k.startswith(f + "{=") and not isinstance(h, Pinned)]:
                        del st.held[k]
                    for k in [k for k in st.cond if k.startswith(f + "{=")]:
                        del st.cond[k]
                st.killed = st.killed | {"%s{=%s}:r" % (f, s) for s in ("set", "null")}

    def for_call(self, st):
        """st as a callee is entered with it: without pinned states."""
        if not any(isinstance(h, Pinned) for h in st.held.values()):
            return st
        st = st.copy()
        st.held = {k: h for k, h in st.held.items() if not isinstance(h, Pinned)}
        return st


def _first_operand(t, lo, hi):
    """(end of the first operand, its operator) of the condition
    toks[lo:hi] when it is 'a && ...' with no '||' outside parentheses,
    or 'a || ...' with no '?'; (hi, None) for a condition without either;
    (lo, None) for any other."""
    ops, depth = [], 0
    for k in range(lo, hi):
        x = t[k].text
        depth += x in ("(", "[")
        depth -= x in (")", "]")
        if depth == 0 and x in ("&&", "||", "?", ","):
            ops.append((k, x))
    if not ops:
        return hi, None
    k, op = ops[0]
    rest = {x for _, x in ops}
    if op == "&&" and rest == {"&&"} or op == "||" and rest <= {"||", "&&"}:
        return k, op
    return lo, None


def unders(spec):
    """The locks a field guard's "under" names: every store holds each."""
    u = spec.get("under")
    return [u] if isinstance(u, str) else list(u or ())


def _forget(st, key):
    """A copy of st without the states of the guard key, held or kept
    while a variable is not 0."""
    st = st.copy()
    for k in [k for k in st.held if k.startswith(key + "{=")]:
        del st.held[k]
    for k in [k for k in st.cond if k.startswith(key + "{=")]:
        del st.cond[k]
    return st


def guard_struct(key):
    """The struct a field guard key names ('S.f{=set}:r' -> 'S'); None for
    a configuration predicate or any other held-set key."""
    if "{=" not in key:
        return None
    base = key.split("{=", 1)[0]
    if base.endswith("()") or "." not in base:
        return None
    return base.split(".", 1)[0]


def remembered_errors(guards, stores):
    """The stores that break a remembered configuration's fact: stores is
    [(toks, token index of the member name, State there, resolve)].  A
    store of a value the fact lists is sound where the flow knows the
    state the value stands for, or where the next statement is 'if (test)
    same = other;' with the test finding the state the other value stands
    for (a default overridden at once, so that after it each value stands
    for its state); anything else is a one-line error."""
    errs = []
    for t, k, st, resolve in stores:
        b = base_start(t, k - 1)
        key, spec, values = guards.remembered[resolve(b, k + 1)]
        where = "line %d: %s" % (t[k].line, " ".join(x.text for x in t[b:k + 3]))
        v = t[k + 2].text if t[k + 1].text == "=" and t[k + 3].text == ";" else None
        if v not in values:
            errs.append("%s stores no value its remembered_in lists" % where)
            continue
        held = {s for s in ("true", "false") if "%s{=%s}:r" % (key, s) in st.held}
        if held == {values[v]}:
            continue
        if held or not _overridden(guards, t, b, k, values[v], resolve):
            errs.append("%s is not made where %s is %s, nor overridden at once by a test "
                        "of it" % (where, key, values[v]))
    return errs


def _overridden(guards, t, b, k, state, resolve):
    """'x->f = V; if (test) x->f = W;' at toks[b:], the branch's state
    the one W stands for and not state; simple statements between that
    neither name f nor hand x on whole are skipped ('x->g = h(x->n);')."""
    i = _skip_plain(t, k + 4, t[k].text, t[b].text)
    if i is None or i + 1 >= len(t) or t[i].text != "if" or t[i + 1].text != "(":
        return False
    c = match_paren(t, i + 1)
    g = guards.test(t, i + 2, c, resolve)
    n = k + 1 - b
    lhs, rhs = [x.text for x in t[b:k + 1]], c + 1 + n
    if g is None or g[0] != guards.remembered[resolve(b, k + 1)][0] or \
            [x.text for x in t[c + 1:rhs]] != lhs or t[rhs].text != "=" or t[rhs + 2].text != ";":
        return False
    other = guards.remembered[resolve(b, k + 1)][2].get(t[rhs + 1].text)
    return other == g[2] and other != state


_NOT_PLAIN = frozenset(("{", "}", "if", "else", "return", "goto", "case", "default", "for",
                        "while", "do", "switch", "break", "continue"))


def _skip_plain(t, i, member, base):
    """The index after the simple statements from toks[i] on (at most
    eight) that name no member 'member' and use 'base' only through '->'
    or '.', or None when one does."""
    for _ in range(8):
        if i >= len(t) or t[i].text == "if":
            return i
        j, depth = i, 0
        while j < len(t) and not (t[j].text == ";" and depth == 0):
            x = t[j].text
            if x in _NOT_PLAIN or x == member or \
                    (x == base and t[j + 1].text not in ("->", ".")):
                return None
            depth += x in ("(", "[")
            depth -= x in (")", "]")
            j += 1
        i = j + 1
    return None
