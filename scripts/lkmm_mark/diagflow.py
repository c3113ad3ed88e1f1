# SPDX-License-Identifier: GPL-2.0-only
"""Stage 2c (after the call graph): loads whose value reaches only
diagnostics through locals and return values.

call_context() (callctx.py) finds a load that is itself an argument of a
message or an assertion.  A load whose value goes into a local first, and
from the local only into messages, is as much a diagnostic read
(data_race()):

    if (x->f && !x->g)         /* the loads only decide the count */
        n++;
    ...
    pr_info("%d\\n", n);        /* the count only goes into a message */

The value of a load is followed, conservatively, through
- the right-hand side of an assignment to a local ('v = x->f * 2;', 'T v =
  x->f;', 'v += x->f;') with no call and no other store in it;
- the condition of an 'if' with no call in it and no 'else', whose body
  only updates such locals ('v++;', 'v = 1;', 'v += 8;', no call);
- 'return' of an expression with no call in it, when the function is
  static, its address is not taken, and every call of it is used the same
  way in its caller (depth 3);
- a store into a member through a struct pointer parameter ('p->m =
  x->f;'), when the function is static, only stores members through p
  (nothing reads them back or hands p on) and every call passes '&v' of
  a struct on the caller's stack whose every other use is '&v' as a whole
  argument of a tracepoint, a message or an assertion (a struct filled
  only to be traced: 'struct T info = { 0 }; fill(x, &info);
  trace_t(x, &info);');
and each local must be a non-pointer one declared in the function, and
every other use of it must be an argument a message prints after its
format (callctx.py's mark), a tracepoint records (policies/
diagnostic_prefixes) or an assertion tests (assertion_calls), in a call
that is a statement of its own (so not 'if (WARN_ON(v))'), the condition
of an 'if' whose body is one assertion, or another of the flows above.
An argument before the format is no such use: the callee may use it for
more than the message.  Any other use
(an index, a base of '->', '&v', a branch with work in it, a 'switch' or a
loop, a store to a field, an argument of any other call, a caller that
keeps the result) keeps the load as it is.  At least one diagnostic must
be reached.

Reads .accesses, .src, .calls, .addr_taken, .macro_used, .P, ._guarded
(callgraph.py).  Adds to the .ctx of each such load the diagnostic its
value reaches, so that verdicts.py and pairs.py judge it as a diagnostic
read.
"""
from . import csrc
from .callctx import call_context
from .locks import KEYWORDS
from .policy import GUARD, MESSAGE

ASSIGN = {"=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>="}
STEP = {"++", "--"}
HEADERS = {"if", "while", "for", "switch"}
NOT_VALUE = {"->", ".", "[", "("}      # after a value: it is a pointer or a callee
DEPTH = 3
PENDING = True      # a memo entry being computed (a cycle: no use seen yet)


