# SPDX-License-Identifier: GPL-2.0-only
"""Field values: the constants an enum field can hold, and the branches
that no value it holds can take.

    enum mode { MODE_A, NR_MODES };          (one mode so far)

    for (i = 0; i < NR_MODES; i++)
            if (i != x->mode)
                    x->mode = i;            <- never runs: i is 0,
                                               and so is x->mode
    switch (x->mode) {
    default:
            x->mode = MODE_A;               <- never runs either
    case MODE_A: ...

A field of enum type whose every store is a constant (an enumerator, a
number, the counter of a loop over constant bounds) holds one of those
values or 0 (a zeroed allocation).  A test 'E != x->f' where E and the
field can only be one and the same value is never true; 'E == x->f' is
never true when they share no value; a switch on the field whose cases
name every value never takes its default arm.  The stores in such a
branch do not count (a fixed point: without them the field may hold
fewer values), and an access there runs in no context: it gets the rule
'dead-code' (exclusions.py asks value_dead()).  A field whose address is
taken, or that is updated in place, may hold anything; so may every field
of a struct that a copy call fills (memcpy(), copy_from_user(): from the
disk or the user) or that an initializer fills by position; a designated
initializer ('.f = X') is a store.

Reads .src, .accesses.  Sets nothing but its cache (_vdead).
"""
import re
from bisect import bisect_right

from . import csrc
from .flagargs import assigned_at
from .tokutil import _branch_end, _open_blocks, _split, _stmt_end


def _number(text):
    """The value of an integer literal (0x10, 4U, 1UL), or None."""
    t = text.rstrip("uUlL")
    try:
        return int(t, 0)
    except ValueError:
        return None


def enum_constants(toks, out, at=None):
    """Add the enumerators of every 'enum [name] { ... }' in toks (those
    at the indexes at, when given) to out (name -> value); an enumerator
    whose value is not a number or an earlier enumerator ends its enum's
    numbering."""
    for i in (range(len(toks) - 2) if at is None else at):
        if toks[i].text != "enum":
            continue
        j = i + 1 if toks[i + 1].text == "{" else i + 2
        if j >= len(toks) or toks[j].text != "{":
            continue
        _number_enum(toks, j + 1, csrc.match_paren(toks, j), out)


def _number_enum(toks, lo, hi, out):
    nxt = 0
    k = lo
    while k < hi:
        if toks[k].kind != "id":
            return
        name = toks[k].text
        k += 1
        if k < hi and toks[k].text == "=":
            e = k + 1
            while e < hi and toks[e].text != ",":
                e += 1
            v = _const_of(toks, k + 1, e, out)
            if v is None:
                return
            nxt = v
            k = e
        out.setdefault(name, nxt)
        nxt += 1
        if k < hi and toks[k].text == ",":
            k += 1
        elif k < hi:
            return


def _const_of(toks, lo, hi, consts):
    """The value of toks[lo:hi] when it is a number or a known constant
    (in parentheses, with a cast), else None."""
    while hi - lo > 2 and toks[lo].text == "(" and csrc.match_paren(toks, lo) == hi - 1:
        lo, hi = lo + 1, hi - 1
    if hi - lo > 3 and toks[lo].text == "(":
        e = csrc.match_paren(toks, lo)
        if e < hi - 1 and all(t.kind == "id" or t.text == "*" for t in toks[lo + 1:e]):
            lo = e + 1                  # a cast
    if hi - lo == 2 and toks[lo].text == "-":
        v = _const_of(toks, lo + 1, hi, consts)
        return None if v is None else -v
    if hi - lo != 1:
        return None
    t = toks[lo]
    if t.kind == "num":
        return _number(t.text)
    if t.kind == "id":
        return consts.get(t.text)
    return None


def _loop_values(fn, toks, k, consts):
    """counter -> the values it takes in the 'for (v = A; v < B; v++)'
    loops around toks[k] (constant bounds, v not assigned in the body)."""
    out = {}
    for i in _open_blocks(toks, fn.body_start, k):
        if toks[i - 1].text != ")":
            continue
        o = csrc.open_of(toks, i - 1)
        if o <= 0 or toks[o - 1].text != "for":
            continue
        h = [t.text for t in toks[o + 1:i - 1]]
        if len(h) < 10 or h[1] != "=" or h.count(";") != 2:
            continue
        s1, s2 = h.index(";"), len(h) - 1 - h[::-1].index(";")
        v = h[0]
        if h[s1 + 1:s1 + 3] != [v, "<"] or h[s2 + 1:] not in ([v, "++"], ["++", v]):
            continue
        lo = _const_of(toks, o + 3, o + 1 + s1, consts)
        hi = _const_of(toks, o + 1 + s1 + 3, o + 1 + s2, consts)
        if lo is None or hi is None or hi - lo > 4096 or v in out or \
                assigned_at(toks, i, csrc.match_paren(toks, i), v):
            continue
        out[v] = frozenset(range(lo, hi))
    return out


