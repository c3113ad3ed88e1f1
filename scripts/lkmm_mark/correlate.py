# SPDX-License-Identifier: GPL-2.0-only
"""Correlated conditions: a condition tested twice in a function, with
nothing between the tests that stores to a variable it names, has the
same value both times.

    if (t == fs->running) {           if (t == fs->running)
            unlock(&fs->lock);                fs->running = NULL;
            wait_for_writers(t);      <- the writers of t drained here
    } ...
    lock(&fs->lock);

A lock taken in the first branch and still held at the second test is
held in the second branch too.  The state records it as a conditional
lock (lockstate.State.cond) keyed by the condition's text, as a local flag's
locks are keyed by the flag ('if (!v) unlock(L)'): a store to a
variable the condition names, or a release of the lock, forgets it.

Only plain conditions qualify: names, members, comparisons and logical
operators, no call and no side effect, so that the second evaluation
can only differ if a store this function does not make changes a field
in between; the code that re-tests a condition relies on the same.
"""
from .csrc import remembered


_ASSIGN = {"=", "+=", "-=", "*=", "/=", "%=", "|=", "&=", "^=", "<<=", ">>=",
           "++", "--"}
_PLAIN = {"==", "!=", "!", "&&", "||", "->", ".", "(", ")", "<", ">", "<=", ">="}
PREFIX = "?"
STORES = _ASSIGN


def key_of(t, lo, hi):
    """The key of the condition toks[lo:hi], or None if it is not plain."""
    if hi - lo < 1 or hi - lo > 16:
        return None
    out = []
    for k in range(lo, hi):
        x = t[k].text
        if x in _ASSIGN:
            return None
        if t[k].kind == "id":
            if k + 1 < hi and t[k + 1].text == "(":
                return None
        elif x not in _PLAIN and t[k].kind != "num":
            return None
        out.append(x)
    return PREFIX + " ".join(out)


def names_of(key):
    """The identifiers a key's condition names."""
    return {w for w in key[len(PREFIX):].split() if w.isidentifier()}


def remember(out, taken, other, key):
    """Locks held at the end of the branch 'taken' of 'if (key)' and not
    on the other path ('other', the end of the else branch or the state
    when the condition is false): held later wherever key holds again."""
    if key is None or taken is None or other is None:
        return
    for k, h in taken.held.items():
        if k not in other.held and k not in out.held and k != "irqs-off":
            out.cond.setdefault(k, (key, h))


def assigned(cond, name, nonzero=False):
    """cond without the entries a store to the variable name makes stale;
    a store of a negative constant ('v = -EIO;', nonzero) keeps those
    held while '!v' is true: they say nothing while v is not 0."""
    return {k: (v, h) for k, (v, h) in cond.items()
            if v != name and not (v.startswith(PREFIX) and name in names_of(v)) or
            nonzero and v == PREFIX + "! " + name}


def negative_store(t, k):
    """toks[k] is stored a negative constant: 'v = -EIO;'."""
    return t[k + 1].text == "=" and t[k + 2].text == "-" and \
        t[k + 3].kind in ("id", "num") and t[k + 4].text == ";"


def held_when(cond, key):
    """lock -> How: the locks kept while the condition key is true."""
    if key is None:
        return {}
    return {k: h for k, (v, h) in cond.items() if v == key}


# ------------------------------------------------------ variables known 0
# A local variable stored 0 ('int ret = 0;', 'ret = 0;') or tested 0 ('if
# (!ret)' then, 'if (ret)' else) is known 0 on that path until a store to
# it, a call that may change it (its address taken anywhere in the
# function, or the whole variable handed to a call, which may be a macro
# that assigns it) or a loop that does.  lockstate.merge() turns a guard's
# state held on one side of a join, where the variable is known 0 on the
# other, into a state held wherever the variable is not 0.
_NOT_LOCAL = {"return", "goto", "else", "do", "case", "sizeof", "typeof", "__typeof__"}
_NOT_CALL = {"if", "while", "for", "switch", "return", "sizeof", "typeof", "__typeof__",
             "__typeof", "_Alignof", "__alignof__"}


_TRACKED = {}


def tracked_locals(t, lo, hi):
    """The variables the function toks[lo:hi] declares ('T v =', 'T v;',
    'T v,') whose address it never takes (remembered: scan.py has them
    found while spatch runs)."""
    return remembered(_TRACKED, t, lambda: _tracked_locals(t, lo, hi), lo, hi)


def _tracked_locals(t, lo, hi):
    decl, addr = set(), set()
    for k in range(lo + 1, hi - 1):
        x = t[k]
        if x.kind != "id":
            continue
        p = t[k - 1]
        if p.text == "&":
            addr.add(x.text)
        elif p.kind == "id" and p.text not in _NOT_LOCAL and \
                t[k + 1].text in ("=", ";", ",") and t[k - 2].text in ("{", ";", "}", ","):
            decl.add(x.text)
    return frozenset(decl - addr)


def zero_step(t, k, st):
    """st after toks[k], a tracked local: known 0 after 'v = 0', forgotten
    after any other store or when handed whole to a call."""
    v = t[k].text
    nxt = t[k + 1].text
    if t[k - 1].text in (".", "->"):
        return st
    if nxt == "=" and t[k + 2].text == "0" and t[k + 3].text in (";", ","):
        if v in st.zero:
            return st
        st = st.copy()
        st.zero = st.zero | {v}
        return st
    kept = [x for x, (w, _) in st.cond.items() if w == v and "{=" in x]
    if v not in st.zero and not kept:
        return st
    passed = t[k - 1].text in ("(", ",") and nxt in (")", ",") and _call_arg(t, k)
    if passed or nxt in _ASSIGN or t[k - 1].text in ("++", "--"):
        # a macro handed v may store to it: what v said is gone
        st = st.copy()
        st.zero = st.zero - {v}
        for x in kept if passed else ():
            del st.cond[x]
    return st


