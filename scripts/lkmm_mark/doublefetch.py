# SPDX-License-Identifier: GPL-2.0-only
"""Stage 4a: check-then-use double fetches, a bug no mark fixes.

A field that races (one of its accesses has a racing pair) is tested for
zero or NULL in a condition ('if', 'while', 'for', or the left side of
'&&', '||', '?') and loaded again, from the same base, in the code that
condition guards, as a divisor or a pointer it dereferences.  A store
that races with the loads can land between them: the code then divides by
zero or dereferences NULL, which its test was there to prevent.
READ_ONCE() on both loads keeps each load whole but not the two equal; the
fix is to load once into a local and test and use the local.

Not reported: the two loads kept apart from every store of the field (a
lock held at the loads that every store holds, or any other reason the
racing pairs know: pairs._counterpart()), a store to the field by this
function between them, a base expression assigned between them, and a
use after the test that the test does not guard ('if (!p->f) return;
... p->f').

Reads .accesses with their verdicts, .pair_idx (pairs.py) and .src.
Sets .double_fetches: one dict per finding, for the plan's
'double_fetches' list (commands.plan_dict()).
"""
import collections

from . import csrc
from .pairs import _locks_text, is_load, is_store
from .kinds import _unary_at
from .tokutil import _stmt_end

_COND_KWS = ("if", "while", "for", "switch")
_ASSIGN = {"=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>="}


def racy_fields(accesses):
    """(struct, field) of each field with a racing pair (pairs.py)."""
    return {(a.struct, a.field) for a in accesses
            if not a.test and getattr(a, "tier", None) == "paired"}


def direct(a):
    """An access the detectors read: a field access written in a function
    body (not one in a macro body, reported at its calls) and not one
    the exclusions set aside (an object not published, an init path)."""
    return not a.test and a.via is None and a.func is not None and a.tok is not None \
        and (a.exclusion is None or a.exclusion[0] == "already-marked")


def plain_load(a):
    return is_load(a) and a.kind in ("read", "marked")


def same_object(accesses, fields):
    """The direct accesses to fields (a set of (struct, field)), grouped by
    (file, function, struct, field, base)."""
    groups = collections.defaultdict(list)
    for a in accesses:
        if (a.struct, a.field) in fields and direct(a) and a.base:
            groups[(a.file, a.fn, a.struct, a.field, a.base)].append(a)
    return groups


class DoubleFetch:
    def find_double_fetches(self):
        self.double_fetches = []
        racy = racy_fields(self.accesses)
        for key, accs in sorted(same_object(self.accesses, racy).items()):
            loads = [a for a in accs if plain_load(a)]
            used = set()
            for a in loads:
                later = self._refetches(a, [b for b in loads if id(b) not in used], accs)
                if not later:
                    continue
                store = self._store_between(a, later[0])
                if store is None:
                    continue
                used.update(id(b) for b in later)
                self.double_fetches.append(_finding(a, later, store))
        self.double_fetches.sort(key=lambda x: (x["file"], x["line"], x["column"]))

    def _refetches(self, a, loads, accs):
        """The loads of loads after load a that are in the code the
        condition testing a guards and use the value as the test is there
        for (_RELIES), with no store of the field by this function and no
        assignment to the base between."""
        toks = self.src.toks[a.file]
        relies = _RELIES.get(test_kind(toks, a.tok))
        if not relies:
            return []
        later = [b for b in loads if b.tok > a.tok and use_kind(toks, b.tok) in relies]
        if not later:
            return []
        spans = guarded_spans(toks, a.func.body_start, a.func.body_end, a.tok)
        names = base_names(a.base)
        return [b for b in later if any(lo <= b.tok <= hi for lo, hi in spans) and
                not any(is_store(s) and a.tok < s.tok < b.tok for s in accs) and
                not assigned_between(toks, a.tok, b.tok, names)]

    def _store_between(self, a, b):
        """A store of the field that races with load a or load b (each
        load's locks are at least those held across both), or None."""
        stores = [s for s in self.pair_idx.get((a.struct, a.field), ()) if is_store(s)]
        for x in (a, b):
            s = self._counterpart(x, stores)[0]
            if s is not None:
                return s
        return None


