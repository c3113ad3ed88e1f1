# SPDX-License-Identifier: GPL-2.0-only
"""Another instance of a struct: the access paths of two accesses show
two different objects, so the two never race (pairs.py asks
other_instance() of every candidate pair).

- two different members embedded in a struct ('fs->a_rsv.size' against
  'fs->b_rsv.size');
- an embedded member against what a pointer field points to when every
  store of that field is a fresh allocation ('rc->rsv = foo_alloc_rsv()');
- a variable assigned only such objects (or NULL), or a parameter every
  caller passes only such objects, through at most three variables and
  parameters ('dest' of foo_release(), passed '&fs->a_rsv' or
  '&fs->b_rsv' by every caller, against 'rc->rsv->size');
- a pointer member the statement just before pointed at another object's
  embedded member ('h->rsv = &p->rsv; ... h->rsv->size');
- a variable assigned what a call returns, when every 'return' of the
  callee's one definition is such an object, less those in the arms of
  a switch on a parameter that the call's constant argument does not
  enter ('return &p->a;' under 'case A:', 'return &p->b;' under
  'case B:': 'f(p, A)' returns p->a, 'f(p, w)' either, unless every
  caller passes w as A), also as the base itself ('f(p, A)->f');
- two declared roles of one struct (policies/ 'instances': a subvolume
  root and a log tree root): the role of what a pointer field points
  to, of what every caller hands a declared parameter ('params') or of
  what a declared call returns ('calls'), also through variables and
  parameters given only such objects, as above.

embedded_in() answers exclusions.py with the same paths: the struct an
access's object is embedded in (a member of a task-private struct is
as private as the struct).

Reads .src, .accesses, .params(), .sites_of(), ._call_args(),
.lock_name_of(), .constructors, .P.allocators, .P.roles, .P.param_roles,
.P.call_roles.  Sets nothing but its memos (_objmemo, _freshmemo).
"""
from .csrc import match_paren, open_of
from .source import STORE_MACROS
from .tokutil import _open_blocks


