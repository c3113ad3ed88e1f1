# SPDX-License-Identifier: GPL-2.0-only
"""Stage 2a: accesses that hide in macro bodies, typed from their call
sites.

- An accessor macro reaches a field through a parameter:
  '#define foo_test_opt(fs, opt) ((fs)->mount_opt & ...)'.
  Each call is an access to that field of the argument's struct, of the
  kind the body makes (a load here).  A macro that updates a parameter
  itself ('#define foo_set_opt(o, opt) ((o) |= ...)') makes the
  argument's own access ('info->mount_opt') a read-modify-write.
- A generator macro defines functions by pasting its argument into their
  names ('FOO_DEV_GETSET_FUNCS(total_bytes)' defines
  foo_dev_get_total_bytes(dev), which returns dev->total_bytes, and
  foo_dev_set_total_bytes()).  Each call of a generated function is
  an access at the call site.

The call-site accesses are extra access facts (accesses.py builds them
like spatch's, with the kind given and .via naming the body: macro,
file:line:col of the member in it).  They are analysed one by one, each
with its own locks and racing pair.  The fix is in the body, which every
call shares: report_in_bodies() makes one site of the body, with the
verdict of its calls, and gives the calls the rule via-accessor.

Reads .src; report_in_bodies() reads the verdicts and pairs of the calls
and adds the body sites to .accesses.
"""
import re

from . import csrc
from .source import Access, _short
from .tokutil import _split

_DEFINE = re.compile(r"^\s*#\s*define\s+(\w+)\(([^)]*)\)(.*)$")
_ASSIGN = {"=", "+=", "-=", "|=", "&=", "^=", "<<=", ">>="}


def macro_defs(text):
    """(name, params, [(line, physical text)] of the body) for every
    function-like #define of text."""
    lines = text.split("\n")
    out = []
    i = 0
    while i < len(lines):
        m = _DEFINE.match(lines[i])
        if not m:
            i += 1
            continue
        body = [(i + 1, lines[i])]
        while lines[i].rstrip().endswith("\\") and i + 1 < len(lines):
            i += 1
            body.append((i + 1, lines[i]))
        params = [p.strip() for p in m.group(2).split(",") if p.strip()]
        out.append((m.group(1), params, body))
        i += 1
    return out


def all_macro_defs(src):
    """[(file, macro_defs() entry)] of every file of src, computed once and
    kept on it (scan.py fills it while the facts pass runs)."""
    if src.macro_defs is None:
        src.macro_defs = [(f, d) for f in sorted(src.text) for d in macro_defs(src.text[f])]
    return src.macro_defs


def _kind_after(toks, k):
    """How the member or operand ending at toks[k] is used."""
    nxt = toks[k + 1].text if k + 1 < len(toks) else ""
    prv = toks[k - 1].text if k > 0 else ""
    if nxt == "=":
        return "write"
    if nxt in _ASSIGN or nxt in ("++", "--") or prv in ("++", "--"):
        return "rmw"
    return "read"


