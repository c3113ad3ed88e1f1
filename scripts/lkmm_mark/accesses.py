# SPDX-License-Identifier: GPL-2.0-only
"""Stage 2a: the accesses, from the facts, with their struct, field, base
and kind; the struct types of names and base expressions; lock names.

Reads .facts, .src, .P.test_dirs and .target.  Sets .accesses (sorted, each
Access with its struct, kind, token index and Function), .by_range (the
accesses by the end of their span: lock_name_of() names a lock member by
it), .not_analysed (functions spatch could not parse) and
.test_prefixes.  A field whose struct is not resolved here (struct None)
ends as 'unknown-type' in exclusions.py.
"""
import collections

from . import csrc, kinds as kinds_mod
from .source import Access
from .tokutil import _scan_decls, own_decls


class Accesses:
    def build_accesses(self):
        acc = {}
        spatch_fns = set()      # functions spatch reported an access in
        kinds = {}
        # the facts of spatch, and the accesses in macro bodies typed from
        # their call sites (accessors.py)
        for r in list(self.facts) + self.accessor_records():
            # spatch puts E->f@p on the field name; X@p covers the whole
            # expression: both end at the end of the field name.
            k = (r["file"], r["eline"], r["ecol"]) if r["k"] != "kind" else None
            if r["k"] == "acc":
                if k not in acc:
                    acc[k] = r
                spatch_fns.add((r["file"], r["fn"]))
            elif r["k"] == "kind":
                kinds[(r["file"], r["line"], r["col"])] = r
        self.by_range = {}
        # a function whose body has field accesses (its tokens say) and of
        # which spatch reported none: spatch could not parse it
        for (f, name), fn in sorted(self.src.funcs.items(), key=lambda x: (x[0][0], x[1].line)):
            if (f, name) not in spatch_fns and _has_member_access(self.src.toks[f], fn):
                self.not_analysed.append((f, fn.line, name, "spatch could not parse it"))
        for (f, name), (line, why) in sorted(self.src.unreadable.items()):
            self.not_analysed.append((f, line, name, why))
        self.not_analysed.sort()
        tests = [self.target + "/" + d.strip("/") + "/" for d in (self.P.test_dirs or ["tests"])]
        self.test_prefixes = tests
        for k, r in acc.items():
            a = self._new_access(r, kinds.get((r["file"], r["line"], r["col"])))
            a.test = any(a.file.startswith(t) for t in tests)
            self.by_range[k] = a
            self.accesses.append(a)
        self.accesses.sort(key=lambda a: a.key())

    def _new_access(self, r, kind_rec):
        """The Access of one fact record; kind_rec: the kind a macro the
        access is an argument of gives it (accessors.py)."""
        a = Access()
        a.file, a.line, a.col, a.eline, a.ecol = (r["file"], r["line"], r["col"],
                                                  r["eline"], r["ecol"])
        a.fn = r["fn"]
        base_toks = None
        if "field" in r:
            a.field, a.base = r["field"], r["base"]
        else:
            a.field, a.base, base_toks = self._field_base(a.file, a.line, a.col)
        a.struct = csrc.struct_name(r["type"]) if r.get("type") else None
        if a.struct is None:
            a.struct = self.resolve_base(a.file, a.fn, a.base, base_toks)
        a.struct_known = a.struct is not None
        a.via = None
        if r.get("kind"):
            a.kind, a.macro, a.via = r["kind"], None, r.get("via")
        else:
            a.kind, a.macro = self._kind_of(a)
            if kind_rec is not None and a.kind == "read":
                a.kind, a.via = kind_rec["kind"], kind_rec.get("via")
        a.tok = self.src.pos.get(a.file, {}).get((a.line, a.col))
        a.func = self.src.funcs.get((a.file, a.fn))
        a.held = {}
        a.ctx = ()
        a.exclusion = None
        a.action = "none"
        a.rule = None
        a.reason = ""
        return a

    def _kind_of(self, a):
        """How the access is used, and its marking macro, from the tokens
        (kinds.py; tests/test_kinds.py checks it against cocci/kinds.cocci)."""
        ks, macro = self._kinds(a.file, a.line, a.col)
        for k, kind in (("sizeof", "sizeof"), ("marked", "marked"), ("addr", "address"),
                        ("rmw", "rmw"), ("write", "write")):
            if k in ks:
                return kind, macro
        return "read", macro

    def _tok_at(self, file, line, col):
        """(tokens, index) of the token spatch placed at line:col; inside a
        #define, the tokens of that line (index None if not found)."""
        toks = self.src.toks.get(file)
        k = self.src.pos.get(file, {}).get((line, col))
        if k is None:
            lines = self.src.text[file].split("\n")
            toks = kinds_mod.line_tokens(lines[line - 1]) if line <= len(lines) else []
            k = next((i for i, t in enumerate(toks) if t.col == col), None)
        return toks, k

    def _kinds(self, file, line, col):
        """How the access at line:col is used (kinds.py), from the tokens."""
        got = self._tokmemo.get(("k", file, line, col))
        if got is not None:
            return got
        toks, k = self._tok_at(file, line, col)
        return kinds_mod.kinds_of(toks, k) if k is not None else (set(), None)

    def member_token_facts(self):
        """_kinds() and _field_base() of every 'x->f' and 'x.f' in the
        sources, from the tokens alone: commands.analyse() has them
        computed while spatch runs, and build_accesses() looks its facts'
        positions up (a position spatch gives that is not among them is
        worked out then)."""
        memo = {}
        for f, toks in self.src.toks.items():
            for k in range(1, len(toks)):
                if toks[k].kind == "id" and toks[k - 1].text in ("->", "."):
                    t = toks[k]
                    memo[("k", f, t.line, t.col)] = self._kinds(f, t.line, t.col)
                    memo[("f", f, t.line, t.col)] = self._field_base(f, t.line, t.col)
        return memo

    def _field_base(self, file, line, col):
        """The field name at line:col (spatch's position of E->f), the text
        of its base expression E (tokens separated by spaces) and those
        tokens' texts (None when there is no base)."""
        got = self._tokmemo.get(("f", file, line, col))
        if got is not None:
            return got
        toks, k = self._tok_at(file, line, col)
        if k is None or k == 0 or toks[k].kind != "id" or toks[k - 1].text not in ("->", "."):
            return (toks[k].text if k is not None else ""), "", None
        b = csrc.base_start(toks, k - 1)
        if b is None:
            return toks[k].text, "", None
        bt = [t.text for t in toks[b:k - 1]]
        return toks[k].text, " ".join(bt), bt

    # ------------------------------------------------------ type resolution
    def _decl_types(self, func):
        """identifier -> struct name, from the parameters and locals of func
        (and the file's own top-level declarations)."""
        if func is None:
            return {}
        cache = getattr(func, "_types", None)
        if cache is not None:
            return cache
        # the parameter list and the body's declarations
        types = dict(own_decls(self.src.toks[func.file], func))
        for k, v in self._file_types(func.file).items():
            types.setdefault(k, v)
        func._types = types
        return types

    def _file_types(self, file):
        """Top-level 'struct x *name...;' declarations of file."""
        c = self._ftypes.get(file)
        if c is None:
            c = {}
            toks = self.src.toks[file]
            bodies = sorted((fn.body_start, fn.body_end) for fn in self.src.funcs.values()
                            if fn.file == file)
            lo = 0
            for a, b in bodies + [(len(toks), len(toks))]:
                if a > lo:
                    _scan_decls(toks, lo, a, lo, c)
                lo = max(lo, b + 1)
            self._ftypes[file] = c
        return c

    def resolve_base(self, file, fn, base, toks=None):
        """Struct name of a base expression (toks: its token texts, when
        at hand)."""
        if not base:
            return None
        func = self.src.funcs.get((file, fn))
        if toks is None:
            toks = [t.text for t in csrc.tokenize(base)]
        parts = _member_path(_unmarked(toks))
        st = self._head_struct(func, parts[0])
        for p in parts[1:]:
            if st is None or not p:
                return None
            m = self.src.member(st, p[0], file)
            if m is None:
                return None
            st = csrc.struct_name(m.type)
        return st

    def _head_struct(self, func, head):
        """Struct name of the first part of a base expression (its tokens'
        texts): a cast '(struct x *)e', a variable of func or its file, or
        the call of a target function that returns a struct pointer."""
        st = None
        while head:
            if head[0] == "(" and head[-1] == ")":
                head = head[1:-1]
            elif head[0] in ("*", "&"):
                head = head[1:]
            elif head[-1] == "]" and "[" in head:
                head = head[:len(head) - head[::-1].index("[") - 1]
            else:
                break
        if len(head) >= 4 and head[0] == "(" and head[1] in ("struct", "union") and \
                ")" in head:
            st = head[2]                        # (struct x *)e
        elif len(head) == 1:
            st = self._decl_types(func).get(head[0])
        elif len(head) >= 3 and head[1] == "(":
            cands = self.src.by_name.get(head[0], [])
            for c in cands:
                st = csrc.struct_name(c.ret.replace("struct", "struct ", 1)) if c.ret else None
                if st:
                    break
        return st

    def lock_name_of(self, file, toks, a, b):
        """Name of the lock an argument toks[a:b] denotes."""
        while a < b and toks[a].text in ("&", "("):
            a += 1
        while b > a and toks[b - 1].text == ")" and \
                sum(1 for t in toks[a:b] if t.text == "(") < sum(1 for t in toks[a:b] if t.text == ")"):
            b -= 1
        if a >= b:
            return None
        if b - a == 1 and toks[a].kind == "id":
            return toks[a].text
        last = toks[b - 1]
        r = self.by_range.get((file, last.line, last.ecol))
        if r is not None:
            return "%s.%s" % (r.struct, r.field) if r.struct else self._member_lock(r.field)
        text = "".join(t.text for t in toks[a:b])
        if "->" in text or "." in text:
            return self._member_lock(text.replace("->", ".").split(".")[-1])
        return text

    def _member_lock(self, member):
        """'?.member', a lock member of a struct the target does not
        define, or the one lock the facts name with that member
        ('down_write(&mnt->mnt_sb->s_umount)': super_block.s_umount)."""
        c = self.__dict__.get("_memberlocks")
        if c is None:
            names = set(self.P.pseudo_locks)
            for spec in list(self.P.ops_entry_locks.values()) + list(self.P.param_locks.values()) \
                    + [x for v in self.P.ops_table_locks.values() for x in v]:
                names.update(x["lock"] for x in [spec] + list(spec.get("also") or ()))
            for specs in self.P.lockfns.values():
                for spec in specs if isinstance(specs, list) else [specs]:
                    if isinstance(spec.get("lock"), str):
                        names.add(spec["lock"])
            by = collections.defaultdict(set)
            for n in names:
                st, _, m = n.partition(".")
                if m and "." not in m and self.src.structs.get(st) is None:
                    by[m].add(n)
            c = self._memberlocks = {m: next(iter(v)) for m, v in by.items() if len(v) == 1}
        return c.get(member, "?." + member)

    def _lock_ptr_locks(self):
        c = self.__dict__.get("_lockptrs")
        if c is None:
            c = self._lockptrs = _lock_ptr_calls(self.src, self.P)
        return c

    def _annot_lock(self, fn, toks):
        text = [t for t in toks]
        if not text:
            return None
        i = 0
        while i < len(text) and text[i].text in ("&", "("):
            i += 1
        if i + 1 < len(text) and text[i].kind == "id" and text[i + 1].text == "(":
            # __releases(foo_lock_ptr(sb, group)): the lock a declared lock
            # wrapper takes through the same pointer function
            return self._lock_ptr_locks().get(text[i].text)
        ids = [t.text for t in text[i:] if t.kind == "id"]
        if len(ids) == 1:
            return ids[0]
        if len(ids) >= 2:
            st = self._decl_types(fn).get(ids[0])
            for mem in ids[1:-1]:
                m = self.src.member(st, mem) if st else None
                st = csrc.struct_name(m.type) if m else None
            return "%s.%s" % (st or "?", ids[-1])
        return None