class Instances:
    def other_instance(self, a, b):
        """The access paths show two different objects: two different
        members embedded in a struct ('fs->a_rsv.size' against
        'fs->b_rsv.size'), or an embedded member against the object a
        pointer field points to when every store of that field is a fresh
        allocation ('rc->rsv = foo_alloc_rsv()'), or two such pointer
        fields, or pointer
        fields of two roles of one struct (policies/ 'instances': a
        subvolume root and a log tree root)."""
        va, vb = self.variant_of(a), self.variant_of(b)
        if va is not None and vb is not None and va != vb:
            return True
        oa, ob = self._object_of(a), self._object_of(b)
        if oa is None or ob is None:
            return False
        return oa.isdisjoint(ob)

    def embedded_in(self, a, structs):
        """The struct of structs that embeds the object a's access path
        names ('p->m.f'; 'h->m = &p->m; ... h->m->f'; a variable or a
        parameter only ever given '&p->m'), or None.  An embedded object
        is part of its container's object: it reaches no task the
        container does not."""
        objs = self._object_of(a)
        if not objs or any(o[0] != "embedded" for o in objs):
            return None
        outer = sorted({o[1].split(".", 1)[0] for o in objs})
        return outer[0] if all(s in structs for s in outer) else None

    def _object_of(self, a):
        """The objects a's base may name, a set of ('embedded', 'S.m') or
        ('fresh', 'S.p') ('x->m.f', 'x->p->f', or 'v->f' with v assigned
        from '&x->m' or 'x->p', or a parameter every caller passes such
        an object), or None when the path does not tell."""
        memo = self.__dict__.setdefault("_objmemo", {})
        if id(a) not in memo:
            o = self._base_object(a)
            memo[id(a)] = frozenset([o]) if isinstance(o, tuple) else o
        return memo[id(a)]

    def _base_object(self, a):
        toks = self.src.toks.get(a.file)
        k = a.tok
        if toks is None or k is None or k < 3 or toks[k - 1].text not in (".", "->"):
            return None
        if toks[k - 2].text == ")" and toks[k - 1].text == "->" and a.func is not None:
            # 'f(x, A)->f': what the call returns
            o = open_of(toks, k - 2)
            if o < 2 or toks[o - 1].kind != "id" or toks[o - 2].text in (".", "->"):
                return None
            return self._call_objects(a.func, o - 1, 0)
        if toks[k - 2].kind != "id":
            return None
        if toks[k - 3].text not in (".", "->"):
            if toks[k - 1].text != "->" or a.func is None:
                return None
            return self._alias_object(a.file, a.func, toks[k - 2].text)
        if toks[k - 1].text == "->" and a.func is not None:
            o = self._assigned_object(a.file, a.func, k - 1)
            if o is not None:
                return o
        return self._member_object(a.file, toks, k - 1, embedded=toks[k - 1].text == ".")

    def _assigned_object(self, file, func, end):
        """The object of 'x->p->f' when the statement just before, in the
        same block, stores '&y->m' (an embedded member) into x->p:
        'h->res = &p->res; ... h->res->f'."""
        from .csrc import base_start
        toks = self.src.toks[file]
        b0 = base_start(toks, end)
        if b0 is None:
            return None
        base = [t.text for t in toks[b0:end]]
        j = b0 - 1
        while j > func.body_start and toks[j].text not in ("{", "}"):
            if toks[j].text == "=" and [t.text for t in toks[j - len(base):j]] == base and \
                    toks[j - len(base) - 1].text in (";", "{", "}") and toks[j + 1].text == "&":
                e = j + 2
                while toks[e].text not in (";", ","):
                    e += 1
                if e - j >= 5 and toks[e - 2].text in ("->", "."):
                    return self._member_object(file, toks, e, embedded=True)
                return None
            j -= 1
        return None

    def _member_object(self, file, toks, end, embedded):
        """The object the member expression ending before toks[end] names."""
        from .csrc import base_start
        b0 = base_start(toks, end)
        name = self.lock_name_of(file, toks, b0, end) if b0 is not None else None
        if not name or name.startswith("?"):
            return None
        if embedded:
            return ("embedded", name)
        if name in self.P.roles:
            # policies/ 'instances': what this pointer field points to has a
            # role no pointer field of another role shares
            return ("role",) + self.P.roles[name]
        return ("fresh", name) if self._fresh_only(name) else None

    def _alias_object(self, file, func, v, depth=0):
        """The objects of 'v->f' when every assignment of v in func is
        '&x->m' (an embedded member), 'x->p' (a pointer field whose every
        store is a fresh allocation), NULL or another such variable; or,
        for a parameter func never assigns, those every caller passes."""
        toks = self.src.toks[file]
        where = [j for j in self._ids(func).get(v, ())
                 if toks[j + 1].text == "=" and toks[j - 1].text not in (".", "->")]
        if not where:
            names = self.params(func)
            role = self.P.param_roles.get((func.name, names.index(v))) if v in names else None
            if role is not None:
                # policies/ 'instances' 'params': every caller hands it that role
                return frozenset([("role",) + role])
            return self._param_objects(func, v, depth)
        objs = set()
        for j in where:
            end = j + 2
            while end < func.body_end and toks[end].text not in (";", ","):
                # a call's own commas do not end the value
                end = match_paren(toks, end) + 1 if toks[end].text == "(" else end + 1
            o = self._value_objects(func, toks, j + 2, end, depth)
            if o is None:
                return None
            objs |= o
        return frozenset(objs) or None

    def _value_objects(self, func, toks, lo, hi, depth):
        """The objects the expression toks[lo:hi] in func may point to,
        as _alias_object(); an empty set for NULL; None if not known."""
        if hi - lo == 1 and toks[lo].text == "NULL":
            return frozenset()
        if hi - lo == 1 and toks[lo].kind == "id":
            if depth >= 3:
                return None
            return self._alias_object(func.file, func, toks[lo].text, depth + 1)
        if toks[lo].kind == "id" and hi - lo >= 3 and toks[lo + 1].text == "(" and \
                match_paren(toks, lo + 1) == hi - 1:
            return self._call_objects(func, lo, depth) if depth < 3 else None
        amp = toks[lo].text == "&"
        if hi - lo < (4 if amp else 3) or toks[hi - 2].text not in ("->", "."):
            return None
        o = self._member_object(func.file, toks, hi, embedded=amp)
        return frozenset([o]) if o is not None else None

    def _param_objects(self, func, v, depth):
        """The objects every call of func passes as its parameter v (not
        for a function whose address is taken), or None."""
        objs = set()
        for (caller, lo, hi) in self.param_arguments(func, v) or ():
            o = self._value_objects(caller, self.src.toks[caller.file], lo, hi, depth)
            if o is None:
                return None
            objs |= o
        return frozenset(objs) or None

    def _call_objects(self, caller, k, depth):
        """The objects the call whose name is toks[k] of caller may return:
        those of every 'return' of its one definition, as _value_objects()
        (NULL, '&p->m', a fresh-only pointer field, a variable), but not a
        'return' in an arm of a switch on a parameter that the call passes
        a constant another 'case' of that switch names, with the arm of the
        constant ending before it ('switch (w) { case A: return &p->a;
        case B: return &p->b; }' called as 'f(p, A)' returns p->a only: two
        labels of one switch never have one value); None if not known."""
        toks = self.src.toks[caller.file]
        if toks[k].text in self.P.call_roles:
            # policies/ 'instances' 'calls': it makes objects of that role
            return frozenset([("role",) + self.P.call_roles[toks[k].text]])
        defs = self.src.by_name.get(toks[k].text) or ()
        args = self._call_args(caller.file, k)
        if len(defs) != 1 or args is None:
            return None
        g = defs[0]
        toks = self.src.toks[g.file]
        objs, seen = set(), False
        for r in range(g.body_start, g.body_end):
            if toks[r].text != "return":
                continue
            seen = True
            if self._arm_not_taken(g, r, caller, args):
                continue
            end = r + 1
            while end < g.body_end and toks[end].text != ";":
                end = match_paren(toks, end) + 1 if toks[end].text == "(" else end + 1
            o = self._value_objects(g, toks, r + 1, end, depth + 1) if end > r + 1 else None
            if o is None:
                return None
            objs |= o
        return frozenset(objs) if seen else None

    def _arm_not_taken(self, g, r, caller, args):
        """The 'return' at toks[r] of g is in the body of a switch on a
        parameter g never changes, every label of which is one token at
        the top of the body, and the call passes that parameter constants
        (_constants()) each of which a label names where a 'break',
        'return', 'goto' or 'continue' at the top of the body comes
        between that label and toks[r] (or the label comes after
        toks[r]); nothing but 'case' labels in the body, and no 'goto' in
        g."""
        toks = self.src.toks[g.file]
        sw = _enclosing_switch(toks, g.body_start, r)
        if sw is None or any(toks[j].text == "goto" for j in range(g.body_start, g.body_end)):
            # a goto may enter an arm past its label
            return False
        q, b0, b1 = sw
        names = self.params(g)
        if q not in names or names.index(q) >= len(args) or _changed(toks, g, q):
            return False
        lo, hi = args[names.index(q)]
        consts = self._constants(caller, lo, hi, 0)
        labels = _switch_labels(toks, b0, b1) if consts else None
        if labels is None or not all(c in labels for c in consts):
            return False
        return all(labels[c] > r or _terminator_between(toks, b0, labels[c], r)
                   for c in consts)

    def _constants(self, func, lo, hi, depth):
        """The constants the argument toks[lo:hi] of func may be: itself
        when it is a number or an upper-case name; for a parameter func
        never changes, those every call of func passes (three calls up at
        most); None if not known."""
        toks = self.src.toks[func.file]
        c = toks[lo]
        if hi - lo != 1:
            return None
        if c.kind == "num" or (c.kind == "id" and c.text.isupper()):
            return {c.text}
        if c.kind != "id" or depth >= 3 or _changed(toks, func, c.text):
            return None
        calls = self.param_arguments(func, c.text)
        out = set()
        for (caller, a, b) in calls or ():
            s = self._constants(caller, a, b, depth + 1)
            if s is None:
                return None
            out |= s
        return out or None

    def _fresh_only(self, name):
        """Every store to pointer field name is a fresh allocation or NULL,
        and its address is never taken."""
        memo = self.__dict__.setdefault("_freshmemo", {})
        if name in memo:
            return memo[name]
        st, fld = name.split(".", 1)
        ok, seen = True, False
        fresh = set(self.constructors) | set(self.P.allocators)
        for b in self.accesses:
            if b.struct != st or b.field != fld:
                continue
            if b.kind == "address":
                ok = False
            elif b.kind in ("write", "rmw") or (b.kind == "marked" and b.macro in STORE_MACROS):
                seen = True
                ok = ok and self._stores_fresh(b, fresh)
            if not ok:
                break
        memo[name] = ok and seen
        return memo[name]

    def _stores_fresh(self, b, fresh):
        toks = self.src.toks.get(b.file)
        k = b.tok
        if toks is None or k is None or toks[k + 1].text != "=":
            return False
        v = toks[k + 2]
        return (v.text == "NULL" and toks[k + 3].text == ";") or \
            (v.text in fresh and toks[k + 3].text == "(")