def _finding(a, later, s):
    again = ", ".join(str(b.line) for b in later)
    reason = "%s.%s is loaded here in %s() to test it and loaded again at line%s %s, " \
        "in the code the test guards; %s() at %s stores it %s and can store between " \
        "the loads: load it once into a local" % (
            a.struct, a.field, a.fn, "s" if len(later) > 1 else "", again, s.fn,
            s.where(), _locks_text(s))
    return {"file": a.file, "line": a.line, "column": a.col, "end_column": a.ecol,
            "function": a.fn, "struct": a.struct, "field": a.field, "base": a.base,
            "again": [{"line": b.line, "column": b.col} for b in later],
            "counterpart": {"file": s.file, "line": s.line, "function": s.fn,
                            "access": s.kind},
            "fix": "load once into a local", "reason": reason}


# ------------------------------------------------- what the loads do

# the uses a test makes safe: a value tested non-zero (or non-NULL) is
# divided by or dereferenced, which a zero (or NULL) stored between the
# loads turns into a crash.  Any other use (a copy, a message's argument,
# another test) sees a value its test did not check, but nothing the test
# was there to prevent; a value compared ('<', '>=') and then subtracted
# is left out too: of the six such pairs in the first target reviewed, five were not
# real and one possible (docs/other-bugs.md).
_RELIES = {"truth": ("divisor", "deref")}
_BOUNDARY = {"&&", "||", "?", ":", ",", ";", "{", "}", "return"} | _ASSIGN
_MARKS = ("READ_ONCE", "data_race", "smp_load_acquire")
_TRANSPARENT = _COND_KWS + ("likely", "unlikely")


def load_span(toks, k):
    """(first, last) token of the load whose field name is toks[k]: the
    member expression, or the READ_ONCE() around it."""
    s = csrc.base_start(toks, k - 1)
    s = k - 1 if s is None else s
    if toks[s - 1].text == "(" and toks[s - 2].text in _MARKS and toks[k + 1].text == ")":
        return s - 2, k + 1
    return s, k


def _segment(toks, s, e):
    """The operand of a logical operator (or the condition, statement or
    argument) that holds toks[s:e + 1]: its first and last index."""
    i = s - 1
    while i > 0 and toks[i].text not in _BOUNDARY:
        if toks[i].text in (")", "]"):
            i = csrc.open_of(toks, i) - 1
            continue
        if toks[i].text in ("(", "["):
            break
        i -= 1
    j = e + 1
    while j < len(toks) and toks[j].text not in _BOUNDARY:
        if toks[j].text in ("(", "["):
            j = csrc.match_paren(toks, j) + 1
            continue
        if toks[j].text in (")", "]"):
            break
        j += 1
    return i + 1, j - 1


def test_kind(toks, k):
    """How the condition tests the load at toks[k]: 'truth' (the load
    alone, negated, or compared with 0 or NULL), or None (a comparison, a
    bit test, a call's argument, an equality with some other value)."""
    s, e = load_span(toks, k)
    lo, hi = _segment(toks, s, e)
    if toks[lo - 1].text == "(" and toks[lo - 2].kind == "id" and \
            toks[lo - 2].text not in _TRANSPARENT:
        return None                     # an argument of a call
    rest = [t.text for t in toks[lo:s]] + [t.text for t in toks[e + 1:hi + 1]]
    if all(x == "!" for x in rest):
        return "truth"
    if len(rest) == 2 and rest[0] in ("==", "!=") and rest[1] in ("0", "NULL") or \
            len(rest) == 2 and rest[1] in ("==", "!=") and rest[0] in ("0", "NULL"):
        return "truth"
    return None


def use_kind(toks, k):
    """What the code does with the load at toks[k]: 'divisor', 'deref',
    or None (anything else)."""
    s, e = load_span(toks, k)
    before, after = toks[s - 1].text, toks[e + 1].text
    if before in ("/", "%", "/=", "%=") or _div_argument(toks, s, e):
        return "divisor"
    if after in ("->", "[") or (before == "*" and _unary_at(toks, s - 1)):
        return "deref"
    return None


def _div_argument(toks, s, e):
    """The load is an argument after the first of a division helper
    ('do_div(n, p->f)', 'div_u64(n, p->f)', 'DIV_ROUND_UP(n, p->f)')."""
    if toks[s - 1].text != "," or toks[e + 1].text not in (",", ")"):
        return False
    o = enclosing_open(toks, 0, s)
    return o is not None and toks[o].text == "(" and "div" in toks[o - 1].text.lower()


# ------------------------------------------------------------ tokens