# calls that fill an object from bytes the code does not show
_COPIES = frozenset(("memcpy", "memmove", "copy_from_user", "memdup_user", "kmemdup",
                     "vmemdup_user", "memdup_user_nul", "copy_struct_from_user",
                     "copy_from_sockptr"))
# those that copy their source argument (its index): from an object of
# the same struct they carry only the values it holds
_SAME_TYPE = {"memcpy": 1, "memmove": 1, "kmemdup": 0}


class _Initialisers:
    def _initialised_values(self, struct, field, consts):
        """The values the designated initializers '.field = X' give, or
        None when one is not a constant, or struct is filled by position
        or by a copy call (then the field may hold anything)."""
        vals = set()
        for f in sorted(self.src.toks):
            toks, text = self.src.toks[f], self.src.text[f]
            for m in re.finditer(re.escape(field), text):
                i = _tok_at(self.src, f, m.start())
                if i is None or i < 2 or i + 1 >= len(toks) or toks[i - 1].text != "." or \
                        toks[i + 1].text != "=" or toks[i - 2].text not in ("{", ","):
                    continue
                e = i + 2
                while e < len(toks) and toks[e].text not in (",", "}", ";"):
                    e = csrc.match_paren(toks, e) + 1 if toks[e].text in "([{" else e + 1
                v = _const_of(toks, i + 2, e, consts)
                if v is None:
                    return None
                vals.add(v)
            for m in re.finditer(re.escape(struct), text):
                i = _tok_at(self.src, f, m.start())
                if i is not None and toks[i - 1].text == "struct" and _by_position(toks, i):
                    return None
        if any(self._fills(toks, k, types, struct) for toks, k, types in self._copy_calls()) \
                or _in_macros(self.src, field):
            return None
        return frozenset(vals)

    def _copy_calls(self):
        """[(tokens, index, declared types of the function)] of every call
        of a _COPIES function inside a function body."""
        got = self.__dict__.get("_vcopies")
        if got is not None:
            return got
        got = self._vcopies = []
        calls = re.compile(r"\b(?:%s)\s*\(" % "|".join(sorted(_COPIES)))
        for f in sorted(self.src.toks):
            fns = self._functions_of(f)
            for m in calls.finditer(self.src.text[f]):
                k = _tok_at(self.src, f, m.start())
                fn = _function_at(fns, k) if k is not None else None
                if fn is not None:
                    got.append((self.src.toks[f], k, self._decl_types(fn)))
        return got

    def _functions_of(self, f):
        """[(body_start, body_end, fn)] of file f's functions, sorted."""
        by_file = self.__dict__.get("_vfns")
        if by_file is None:
            by_file = self._vfns = {}
            for (f2, _), fn in self.src.funcs.items():
                by_file.setdefault(f2, []).append((fn.body_start, fn.body_end, fn))
            for v in by_file.values():
                v.sort(key=lambda x: x[:2])
        return by_file.get(f, [])

    @staticmethod
    def _fills(toks, k, types, struct):
        """The copy call at toks[k] fills an object of struct from
        something else."""
        args = _split(toks, k + 2, csrc.match_paren(toks, k + 1))
        objs = [n for n, (lo, hi) in enumerate(args) if _object_of(toks, lo, hi, types, struct)]
        if toks[k - 1].text == "=" and types.get(toks[k - 2].text) == struct:
            objs.append(-1)             # p = memdup_user(...)
        return bool(objs) and _SAME_TYPE.get(toks[k].text) not in objs


def _tok_at(src, f, offset):
    """The index of the token that starts at offset of file f's text."""
    starts = src.__dict__.setdefault("_line_starts", {})
    ls = starts.get(f)
    if ls is None:
        ls = starts[f] = [0] + [m.end() for m in re.finditer("\n", src.text[f])]
    line = bisect_right(ls, offset)
    return src.pos[f].get((line, offset - ls[line - 1]))