def _call_arg(t, k):
    """toks[k] is a whole argument of a call (or a macro)."""
    depth = 0
    for j in range(k - 1, max(k - 300, 0), -1):
        x = t[j].text
        if x in (")", "]", "}"):
            depth += 1
        elif x in ("(", "[", "{"):
            if depth == 0:
                return x == "(" and t[j - 1].kind == "id" and t[j - 1].text not in _NOT_CALL
            depth -= 1
        elif x == ";" and depth == 0:
            return False
    return True


def zero_test(t, lo, hi, tracked):
    """(v, True) when the condition toks[lo:hi] is true only with the
    tracked local v 0 ('!v', 'v == 0'), (v, False) when it is false only
    then ('v', 'v != 0'); else None."""
    xs = [x.text for x in t[lo:hi]]
    if len(xs) == 1 and xs[0] in tracked:
        return xs[0], False
    if len(xs) == 2 and xs[0] == "!" and xs[1] in tracked:
        return xs[1], True
    if len(xs) == 3 and xs[0] in tracked and xs[2] == "0" and xs[1] in ("==", "!="):
        return xs[0], xs[1] == "=="
    return None


def known_zero(st, v):
    """A copy of st that knows v is 0."""
    st = st.copy()
    st.zero = st.zero | {v}
    return st


def forget_in(t, lo, hi, st):
    """st without the variables known 0 that toks[lo:hi] names (a loop's
    body, or what a backward goto repeats)."""
    if st is None or not st.zero:
        return st
    vs = {t[k].text for k in range(lo, hi) if t[k].text in st.zero}
    if not vs:
        return st
    st = st.copy()
    st.zero = st.zero - vs
    return st


def flag_values(t, lo, hi, v, returned=None):
    """The values the local v of the body toks[lo:hi] is ever given, as
    tuples of token texts ('v = A;', 'T v = A | B;'), when every one is a
    flag constant or an or of them, or what a call returns whose every
    value returned(name) gives so ('v = f(x);' of a function that
    returns the flags it took, returned_values()), v is no parameter (not
    named in the function's head before toks[lo]) and nothing else
    changes it ('v |= A', '&v'); else None.  Flow-insensitive: a lock
    call handed v takes what every one of them names (locks.py)."""
    head = lo - 1
    while head > 0 and lo - head < 400 and t[head].text not in (";", "}"):
        if t[head].text == v:
            return None
        head -= 1
    out = []
    for k in range(lo + 1, hi - 1):
        if t[k].text != v or t[k - 1].text in (".", "->"):
            continue
        nxt = t[k + 1].text
        if t[k - 1].text == "&" or nxt in _ASSIGN and nxt != "=" or t[k - 1].text in ("++", "--"):
            return None
        if nxt != "=":
            continue
        got = _call_value(t, k + 2, hi, returned)
        if got is not None:
            if not got:
                return None
            out.extend(got)
            continue
        e = k + 2
        while e < hi and t[e].text not in (";", ","):
            e += 1
        words = t[k + 2:e]
        if not _or_of_names(words):
            return None
        out.append(tuple(x.text for x in words))
    return out or None


def _or_of_names(words):
    """words (tokens) are a name or an or of names ('A', 'A | B')."""
    return bool(words) and len(words) % 2 == 1 and \
        all(x.kind == "id" for x in words[::2]) and all(x.text == "|" for x in words[1::2])


def _call_value(t, k, hi, returned):
    """For 'v = f(...);' with the call at toks[k]: the values
    returned(f) gives, () when it gives none; None when toks[k] starts
    no such call (or nothing is asked about calls)."""
    from .csrc import match_paren
    if returned is None or t[k].kind != "id" or k + 1 >= hi or t[k + 1].text != "(":
        return None
    c = match_paren(t, k + 1)
    if c + 1 >= hi or t[c + 1].text != ";":
        return None
    return returned(t[k].text) or ()


def returned_values(t, lo, hi, returned=None):
    """The values the function body toks[lo:hi] returns, as flag_values()
    gives them, when every 'return' returns flag constants (upper-case
    names, or-ed) or a local flag_values() knows the values of
    ('uint mode = A; if (c) mode = B; lock(x, mode); return mode;');
    else None (also for a body with no 'return')."""
    out = []
    for k in range(lo, hi):
        if t[k].text != "return":
            continue
        e = k + 1
        while e < hi and t[e].text != ";":
            e += 1
        words = t[k + 1:e]
        if len(words) == 1 and words[0].kind == "id" and not words[0].text.isupper():
            vals = flag_values(t, lo, hi, words[0].text, returned)
            if vals is None:
                return None
            out.extend(vals)
        elif _or_of_names(words) and all(x.text.isupper() for x in words[::2]):
            out.append(tuple(x.text for x in words))
        else:
            return None
    return out or None


def names_flag(ops, token):
    """The texts ops are the token, or an or-ed set of flags one of which
    is the token ('A', 'A | B'), or the number the token is ('1':
    atomic_set(&x->busy, 1), a flag raised)."""
    if token[:1].isdigit():
        return list(ops) == [token]
    if token not in ops:
        return False
    return all(x == "|" for x in ops[1::2]) and \
        all(x[:1].isalpha() or x[:1] == "_" for x in ops[::2])