class DiagFlow:
    def diag_flows(self):
        """Mark the loads whose value reaches only diagnostics."""
        self._dfctx = {}
        self._dflocal = {}
        self._dfresult = {}
        for a in self.accesses:
            if a.kind != "read" or a.tok is None or a.func is None or \
                    any(self.P.is_diag(c) for c in a.ctx):
                continue
            toks = self.src.toks[a.file]
            j = _last_token(toks, a)
            i = _first_token(toks, a.tok)
            if j is None or not _plain_value(toks, i, j):
                continue
            d = self._flows_to_diag(a.func, i, j, 0)
            if d:
                a.ctx = a.ctx + (d,)

    def _fctx(self, fn):
        key = (fn.file, fn.name)
        c = self._dfctx.get(key) or self.call_contexts.get(key)
        if c is None:
            c = self._dfctx[key] = call_context(
                self.src.toks[fn.file], fn.body_start, fn.body_end + 1, self.P.output_calls,
                self._guarded)
        return c

    def _use_diag(self, fn, k):
        """The diagnostic token k of fn is an argument of, or None: a value
        printed after the format, recorded by a tracepoint or tested by an
        assertion, whose call is a statement of its own (its result unused:
        'if (WARN_ON(v))' decides more than a message), or the condition of
        an 'if' whose body is one assertion."""
        ctx = [c for c in self._fctx(fn).get(k, ()) if c]
        if len(ctx) > 1 and ctx[0] == "if" and ctx[1].endswith(GUARD):
            return ctx[1]
        if not ctx or not (self.P.is_diag(ctx[0]) or ctx[1:2] == [ctx[0] + MESSAGE]):
            return None
        toks = self.src.toks[fn.file]
        st = _statement_start(toks, k, fn.body_start)
        if toks[st].text != ctx[0] or toks[st + 1].text != "(" or \
                toks[csrc.match_paren(toks, st + 1) + 1].text != ";":
            return None
        # an argument a message prints, a tracepoint records or an
        # assertion tests: not one before the format, which the callee
        # may use for more (a lock it drops and takes again)
        return next((c for c in reversed(ctx) if c.endswith(MESSAGE) or
                     c in self.P.assertions or
                     any(c.startswith(p) for p in self.P.diag_prefixes)), None)

    def _flows_to_diag(self, fn, i, j, depth):
        """The diagnostic the value of tokens i..j of fn reaches when it
        reaches nothing else, else None ('' when it reaches nothing)."""
        toks = self.src.toks[fn.file]
        s = _sink(toks, i, j, fn.body_start)
        if s is None:
            return None
        if s[0] == "assign":
            return self._local_diag(fn, s[1], depth)
        if s[0] == "if":
            return self._guard_diag(fn, s[1], depth)
        if s[0] == "return":
            return self._result_diag(fn, depth + 1)
        if s[0] == "out":
            return self._out_diag(fn, s[1])
        return None

    def _out_diag(self, fn, p):
        """The diagnostic the struct parameter p of fn is filled for, when
        fn only stores members through p ('p->m = e;', nothing reads them
        back or hands p on) and every caller passes '&v' of a struct of
        its stack whose every other use is '&v' as an argument of a
        tracepoint, a message or an assertion (or of fn again); else
        None."""
        toks = self.src.toks[fn.file]
        if not fn.static or any(
                toks[k].text == p and toks[k - 1].text not in ("->", ".") and
                not (_statement_start(toks, k, fn.body_start) == k and
                     toks[k + 1].text == "->" and toks[k + 3].text == "=")
                for k in range(fn.body_start + 1, fn.body_end)):
            return None
        args = self.param_arguments(fn, p)
        if not args:
            return None
        fills = {(c.file, lo) for (c, lo, hi) in args}
        found = ""
        for (caller, lo, hi) in args:
            ctoks = self.src.toks[caller.file]
            if hi != lo + 2 or ctoks[lo].text != "&" or ctoks[lo + 1].kind != "id":
                return None
            d = self._filled_diag(caller, ctoks[lo + 1].text, fills)
            if d is None:
                return None
            found = found or d
        return found or None

    def _filled_diag(self, fn, v, fills):
        """The diagnostic the struct v on fn's stack goes to when its every
        use but its declaration is '&v' as a whole argument of a call
        that fills it (fills: the '&' of each) or of a diagnostic, else
        None."""
        toks = self.src.toks[fn.file]
        occ = [k for k in range(fn.body_start + 1, fn.body_end) if toks[k].text == v and
               toks[k].kind == "id" and toks[k - 1].text not in ("->", ".")]
        decls = [k for k in occ if _declares(toks, k)]
        if len(decls) != 1 or toks[decls[0] - 1].text == "*":
            return None
        found = ""
        for k in occ:
            if k in decls:
                continue
            if toks[k - 1].text != "&" or toks[k - 2].text not in ("(", ",") or \
                    toks[k + 1].text not in (")", ","):
                return None
            if (fn.file, k - 1) in fills:
                continue
            d = self._use_diag(fn, k)
            ctx = self._fctx(fn).get(k, ())
            if d is None or not ctx or ctx[-1] != d:
                return None
            found = d
        return found or None

    def _guard_diag(self, fn, names, depth):
        if names is None:
            return None
        found = ""
        for n in names:
            d = self._local_diag(fn, n, depth)
            if d is None:
                return None
            found = found or d
        return found

    def _local_diag(self, fn, name, depth):
        """The diagnostic the local name of fn reaches when its every use is
        a diagnostic or a flow of this module, else None."""
        key = (fn.file, fn.name, name)
        if key in self._dflocal:
            return _memo(self._dflocal[key])
        self._dflocal[key] = PENDING
        toks = self.src.toks[fn.file]
        occ = [k for k in self._ids(fn).get(name, ()) if toks[k - 1].text not in ("->", ".")]
        decls = [k for k in occ if _declares(toks, k)]
        if not decls or any(toks[k - 1].text == "*" for k in decls):
            self._dflocal[key] = False      # not a local, or a pointer
            return None
        found = ""
        for k in occ:
            if _declares(toks, k) or _stored(toks, k):
                continue
            if not _plain_value(toks, k, k):
                found = None
                break
            d = self._use_diag(fn, k) or self._flows_to_diag(fn, k, k, depth)
            if d is None:
                found = None
                break
            found = found or d
        self._dflocal[key] = found if found is not None else False
        return found

    def _result_diag(self, fn, depth):
        """The diagnostic fn's return value reaches in every caller."""
        key = (fn.file, fn.name)
        if key in self._dfresult:
            return _memo(self._dfresult[key])
        if depth > DEPTH or not fn.static or fn.name in self.addr_taken or \
                fn.name in self.macro_used:
            return None
        self._dfresult[key] = PENDING
        # every call of the name: a static function of a header has callers
        # in each file including it (more callers than its own is safe)
        sites = [(c, k) for (c, st, k) in self.calls.get(fn.name, ())]
        found = "" if sites else None
        for (caller, k) in sites:
            toks = self.src.toks[caller.file]
            if k + 1 >= len(toks) or toks[k + 1].text != "(":
                found = None
                break
            d = self._use_diag(caller, k) or \
                self._flows_to_diag(caller, k, csrc.match_paren(toks, k + 1), depth)
            if d is None:
                found = None
                break
            found = found or d
        self._dfresult[key] = found if found is not None else False
        return found


