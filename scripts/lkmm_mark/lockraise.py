# SPDX-License-Identifier: GPL-2.0-only
"""A hold in a stronger mode where the caller finds true the condition
that makes the lock function take it (policies/ 'lock_functions'
'raised_where': {"call": P, "mode_arg": [n, TOKEN]}).

A lock function that takes a lock in the mode its caller hands it as
'&v' (argument n), but in the stronger mode TOKEN names whenever the
predicate P holds of its object (argument 0), re-testing P once it holds
the lock, is declared in its weaker mode; P's state cannot change while
any mode of the lock is held.  Its caller's flow (locks.py, lockconds.py)
then holds the lock in TOKEN's mode too in the branch of a test 'if
(P(x))' (or the false branch of 'if (!P(x))') made while the hold lasts,
x the object the lock call was handed; at the join the branches meet in
the weaker mode again (lockstate.merge()).

Only where that cannot be wrong: x is one identifier, not assigned after
the lock call, and v a local of the caller (no parameter) that it only
ever sets to TOKEN, hands by address to this lock function only, and
otherwise only reads (what the function stores back is never weaker
than what it was handed).  So a caller that asked for the weaker mode
gets nothing (the stronger one is taken only for a write, which the
caller's code does not show); a caller that asked for the stronger one
gets it only in the branch of the test, not on its other paths, where
it holds it too: stated for the whole hold, the stores of those paths
give fields the lock that had no lock evidence, and their readers that
hold it in ways the analysis does not see yet (through a callback's
private data, on an object being torn down) turn up racing
(docs/analysis.md, not modelled yet)."""
from .correlate import STORES
from .lockstate import How


class Raisable(How):
    """A weaker-mode hold that a test of 'call(obj)' raises to the lock
    name's exclusive mode."""
    __slots__ = ("obj", "call")

    def __init__(self, what, line, obj, call):
        How.__init__(self, what, line)
        self.obj = obj
        self.call = call


def taken(spec, how, t, lo, hi, k, args):
    """how as a Raisable when the call toks[k](...) (args: its argument
    ranges) of the lock function spec may be raised in its caller's body
    toks[lo:hi] (see the module's docstring); else how."""
    rw = spec.get("raised_where")
    if not rw or type(how) is not How or not args or args[0][1] - args[0][0] != 1:
        return how
    n, token = rw["mode_arg"]
    obj = t[args[0][0]]
    if n >= len(args) or args[n][1] - args[n][0] != 2 or t[args[n][0]].text != "&" or \
            obj.kind != "id" or _assigned_after(t, k, hi, obj.text):
        return how
    v = t[args[n][0] + 1].text
    if not _only_set_to(t, lo, hi, v, token, spec["name"], n):
        return how
    return Raisable(how.what, how.line, obj.text, rw["call"])


def _assigned_after(t, k, hi, x):
    """x is stored, stepped or handed by address ('&x', not '&x->m')
    from toks[k] on."""
    return any(t[j].text == x and t[j - 1].text not in (".", "->") and
               (t[j + 1].text in STORES or t[j + 1].text in ("++", "--") or
                t[j - 1].text in ("++", "--") or
                t[j - 1].text == "&" and t[j + 1].text not in ("->", ".", "["))
               for j in range(k, hi - 1))


def _only_set_to(t, lo, hi, v, token, fname, n):
    """The local v of the body toks[lo:hi] is no parameter, is only ever
    given token ('v = TOKEN;', 'T v = TOKEN;'), and its address is only
    handed as argument n of calls to fname."""
    head = lo - 1
    while head > 0 and lo - head < 400 and t[head].text not in (";", "}"):
        if t[head].text == v:
            return False
        head -= 1
    for k in range(lo + 1, hi - 1):
        if t[k].text != v or t[k - 1].text in (".", "->"):
            continue
        if t[k - 1].text == "&":
            if not _arg_of(t, lo, k - 1, fname, n):
                return False
        elif t[k + 1].text == "=":
            if t[k + 2].text != token or t[k + 3].text not in (";", ","):
                return False
        elif t[k + 1].text in STORES or t[k + 1].text in ("++", "--") or \
                t[k - 1].text in ("++", "--"):
            return False
    return True


def _arg_of(t, lo, a, fname, n):
    """toks[a] starts argument n of a call to fname, and ends it."""
    depth, commas, j = 0, 0, a - 1
    while j > lo:
        x = t[j].text
        if x in "([{" and depth == 0:
            break
        depth += (x in ")]}") - (x in "([{")
        commas += x == "," and depth == 0
        j -= 1
    return t[j].text == "(" and t[j - 1].text == fname and commas == n and \
        t[a - 1].text in ("(", ",") and t[a + 2].text in (",", ")")


def tested(t, lo, hi, st):
    """(state if true, state if false) of the condition toks[lo:hi] when
    it is '[!]P(x)' for a Raisable hold of st on x raised by P: the branch
    that finds P true holds the lock exclusive too; else None."""
    k, neg = lo, False
    while k < hi and t[k].text == "!":
        neg, k = not neg, k + 1
    if hi - k != 4 or t[k].kind != "id" or t[k + 1].text != "(" or t[k + 3].text != ")":
        return None
    call, obj = t[k].text, t[k + 2].text
    keys = [n for n, h in st.held.items() if type(h) is Raisable and n.endswith(":r") and
            h.call == call and h.obj == obj]
    if not keys:
        return None
    yes = st.copy()
    for n in keys:
        h = st.held[n]
        yes.held.setdefault(n[:-2], How("%s, raised where %s(%s) is true" % (
            h.what, call, obj), t[k].line))
    return (st.copy(), yes) if neg else (yes, st.copy())
