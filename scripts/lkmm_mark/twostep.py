# SPDX-License-Identifier: GPL-2.0-only
"""Stage 4b: two-step stores that expose an intermediate value, a bug no
mark fixes.

A field that races (one of its accesses has a racing pair) is stored by a
plain assignment, then stored again in sequence by the same function, on
the same base, once or more, each later store computed from the field
itself: from its own value ('p->f = min(p->f, max)', 'p->f += n') or
under a test of it ('if (p->f > max) p->f = max').
A load elsewhere that races with the stores sees the value of the first
store, which the later ones were there to correct (an option not yet
clamped to its limit).  WRITE_ONCE() on each store keeps each store whole,
not the value final; the fix is to compute into a local and store once.

Not reported: stores whose racing readers are all kept apart from them
(pairs._counterpart(): a lock the readers hold too, the contexts, a
life-cycle order...), stores on exclusive paths (the two branches of an
'if', two cases of a switch, a block left by a 'return' or 'goto'), a
later store that does not read the field (the first is simply
overwritten), and a first store that is a read-modify-write (a whole
change of its own: counters, flag bits, a change undone on error).

Reads .accesses with their verdicts, .pair_idx (pairs.py) and .src.
Sets .two_step_stores: one dict per finding, for the plan's
'two_step_stores' list (commands.plan_dict()).
"""
from . import csrc
from .doublefetch import enclosing_open, guarded_spans, plain_load, racy_fields, \
    same_object, stmt_last
from .pairs import _locks_text, is_load
from .source import STORE_MACROS
from .tokutil import _stmt_end


def plain_store(a):
    return a.kind in ("write", "rmw") or (a.kind == "marked" and a.macro in STORE_MACROS)


class TwoStep:
    def find_two_step_stores(self):
        self.two_step_stores = []
        racy = racy_fields(self.accesses)
        for key, accs in sorted(same_object(self.accesses, racy).items()):
            stores = [a for a in accs if plain_store(a)]
            i = 0
            while i < len(stores) - 1:
                chain = self._chain(stores, i, accs)
                i += len(chain)
                if len(chain) < 2:
                    continue
                reader = self._reader(chain)
                if reader is not None:
                    self.two_step_stores.append(_finding(chain, reader))
        self.two_step_stores.sort(key=lambda x: (x["file"], x["line"], x["column"]))

    def _chain(self, stores, i, accs):
        """stores[i], a plain assignment, and the stores after it that each
        follow the one before on the same path and compute the field from
        itself.  A first store that is itself a read-modify-write ('+=',
        '|=', '--') applies a change of its own, which later changes add
        to (or undo on an error path): not a value stored to be corrected."""
        first = stores[i]
        if first.kind == "rmw":
            return [first]
        toks = self.src.toks[first.file]
        lo, hi = first.func.body_start, first.func.body_end
        chain = [first]
        for t in stores[i + 1:]:
            prev = chain[-1]
            if not (in_sequence(toks, lo, hi, prev.tok, t.tok) and
                    self._from_itself(t, prev, accs)):
                break
            chain.append(t)
        return chain

    def _from_itself(self, t, prev, accs):
        """Store t computes the field from itself: a read-modify-write, a
        value that loads the field, or a store under a test of the field
        made after the store prev."""
        if t.kind == "rmw":
            return True
        toks = self.src.toks[t.file]
        hi = t.func.body_end
        end = _stmt_end(toks, t.tok, hi)
        for x in accs:
            if not plain_load(x):
                continue
            if t.tok < x.tok <= end:
                return True
            if prev.tok < x.tok < t.tok and \
                    any(lo <= t.tok <= e for lo, e in guarded_spans(toks, t.func.body_start,
                                                                 hi, x.tok)):
                return True
        return False

    def _reader(self, chain):
        """A load of the field in another function that races with one of
        the stores (the locks held at each are at least those held across
        the chain), or None."""
        s = chain[0]
        loads = [x for x in self.pair_idx.get((s.struct, s.field), ())
                 if is_load(x) and (x.file, x.fn) != (s.file, s.fn)]
        for a in chain:
            r = self._counterpart(a, loads)[0]
            if r is not None:
                return r
        return None


def in_sequence(toks, lo, hi, i, j):
    """Can toks[j] run after toks[i] (i < j) on one path of the function
    whose braces are toks[lo] and toks[hi]?  Not when they are in the two
    branches of one 'if' (or two cases of one switch), nor when a block
    that holds i and not j leaves ('return', 'goto', 'break', 'continue')
    after i without a condition."""
    for x in range(lo + 1, i):
        if toks[x].text == "if" and toks[x + 1].text == "(":
            c = csrc.match_paren(toks, x + 1)
            e = stmt_last(toks, c + 1, hi)
            if c < i <= e < j and toks[e + 1].text == "else" and \
                    j <= stmt_last(toks, e + 2, hi):
                return False
    for o in _blocks(toks, lo, i):
        end = csrc.match_paren(toks, o)
        if end >= j:
            break
        if any(toks[x].text in ("return", "goto", "break", "continue") and
               toks[x - 1].text in (";", "{", "}", ":") and enclosing_open(toks, lo, x) == o
               for x in range(i + 1, end)):
            return False
    return not _other_case(toks, i, j)


def _blocks(toks, lo, i):
    """The '{' of each block that holds toks[i], innermost first."""
    o = enclosing_open(toks, lo, i)
    while o is not None and o > lo:
        if toks[o].text == "{":
            yield o
        o = enclosing_open(toks, lo, o)


def _other_case(toks, i, j):
    """toks[i] and toks[j] are in two cases of one switch."""
    for c in range(i + 1, j):
        if toks[c].text in ("case", "default") and toks[c].kind == "id":
            o = enclosing_open(toks, 0, c)
            if o is not None and o < i and csrc.match_paren(toks, o) > j:
                return True
    return False


def _finding(chain, r):
    s = chain[0]
    again = ", ".join(str(t.line) for t in chain[1:])
    reason = "%s.%s is stored here in %s() and stored again from its own value at " \
        "line%s %s, with no lock held across them that its readers hold; %s() at %s " \
        "loads it %s and can see the value stored here: compute into a local, " \
        "store once" % (s.struct, s.field, s.fn, "s" if len(chain) > 2 else "", again,
                        r.fn, r.where(), _locks_text(r))
    return {"file": s.file, "line": s.line, "column": s.col, "end_column": s.ecol,
            "function": s.fn, "struct": s.struct, "field": s.field, "base": s.base,
            "again": [{"line": t.line, "column": t.col} for t in chain[1:]],
            "counterpart": {"file": r.file, "line": r.line, "function": r.fn,
                            "access": r.kind},
            "fix": "compute into a local, store once", "reason": reason}