def _enclosing_switch(toks, lo, r):
    """(parameter tested, '{', '}') of the innermost switch whose body
    holds toks[r] (through the blocks of 'if's and loops), if it tests one
    plain name: 'switch (q) {'."""
    for j in _open_blocks(toks, lo, r):
        if toks[j - 1].text == ")" and toks[j - 4].text == "switch" and \
                toks[j - 3].text == "(" and toks[j - 2].kind == "id":
            return toks[j - 2].text, j, match_paren(toks, j)
        if toks[j - 1].text == ")" and _before_paren(toks, j - 1) == "switch":
            return None
    return None


def _changed(toks, g, q):
    """Parameter q is assigned, stepped or has its address taken in g."""
    for j in range(g.body_start, g.body_end):
        if toks[j].text != q or toks[j - 1].text in (".", "->"):
            continue
        if toks[j + 1].text in ASSIGN_OPS or toks[j - 1].text in ("&", "++", "--"):
            return True
    return False


ASSIGN_OPS = ("=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>=", "++", "--")


def _switch_labels(toks, b0, b1):
    """{label text: index of its 'case'} of the switch body toks[b0:b1]
    when every label is one token at the top of the body and the body
    holds no other label (a 'case' of an inner switch is its own); None
    otherwise."""
    labels = {}
    depth = 0
    j = b0 + 1
    while j < b1:
        t = toks[j].text
        if t == "switch":
            # an inner switch and its labels
            j = match_paren(toks, j + 1) + 1
            if toks[j].text == "{":
                j = match_paren(toks, j)
        elif t in ("{", "("):
            depth += 1
        elif t in ("}", ")"):
            depth -= 1
        elif t == "case":
            if depth or toks[j + 2].text != ":":
                return None
            labels[toks[j + 1].text] = j
        elif t == ":" and toks[j - 1].kind == "id" and toks[j - 2].text in (";", "{", "}") \
                and toks[j - 1].text != "default":
            return None             # a goto label
        j += 1
    return labels


def _terminator_between(toks, b0, lo, hi):
    """A statement at the top of the switch body toks[b0] that leaves
    the arm ('break', 'return', 'goto', 'continue') comes between
    toks[lo] and toks[hi]."""
    depth = 0
    for j in range(b0 + 1, hi):
        t = toks[j].text
        if t in ("{", "("):
            depth += 1
        elif t in ("}", ")"):
            depth -= 1
        elif j > lo and depth == 0 and t in ("break", "return", "goto", "continue") and \
                toks[j - 1].text in (";", "{", "}", ":"):
            # a statement of its own, not the body of an 'if', 'else' or loop
            return True
    return False


def _before_paren(toks, j):
    """The text before the '(' that the ')' at toks[j] closes."""
    depth = 0
    while j > 0:
        if toks[j].text == ")":
            depth += 1
        elif toks[j].text == "(":
            depth -= 1
            if depth == 0:
                return toks[j - 1].text
        j -= 1
    return None