class Accessors:
    def accessor_records(self):
        """Access facts at the call sites of accessor macros and of the
        functions generator macros define (the sources alone: computed
        while spatch runs, commands.analyse())."""
        got = self.__dict__.get("_accrecs")
        if got is not None:
            return [dict(r) for r in got]
        members, lvalues, generated = {}, {}, {}
        defs = all_macro_defs(self.src)
        for f, (name, params, body) in defs:
            self._scan_lvalues(f, name, params, body, lvalues)
        for f, (name, params, body) in defs:
            self._scan_macro(f, name, params, body, members, lvalues, generated)
        if not (members or lvalues or generated):
            return []
        return self._call_records(dict(members, **generated), lvalues)

    def report_in_bodies(self):
        """One site per place in a body that some call marks (one place
        may serve several generated functions: every getter of
        FOO_DEV_GETSET_FUNCS() returns 'dev->name'): the calls'
        action, rule and racing pair (the first marked call's), a reason
        that counts the calls; the calls get action none and the rule
        via-accessor.  An access spatch reported in the body itself
        (untyped there) gives way to it."""
        groups = {}
        for a in self.accesses:
            if a.via is not None:
                groups.setdefault(tuple(a.via[1:]), []).append(a)
        bodies = []
        for where, calls in sorted(groups.items()):
            marked = [c for c in calls if c.action != "none"]
            for c in marked:
                c.body = (c.action, c.rule, c.reason)
                c.action, c.rule = "none", "via-accessor"
                c.reason = "the access is in the body of %s() at %s:%d, reported there" % (
                    c.via[0], _short(where[0]), where[1])
            if marked:
                bodies.append(self._body_site(where, calls, marked))
        if bodies:
            at = {(b.file, b.line, b.col) for b in bodies}
            self.accesses = [a for a in self.accesses
                             if (a.file, a.line, a.col) not in at] + bodies
            self.accesses.sort(key=lambda a: a.key())

    def _body_site(self, where, calls, marked):
        """The site in the body, with the verdict of its first marked call."""
        first = marked[0]
        b = Access()
        for k in Access.__slots__:
            setattr(b, k, getattr(first, k, None))
        b.file, b.line, b.col, b.eline, b.ecol = where[0], where[1], where[2], where[1], where[3]
        names = sorted({c.via[0] for c in calls})
        b.fn, b.via, b.tok, b.func, b.body = names[0], None, None, None, None
        b.action, b.rule, why = first.body
        b.reason = "%d of the %d calls of %s race, and one mark in the body covers them " \
            "all; e.g. in %s() at %s: %s" % (len(marked), len(calls), "(), ".join(names) + "()",
                                              first.fn, first.where(), why)
        return b

    def _scan_lvalues(self, f, name, params, body, lvalues):
        """'#define set(o, x) ((o) |= x)': the macro updates its argument."""
        for line, text in body:
            toks = _line_toks(text, line)
            for k, t in enumerate(toks):
                if t.kind != "id" or t.text not in params or k == 0:
                    continue
                j = k + 2 if k + 2 < len(toks) and toks[k + 1].text == ")" else k + 1
                if j < len(toks) and toks[j].text in _ASSIGN and \
                        (j == k + 1 or toks[k - 1].text == "("):
                    lvalues.setdefault(name, (params.index(t.text),
                                              "rmw" if toks[j].text != "=" else "write",
                                              (f, line, t.col, t.ecol)))

    def _scan_macro(self, f, name, params, body, members, lvalues, generated):
        """'(p)->f' or 'p->f' in the body: a field through parameter p, of
        the kind the body makes (an argument of an updating macro is
        updated)."""
        for line, text in body:
            toks = _line_toks(text, line)
            for k, t in enumerate(toks):
                if t.kind != "id" or t.text not in params:
                    continue
                j = k + 2 if k + 2 < len(toks) and toks[k + 1].text == ")" else k + 1
                if j + 1 >= len(toks) or toks[j].text not in ("->", ".") or \
                        toks[j + 1].kind != "id" or toks[j + 1].text in params:
                    continue
                m = toks[j + 1]
                if text[m.col:m.ecol] != m.text or _addressed_or_marked(toks, k):
                    continue        # a pasted name ('lock##_map'), '&p->f', READ_ONCE(p->f)
                kind = _kind_after(toks, j + 1)
                call = _call_of_arg(toks, k)
                if kind == "read" and call is not None and call[0] in lvalues and \
                        call[1] == lvalues[call[0]][0]:
                    kind = lvalues[call[0]][1]
                members.setdefault(name, (params.index(t.text), toks[j + 1].text, kind,
                                          (f, line, m.col, m.ecol)))
        if len(params) == 1 and any("##" in text for _, text in body):
            self._generated(f, name, params[0], body, generated)

    def _generated(self, f, name, param, body, generated):
        """Functions whose name pastes the parameter, one set per call of
        the generator macro name(arg) in the sources.  Of several
        definitions (#if variants), the last one's place is kept: the
        plain one ('#else')."""
        text = " ".join(t.rstrip().rstrip("\\") for _, t in body)
        text = text[text.index(")", text.index(name)) + 1:]
        for arg in self._invocations().get(name, ()):
            exp = re.sub(r"\s*##\s*", "", re.sub(r"\b%s\b" % re.escape(param), arg, text))
            etoks = csrc.tokenize(exp)
            csrc.index_parens(etoks)
            for fn in csrc.find_functions(etoks, f):
                spec = _generated_fn(fn, etoks, arg)
                if spec is not None:
                    generated[fn.name] = spec + (_member_in_body(f, body, param, spec[2]),)

    def _invocations(self):
        """{name: [arg, ...]} of every 'NAME(arg)' outside function bodies
        (where a generator macro is used), in file order."""
        c = self.__dict__.get("_invoc")
        if c is not None:
            return c
        c = {}
        for f, toks in sorted(self.src.toks.items()):
            inside = sorted((fn.body_start, fn.body_end) for fn in self.src.funcs.values()
                            if fn.file == f)
            lo = 0
            for a, b in inside + [(len(toks), len(toks))]:
                for i in range(lo, min(a, len(toks) - 3)):
                    if toks[i + 1].text == "(" and toks[i + 3].text == ")" and \
                            toks[i].kind == "id" and toks[i + 2].kind == "id":
                        c.setdefault(toks[i].text, []).append(toks[i + 2].text)
                lo = max(lo, b + 1)
        self.__dict__["_invoc"] = c
        return c

    def _call_records(self, accessors, lvalues):
        recs = []
        for f, toks in sorted(self.src.toks.items()):
            fns = sorted(((fn.body_start, fn.body_end, fn.name) for fn in self.src.funcs.values()
                          if fn.file == f))
            for lo, hi, fname in fns:
                for k in range(lo, hi):
                    t = toks[k]
                    if t.kind != "id" or toks[k + 1].text != "(" or \
                            (t.text not in accessors and t.text not in lvalues):
                        continue
                    args = _split(toks, k + 2, csrc.match_paren(toks, k + 1))
                    if t.text in accessors:
                        recs += self._member_record(f, fname, toks, t, args, accessors[t.text])
                    else:
                        recs += self._lvalue_record(f, fname, toks, t, args, lvalues[t.text])
        return recs

    def _member_record(self, f, fname, toks, t, args, spec):
        n, field, kind, where = spec
        if n >= len(args):
            return []
        a, b = args[n]
        base = " ".join(x.text for x in toks[a:b])
        return [{"k": "acc", "file": f, "line": t.line, "col": t.col, "eline": t.line,
                 "ecol": t.ecol, "fn": fname, "field": field, "base": base, "kind": kind,
                 "via": [t.text] + list(where)}]

    def _lvalue_record(self, f, fname, toks, t, args, spec):
        """The argument's own access gets the macro's kind ('rmw')."""
        n, kind, where = spec
        if n >= len(args):
            return []
        a, b = args[n]
        last = toks[b - 1]
        if b - a < 3 or last.kind != "id" or toks[b - 2].text not in ("->", "."):
            return []
        return [{"k": "kind", "file": f, "line": last.line, "col": last.col, "kind": kind,
                 "via": [t.text] + list(where)}]


