# SPDX-License-Identifier: GPL-2.0-only
"""Variants of one struct: a field fixed when an object is made says which
of two kinds it is, and code reaches each kind its own way.

    if (!e->map) {                         m = foo_search(ctl, o, 1);
            ... e->state ...               m->state = DONE;
    }                                      (the lookup returns maps only)

The load reads an extent entry, the store writes a bitmap entry: two
objects, whatever their field (instances.py asks variant_of() of both).

policies/ 'variants': {"field": "S.f", "lookups": [{"call", "arg",
"value", "variant"}], "reason"}; a variant is "set" (f is not NULL) or
"null".  Or a kind field with two named values, {"field": "S.kind",
"values": {"FOO_A": "a", "FOO_B": "b"}, "lists": {"T.a_list": "a"}}: a
variant is the name of the value the field holds, and an object a loop
takes from a list of one variant ('list_for_each_entry(v, &t->a_list,
...)') is of that variant.  Or a flag bit of a field, {"field": "S.m",
"bit": "FOO_RW"}: the variant is "set" or "null" as a test 'test_bit(FOO_RW,
&v->m)' (or '!test_bit(...)') says.  'made_lists', [{"list": "T.l",
"call": "foo_make", "variant"}]: what a loop takes from the list '&c->l'
of a container c that every value of comes from foo_make() (or NULL; for
a parameter, every caller passes such a variable) is of that variant (a
container that call makes only ever holds one kind).  The variant of the
object 'v->x' names, at that token:

- a test of v->f that the token is inside a branch of ('if (v->f)',
  '!v->f', 'v->f == NULL', 'v->kind == FOO_A', ...), or that ends in a
  return, goto, break or continue before it ('if (!v->f) goto out;'), or
  an assertion of it (policies/ 'state_assertions'), or a store 'v->f =
  x' before it, with v not assigned in between;
- else the list the loop around it takes v from ('lists', 'made_lists');
- else the variant of every value assigned to v in the function: a
  lookup call with the declared argument ('foo_search(ctl, o, 1)'), or
  another variable;
- else, for a parameter the function never assigns, the variant every
  call passes (at most three calls deep).

Reads .src, .P.variants, .P.state_assertions, .params(), .sites_of(),
._call_args(), .addr_taken, .macro_used.  Sets nothing but its memo.
"""
from . import csrc
from .tokutil import _branch_end, _last_stmt, _open_blocks, _stmt_end

_EXITS = ("return", "goto", "break", "continue")