def _function_at(fns, k):
    """The function of fns ((body_start, body_end, fn), sorted) whose body
    holds token k."""
    for lo, hi, fn in fns:
        if lo <= k <= hi:
            return fn
        if lo > k:
            break
    return None

def _object_of(toks, lo, hi, types, struct):
    """toks[lo:hi] is an object of struct, or 'sizeof' of one."""
    if hi - lo > 2 and toks[lo].text == "sizeof" and toks[lo + 1].text == "(":
        lo, hi = lo + 2, hi - 1
        if toks[lo].text == "struct":
            return hi - lo == 2 and toks[lo + 1].text == struct
    while lo < hi and toks[lo].text in ("&", "*"):
        lo += 1
    return hi - lo == 1 and types.get(toks[lo].text) == struct


def _in_macros(src, field):
    """Does a macro body store field ('.field =', '->field =')?"""
    text = getattr(src, "_define_text", None)
    if text is None:
        define = re.compile(r"^[ \t]*#[ \t]*define\b(?:[^\n\\]|\\.|\\\n)*", re.M)
        text = src._define_text = "\n".join(m.group(0) for f in sorted(src.text)
                                            for m in define.finditer(src.text[f]))
    return re.search(r"(?:->|\.)\s*%s\s*=(?!=)" % re.escape(field), text) is not None

def _by_position(toks, i):
    """'struct S x = { a, b }', 'struct S x[] = { { a, b } }' or
    '(struct S){ a, b }' at toks[i] (S): members filled by position."""
    j = i + 1
    if toks[j].text == ")":
        j += 1
    else:
        while j < len(toks) and (toks[j].kind == "id" or toks[j].text == "*"):
            j += 1
        while j < len(toks) and toks[j].text == "[":
            j = csrc.match_paren(toks, j) + 1
        if j >= len(toks) or toks[j].text != "=":
            return False
        j += 1
    while j < len(toks) and toks[j].text == "{":
        j += 1
    return 0 < j < len(toks) and toks[j - 1].text == "{" and toks[j].text not in (".", "}")


class FieldValues(_Initialisers):
    def value_dead(self, a):
        """Why a runs in no context (a branch no value of an enum field
        takes), or None."""
        if a.tok is None or a.func is None:
            return None
        for lo, hi, why in self._value_dead_ranges().get(a.file, ()):
            if lo <= a.tok <= hi:
                return why
        return None

    def _value_dead_ranges(self):
        """file -> [(from, to, why)]: the token ranges no value reaches
        (the fixed point of the module docstring)."""
        got = getattr(self, "_vdead", None)
        if got is not None:
            return got
        consts = {}
        for f in sorted(self.src.toks):
            at = [_tok_at(self.src, f, m.start())
                  for m in re.finditer("enum", self.src.text[f])]
            enum_constants(self.src.toks[f], consts, [i for i in at if i is not None])
        by_field = {}
        for a in self.accesses:
            m = self.src.member(a.struct, a.field, a.file)
            if m is not None and not m.pointer and not m.array and \
                    (m.type or "").startswith("enum "):
                by_field.setdefault((a.struct, a.field), []).append(a)
        dead = {}
        extra = {}
        for _ in range(4):
            new = {}
            for (s, f), accs in sorted(by_field.items()):
                vals = self._field_values(accs, consts, dead)
                if vals is not None and (s, f) not in extra and \
                        any(self._untaken(a, vals, consts, "") for a in accs):
                    extra[(s, f)] = self._initialised_values(s, f, consts)
                if vals is None or extra.get((s, f), frozenset()) is None:
                    continue
                vals |= extra.get((s, f), frozenset())
                for a in accs:
                    for r in self._untaken(a, vals, consts, "%s.%s" % (s, f)):
                        new.setdefault(a.file, []).append(r)
            if new == dead:
                break
            dead = new
        self._vdead = dead
        return dead

    def _field_values(self, accs, consts, dead):
        """The values the field of accs can hold (0 included: a zeroed
        allocation), or None when a store is not a constant."""
        vals = {0}
        for a in accs:
            if a.kind == "read":
                continue
            if a.kind != "write" or a.tok is None or a.func is None:
                return None
            if any(lo <= a.tok <= hi for lo, hi, _ in dead.get(a.file, ())):
                continue
            toks = self.src.toks[a.file]
            if toks[a.tok + 1].text != "=":
                return None
            got = _expr_values(a.func, toks, a.tok + 2,
                               _stmt_end(toks, a.tok + 2, a.func.body_end), consts)
            if got is None:
                return None
            vals |= got
        return frozenset(vals)

    def _untaken(self, a, vals, consts, name):
        """The branches the test that load a is an operand of never takes:
        [(from, to, why)]."""
        if a.kind != "read" or a.tok is None or a.func is None:
            return []
        toks = self.src.toks[a.file]
        s = csrc.base_start(toks, a.tok - 1)
        if s is None or s < 2:
            return []
        e = a.tok
        if toks[s - 2].text == "switch" and toks[s - 1].text == "(" and \
                toks[e + 1].text == ")" and toks[e + 2].text == "{":
            return _dead_default(toks, e + 2, vals, consts, name)
        if toks[s - 2].text == "if" and toks[s - 1].text == "(" and \
                toks[e + 1].text in ("==", "!="):
            close = csrc.match_paren(toks, s - 1)
            op, other = toks[e + 1].text, (e + 2, close)
        elif toks[e + 1].text == ")" and toks[s - 1].text in ("==", "!="):
            close = e + 1
            o = csrc.open_of(toks, close)
            if o < 1 or toks[o - 1].text != "if":
                return []
            op, other = toks[s - 1].text, (o + 1, s - 1)
        else:
            return []
        ov = _expr_values(a.func, toks, other[0], other[1], consts)
        if ov is None:
            return []
        return _dead_arms(a.func, toks, close, op, vals, ov, name)