_MARKING = ("READ_ONCE", "WRITE_ONCE", "data_race", "smp_load_acquire", "smp_store_release",
            "rcu_dereference", "rcu_assign_pointer", "rcu_access_pointer")


def _addressed_or_marked(toks, k):
    """The member expression starting at toks[k] ('p->f' or '(p)->f') has
    its address taken, or is already the operand of a marking macro."""
    j = k - 1 if k > 0 and toks[k - 1].text == "(" else k
    if j > 0 and toks[j - 1].text == "&":
        return True
    call = _call_of_arg(toks, j)
    return call is not None and call[0] in _MARKING


def _generated_fn(fn, etoks, field):
    """(parameter number, field, kind) of the access a generated function
    makes through a parameter, or None."""
    i = fn.body_start - 1
    while i > 0 and etoks[i].text != fn.name:
        i -= 1
    params = [etoks[b - 1].text for a, b in _split(etoks, i + 2, csrc.match_paren(etoks, i + 1))
              if b > a and etoks[b - 1].kind == "id"]
    for k in range(fn.body_start, fn.body_end):
        if etoks[k].text == field and etoks[k - 1].text == "->" and etoks[k - 2].text in params:
            return (params.index(etoks[k - 2].text), field, _kind_after(etoks, k))
    return None


def _member_in_body(f, body, param, kind):
    """(file, line, col, ecol) of the '->param' of a generator's body that
    makes an access of kind (a store is followed by '=')."""
    for line, text in body:
        for m in re.finditer(r"->\s*(%s)\b(\s*=(?!=))?" % re.escape(param), text):
            if bool(m.group(2)) == (kind == "write"):
                return (f, line, m.start(1), m.end(1))
    return (f, body[0][0], 0, 0)


def _call_of_arg(toks, k):
    """(callee, argument number) when the expression starting at toks[k]
    is a whole argument of a call: 'set(p->f, x)'."""
    depth, n = 0, 0
    for j in range(k - 1, 0, -1):
        x = toks[j].text
        if x in (")", "]"):
            depth += 1
        elif x in ("(", "["):
            if depth == 0:
                return (toks[j - 1].text, n) if x == "(" and toks[j - 1].kind == "id" else None
            depth -= 1
        elif x == "," and depth == 0:
            n += 1
        elif depth == 0 and x in (";", "{", "}"):
            return None
    return None


def _line_toks(text, line):
    """Tokens of one physical line of a #define, placed on its line."""
    from .kinds import line_tokens
    toks = line_tokens(text)
    for t in toks:
        t.line = line
    return toks