def _memo(v):
    """A memo entry as a result: a diagnostic, '' (pending) or None."""
    return "" if v is PENDING else None if v is False else v


def _last_token(toks, a):
    """Index of the last token of access a (its field name), or None."""
    for k in range(a.tok, min(a.tok + 64, len(toks))):
        t = toks[k]
        if t.line == a.eline and t.ecol >= a.ecol:
            return k if t.ecol == a.ecol or t.ecol == a.ecol + 1 else None
        if t.line > a.eline:
            return None
    return None


def _first_token(toks, k):
    """The first token of the member path whose field is toks[k] ('p' of
    'p->a.f', '(' of '(*pp)->f', the base of 'v[n]->f')."""
    while toks[k - 1].text in ("->", "."):
        k -= 2
        while toks[k].text in (")", "]"):
            o = csrc.open_of(toks, k)
            if toks[k].text == ")" and toks[o - 1].kind != "id":
                k = o
                break
            k = o - 1
    return k


def _plain_value(toks, i, j):
    """Tokens i..j are used as a value: not a pointer followed through,
    not called, not dereferenced, not an address taken."""
    if j + 1 < len(toks) and toks[j + 1].text in NOT_VALUE | STEP | ASSIGN:
        return False
    p = toks[i - 1]
    if p.text in ("&", "*") and toks[i - 2].kind not in ("id", "num") and \
            toks[i - 2].text not in (")", "]"):
        return False
    return p.text not in STEP


def _declares(toks, k):
    """toks[k] is the name a declaration statement declares ('T v;', 'T v
    = ...;', 'struct s *v;'): type words from the statement's start."""
    if toks[k + 1].text not in ("=", ";", ","):
        return False
    q = k - 1
    while toks[q].text == "*" or (toks[q].kind == "id" and toks[q].text not in KEYWORDS):
        q -= 1
    return q < k - 1 and toks[q + 1].kind == "id" and toks[q].text in (";", "{", "}")


def _stored(toks, k):
    """toks[k] is the target of an assignment or a '++'/'--' statement."""
    return (toks[k + 1].text in ASSIGN | STEP or toks[k - 1].text in STEP) and \
        toks[k - 1].text not in ("->", ".", "*", "&")


def _statement_start(toks, k, lo):
    """The first token of the statement token k is in."""
    k -= 1
    while k > lo:
        x = toks[k].text
        if x in (")", "]"):
            o = csrc.open_of(toks, k)
            if o <= lo or x == ")" and toks[o - 1].text in HEADERS:
                break
            k = o
        elif x in (";", "{", "}", "else") or (x == ":" and _label(toks, k)):
            break
        k -= 1
    return k + 1


