# SPDX-License-Identifier: GPL-2.0-only
"""Stage 2e: the exclusions, the accesses that get no verdict of their own
(rule and reason set from the exclusion in infer()): sizeof/typeof
operands, already marked, unknown type or outside the target, not
markable (bitfields, arrays, __rcu pointers, aggregates), address taken,
declared exceptions and task-private structs, life-cycle, dead and
test-only code, objects private to the function at that point, and
stores made where a reference count says no other task holds a
reference (and loads too, while a dec-and-lock that found the last
reference gone still holds its lock).

Reads .accesses, .src, .P, .dead, .dead_lines, .testonly, and asks
private.py (_private_why()), owners.py (lifecycle_functions()) and
instances.py (embedded_in(): a member embedded in a task-private struct).  Sets
.life and each access's .exclusion (and .kind 'atomic' for a bit
operation on a field's address).  Most false negatives a reviewer may
suspect live here; the false positives of missed exclusions live in
private.py, detach.py and unpublished.py.
"""
import re

from . import csrc
from .source import STORE_MACROS
from .tokutil import _returns


class Exclusions:
    def apply_exclusions(self):
        """The exclusion (rule, reason) of each access that is no plain
        access to judge, runs where nothing races with it, or touches an
        object no other task can reach; None for the others."""
        life = self.life = self.lifecycle_functions()
        exc = {}
        file_exc = {}
        for e in self.P.exceptions:
            if e.get("file"):
                file_exc[e["file"]] = e
            else:
                exc[e["field"]] = e
        for a in self.accesses:
            x = self._access_exclusion(a) or self._code_exclusion(a, exc, file_exc, life) or \
                self._object_exclusion(a)
            if x is not None:
                a.exclusion = x
        self._zero_holder_uses()

    def _access_exclusion(self, a):
        """Not a plain access to a scalar field of the target's structs
        (sizeof, marked, unknown type, not markable, address taken)."""
        fieldname = "%s.%s" % (a.struct, a.field)
        if a.kind == "sizeof" or any(c in ("typeof", "__typeof__", "__typeof", "sizeof")
                                     for c in a.ctx):
            return ("sizeof", "operand of sizeof/typeof")
        if a.kind == "marked":
            return ("already-marked", "already marked with %s()" % a.macro)
        if a.kind == "read" and self._store_macro_read_half(a):
            # 'WRITE_ONCE(x->f, x->f | b)': the read half of a marked
            # read-modify-write, which the rewrite leaves plain where no
            # store races with it; judged with the store, as an unmarked
            # 'x->f |= b' is
            return ("already-marked", "the read half of the WRITE_ONCE() it is the value of")
        if (a.file, a.fn) in self.src.unreadable:
            return ("not-analysed", "%s() is not analysed: %s"
                    % (a.fn, self.src.unreadable[(a.file, a.fn)][1]))
        if a.func is None:
            return ("unknown-type", "not inside a function definition")
        if a.struct is None:
            return ("unknown-type", "type of '%s' not inferred" % a.base)
        if a.struct not in self.src.structs:
            return ("outside-target", "struct %s is not defined under %s"
                    % (a.struct, self.target))
        m = self.src.member(a.struct, a.field, a.file)
        if m is None:
            return ("unknown-type", "no member %s in struct %s" % (a.field, a.struct))
        cat = m.category
        if cat.startswith("opaque:") and cat[7:] in self.P.scalar_typedefs:
            cat = "scalar"
        if cat != "scalar":
            what = {"bitfield": "a bitfield", "array": "an array", "rcu": "an __rcu pointer",
                    "aggregate": "a struct or union (%s)" % m.type}.get(
                        cat, "of type %s" % m.type)
            return ("not-markable", "%s is %s" % (fieldname, what))
        if a.kind == "address":
            bit = self._bitop(a)
            if bit:
                a.kind = "atomic"
                a.macro = bit
                return ("already-marked", "atomic %s() on its address" % bit)
            return ("address-taken", "address taken")
        return None

    def _store_macro_read_half(self, a):
        """a's load is inside the value of WRITE_ONCE() (a store macro) of
        the same expression: 'WRITE_ONCE(x->f, x->f + n)'."""
        toks = self.src.toks[a.file]
        k = a.tok
        if k is None or a.func is None or k < 2 or toks[k - 1].text not in ("->", "."):
            return False
        depth = 0
        for j in range(k - 1, a.func.body_start, -1):
            x = toks[j].text
            if x == ")":
                depth += 1
            elif x == "(" and depth:
                depth -= 1
            elif x == "(":
                if toks[j - 1].text not in STORE_MACROS:
                    return False
                args = self._call_args(a.file, j - 1) or []
                if len(args) != 2 or not args[1][0] <= k < args[1][1]:
                    return False
                lo, hi = args[0]
                want = "%s %s %s" % (a.base, toks[k - 1].text, a.field) if a.base else None
                return want is not None and " ".join(t.text for t in toks[lo:hi]) == want
            elif x in (";", "{", "}"):
                return False
        return False

    def _code_exclusion(self, a, exc, file_exc, life):
        """Declared (policies 'exceptions', 'task_private'), or code that
        runs alone: init/teardown, dead code, test-only code."""
        fieldname = "%s.%s" % (a.struct, a.field)
        if a.file in file_exc:
            return ("declared-exception", file_exc[a.file]["reason"])
        if fieldname in exc:
            e = exc[fieldname]
            if not e.get("functions") or a.fn in e["functions"]:
                return ("declared-exception", e["reason"])
        tp = self.P.task_private.get(a.struct)
        if tp is not None:
            return ("task-private", "struct %s belongs to one task%s: %s" % (
                a.struct, _handed_text(tp), tp["reason"]))
        outer = self._embedded_private(a)
        if outer is not None:
            tp = self.P.task_private[outer]
            return ("task-private", "this %s is embedded in a struct %s, which belongs to "
                    "one task%s: %s" % (a.struct, outer, _handed_text(tp), tp["reason"]))
        if (a.file, a.fn) in life:
            return ("lifecycle", "%s() is an init/teardown function%s" % (
                a.fn, "" if self.P.is_lifecycle(a.fn) else
                " (only called from init/teardown functions)" if (a.file, a.fn) not in
                self.init_fns else " (only called during init, from init functions or "
                "branches where a flag only init sets is set)"))
        e = self.in_init_branch(a.file, a.tok) if a.tok is not None else None
        if e is not None:
            return ("lifecycle", "%s() makes it only during init, where %s has %s set: %s" % (
                a.fn, e["field"], e["bit"], e["reason"]))
        key = (a.file, a.fn)
        if key in self.dead:
            return ("dead-code", self.dead[key])
        if a.line in self.dead_lines.get(a.file, ()):
            return ("dead-code", "inside a preprocessor block that is never compiled")
        why = self.value_dead(a)
        if why is not None:
            return ("dead-code", why)
        if key in self.testonly and not a.test:
            return ("test-only", self.testonly[key])
        return None

    def _embedded_private(self, a):
        """The task-private struct (policies 'task_private') that embeds
        the object of access a, by the paths instances.py follows
        (embedded_in()), or None."""
        types = self.__dict__.get("_tpmembers")
        if types is None:
            types = self._tpmembers = set()
            for s in self.P.task_private:
                for m in (self.src.structs.get(s) or {}).values():
                    if not m.pointer and not m.array and m.category == "aggregate":
                        types.add(csrc.struct_name(m.type))
        if a.struct not in types:
            return None
        return self.embedded_in(a, self.P.task_private)

    def _object_exclusion(self, a):
        """An object no other task reaches at a: private to the function
        (private.py, detach.py, unpublished.py), or a store made when a
        reference count says no other task holds one."""
        why = self._private_why(a)
        if why is not None:
            return ("private", why)
        if a.tok is not None and a.kind in ("write", "rmw", "read"):
            why = self._zero_holders_at(a)
            if why:
                return ("refcount-guarded", why)
        return None

    def _zero_holder_uses(self):
        """A store made when a count says 'no holder' (the '== 0' and
        dec-and-test forms, where the count may be a resource's, not the
        object's own) races with no task that holds a count: the field
        points to something that exists only while the count is not zero,
        so a task that uses it holds one.  A task that only tests it
        ('f->workers != NULL') needs no count and may race: then the
        stores of that field are judged as usual."""
        tests = set()
        for a in self.accesses:
            if a.kind != "read" or a.tok is None or a.exclusion is not None or \
                    a.struct is None:
                continue
            if any(h != "irqs-off" and not h.startswith("?") and h not in self.phase_locks
                   and h[:-2] not in self.phase_locks for h in (a.held or ())):
                continue                         # under a lock: races with no store
            toks = self.src.toks[a.file]
            k = a.tok
            if toks[k + 1].text in ("->", "["):
                continue                         # dereferenced: a use
            j = k - 1
            while j > 1 and toks[j].text in ("->", ".") and toks[j - 1].kind == "id":
                j -= 2
            if toks[k + 1].text in (",", ")") and toks[j + 1].kind == "id" and \
                    toks[j].text in ("(", ",") and \
                    self._call_arg(toks, k, a.func.body_start) is not None:
                continue                         # handed to a call as is
            tests.add((a.struct, a.field))
        for a in self.accesses:
            if a.exclusion and a.exclusion[0] == "refcount-guarded" and \
                    a.kind != "read" and "no reference is held" in a.exclusion[1] and \
                    (a.struct, a.field) in tests:
                a.exclusion = None

    # refcount_t calls whose true branch means 'no reference is left'
    _REF_ZERO = ("refcount_dec_and_test", "refcount_dec_and_lock",
                 "refcount_dec_and_lock_irqsave", "refcount_dec_and_mutex_lock")
    # dec-and-lock calls: true with the last reference gone and the lock of
    # the structure that finds the object held (the atomic_t forms are
    # reference counts by their name: the lock they take is a lookup's)
    _REF_ZERO_LOCKED = ("refcount_dec_and_lock", "refcount_dec_and_lock_irqsave",
                        "refcount_dec_and_mutex_lock", "atomic_dec_and_lock",
                        "atomic_dec_and_lock_irqsave", "atomic_dec_and_mutex_lock")

    def _zero_holders(self, fn):
        """Regions of fn where a reference count shows that no other task
        holds a reference to the object X that embeds it: after 'if
        (refcount_read(&X->refs) > N) return;' (nobody beyond the N known
        holders), inside 'if (refcount_read(&X->refs) == 0) {...}', and
        inside the true branch of refcount_dec_and_test() and friends.
        Also, for the dec-and-lock forms, the window where their lock is
        still held (_locked_windows()), where loads are safe too when
        policies/ 'lifetime_counts' declares the count X's own.
        [(X, lo, hi, why, count)]: token range, X not assigned inside;
        count: the count member of such a window, else None."""
        key = (fn.file, fn.body_start)
        c = self._zhcache.get(key)
        if c is not None:
            return c
        out = []
        toks = self.src.toks[fn.file]
        lo, hi = fn.body_start, fn.body_end
        for k in range(lo + 1, hi - 8):
            if toks[k].text != "if" or toks[k + 1].text != "(":
                continue
            r = self._zero_region(toks, k, hi)
            if r is None:
                continue
            x, (rlo, rhi, why) = r
            out.append((x, rlo, _unassigned(toks, x, rlo, rhi), why, None))
        for (x, rlo, rhi, why, cnt) in _locked_windows(toks, lo, hi, self._REF_ZERO_LOCKED):
            out.append((x, rlo, _unassigned(toks, x, rlo, rhi), why, cnt))
        self._zhcache[key] = out
        return out

    def _zero_region(self, toks, k, hi):
        """(X, (lo, hi, why)) when the if at toks[k] tests a reference count
        of X so that no other task holds a reference in that token range
        (_zero_holders()), else None."""
        close = csrc.match_paren(toks, k + 1)
        j = k + 2
        neg = toks[j].text == "!"
        if neg:
            j += 1
        call = toks[j].text
        if toks[j + 1].text != "(" or toks[j + 2].text != "&" or toks[j + 3].kind != "id" \
                or toks[j + 4].text != "->" or toks[j + 5].kind != "id":
            return None
        x, cnt = toks[j + 3].text, toks[j + 5].text
        cend = csrc.match_paren(toks, j + 1)
        rest = [t.text for t in toks[cend + 1:close]]
        region = None
        if call == "refcount_read" and not neg and len(rest) == 2 and \
                rest[0] in (">", ">=", "!=") and _returns(toks, close + 1, hi):
            # 'if (refcount_read(&x->refs) > 2) return;': below it, the
            # object has no holder but the ones the function knows of
            end = _returns(toks, close + 1, hi)
            region = (end + 1, hi, "after '%s' returns when other tasks hold "
                      "references at line %d" % ("if (refcount_read(&%s->%s) %s %s)"
                                                 % (x, cnt, rest[0], rest[1]), toks[k].line))
        elif (call == "refcount_read" and ((not neg and rest == ["==", "0"]) or
                                           (neg and not rest))) or \
                (call in self._REF_ZERO and not neg and not rest):
            # the true branch: no reference is held
            b = close + 1
            if toks[b].text == "{":
                e = csrc.match_paren(toks, b)
            else:
                e = b
                while e < hi and toks[e].text != ";":
                    e += 1
            region = (b, e, "in the branch where %s(&%s->%s) says no reference is "
                      "held (line %d)" % (call, x, cnt, toks[k].line))
        if region is None:
            return None
        return x, region

    def _zero_holders_at(self, a):
        """Why the store a to X->f cannot race with a task holding a
        reference to X (the only tasks that may touch X without its
        lock), or None."""
        if a.base is None or not re.fullmatch(r"\w+", a.base.strip()):
            return None
        x = a.base.strip()
        for (name, lo, hi, why, cnt) in self._zero_holders(a.func):
            if cnt is not None and "%s.%s" % (a.struct, cnt) not in self.P.lifetime_counts:
                continue                 # a count that may be a resource's
            if name == x and lo <= a.tok < hi and (cnt or a.kind != "read"):
                if a.kind == "read":
                    return "load of %s->%s %s: a task that stores it holds a reference " \
                        "or that lock" % (x, a.field, why)
                return "store to %s->%s %s: tasks that read it without the lock hold " \
                    "a reference" % (x, a.field, why)
        return None

    def _bitop(self, a):
        for c in reversed(a.ctx):
            if c in self.P.bitops:
                return c
            if c:
                return None
        return None


