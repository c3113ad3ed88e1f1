# SPDX-License-Identifier: GPL-2.0-only
"""Ownership, part 2: where a function's objects go when it hands them on.
A parameter escapes when its object may outlive the call or reach another
task (stored, returned, linked into a shared list or tree, handed to code
outside the target: a fixed point over the call graph; a function-like
macro that only dereferences it keeps nothing, _macro_derefs()); an
address escapes a function the same way.  A parameter that every call
site passes a private object (private.py), or that the call is made from
an init or teardown function, and that does not escape, is as private
as the caller's object (private_params(), a fixed point); own_param()
tells the ones whose callers own the object outright (a stack object, a
new inode), for the calling contexts (without_private()).

Reads .src, .calls (sites_of()), .addr_taken, .macro_used, .dead,
.lockfns, .P (non_retaining, publishers, task_private), and
lifecycle_functions() (owners.py).  Sets .escaping
({(file, fn, index)}: param_escapes()) and .priv_params ((file, fn) ->
name -> (why, origin): private_params(), which also resets the caches
of private.py and detach.py).  A parameter wrongly found private
here makes every access through it an 'private' exclusion.
"""
import collections

from . import csrc
from .accessors import all_macro_defs
from .locks import KEYWORDS
from .source import _short
from .tokutil import _split, _stmt_end


