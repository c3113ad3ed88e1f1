# SPDX-License-Identifier: GPL-2.0-only
"""Lock wrappers the code shows: a function that hands back, through a
pointer-to-pointer parameter, an object a lock function returned locked.

    int foo_read_hdr(struct ag *ag, struct buf **bpp)
    {
            struct buf *bp;
            int error = read_buf(ag, &bp);      // returns 0 with bp locked
            if (error)
                    return error;
            ...
            if (bpp)
                    *bpp = bp;
            else
                    buf_relse(bp);
            return 0;
    }

returns 0 with the lock read_buf() took held wherever the caller passed
a place to keep the buffer: it is itself a lock function ('acquire_ret0')
whose call takes nothing when that argument is NULL ('out_arg').  The
function's lock flow is run as such a call makes it, with p not NULL
(the branch of 'if (!p)' never taken), and every return that may return
0 must come after both the lock and the hand-back ('*p = v;' of the
object the lock call was handed, or a wrapper's call handed p itself in
the place it hands back through); a return of a negative constant, or
'return e;' where 'if (e)' found e not 0, returns an error.

The inferred wrappers are for the lock flow only (.flow_lockfns): they
are functions of the target, whose calls publish and keep what other
calls do (not primitives, as the declared wrappers in .lockfns are).

Reads .src, .lockfns, .guards, .params(); sets nothing but the memo
of _out_params() (_outparams; callgraph.py keeps the result as
.flow_lockfns).
"""
from .correlate import STORES
from .lockmodes import HANDED, handed_base
from .locks import LockFlow
from .lockstate import How, State

ROUNDS = 4


class HandBack:
    def handed_back_lockfns(self):
        """{name: spec} of the wrappers that hand back a locked object
        through a parameter, in rounds (a wrapper of one found before)."""
        cands = []
        for fn in self.src.funcs.values():
            outs = self._out_params(fn)
            if outs and fn.name not in self.lockfns:
                cands.append((fn, outs))
        found = {}
        for _ in range(ROUNDS):
            lockfns = dict(self.lockfns, **found)
            new = {}
            for fn, outs in cands:
                if fn.name in found or fn.name in new or \
                        len(self.src.by_name.get(fn.name, ())) != 1:
                    continue
                spec = self._hands_back(fn, outs, lockfns)
                if spec is not None:
                    new[fn.name] = spec
            if not new:
                break
            found.update(new)
        return found

    def _out_params(self, fn):
        """[(index, name)] of fn's 'struct S **p' parameters, when fn
        returns an int (0 for success); remembered (the sources alone:
        the lock flow's wrappers and out_makers() ask, the latter again
        after the windows are forgotten)."""
        memo = self.__dict__.setdefault("_outparams", {})
        key = (fn.file, fn.body_start)
        if key not in memo:
            memo[key] = self._find_out_params(fn)
        return memo[key]

    def _find_out_params(self, fn):
        if (fn.ret or "").split()[-1:] != ["int"] or fn.broken:
            return []
        toks = self.src.toks[fn.file]
        names = self.params(fn)
        out = []
        i = fn.body_start - 1
        while i > 0 and not (toks[i].text == fn.name and toks[i + 1].text == "("):
            i -= 1
        for n, p in enumerate(names):
            if p is None:
                continue
            for k in range(i + 2, fn.body_start):
                if toks[k].text == p and toks[k - 1].text == "*" and toks[k - 2].text == "*" \
                        and toks[k + 1].text in (",", ")"):
                    out.append((n, p))
                    break
        return out

    def _stored_in(self, toks, fn, p):
        """The locals fn stores in '*p' ('*p = v;' as a statement; not
        '*p = NULL;', which hands back nothing)."""
        out = set()
        for k in range(fn.body_start + 1, fn.body_end - 4):
            if toks[k].text == "*" and toks[k + 1].text == p and toks[k + 2].text == "=" and \
                    toks[k + 3].kind == "id" and toks[k + 3].text != "NULL" and \
                    toks[k + 4].text == ";" and \
                    toks[k - 1].text in (";", "{", "}", ")", "else"):
                out.add(toks[k + 3].text)
        return out

    def _returns(self, toks, fn):
        """[(index of the returned expression, its kind)]: '0', 'neg' (a
        negative constant) or 'other'; None if one returns nothing."""
        out = []
        for k in range(fn.body_start + 1, fn.body_end):
            if toks[k].text != "return":
                continue
            x = toks[k + 1]
            if x.text == ";":
                return None
            if x.text == "0" and toks[k + 2].text == ";":
                out.append((k + 1, "0"))
            elif x.text == "-" and toks[k + 2].kind in ("id", "num") and \
                    toks[k + 3].text == ";" and toks[k + 2].text != "0":
                out.append((k + 1, "neg"))
            else:
                out.append((k + 1, "other"))
        return out

    def _hands_back(self, fn, outs, lockfns):
        """The spec of fn as a wrapper that hands back a locked object
        through one of its parameters outs, or None."""
        toks = self.src.toks[fn.file]
        rets = self._returns(toks, fn)
        if not rets:
            return None
        for n, p in outs:
            objs = self._stored_in(toks, fn, p)
            flow = _NonNull(toks, fn.body_start, fn.body_end + 1, lockfns,
                            lambda x, y: self.lock_name_of(fn.file, toks, x, y),
                            {k for k, _ in rets}, self.guards)
            flow.p, flow.objs, flow.handed = p, objs, self._handed
            res = flow.run(State())
            names = {handed_base(name) or name for (_, op, name) in res.events
                     if op == "handed"}
            for name in sorted(names - self._ended_here(toks, fn)):
                key = _held_at_returns(toks, res, rets, name)
                if key is not None:
                    return {"name": fn.name, "op": "acquire_ret0", "lock": name + HANDED,
                            "mode": "read" if key.endswith(":r") else "exclusive",
                            "out_arg": n,
                            "reason": "%s() hands back through its parameter %s an object "
                                      "it holds locked" % (fn.name, p)}
        return None

    def _ended_here(self, toks, fn):
        """The locks a protocol fn starts itself may give back before fn
        returns: those of a pseudo-lock that stands for the locks of the
        objects it covers ('excludes': a transaction holds locked the
        objects it changes until it ends) whose struct fn makes in a local
        ('struct S *v; ... start(&v)'): the flow cannot see the end release
        them."""
        out = set()
        for c in self.P.pseudo_locks.values():
            s = c.get("struct")
            if not c.get("excludes") or not s:
                continue
            mine = {toks[k + 3].text for k in range(fn.body_start + 1, fn.body_end - 3)
                    if toks[k].text == "struct" and toks[k + 1].text == s and
                    toks[k + 2].text == "*" and toks[k + 3].kind == "id"}
            if any(toks[k].text == "&" and toks[k + 1].text in mine and
                   toks[k + 2].text in (",", ")")
                   for k in range(fn.body_start + 1, fn.body_end - 2)):
                out.update(c["excludes"])
        return out

    def _handed(self, toks, k, objs, at):
        """The call toks[k](...) is handed one of objs: 'v', '&v' or 'p'
        as a whole argument (argument number at, for a wrapper that hands
        the object back through that one)."""
        from .csrc import match_paren
        c = match_paren(toks, k + 1)
        depth, start, n = 0, k + 2, 0
        for j in range(k + 2, c + 1):
            x = toks[j].text
            if x in ("(", "["):
                depth += 1
            elif x in (")", "]") and j < c:
                depth -= 1
            elif depth == 0 and (x == "," or j == c):
                arg = [t.text for t in toks[start:j]]
                if arg[-1:] and arg[-1] in objs and arg[:-1] in ([], ["&"]) and \
                        at in (None, n):
                    return True
                start, n = j + 1, n + 1
        return False