def _handed_text(tp):
    """' at a time' for a struct its task hands to the functions of
    'handed_to' while it waits for them."""
    if not tp.get("handed_to"):
        return ""
    return " at a time (its task hands it to %s() and waits for them)" % (
        "(), ".join(tp["handed_to"]))


def _locked_windows(toks, lo, hi, calls):
    """The windows of toks[lo:hi] where a dec-and-lock call, CALL(&X->cnt,
    LOCK), found the last reference of X gone and still holds LOCK: no task
    holds a reference then, and one that finds X without one finds it
    through what LOCK guards, so holds LOCK.  Two forms: 'if (CALL(..))
    {...}' (its block), and 'v = CALL(..); if (!v) {... return|goto ...;}'
    (the statements after that block).  A window ends at the first unlock
    of LOCK or label; none without an unlock.  [(X, lo, hi, why, count)]."""
    out = []
    for k in range(lo + 1, hi - 8):
        if toks[k].text not in calls or toks[k + 1].text != "(" or \
                toks[k + 2].text != "&" or toks[k + 3].kind != "id" or \
                toks[k + 4].text != "->" or toks[k + 5].kind != "id" or \
                toks[k + 6].text != ",":
            continue
        cend = csrc.match_paren(toks, k + 1)
        lock = [t.text for t in toks[k + 7:cend]]
        start = None
        if toks[k - 1].text == "(" and toks[k - 2].text == "if" and \
                toks[cend + 1].text == ")" and toks[cend + 2].text == "{":
            start = cend + 3
        elif toks[k - 1].text == "=" and toks[k - 2].kind == "id" and \
                toks[k - 3].text in (";", "{", "}") and toks[cend + 1].text == ";":
            start = _after_refused(toks, cend + 2, toks[k - 2].text, hi)
        if start is None or not lock:
            continue
        end = _unlock_or_label(toks, start, hi, lock)
        if end is not None:
            out.append((toks[k + 3].text, start, end,
                        "in the branch where %s(&%s->%s, %s) says no reference is held "
                        "(line %d), before that lock's unlock" % (
                            toks[k].text, toks[k + 3].text, toks[k + 5].text,
                            "".join(lock), toks[k].line), toks[k + 5].text))
    return out