def _lock_ptr_calls(src, P):
    """{f: lock}: the functions a declared lock wrapper (policies
    'lock_functions' with a lock, no condition) hands its lock primitive
    the result of, 'spin_lock(foo_lock_ptr(sb, group))', with the lock the
    wrapper declares (a primitive: a lock function that takes its lock as
    its argument); a pointer function two wrappers of different locks use
    names neither."""
    out = {}
    for fn in src.funcs.values():
        spec = P.lockfns.get(fn.name)
        if spec is None or not spec.get("lock") or spec.get("when_arg") or \
                spec.get("when_field"):
            continue
        toks = src.toks[fn.file]
        # 'lock = foo_lock_ptr(sb, group); ... spin_lock(lock);' too
        via = {toks[k].text: toks[k + 2].text for k in range(fn.body_start + 1, fn.body_end - 3)
               if toks[k].kind == "id" and toks[k + 1].text == "=" and
               toks[k + 2].kind == "id" and toks[k + 3].text == "("}
        for k in range(fn.body_start + 1, fn.body_end - 3):
            prim = P.lockfns.get(toks[k].text)
            if prim is None or prim.get("lock") or toks[k + 1].text != "(" or \
                    toks[k + 2].kind != "id":
                continue
            f = toks[k + 2].text if toks[k + 3].text == "(" else \
                via.get(toks[k + 2].text) if toks[k + 3].text == ")" else None
            if f:
                out[f] = spec["lock"] if out.get(f, spec["lock"]) == spec["lock"] else None
    return {f: n for f, n in out.items() if n}


