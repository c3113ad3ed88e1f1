# SPDX-License-Identifier: GPL-2.0-only
"""What each token of a function is an argument of: the callees of the
parentheses around it, and the uses that make a read diagnostic (an
argument after a format string, the condition of an 'if' whose body is
one assertion)."""
from . import csrc
from .locks import KEYWORDS
from .policy import GUARD, MESSAGE


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