def _after_refused(toks, k, v, hi):
    """toks[k] starts 'if (!v) { ... return|goto ...; }' or 'if (!v)
    return|goto ...;': the index after it, else None."""
    if [t.text for t in toks[k:k + 5]] != ["if", "(", "!", v, ")"]:
        return None
    if toks[k + 5].text in ("return", "goto"):
        e = k + 5
        while e < hi and toks[e].text != ";":
            e += 1
        return e + 1 if e + 1 < hi else None
    if toks[k + 5].text != "{":
        return None
    e = csrc.match_paren(toks, k + 5)
    j = e - 1
    if toks[j].text != ";":
        return None
    while j > k + 5 and toks[j - 1].text not in (";", "{", "}"):
        j -= 1
    if toks[j].text not in ("return", "goto"):
        return None
    return e + 1 if e + 1 < hi else None


def _unlock_or_label(toks, k, hi, lock):
    """The first unlock of the lock spelled 'lock' (its tokens), or label,
    at or after toks[k]; None when the lock is not unlocked before hi."""
    n = len(lock)
    depth = 0
    for q in range(k, hi):
        t = toks[q].text
        if t == "{":
            depth += 1
        elif t == "}":
            depth -= 1
            if depth < 0:
                return None              # the enclosing block ends, still locked
        elif toks[q].kind == "id" and toks[q + 1].text == ":" and \
                toks[q - 1].text in (";", "{", "}"):
            return q
        elif "unlock" in t and toks[q + 1].text == "(" and \
                [x.text for x in toks[q + 2:q + 2 + n]] == lock:
            return q
    return None


def _unassigned(toks, x, lo, hi):
    """The end of toks[lo:hi] cut at the first assignment of x."""
    for q in range(lo, hi - 1):
        if toks[q].text == x and toks[q + 1].text == "=" and \
                toks[q - 1].text not in ("->", "."):
            return q
    return hi