def _expr_values(fn, toks, lo, hi, consts):
    """The values toks[lo:hi] can have: a constant, or the counter of a
    loop over constant bounds around it; None when not known."""
    v = _const_of(toks, lo, hi, consts)
    if v is not None:
        return frozenset((v,))
    if hi - lo == 1 and toks[lo].kind == "id":
        return _loop_values(fn, toks, lo, consts).get(toks[lo].text)
    return None


def _dead_arms(fn, toks, close, op, vals, ov, name):
    """The arm of 'if (field op other)' (the condition closing at
    toks[close]) that no value takes."""
    same = len(vals) == 1 and vals == ov
    never_true = same if op == "!=" else vals.isdisjoint(ov)
    never_false = same if op == "==" else vals.isdisjoint(ov)
    end = _branch_end(toks, close + 1, fn.body_end)
    why = "%s can only be %s here, so this branch never runs" % (
        name, " or ".join(str(v) for v in sorted(vals)))
    if never_true:
        return [(close + 1, end, why)]
    if never_false and toks[end + 1].text == "else":
        return [(end + 1, _branch_end(toks, end + 2, fn.body_end), why)]
    return []


def _dead_default(toks, body, vals, consts, name):
    """The default arm of the switch whose body opens at toks[body], when
    a case names every value the field holds and nothing falls into it."""
    end = csrc.match_paren(toks, body)
    labels, cases, default = [], set(), None
    k = body + 1
    while k < end:
        t = toks[k].text
        if t == "{":
            k = csrc.match_paren(toks, k) + 1
            continue
        if t == "case":
            c = k + 1
            while c < end and toks[c].text != ":":
                c += 1
            v = _const_of(toks, k + 1, c, consts)
            if v is not None:
                cases.add(v)
            labels.append(k)
            k = c
        elif t == "default" and toks[k + 1].text == ":":
            default = k
            labels.append(k)
        k += 1
    if default is None or not vals <= cases or not _no_fallthrough(toks, body, default):
        return []
    nxt = [x for x in labels if x > default]
    return [(default, (nxt[0] if nxt else end) - 1,
             "a case of this switch names every value %s can hold (%s), so its "
             "default arm never runs" % (name, ", ".join(str(v) for v in sorted(vals))))]


def _no_fallthrough(toks, body, k):
    """Nothing before the label at toks[k] runs into it: it comes first,
    or the statement before it ends in break, continue, return or goto."""
    if k == body + 1:
        return True
    if toks[k - 1].text != ";":
        return False
    j = k - 2
    while j > body and toks[j].text not in (";", "{", "}", ":"):
        j -= 1
    return toks[j + 1].text in ("break", "continue", "return", "goto")

