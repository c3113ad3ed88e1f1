# SPDX-License-Identifier: GPL-2.0-only
"""Ownership, part 5: objects a flag says are new (policies
'new_object_flags': an inode with I_NEW, which every lookup waits on or
skips), from the test of the flag, an assertion of it, the call that sets
it, a call that hands the new object back, or a function that returns it
new, to the call that publishes it (or after which other paths reach it)
or the end of the block.  Windows of tokens, as in unpublished.py and
detach.py, which gathers them into _detached().

Reads .src, .P (new_flags, container_accessors).  Sets only its caches.
"""
import re

from . import csrc
from .locks import KEYWORDS
from .tokutil import _in_loop, _last_stmt
from .unpublished import _assignments


class NewObjects:
    def _new_windows(self, fn, made=True):
        """name -> (from, to, why): an object fn holds while a flag says it
        is new (policies 'new_object_flags': an inode marked I_NEW, which
        iget5_locked() and every lookup wait on), from the test of the
        flag to the call that publishes it (unlock_new_inode()) or the end
        of the block: 'if (x->i_state & I_NEW) { ... }', or after
        'if (!(x->i_state & I_NEW)) return ...;'; or from an assertion
        that the flag is set, 'ASSERT(test_bit(FLAG, &x->member));', to
        the publishing call or the end of fn (an object no lookup ever
        returns: a flag that is never cleared, no publish function); or
        from 'x = f(...);' of a function that returns its object new
        (_new_makers(); made: also those)."""
        out = {}
        if not self.P.new_flags:
            return out
        toks = self.src.toks[fn.file]
        lo, hi = fn.body_start, fn.body_end
        ids = self._ids(fn)
        for spec in self.P.new_flags:
            makers = self._new_makers(spec) if made else {}
            if spec["flag"] not in ids and not any(c in ids for c in spec.get("set_by", ())) \
                    and not any(c in ids for c in makers) \
                    and not any(c in ids for c in spec.get("handed_back_by", {})):
                continue                    # fn never names the flag
            for k in range(lo + 1, hi - 8):
                mw = _flag_made(toks, k, hi, makers)
                w = self._flag_if(toks, k, hi, spec) or self._flag_assert(toks, k, hi, spec) \
                    or self._flag_set_by(toks, k, hi, spec) or mw or \
                    self._flag_handed_back(fn, toks, k, hi, spec) or \
                    self._flag_tested(toks, k, hi, spec)
                if w is None:
                    continue
                name, start, end = w
                end = self._new_window_end(fn, toks, name, start, end, spec)
                if w is mw:
                    end = self._made_end(fn, start, end, name, spec)
                why = "new: %s is set in %s->%s%s (%s)" % (
                    spec["flag"], name, spec["member"],
                    " until %s()" % spec["publish"][0] if spec["publish"] else "",
                    spec["reason"])
                out.setdefault(name, (start, end, why))
                # 'ei = FOO_I(x);' before the end of the window (policies
                # 'container_accessors'), ei assigned nowhere else and x
                # not again after it: the struct around x, as new
                for j in range(lo + 1, end - 5):
                    if toks[j].kind == "id" and toks[j + 1].text == "=" and \
                            toks[j + 2].text in self.P.container_accessors and \
                            toks[j + 3].text == "(" and toks[j + 4].text == name and \
                            toks[j + 5].text == ")" and toks[j - 1].text in (";", "{", "}", "*") \
                            and _assignments(toks, lo, hi, toks[j].text) == 1 and \
                            _assignments(toks, j, end, name) == 0:
                        out.setdefault(toks[j].text, (max(j, start), end, why))
        return out

    def in_new_window(self, a):
        """Access a is made to an object its function holds in a window
        of _new_windows() (a new object, its flag set)."""
        if a.tok is None or a.func is None:
            return False
        win = {n: d for n, d in self._new_windows(a.func).items() if d[0] < a.tok < d[1]}
        return bool(win) and self._private_root(a, win) is not None

    def _new_window_end(self, fn, toks, name, start, end, spec):
        """Where a new-object window from toks[start] to toks[end] ends: at
        the call that publishes the object (its argument is exactly the
        name), or at the first call after which other paths reach it
        though the flag is still set (policies 'shared_after': a commit
        that hands it to the log), whichever comes first."""
        for j in range(start, end):
            if toks[j + 1].text != "(" or toks[j - 1].text in (".", "->"):
                continue
            if toks[j].text in spec.get("shared_after", ()):
                return j
            if toks[j].text in spec["publish"]:
                args = self._call_args(fn.file, j) or []
                if any(b - a2 == 1 and toks[a2].text == name for a2, b in args):
                    return j
        return end

    def _flag_handed_back(self, fn, toks, k, hi, spec):
        """(name, from, to) of a call that hands back through its argument
        n a new object with the flag set, 'make(a, b, &x);' (policies
        'handed_back_by': {function: n}): to the end of fn or where fn
        assigns x again.  Not in a loop."""
        n = spec.get("handed_back_by", {}).get(toks[k].text)
        if n is None or toks[k + 1].text != "(" or toks[k - 1].text in (".", "->"):
            return None
        args = self._call_args(fn.file, k) or []
        if n >= len(args) or args[n][1] - args[n][0] != 2 or toks[args[n][0]].text != "&":
            return None
        x = toks[args[n][0] + 1].text
        if toks[args[n][0] + 1].kind != "id" or _in_loop(toks, fn.body_start, k):
            return None
        start = csrc.match_paren(toks, k + 1)
        end = next((j for j in range(start, hi) if toks[j].text == x and
                    toks[j + 1].text == "=" and toks[j - 1].text not in (".", "->")), hi)
        return x, start, end

    @staticmethod
    def _flag_tested(toks, k, hi, spec):
        """(name, from, to) of 'if (T(x, FLAG)) stmt;' or 'if (T(x, FLAG) &&
        ...) { ... }' at k, T a call that tests the flag (policies
        'tested_by'): the branch taken when it is set.  Not with '||' in
        the condition."""
        if toks[k].text != "if" or toks[k + 1].text != "(" or \
                toks[k + 2].text not in spec.get("tested_by", ()) or toks[k + 3].text != "(" \
                or toks[k + 4].kind != "id" or toks[k + 5].text != "," or \
                toks[k + 6].text != spec["flag"] or toks[k + 7].text != ")":
            return None
        close = csrc.match_paren(toks, k + 1)
        if toks[k + 8].text not in (")", "&&") or \
                any(toks[j].text == "||" for j in range(k + 8, close)):
            return None
        if toks[close + 1].text == "{":
            return toks[k + 4].text, close + 1, csrc.match_paren(toks, close + 1)
        if toks[close + 1].text in ("if", "for", "while", "do", "switch", ";"):
            return None
        end = close + 1
        while end < hi and toks[end].text != ";":
            end += 1
        return toks[k + 4].text, close, end + 1

    @staticmethod
    def _flag_if(toks, k, hi, spec):
        """(name, from, to) of 'if (x->member & FLAG) {' at k (the block)
        or 'if (!(x->member & FLAG)) return ...;' (the rest of fn)."""
        if toks[k].text != "if" or toks[k + 1].text != "(":
            return None
        neg = toks[k + 2].text == "!" and toks[k + 3].text == "("
        a = k + 4 if neg else k + 2
        if not (toks[a].kind == "id" and toks[a + 1].text == "->" and
                toks[a + 2].text == spec["member"] and toks[a + 3].text == "&" and
                toks[a + 4].text == spec["flag"] and toks[a + 5].text == ")"):
            return None
        close = a + 5 if not neg else a + 6
        if neg:
            if toks[close].text != ")":
                return None
            if toks[close + 1].text == "{":
                # 'if (!(x->m & F)) { ...; return x; }': the block ends
                # in a return, so the rest of fn runs with the flag set
                end = csrc.match_paren(toks, close + 1)
                last = _last_stmt(toks, close + 1, end)
                if last is None or toks[last].text != "return":
                    return None
                return toks[a].text, end, hi
            if toks[close + 1].text != "return":
                return None
            start = close + 1
            while start < hi and toks[start].text != ";":
                start += 1
            return toks[a].text, start, hi
        if toks[close + 1].text != "{":
            return None
        return toks[a].text, close + 1, csrc.match_paren(toks, close + 1)

    def _new_makers(self, spec):
        """{name: why} of the functions that return an object the flag
        says is new: every return is an error pointer, NULL, or the
        object of a window 'set_by' opens (or a local only ever given
        it), made inside the window (before the call that publishes it);
        and of the macros whose every definition is one call of such a
        function ('#define foo_new(a, b) __foo_new(NULL, (a), (b))')."""
        memo = self.__dict__.setdefault("_makers", {})
        if spec["flag"] in memo:
            return memo[spec["flag"]]
        out = memo[spec["flag"]] = {}
        for fn in self.src.funcs.values():
            if spec.get("set_by") and self._returns_new(fn, spec):
                out[fn.name] = "%s() returns it with %s set" % (fn.name, spec["flag"])
        for name, callee, _ in _call_macros(self.src):
            if out.get(callee):
                out.setdefault(name, "%s(), which %s" % (name, out[callee]))
            else:
                out[name] = None            # a definition that is not one call
        for name in [n for n, why in out.items() if why is None]:
            del out[name]
        return out

    def _made_end(self, fn, start, end, x, spec):
        """Where the window of x, made by a call that returns it new, ends
        at the latest: at the first call handed '&x' (it may publish x and
        put another object there), or x where the callee may publish it
        (_publishing())."""
        toks = self.src.toks[fn.file]
        pub = self._publishing(spec)
        for j in range(start, end):
            if toks[j].kind != "id" or toks[j + 1].text != "(" or toks[j].text in KEYWORDS:
                continue
            for n, (a, b) in enumerate(self._call_args(fn.file, j) or []):
                t = [toks[i].text for i in range(a, b)]
                if t == ["&", x] or t == [x] and (toks[j].text, n) in pub:
                    return j
        return end

    def _publishing(self, spec):
        """{(function, argument number)}: the publish functions of spec,
        with each argument, and the functions of the target that hand
        their parameter there ('p', '*p' or '&p'), to a fixed point."""
        memo = self.__dict__.setdefault("_pubargs", {})
        if spec["flag"] in memo:
            return memo[spec["flag"]]
        edges = {}
        for fn in self.src.funcs.values():
            params = self.params(fn)
            toks = self.src.toks[fn.file]
            for j in range(fn.body_start, fn.body_end):
                if toks[j].kind != "id" or toks[j + 1].text != "(" or toks[j].text in KEYWORDS:
                    continue
                for m, (a, b) in enumerate(self._call_args(fn.file, j) or []):
                    t = [toks[i].text for i in range(a, b)]
                    if len(t) in (1, 2) and t[-1] in params and t[0] in (t[-1], "*", "&"):
                        edges.setdefault((toks[j].text, m), set()).add(
                            (fn.name, params.index(t[-1])))
        pub = {(c, m) for c, m in edges if c in spec["publish"]}
        pub |= {(c, m) for c in spec["publish"] for m in range(4)}
        todo = list(pub)
        while todo:
            for src_ in edges.get(todo.pop(), ()):
                if src_ not in pub:
                    pub.add(src_)
                    todo.append(src_)
        memo[spec["flag"]] = pub
        return pub

    def _returns_new(self, fn, spec):
        """Every return of fn is an error pointer or NULL or the object
        of one window of a 'set_by' call (or a local only given it) made
        inside that window, and one is."""
        toks = self.src.toks[fn.file]
        lo, hi = fn.body_start, fn.body_end
        setters = spec.get("set_by", ())
        wins = [w for w in (self._flag_set_by(toks, k, hi, spec) for k in range(lo + 1, hi - 3)
                            if toks[k].text in setters)
                if w is not None]
        if len(wins) != 1:
            return False
        start, end, _ = self._new_windows(fn, made=False).get(wins[0][0], (0, 0, None))
        names = {wins[0][0]} | {toks[j].text for j in range(lo + 1, hi - 3)
                                if toks[j].kind == "id" and toks[j + 1].text == "=" and
                                toks[j + 2].text == wins[0][0] and toks[j + 3].text == ";" and
                                _assignments(toks, lo, hi, toks[j].text) == 1}
        found = False
        for k in range(lo + 1, hi):
            if toks[k].text != "return":
                continue
            v = toks[k + 1].text
            if v in ("ERR_PTR", "ERR_CAST", "NULL"):
                continue
            if v not in names or toks[k + 2].text != ";" or not start <= k < end:
                return False
            found = True
        return found

    @staticmethod
    def _flag_set_by(toks, k, hi, spec):
        """(name, from, to) of a call that sets the flag on its first
        argument, 'insert_inode_locked(x)' (policies 'set_by'): the rest
        of fn."""
        if toks[k].text not in spec.get("set_by", ()) or toks[k + 1].text != "(" or \
                toks[k + 2].kind != "id" or toks[k + 3].text not in (")", ","):
            return None
        return toks[k + 2].text, csrc.match_paren(toks, k + 1), hi

    def _flag_assert(self, toks, k, hi, spec):
        """(name, from, to) of 'ASSERT(test_bit(FLAG, &x->member));' at k:
        the rest of fn."""
        if toks[k].text not in self.P.assertions or k + 12 >= hi:
            return None
        want = ["(", "test_bit", "(", spec["flag"], ",", "&", None, "->", spec["member"],
                ")", ")", ";"]
        for n, w in enumerate(want, 1):
            if w is not None and toks[k + n].text != w:
                return None
        if toks[k + 7].kind != "id":
            return None
        return toks[k + 7].text, k + 12, hi