class Escapes:
    def param_escapes(self):
        """(file, function, index) of parameters whose object may outlive
        the call or reach other threads: stored, returned, or passed to code
        outside the target (fixed point over the target's call graph)."""
        keep = self.P.non_retaining
        esc = set()
        deps = {}
        for key, fn in self.src.funcs.items():
            for n, p in enumerate(self.params(fn)):
                if not p:
                    esc.add(key + (n,))
                    continue
                d = []
                toks = self.src.toks[fn.file]
                for k1 in self._ids(fn).get(p, ()):
                    # &p->node linked into a shared list or tree
                    k = k1 - 1
                    if toks[k].text == "&" and k1 + 1 < fn.body_end - 1 and \
                            toks[k1 + 1].text in ("->", ".") and \
                            self._published(toks, k, fn.body_start):
                        esc.add(key + (n,))
                for kind, info in self._bare_uses(fn, p):
                    if kind in ("stored", "returned"):
                        esc.add(key + (n,))
                    elif kind == "other-arg" and info not in keep:
                        esc.add(key + (n,))
                    elif kind == "arg":
                        callee, m = info
                        if callee in keep:
                            continue
                        targets = self._callee(fn, callee)
                        if not targets and self._macro_derefs(callee, m):
                            continue            # a macro that only reads through it
                        if not targets or callee in self.addr_taken:
                            esc.add(key + (n,))
                        d += [(t.file, t.name, m) for t in targets]
                deps[key + (n,)] = d
        changed = True
        while changed:
            changed = False
            for k, d in deps.items():
                if k not in esc and any(x in esc for x in d):
                    esc.add(k)
                    changed = True
        self.escaping = esc

    def _arg_escapes(self, caller, callee, n):
        keep = self.P.non_retaining
        if callee in keep or callee in self.lockfns:
            return False
        targets = self._callee(caller, callee)
        if not targets and self._macro_derefs(callee, n):
            return False
        if not targets or callee in self.addr_taken:
            return True
        return any((t.file, t.name, n) in self.escaping for t in targets)

    def _macro_derefs(self, name, n):
        """Parameter n of the function-like macro name (defined in the
        target) is only dereferenced in its body ('(p)->f', 'p->f'): the
        macro keeps no pointer to what it is given."""
        memo = self.__dict__.get("_mderefs")
        if memo is None:
            memo = self._mderefs = {}
            self._macros = collections.defaultdict(list)
            for _, (m, params, body) in all_macro_defs(self.src):
                self._macros[m].append((params, body))
        if (name, n) not in memo:
            defs = self._macros.get(name, ())
            memo[(name, n)] = bool(defs) and all(_derefs_only(params, body, n)
                                                 for params, body in defs)
        return memo[(name, n)]

    def _passes_private(self, caller, k):
        """The call at toks[k] hands the callee an object the caller owns
        outright (a stack object, one a flag says is new, a parameter only
        given those: own_arg()): it says nothing about the locks of shared
        objects."""
        key = (caller.file, k)
        c = self._ppcache.get(key)
        if c is None:
            c = False
            for n in range(len(self._call_args(caller.file, k) or ())):
                r = self._arg_private(caller, k, n)
                if r is not None and (r[1] == "stack" or r[0].startswith("new: ") or
                                      self.own_arg(caller, k, n)):
                    c = True
                    break
            self._ppcache[key] = c
        return c

    def without_private(self, sites):
        """Call sites less those that pass the callee an object their
        caller owns outright (all of them if every one does; one site is
        kept as it is)."""
        if len(sites) == 1:
            return sites
        return [x for x in sites if not self._passes_private(x[0], x[2])] or sites

    def _arg_private(self, caller, k, n):
        """Why argument n of the call at toks[k] is an object private to
        the caller, with the kind of its origin; or None."""
        toks = self.src.toks[caller.file]
        args = self._call_args(caller.file, k)
        if args is None or n >= len(args):
            return None
        a, b = args[n]
        if b - a == 1 and toks[a].text == "NULL":
            return ("no object (NULL)", "alloc")
        if b - a == 2 and toks[a].text == "&":
            r = self._private_name(caller, toks[a + 1].text)
            if r is not None and r[1] == "alloc" and not r[0].startswith("detached"):
                # &x of a pointer to a private object: the callee reaches
                # that object through '*p' (foo_add_map(..., &m, ...) on
                # an m foo_alloc_map() just returned)
                return ("the address of '%s', which is %s" % (toks[a + 1].text, r[0]), "ptr")
            if r is None:
                # a struct on the caller's stack before the first statement
                # that may let another task reach it: the callee, which
                # does not keep the address (else this call would be that
                # statement), runs while it is still the caller's alone
                # (foo_init_ctx(&ctx, inode) before the fsync links ctx
                # into a list other tasks walk)
                w = self._unpublished_stack_cut(caller).get(toks[a + 1].text)
                if w is not None and w[0] < a < w[1]:
                    return ("'%s', a struct on %s()'s stack, %s" % (
                        toks[a + 1].text, caller.name,
                        w[2].replace("a stack object not yet published: ",
                                     "not yet published: ")), "stack")
            return r if r is not None and r[0] == "stack object" else None
        if b - a == 4 and toks[a].text == "&" and toks[a + 1].kind == "id" and \
                toks[a + 2].text in ("->", ".") and toks[a + 3].kind == "id":
            # &x->member / &x.member: a struct inside the private object
            # x (foo_init_ref(fs, &ref->node, ...) on a ref just
            # allocated)
            r = self._private_name(caller, toks[a + 1].text)
            if r is not None and (r[0] == "stack object") == (toks[a + 2].text == ".") and \
                    self._fresh_at(caller, toks[a + 1].text, a):
                return r
            return None
        if b - a == 1:
            r = self._private_name(caller, toks[a].text)
            if r is not None and not self._fresh_at(caller, toks[a].text, a):
                return None
            if r is None:
                why = self._detached_at(caller, toks[a].text, k)
                return (why, "alloc") if why else None
            return r if r[0] != "stack object" else None
        return None

    def _member_addr_escapes(self, fn, k):
        """&x.m (or &x.m.n) at toks[k]: linked into a shared list or tree,
        or handed to a call that may keep it, or used any other way than as
        a whole call argument (stored, returned)."""
        toks = self.src.toks[fn.file]
        lo = fn.body_start
        if self._published(toks, k, lo):
            return True
        e = k + 2
        while toks[e].text == "." and toks[e + 1].kind == "id":
            e += 2
        c = self._call_arg(toks, k, lo)
        if c is None or toks[e].text not in (",", ")") or toks[k - 1].text not in (",", "("):
            return True
        return c[0] in KEYWORDS or self._arg_escapes(fn, c[0], c[1])

    def private_params(self):
        """Parameters that only ever receive a private object: every call
        site passes a stack object, a fresh allocation, an object a
        constructor returned, or a private parameter of its own (fixed
        point).  Such a parameter is as private as the caller's object."""
        self._forget_windows()
        self._pmixed = {}
        self.priv_params = {}
        # a failed parameter is looked at again only when the private
        # parameters of the caller that failed it have changed since
        version = collections.Counter()
        blocked = {}
        # a call from init or teardown (owners.lifecycle_functions()) runs
        # when nothing else does: the object it passes is the caller's alone
        life = self.lifecycle_functions()
        for _ in range(20):
            changed = False
            for key, fn in self.src.funcs.items():
                if fn.name in self.addr_taken or fn.name in self.macro_used or key in self.dead:
                    continue
                sites = self.sites_of(fn)
                if not sites:
                    continue
                names = self.params(fn)
                mine = self.priv_params.get(key, {})
                for n, p in enumerate(names):
                    if not p or p in mine:
                        continue
                    ak = key + (p,)
                    if self._reassigned(fn, p) and self._param_mixed(fn, p) is None:
                        continue
                    b = blocked.get(ak)
                    if b is not None and version[b[0]] == b[1]:
                        continue
                    why = []
                    for (caller, st, k) in sites:
                        r = self._arg_private(caller, k, n) or (
                            ("passed during init or teardown", "alloc")
                            if (caller.file, caller.name) in life else None)
                        if r is None:
                            ck = (caller.file, caller.name)
                            blocked[ak] = (ck, version[ck])
                            break
                        why.append((caller, k, r))
                    else:
                        caller, k, r = why[0]
                        self.priv_params.setdefault(key, {})[p] = (
                            "a parameter every caller passes its own private object "
                            "(%d call%s, e.g. %s() at %s:%d)" % (
                                len(why), "s" if len(why) > 1 else "", caller.name,
                                _short(caller.file), self.src.toks[caller.file][k].line), r[1])
                        mine = self.priv_params[key]
                        version[key] += 1
                        changed = True
            if not changed:
                break
        self._forget_windows()

    def own_param(self, fn, n, _seen=None):
        """Parameter n of fn only ever receives an object its caller owns
        outright: a stack object, one a flag says is new (I_NEW), or such
        a parameter of the caller's own (a helper of the new inode's
        constructor): a call passing it says no more about the locks of
        shared objects than the caller's own call would
        (without_private())."""
        key = (fn.file, fn.name, n)
        memo = self.__dict__.setdefault("_ownmemo", {})
        if key in memo:
            return memo[key]
        seen = _seen if _seen is not None else set()
        if key in seen:
            return False                # a cycle: no caller outside it decides
        seen.add(key)
        names = self.params(fn)
        ok = n < len(names) and names[n] in self.priv_params.get((fn.file, fn.name), {})
        for (caller, _, k) in self.sites_of(fn) if ok else ():
            r = self._arg_private(caller, k, n)
            if r is None or not (r[1] == "stack" or r[0].startswith("new: ") or
                                 self.own_arg(caller, k, n, seen)):
                ok = False
                break
        memo[key] = ok
        return ok

    def own_arg(self, caller, k, n, _seen=None):
        """Argument n of the call at toks[k] is a parameter of the caller
        that own_param() finds owned outright."""
        args = self._call_args(caller.file, k)
        if not args or n >= len(args) or args[n][1] - args[n][0] != 1:
            return False
        v = self.src.toks[caller.file][args[n][0]].text
        names = self.params(caller)
        return v in names and self.own_param(caller, names.index(v), _seen)

    def _forget_windows(self):
        """The caches of private.py and detach.py: after private_params()
        has found every private parameter, the windows of objects handed
        only into them (unpublished.py _kept_privately()) are no longer
        cut at those calls."""
        self._detcache = {}
        self._privcache = {}
        self._pofcache = {}
        self._mixedcache = {}
        self._memlocals = {}
        self._outmakers = None

    def _param_mixed(self, fn, p):
        """For a parameter fn assigns again: its assignments as (token,
        fresh), headed by the entry value (fresh when every caller passes
        a private object), or None when one is not a plain 'p = ...;'."""
        key = (fn.file, fn.name, p)
        if key in self._pmixed:
            return self._pmixed[key]
        toks = self.src.toks[fn.file]
        out = [(fn.body_start, True)]
        for kind, k in self._bare_uses(fn, p):
            if kind != "assigned":
                continue
            if toks[k + 1].text != "=" or toks[k - 1].text not in (";", "{", "}", ")", "else"):
                out = None
                break
            out.append((_stmt_end(toks, k, fn.body_end), self._fresh_value(toks, k + 2)))
        self._pmixed[key] = out
        return out

    def _published(self, toks, k, lo):
        """&x.node / &x->node at toks[k] is the object a list/tree insertion
        links in."""
        c = self._call_arg(toks, k, lo)
        return c is not None and self.P.publishers.get(c[0], -1) == c[1]

    def _stays_in_task(self, fn, v):
        """Variable v of fn points to a struct that never leaves its task
        (policies 'task_private', not one it hands on: 'handed_to')."""
        tp = self.P.task_private.get(csrc.struct_name(self._decl_types(fn).get(v) or ""))
        return tp is not None and not tp.get("handed_to")

    def _addr_escapes(self, fn, k):
        """&obj at toks[k]: does the address leave fn?  Not when it is a
        whole argument of a call that does not keep it."""
        toks = self.src.toks[fn.file]
        if not hasattr(self, "escaping"):
            return True
        callee = self._call_of(toks, k, fn.body_start)
        if callee is None and toks[k - 1].text == "=" and toks[k - 2].kind == "id" and \
                toks[k - 3].text == "->" and toks[k - 4].kind == "id" and \
                toks[k - 5].text in (";", "{", "}") and \
                self._stays_in_task(fn, toks[k - 4].text):
            # 'handle->rsv = &rsv': stored in an object that
            # belongs to this task (policies 'task_private'), so the
            # address stays with the task (not one the task hands to
            # another, 'handed_to')
            return False
        if callee is None or callee in KEYWORDS:
            return True
        j = k - 1
        depth = 0
        while toks[j].text != "(" or depth:
            if toks[j].text == ")":
                depth += 1
            elif toks[j].text == "(":
                depth -= 1
            j -= 1
        for n, (a, b) in enumerate(_split(toks, j + 1, csrc.match_paren(toks, j))):
            if a == k:
                return b - a != 2 or self._arg_escapes(fn, callee, n)
        return True


def _derefs_only(params, body, n):
    """Parameter n of a macro (params, body: accessors.macro_defs()) is
    used in the body, and only as '(p)->' or 'p->'."""
    if n >= len(params):
        return False
    text = " ".join(t for _, t in body).replace("\\", " ")
    toks = csrc.tokenize(text[text.index(")") + 1:] if ")" in text else "")
    uses = [i for i, t in enumerate(toks) if t.text == params[n]]
    return bool(uses) and all(
        i + 1 < len(toks) and (toks[i + 1].text == "->" or (
            toks[i + 1].text == ")" and i + 2 < len(toks) and toks[i + 2].text == "->" and
            i > 0 and toks[i - 1].text == "(")) for i in uses)