def _held_at_returns(toks, res, rets, name):
    """The held-set key of lock name when every return that may return
    0 holds it and comes after the hand-back, and one does; else None."""
    got = None
    for k, kind in rets:
        st = res.at.get(k)
        if st is None or kind == "neg" or NONZERO + toks[k].text in st.held and \
                toks[k + 1].text == ";":
            continue
        held = [x for x in (name, name + ":r", name + HANDED, name + HANDED + ":r")
                if x in st.held]
        if not held or BACK not in st.held:
            return None
        got = held[0]
    return got


BACK = "*handed back"
NONZERO = "*not 0: "


class _NonNull(LockFlow):
    """The lock flow of a function called with its parameter .p not
    NULL, which also holds BACK from the hand-back of an object it
    locked on ('*p = v;' of v in .objs, or a lock call handed p itself),
    and NONZERO + e in the branch of 'if (e)'."""

    def cond(self, lo, hi, st):
        words = [x.text for x in self.t[lo:hi]]
        if st is not None and words in ([self.p], ["!", self.p]):
            s = self.expr(lo, hi, st)
            return (s, None) if len(words) == 1 else (None, s)
        yes, no = super().cond(lo, hi, st)
        if yes is not None and len(words) == 1 and self.t[lo].kind == "id":
            yes = yes.copy()
            yes.held[NONZERO + words[0]] = How("if", self.t[lo].line)
        return yes, no

    def expr(self, lo, hi, st, skip_events=False):
        n = len(self.res.events)
        out = super().expr(lo, hi, st, skip_events)
        if out is None:
            return out
        t = self.t
        for k in range(lo, hi - 3):
            if t[k].text == "*" and t[k + 1].text == self.p and t[k + 2].text == "=" and \
                    t[k + 3].text in self.objs and t[k + 4].text == ";":
                out = out.copy()
                out.held[BACK] = How("*%s =" % self.p, t[k].line)
            elif t[k].kind == "id" and t[k + 1].text in STORES and \
                    NONZERO + t[k].text in out.held:
                out = out.copy()
                del out.held[NONZERO + t[k].text]
        for (k, op, name) in self.res.events[n:]:
            if op == "acquire" and "{" not in name:
                at = self.lockfns[t[k].text].get("out_arg")
                if self.handed(t, k, self.objs | {self.p}, at):
                    self.res.events.append((k, "handed", name))
                if self.handed(t, k, {self.p}, at):
                    out = out.copy()
                    out.held[BACK] = How(t[k].text, t[k].line)
        return out