def _call_macros(src):
    """[(macro, function, names)] for every function-like '#define' of
    src's files: function the one call its body is ('f(...)' in any
    parentheses) or None, names the identifiers of its body."""
    memo = src.__dict__.get("_callmacros")
    if memo is not None:
        return memo
    memo = src._callmacros = []
    for text in src.text.values():
        for body in re.findall(r"^[ \t]*#[ \t]*define[ \t]+(?:.*\\\n)*.*", text, re.M):
            m = re.match(r"\s*#\s*define\s+(\w+)\(([^)]*)\)(.*)$",
                         body.replace("\\\n", " "), re.S)
            if m is None:
                continue
            t = list(csrc.tokenize(m.group(3).replace("#", " ")))
            names = frozenset(x.text for x in t if x.kind == "id")
            while len(t) > 2 and t[0].text == "(" and csrc.match_paren(t, 0) == len(t) - 1:
                t = t[1:-1]
            ok = len(t) > 2 and t[1].text == "(" and csrc.match_paren(t, 1) == len(t) - 1
            memo.append((m.group(1), t[0].text if ok else None, names))
    return memo


def _flag_made(toks, k, hi, makers):
    """(name, from, to) of 'x = f(...);' at k, f a function or macro that
    returns its object new (_new_makers()): the rest of fn."""
    if toks[k].kind != "id" or toks[k + 1].text != "=" or toks[k + 2].text not in makers or \
            toks[k + 3].text != "(" or toks[k - 1].text not in (";", "{", "}", ":", ")"):
        return None
    close = csrc.match_paren(toks, k + 3)
    if close + 1 >= hi or toks[close + 1].text != ";":
        return None
    return toks[k].text, close + 1, hi