class Variants:
    def variant_of(self, a):
        """'set', 'null' or None for the object access a goes through."""
        spec = self.P.variants.get(a.struct)
        toks = self.src.toks.get(a.file)
        k = a.tok
        if spec is None or toks is None or k is None or a.func is None or k < 2 or \
                toks[k - 1].text != "->" or toks[k - 2].kind != "id" or \
                toks[k - 3].text in (".", "->"):
            return None
        memo = self.__dict__.setdefault("_varmemo", {})
        key = (a.file, k)
        if key not in memo:
            memo[key] = self._variant_at(a.func, toks[k - 2].text, k, spec, 0)
        return memo[key]

    def _variant_at(self, fn, v, k, spec, depth):
        """The variant of the object variable v names at toks[k] in fn."""
        toks = self.src.toks[fn.file]
        got = self._tested(fn, toks, v, k, spec)
        if got is None and (spec.get("lists") or spec.get("made_lists")):
            got = self._listed(fn, toks, v, k, spec)
        if got is not None:
            return got
        where = [j for j in range(fn.body_start, fn.body_end)
                 if toks[j].text == v and toks[j + 1].text == "=" and
                 toks[j - 1].text not in (".", "->")]
        if where:
            seen = set()
            for j in where:
                end = _stmt_end(toks, j + 2, fn.body_end)
                x = self._value_variant(fn, toks, j + 2, end, spec, depth)
                if x is None:
                    return None
                seen |= x
            return seen.pop() if len(seen) == 1 else None
        return self._param_variant(fn, v, spec, depth)

    def _value_variant(self, fn, toks, lo, hi, spec, depth):
        """{variant} of the value toks[lo:hi] (empty for NULL), or None."""
        if hi - lo == 1 and toks[lo].text == "NULL":
            return set()
        if hi - lo == 1 and toks[lo].kind == "id":
            if depth >= 3:
                return None
            x = self._variant_at(fn, toks[lo].text, lo, spec, depth + 1)
            return {x} if x else None
        if toks[lo].kind == "id" and toks[lo + 1].text == "(" and \
                csrc.match_paren(toks, lo + 1) == hi - 1:
            args = self._call_args(fn.file, lo) or []
            for lk in spec.get("lookups", ()):
                n = lk["arg"]
                if toks[lo].text == lk["call"] and n < len(args) and \
                        args[n][1] - args[n][0] == 1 and toks[args[n][0]].text == lk["value"]:
                    return {lk["variant"]}
        return None

    def _param_variant(self, fn, v, spec, depth):
        """The variant every call of fn passes as its parameter v."""
        args = self.param_arguments(fn, v) if depth < 3 else None
        seen = set()
        for (caller, lo, hi) in args or ():
            x = self._value_variant(caller, self.src.toks[caller.file], lo, hi, spec, depth)
            if x is None:
                return None
            seen |= x
        return seen.pop() if len(seen) == 1 else None

    def _listed(self, fn, toks, v, k, spec):
        """The variant of the list a loop around toks[k] takes v from
        ('list_for_each_entry(v, &t->a_list, member) ...'), the innermost."""
        got = None
        for j in range(fn.body_start + 1, k):
            if not toks[j].text.startswith("list_for_each_entry") or toks[j + 1].text != "(":
                continue
            c = csrc.match_paren(toks, j + 1)
            if not c < k <= _branch_end(toks, c + 1, fn.body_end):
                continue
            args = self._call_args(fn.file, j) or []
            if len(args) >= 2 and args[0][1] - args[0][0] == 1 and toks[args[0][0]].text == v:
                lo, hi = args[1]
                name = self.lock_name_of(fn.file, toks, lo, hi)
                got = spec.get("lists", {}).get(name) or self._made_list(fn, toks, lo, hi, name, spec)
        return got

    def _made_list(self, fn, toks, lo, hi, name, spec):
        """The variant of what the list '&c->m' (toks[lo:hi], member name)
        holds when every value of c comes from the declared call
        (policies/ 'made_lists': a container that call makes only ever
        holds objects of one variant on that list), or None."""
        for ml in spec.get("made_lists", ()):
            if ml["list"] == name and hi - lo == 4 and toks[lo].text == "&" and \
                    toks[lo + 1].kind == "id" and toks[lo + 2].text == "->" and \
                    self._made_by(fn, toks[lo + 1].text, ml["call"], 0):
                return ml["variant"]
        return None

    def _made_by(self, fn, v, call, depth):
        """Every value variable v holds in fn is NULL or a call of call
        ('c = call(...)'), or, for a parameter fn never assigns, every
        caller passes such a variable (at most three calls deep)."""
        toks = self.src.toks[fn.file]
        mine = [j for j in range(fn.body_start, fn.body_end)
                if toks[j].text == v and toks[j - 1].text not in (".", "->")]
        if any(toks[j - 1].text == "&" and toks[j + 1].text not in ("->", ".", "[")
               for j in mine):
            return False                    # a callee may store into it
        where = [j for j in mine if toks[j + 1].text == "="]
        if where:
            for j in where:
                end = _stmt_end(toks, j + 2, fn.body_end)
                if not ((end == j + 3 and toks[j + 2].text == "NULL") or
                        (toks[j + 2].text == call and toks[j + 3].text == "(" and
                         csrc.match_paren(toks, j + 3) == end - 1)):
                    return False
            return True
        args = self.param_arguments(fn, v) if depth < 3 else None
        return bool(args) and all(
            hi - lo == 1 and self.src.toks[c.file][lo].kind == "id" and
            self._made_by(c, self.src.toks[c.file][lo].text, call, depth + 1)
            for (c, lo, hi) in args)

    # ------------------------------------------------------------ tests
    def _tested(self, fn, toks, v, k, spec):
        """The variant a test, assertion or store of v->f says holds at
        toks[k], the nearest before it; None if none does."""
        member = spec["field"].split(".", 1)[1]
        holds = {a["call"]: a["holds"] for a in self.P.state_assertions}
        blocks = set(_open_blocks(toks, fn.body_start, k))
        best = None
        for i in range(fn.body_start + 1, k):
            t = toks[i].text
            if t == v and toks[i + 1].text == "=" and toks[i - 1].text not in (".", "->"):
                best = None                       # v assigned again
                continue
            if t == v and toks[i + 1].text == "->" and toks[i + 2].text == member and \
                    toks[i + 3].text == "=" and toks[i - 1].text not in (".", "->") and \
                    "bit" not in spec:
                if self._dominates(toks, fn, i, blocks):
                    best = _stored(toks, i + 4, spec)
                continue
            if t not in ("if",) and t not in holds:
                continue
            if toks[i + 1].text != "(":
                continue
            close = csrc.match_paren(toks, i + 1)
            x = _test(toks, i + 2, close, v, member, spec)
            if x is None or close >= k:
                continue
            if t in holds:
                if self._dominates(toks, fn, i, blocks):
                    best = x if holds[t] else _other(x, spec)
                continue
            got = self._branch(fn, toks, close, k, x, blocks, i, spec)
            if got is not None:
                best = got
        return best

    def _branch(self, fn, toks, close, k, x, blocks, i, spec):
        """What 'if (test) ...' (test says x when true, closing at close)
        says at toks[k]: x inside the then-branch, the other in the else
        branch, the other after a then-branch that always leaves."""
        end = _branch_end(toks, close + 1, fn.body_end)
        last = _last_stmt(toks, close + 1, end) if toks[close + 1].text == "{" else close + 1
        if k < end:
            return x
        if toks[end + 1].text == "else":
            return _other(x, spec) if k <= _branch_end(toks, end + 2, fn.body_end) else None
        if last is not None and toks[last].text in _EXITS and \
                self._dominates(toks, fn, i, blocks):
            return _other(x, spec)
        return None

    @staticmethod
    def _dominates(toks, fn, i, blocks):
        """toks[i] is in a block that holds the token whose open blocks
        are blocks (so it runs before it on every path through it)."""
        return next(_open_blocks(toks, fn.body_start, i), fn.body_start) in blocks