def _sink(toks, i, j, lo):
    """Where the value of tokens i..j goes: ('assign', local), ('if', the
    locals its body updates, or None), ('return',), or None (anything
    else)."""
    k = i - 1
    while k > lo:
        x = toks[k].text
        if x in (")", "]"):
            o = csrc.open_of(toks, k)
            if o <= lo:
                return None
            if x == ")" and toks[o - 1].text in HEADERS:
                break                       # the body of a header
            k = o - 1
            continue
        if x == "[":
            return None
        if x == "(":
            name = toks[k - 1].text if toks[k - 1].kind == "id" else ""
            if name == "if":
                return ("if", _guard_updates(toks, k, i, j))
            if name:
                return None                 # a call, a loop or a switch
        elif x in (";", "{", "}", "else") or (x == ":" and _label(toks, k)):
            break
        k -= 1
    return _statement_sink(toks, k + 1, i, j)


def _statement_sink(toks, st, i, j):
    """The sink of the value i..j in the statement starting at st."""
    if toks[st].text == "return":
        end = _end(toks, st)
        return ("return",) if end is not None and _pure(toks, st + 1, end, i, j) else None
    eq = next((k for k in range(st, i) if toks[k].text in ASSIGN), None)
    if eq is None:
        return None
    lhs = toks[st:eq]
    if len(lhs) == 3 and lhs[1].text == "->" and lhs[0].kind == lhs[2].kind == "id" and \
            toks[eq].text == "=":
        end = _end(toks, eq)
        if end is None or not _pure(toks, eq + 1, end, i, j):
            return None
        return ("out", lhs[0].text)
    if not lhs or lhs[-1].kind != "id" or lhs[0].text == "*" or \
            any(t.kind != "id" and t.text != "*" for t in lhs) or \
            any(t.text in KEYWORDS for t in lhs):
        return None
    end = _end(toks, eq)
    if end is None or not _pure(toks, eq + 1, end, i, j):
        return None
    return ("assign", lhs[-1].text)


def _label(toks, k):
    """The ':' at toks[k] ends a case or goto label."""
    p = toks[k - 1]
    if p.text == "default" or (p.kind == "id" and toks[k - 2].text in (";", "{", "}")):
        return True
    for q in range(k - 1, max(k - 16, 0), -1):
        x = toks[q].text
        if x == "case":
            return True
        if x in (";", "{", "}", "?"):
            return False
    return False


def _end(toks, k):
    """The ';' that ends the statement token k is in (at its depth)."""
    n = len(toks)
    while k < n:
        x = toks[k].text
        if x in ("(", "["):
            k = csrc.match_paren(toks, k)
        elif x == ";":
            return k
        elif x in ("{", "}", ")", "]"):
            return None
        k += 1
    return None


def _pure(toks, lo, hi, i=None, j=None):
    """Tokens lo..hi (exclusive), the value i..j aside, call nothing and
    store nothing."""
    for k in range(lo, hi):
        if i is not None and i <= k <= j:
            continue
        x = toks[k].text
        if x in ASSIGN or x in STEP or x == "{":
            return False
        if x == "(" and toks[k - 1].kind == "id" and toks[k - 1].text not in (
                "sizeof", "__typeof__", "typeof"):
            return False
    return True


def _guard_updates(toks, o, i, j):
    """The locals the body of the 'if' whose condition opens at toks[o]
    updates, when its condition (the value i..j aside) calls and stores
    nothing, it has no else and its body does nothing else; else None."""
    c = csrc.match_paren(toks, o)
    if c >= len(toks) or not _pure(toks, o + 1, c, i, j):
        return None
    b = c + 1
    if toks[b].text == "{":
        e = csrc.match_paren(toks, b)
        stmts_lo, stmts_hi = b + 1, e
    else:
        e = _end(toks, b)
        if e is None:
            return None
        stmts_lo, stmts_hi = b, e + 1
    if e + 1 >= len(toks) or toks[e + 1].text == "else":
        return None
    names = []
    k = stmts_lo
    while k < stmts_hi:
        end = _end(toks, k)
        if end is None or end >= stmts_hi:
            return None
        name = _update(toks, k, end)
        if name is None:
            return None
        names.append(name)
        k = end + 1
    return names or None


def _update(toks, st, end):
    """The local the statement st..end (';') updates, when that is all it
    does ('v++;', '++v;', 'v = e;', 'v += e;' with e calling and storing
    nothing), else None."""
    n = end - st
    if n == 2 and toks[st].kind == "id" and toks[st + 1].text in STEP:
        return toks[st].text
    if n == 2 and toks[st].text in STEP and toks[st + 1].kind == "id":
        return toks[st + 1].text
    if n >= 3 and toks[st].kind == "id" and toks[st].text not in KEYWORDS and \
            toks[st + 1].text in ASSIGN and _pure(toks, st + 2, end):
        return toks[st].text
    return None
