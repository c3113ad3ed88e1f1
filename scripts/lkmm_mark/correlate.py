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


def assigned(cond, name):
    """cond without the entries a store to the variable name makes stale."""
    return {k: (v, h) for k, (v, h) in cond.items()
            if v != name and not (v.startswith(PREFIX) and name in names_of(v))}


def held_when(cond, key):
    """lock -> How: the locks kept while the condition key is true."""
    if key is None:
        return {}
    return {k: h for k, (v, h) in cond.items() if v == key}