def base_names(base):
    """The variables a base expression text reads ('inode -> root' ->
    {'inode'}; members after '->' or '.' are not variables)."""
    toks = base.split()
    return {t for i, t in enumerate(toks)
            if (t[:1].isalpha() or t[:1] == "_") and (i == 0 or toks[i - 1] not in ("->", "."))}


def assigned_between(toks, lo, hi, names):
    """Is one of names assigned ('v =', 'v += ', 'v++', '++v') in toks[lo:hi]?"""
    for i in range(lo + 1, hi):
        t = toks[i]
        if t.kind != "id" or t.text not in names or toks[i - 1].text in ("->", "."):
            continue
        if toks[i + 1].text in _ASSIGN or toks[i + 1].text in ("++", "--") or \
                toks[i - 1].text in ("++", "--"):
            return True
    return False


def guarded_spans(toks, lo, hi, k):
    """The token spans (first, last) of the code that a condition holding
    toks[k] guards: the branches of the 'if', the body of the 'while' or
    'for' whose condition holds it, and the right side of each '&&', '||'
    or '?' whose left side holds it.  lo, hi: the function's braces."""
    spans = []
    scan, inner = k, k
    while True:
        m, end = _level_operator(toks, scan + 1, hi)
        if m is not None:
            spans.append((m + 1, end))
        o = enclosing_open(toks, lo, inner)
        if o is None or toks[o].text == "{":
            return spans
        if toks[o].text == "(" and toks[o - 1].text in _COND_KWS:
            return spans + _statement_spans(toks, o, hi, k)
        inner, scan = o, csrc.match_paren(toks, o)


def _level_operator(toks, i, hi):
    """From toks[i], at this bracket level: the index of the first '&&',
    '||' or '?' before the level ends (None), and where it ends."""
    m = None
    while i < hi:
        x = toks[i].text
        if x in ("(", "[", "{"):
            i = csrc.match_paren(toks, i) + 1
            continue
        if x in (")", "]", "}", ";", ","):
            return m, i - 1
        if x == ":" and m is None:
            return None, i - 1
        if x in ("&&", "||", "?") and m is None:
            m = i
        i += 1
    return m, hi - 1


def enclosing_open(toks, lo, i):
    """The innermost '(', '[' or '{' that holds toks[i], or None."""
    j = i - 1
    while j > lo:
        x = toks[j].text
        if x in (")", "]", "}"):
            j = csrc.open_of(toks, j) - 1
            continue
        if x in ("(", "[", "{"):
            return j
        j -= 1
    return lo if j == lo else None


def _statement_spans(toks, o, hi, k):
    """The code that the condition in parentheses toks[o] guards, when it
    holds toks[k]: an 'if''s branches, a 'while''s body (not a do-while's
    tail), the body of a 'for' whose middle clause holds k."""
    kw = toks[o - 1].text
    c = csrc.match_paren(toks, o)
    if kw == "switch" or c + 1 >= hi:
        return []
    if kw == "for":
        semis = [j for j in range(o + 1, c) if toks[j].text == ";" and
                 enclosing_open(toks, o - 1, j) == o]
        if len(semis) != 2 or not semis[0] < k < semis[1]:
            return []
    if kw == "while" and toks[o - 2].text == "}" and \
            toks[csrc.open_of(toks, o - 2) - 1].text == "do":
        return []
    end = stmt_last(toks, c + 1, hi)
    spans = [(c + 1, end)]
    if kw == "if" and end + 1 < hi and toks[end + 1].text == "else":
        spans.append((end + 2, stmt_last(toks, end + 2, hi)))
    return spans


def stmt_last(toks, s, hi):
    """The index of the last token of the statement that starts at toks[s]."""
    x = toks[s].text
    if x == "{":
        return csrc.match_paren(toks, s)
    if toks[s].kind == "id" and toks[s + 1].text == "(":
        c = csrc.match_paren(toks, s + 1)
        if x in ("if", "while", "for", "switch") or toks[c + 1].text == "{":
            # a statement, or a loop macro ('list_for_each_entry(...) {')
            e = stmt_last(toks, c + 1, hi)
            if x == "if" and e + 1 < hi and toks[e + 1].text == "else":
                e = stmt_last(toks, e + 2, hi)
            return e
    if x == "do":
        e = stmt_last(toks, s + 1, hi)
        return _stmt_end(toks, e + 1, hi)
    return _stmt_end(toks, s, hi)
