# SPDX-License-Identifier: GPL-2.0-only
"""How each field access is used, read from the tokens around it.

cocci/facts.cocci reports every E->f / E.f (its rules arrowu and dotu); the
use of the access (written, read-modify-written, address taken, the operand
of a marking macro, inside data_race() or sizeof) is decided here, from the
tokens of the expression, with the same syntax as the SmPL rules of
cocci/kinds.cocci, which state it as patterns:

    E->f = E2                         write
    E->f op= E2, ++E->f, E->f++, ...  rmw
    swap(E->f, E2), swap(E2, E->f)    rmw (the macro reads and assigns both)
    &E->f                             addr
    m(E->f, ...), m(&E->f, ...)       marked (m: READ_ONCE, WRITE_ONCE, ...)
    data_race(E->f)                   marked, data_race
    data_race(<+... E->f ...+>)       marked, data_race-expr
    sizeof(<+... E->f ...+>)          sizeof

Matching those patterns in spatch cost a third of the facts pass;
tests/test_kinds.py runs cocci/kinds.cocci and checks that both give the
same kinds on every fixture and on all of the default target.
"""
from . import csrc

MARK_MACROS = {"READ_ONCE", "WRITE_ONCE", "smp_load_acquire", "smp_store_release",
               "smp_store_mb", "xchg", "cmpxchg", "try_cmpxchg", "xchg_relaxed",
               "cmpxchg_relaxed", "rcu_dereference", "rcu_assign_pointer",
               "rcu_access_pointer"}
# macros that read and assign their arguments (include/linux/minmax.h)
LVALUE_MACROS = {"swap"}
_ASSIGN_OPS = {"+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>="}
_POSTFIX = {".", "->", "[", "("}
_UNARY = {"*", "&", "++", "--", "!", "~", "-", "+"}


def _unary_at(toks, i):
    """toks[i] ('&', '*', '++', '--') is a prefix operator."""
    if i <= 0:
        return True
    p = toks[i - 1]
    if p.kind in ("num", "str", "chr"):
        return False
    if p.kind == "id":
        # 'return &x->f', 'sizeof *p': keywords; any other identifier is a value
        return p.text in ("return", "sizeof", "case", "else", "do")
    if p.text == ")":
        o = csrc.open_of(toks, i - 1)
        if o > 0 and toks[o - 1].text in ("if", "while", "for", "switch"):
            return True                 # 'if (c) *x->p = 0;'
        # a cast '(type) &x->f' or a value '(a) & x->f': the SmPL patterns
        # see a cast when the parenthesis holds a type name, which the
        # tokens cannot tell; a cast is taken when it ends in '*' or starts
        # with 'struct'/'const'/a type keyword
        if 0 <= o and o + 1 < i - 1:
            return toks[i - 2].text == "*" or toks[o + 1].text in _TYPE_WORDS
        return False
    # after ']' or a postfix '++'/'--' it is binary
    return p.text not in ("]", "++", "--")


_TYPE_WORDS = {"struct", "union", "enum", "const", "volatile", "unsigned", "signed",
               "char", "short", "int", "long", "void", "u8", "u16", "u32", "u64",
               "s8", "s16", "s32", "s64", "bool", "size_t", "loff_t", "__le16",
               "__le32", "__le64", "__u8", "__u16", "__u32", "__u64"}


def _call_of(toks, o):
    """The name of the function or macro whose '(' is toks[o], or None."""
    if o > 0 and toks[o - 1].kind == "id":
        return toks[o - 1].text
    return None


def _enclosing_opens(toks, i):
    """Indices of the '(' enclosing toks[i] within its statement, innermost
    first."""
    out = []
    j = i - 1
    while j >= 0:
        t = toks[j].text
        if t in (")", "]", "}"):
            o = csrc.open_of(toks, j)
            if o < 0:
                break
            j = o - 1
            continue
        if t == "(":
            out.append(j)
        elif t in ("{", ";"):
            break
        j -= 1
    return out


def kinds_of(toks, k):
    """The kinds (set of 'write', 'rmw', 'addr', 'marked', 'sizeof') of the
    access whose field name is toks[k], and the marking macro (or None)."""
    ks = set()
    macro = None
    if k < 1 or toks[k - 1].text not in ("->", "."):
        return ks, macro
    b = csrc.base_start(toks, k - 1)
    if b is None:
        return ks, macro
    nxt = toks[k + 1].text if k + 1 < len(toks) else ""
    prv = toks[b - 1].text if b > 0 else ""
    whole = nxt not in _POSTFIX           # E->f is not the base of a longer postfix
    # a prefix operator applies to E->f: '*E->f = x' assigns to what it
    # points to, '*--E->p = x' decrements the pointer
    pre = prv in _UNARY and _unary_at(toks, b - 1)
    if whole:
        if nxt in ("++", "--"):
            ks.add("rmw")               # postfix binds tighter: '*p->x++'
        elif pre:
            if prv in ("++", "--"):
                ks.add("rmw")
        elif nxt == "=":
            ks.add("write")
        elif nxt in _ASSIGN_OPS:
            ks.add("rmw")
    addr = whole and prv == "&" and _unary_at(toks, b - 1)
    if addr:
        ks.add("addr")
    # the operand of a macro: m(E->f, ...) or m(&E->f, ...)
    if whole and nxt in (",", ")"):
        o = b - 2 if addr else b - 1
        if o >= 0 and toks[o].text == "(":
            m = _call_of(toks, o)
            if m in MARK_MACROS:
                ks.add("marked")
                macro = m
            elif m == "data_race" and not addr and nxt == ")":
                ks.add("marked")
                macro = "data_race"
    if whole and not addr and nxt in (",", ")") and prv in ("(", ","):
        opens = _enclosing_opens(toks, b)
        if opens and _call_of(toks, opens[0]) in LVALUE_MACROS:
            ks.add("rmw")               # swap(E->f, x): read and assigned
    if prv == "sizeof":
        ks.add("sizeof")                # sizeof x->f, sizeof(x)->f
    for o in _enclosing_opens(toks, b):
        m = _call_of(toks, o)
        if m == "sizeof":
            ks.add("sizeof")
        elif m == "data_race" and macro != "data_race":
            ks.add("marked")
            if macro is None:
                macro = "data_race-expr"
    return ks, macro


def line_tokens(line):
    """Tokens of one source line inside a #define (the access facts spatch
    reports in macro bodies): '##' joins its neighbours into one
    identifier and '#' is blanked (same columns), so that the tokenizer
    does not take the rest of the line for a preprocessor directive."""
    toks = csrc.tokenize(line.replace("##", "__").replace("#", " "))
    csrc.index_parens(toks)
    return toks
