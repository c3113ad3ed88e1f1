# SPDX-License-Identifier: GPL-2.0-only
"""What a function's tokens say, for every stage after it: its parameter
names, where each identifier occurs in its body, how a variable itself is
used (assigned, stored, returned, handed to a call), the calls and their
arguments around a token, the target's definitions a call may reach,
the structs on its stack and whether it assigns a parameter again.

Reads .src and, in _bare_uses(), .lockfns (callgraph.py: a lock wrapper's
argument is no use of the object).  Sets nothing but its caches
(_paramcache, _idcache, _argcache, _stackcache).
"""
import collections

from . import csrc
from .locks import KEYWORDS
from .tokutil import _split


class Syntax:
    def params(self, fn):
        """Parameter names of fn, in order (None where there is no name)."""
        c = self._paramcache.get((fn.file, fn.body_start))
        if c is None:
            c = self._paramcache[(fn.file, fn.body_start)] = self._params(fn)
        return c

    def _params(self, fn):
        toks = self.src.toks[fn.file]
        i = fn.body_start - 1
        while i > 0 and not (toks[i].kind == "id" and toks[i].text == fn.name
                             and toks[i + 1].text == "("):
            i -= 1
        if i <= 0:
            return []
        end = csrc.match_paren(toks, i + 1)
        out = []
        for a, b in _split(toks, i + 2, end):
            name = None
            for k in range(a, b - 2):
                if toks[k].text == "(" and toks[k + 1].text == "*" and toks[k + 2].kind == "id":
                    name = toks[k + 2].text
                    break
            if name is None:
                j = b
                for k in range(a, b):
                    if toks[k].text == "[":
                        j = k
                        break
                ids = [t for t in toks[a:j] if t.kind == "id"]
                if len(ids) >= 2 and toks[j - 1].kind == "id":
                    name = ids[-1].text
            out.append(name)
        return out

    def _callee(self, caller, name):
        """The target's definitions a call by name from caller may reach."""
        c = [f for f in self.src.by_name.get(name, [])
             if not f.static or f.file == caller.file or f.file.endswith(".h")]
        return c

    def _ids(self, fn):
        """identifier -> token indices inside fn's body, in order."""
        key = (fn.file, fn.body_start)
        c = self._idcache.get(key)
        if c is None:
            c = collections.defaultdict(list)
            toks = self.src.toks[fn.file]
            for k in range(fn.body_start + 1, fn.body_end):
                if toks[k].kind == "id":
                    c[toks[k].text].append(k)
            self._idcache[key] = c
        return c

    def _bare_uses(self, fn, name):
        """How the variable `name` itself (not *name, name->f) is used in
        fn: yields (kind, info) with kind 'assigned', 'stored', 'returned',
        'arg' (callee, index) or 'other-arg'."""
        toks = self.src.toks[fn.file]
        lo = fn.body_start
        for k in self._ids(fn).get(name, ()):
            prev, nxt = toks[k - 1].text, toks[k + 1].text
            if prev in (".", "->") or nxt in ("->", ".", "[", "("):
                continue
            if prev == "*" and toks[k - 2].text in (";", "{", "}", "(", ",", "=", "return"):
                continue                     # *name: what it points to
            if prev == "&":
                yield ("stored", k)
                continue
            if nxt in ("=", "+=", "-=", "++", "--") or prev in ("++", "--"):
                yield ("assigned", k)
                continue
            if prev == "=" and nxt in (";", ",", ")", "}"):
                yield ("stored", k)
                continue
            if prev == "return":
                yield ("returned", k)
                continue
            # the innermost enclosing call and whether `name` is a whole argument
            c = self._call_arg(toks, k, lo)
            if c is None or c[0] in KEYWORDS or c[0] in self.lockfns:
                continue
            if c[2]:
                yield ("arg", c[:2])
            else:
                yield ("other-arg", c[0])

    def _call_args(self, file, k):
        """Argument token ranges of the call whose name is toks[k], or None."""
        key = (file, k)
        c = self._argcache.get(key, False)
        if c is False:
            toks = self.src.toks[file]
            if k + 1 >= len(toks) or toks[k + 1].text != "(":
                c = None
            else:
                c = _split(toks, k + 2, csrc.match_paren(toks, k + 1))
            self._argcache[key] = c
        return c

    def _call_of(self, toks, k, lo):
        """Name of the call whose argument list directly holds toks[k]."""
        c = self._call_arg(toks, k, lo)
        return c[0] if c else None

    def _call_arg(self, toks, k, lo):
        """(callee, argument index, whether toks[k] is the whole argument) of
        the call whose argument list directly holds toks[k], or None
        (remembered: the token lists live as long as the analysis)."""
        memo = self.__dict__.setdefault("_callargmemo", {})
        key = (id(toks), k, lo)
        if key not in memo:
            memo[key] = self._find_call_arg(toks, k, lo)
        return memo[key]

    def _find_call_arg(self, toks, k, lo):
        depth = 0
        j = k - 1
        while j > lo:
            x = toks[j].text
            if x == ")":
                depth += 1
            elif x == "(":
                if depth == 0:
                    if toks[j - 1].kind != "id":
                        return None
                    for n, (a, b) in enumerate(_split(toks, j + 1, csrc.match_paren(toks, j))):
                        if a <= k < b:
                            return (toks[j - 1].text, n, b - a == 1)
                    return None
                depth -= 1
            elif x in (";", "{", "}") and depth == 0:
                return None
            j -= 1
        return None

    def _reassigned(self, fn, p):
        """Does fn assign to its parameter p (so p may name another object)?"""
        key = (fn.file, fn.body_start, p)
        c = self._stackcache.get(key)
        if c is None:
            c = self._stackcache[key] = any(kind == "assigned"
                                            for kind, _ in self._bare_uses(fn, p))
        return c

    def _stack_structs(self, fn):
        """Names of the structs on fn's stack ('struct x name;'), whether or
        not their address escapes: the task running fn owns them."""
        key = (fn.file, fn.body_start)
        c = self._stackcache.get(key)
        if c is None:
            toks = self.src.toks[fn.file]
            c = {}                                  # an ordered set
            hi = fn.body_end
            for k in range(fn.body_start, hi - 3):
                if toks[k].text in ("struct", "union") and toks[k + 1].kind == "id" and \
                        toks[k + 2].kind == "id" and toks[k + 3].text in (";", "=", ",", "["):
                    c[toks[k + 2].text] = None
            self._stackcache[key] = c
        return c