def _unmarked(toks):
    """The token texts of a base expression without the READ_ONCE() or
    data_race() around it."""
    # READ_ONCE(e) and data_race(e) have the type of e
    while len(toks) >= 4 and toks[0] in ("READ_ONCE", "data_race") and toks[1] == "(":
        depth, end = 0, None
        for i, t in enumerate(toks[1:], 1):
            depth += t == "("
            depth -= t == ")"
            if depth == 0:
                end = i
                break
        if end is None:
            break
        toks = toks[2:end] + toks[end + 1:]
    return toks


def _member_path(toks):
    """The token texts of a base expression split on top-level -> and
    '.': [head, member, member...]."""
    parts = []
    depth = 0
    cur = []
    for t in toks:
        if t in "([":
            depth += 1
        elif t in ")]":
            depth -= 1
        if depth == 0 and t in ("->", "."):
            parts.append(cur)
            cur = []
            continue
        cur.append(t)
    parts.append(cur)
    return parts


def _has_member_access(toks, fn):
    """fn's body has a field access, 'x->f' or 'x.f' (not a designated
    initializer '{ .f = v }')."""
    for k in range(fn.body_start + 1, fn.body_end - 1):
        t = toks[k].text
        if (t == "->" or (t == "." and toks[k - 1].text not in ("{", ","))) and \
                toks[k + 1].kind == "id":
            return True
    return False