def _test(toks, lo, hi, v, member, spec):
    """The variant the condition toks[lo:hi] says when true ('v->m',
    '!v->m', 'v->m == NULL', 'v->m != NULL', 'v->m == FOO_A' of a kind
    field), or None."""
    neg = toks[lo].text == "!"
    a = lo + 1 if neg else lo
    if "bit" in spec:
        # 'test_bit(FLAG, &v->m)', '!test_bit(...)': the flag's kind
        want = ["test_bit", "(", spec["bit"], ",", "&", v, "->", member, ")"]
        if [t.text for t in toks[a:hi]] != want:
            return None
        return "null" if neg else "set"
    if not (toks[a].text == v and toks[a + 1].text == "->" and toks[a + 2].text == member):
        return None
    rest = [t.text for t in toks[a + 3:hi]]
    values = spec.get("values")
    if values:
        if neg or len(rest) != 2 or rest[0] not in ("==", "!=") or rest[1] not in values:
            return None
        x = values[rest[1]]
        return x if rest[0] == "==" else _other(x, spec)
    if rest == []:
        x = "set"
    elif rest == ["==", "NULL"] and not neg:
        x = "null"
    elif rest == ["!=", "NULL"] and not neg:
        x = "set"
    else:
        return None
    return _other(x, spec) if neg else x


def _stored(toks, k, spec):
    """The variant a store of the value at toks[k] makes."""
    values = spec.get("values")
    if values:
        return values.get(toks[k].text) if toks[k + 1].text == ";" else None
    return "null" if toks[k].text == "NULL" else "set"


def _other(x, spec):
    """The other of the two variants."""
    values = spec.get("values")
    if values:
        (y,) = set(values.values()) - {x}
        return y
    return "null" if x == "set" else "set"
