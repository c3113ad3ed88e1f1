# SPDX-License-Identifier: GPL-2.0-only
"""Ownership, part 6: a new object handed to a helper inside a request
struct.  A function that reads a pointer member of a private parameter
into a local, 'dn = req->dn;', has in that local the object every caller
stored there, 'req->dn = dn;', when each caller stored its own new object
(one a flag says is new, policies 'new_object_flags', or a parameter only
ever given one) as the one store of that member it makes, before the call
and with nothing but a diagnostic call handed the struct between, and the
function hands the parameter to nothing but a diagnostic call before the
read and never stores the member (a function allocates a request,
stores the new inode in it and hands it to a helper that reads the inode
back).  private.py takes such a local as private.

Reads .src, .priv_params, .P (new_flags, diagnostic calls), the windows
of newobjects.py (through _detached_at() and _arg_private()), sites_of().
Sets only its cache (_memlocals, which escapes.py _forget_windows()
resets).  A local wrongly found here makes its accesses 'private'.
"""


class NewMembers:
    def _member_locals(self, fn):
        """'x = p->m;' of a private parameter p (not a pointer to one)
        whose every caller stored its own new object in that member,
        'v->m = w;' (_member_set_private()), and handed v on bare: x is
        w.  Before the statement fn hands p to diagnostic calls only, and
        it never stores p->m; x is assigned nothing else (a helper handed
        a request struct its caller filled with a new inode)."""
        key = (fn.file, fn.name)
        pp = self.priv_params.get(key, {})
        memo = self.__dict__.setdefault("_memlocals", {})
        if (key, len(pp)) in memo:
            return memo[(key, len(pp))]
        names = self.params(fn)
        out = memo[(key, len(pp))] = {}       # a cycle of callers finds nothing
        toks = self.src.toks[fn.file]
        ids = self._ids(fn) if pp else {}
        for k in sorted(j - 2 for q in pp for j in ids.get(q, ())
                        if fn.body_start < j - 2 < fn.body_end - 5):
            p, m, x = toks[k + 2].text, toks[k + 4].text, toks[k].text
            if toks[k + 1].text != "=" or toks[k + 3].text != "->" or \
                    toks[k + 5].text != ";" or p not in pp or pp[p][1] == "ptr" or \
                    not (toks[k - 1].text in (";", "{", "}") or
                         (toks[k - 1].text == "*" and toks[k - 2].kind == "id")) or \
                    x in names or \
                    toks[k].kind != "id" or toks[k + 4].kind != "id" or \
                    self._reassigned(fn, p) or _member_stored(toks, fn, p, m) or \
                    sum(1 for kind, _ in self._bare_uses(fn, x) if kind == "assigned") != 1 or \
                    self._handed_before(fn, p, k):
                continue
            n = names.index(p)
            whys = [self._member_set_private(c, j, n, m) for (c, _, j) in self.sites_of(fn)]
            if whys and all(whys):
                out.setdefault(x, ("the object %s->%s holds, which every caller set to "
                                   "its own (%s)" % (p, m, whys[0]), "alloc"))
        return out

    def _handed_before(self, fn, p, k):
        """fn hands p to a call other than a diagnostic one before toks[k]."""
        toks = self.src.toks[fn.file]
        for j in range(fn.body_start + 1, k):
            if toks[j].kind == "id" and toks[j + 1].text == "(" and \
                    not self.P.is_diag(toks[j].text):
                args = self._call_args(fn.file, j) or ()
                if any(toks[i].text == p for a, b in args for i in range(a, b)):
                    return True
        return False

    def _member_set_private(self, caller, k, n, m):
        """Why the call at toks[k] hands, as its argument n, a bare v whose
        member m the caller set to its own new object ('v->m = w;', w in
        a window of new_object_flags or a parameter only ever given one,
        no call that publishes or shares such an object before; the one
        store of v->m in the caller, not given away by address,
        before the call, v not assigned after it and handed to nothing
        but diagnostic calls between);
        or None."""
        args = self._call_args(caller.file, k) or ()
        toks = self.src.toks[caller.file]
        if n >= len(args) or args[n][1] - args[n][0] != 1:
            return None
        v = toks[args[n][0]].text
        sets = [j for j in range(caller.body_start + 1, caller.body_end - 4)
                if toks[j].text == v and toks[j + 1].text == "->" and toks[j + 2].text == m
                and toks[j - 1].text not in (".", "->")
                and (toks[j + 3].text in ("=", "+=", "-=", "|=", "&=") or toks[j - 1].text == "&")]
        if len(sets) != 1 or toks[sets[0] + 3].text != "=" or toks[sets[0] - 1].text == "&" or \
                toks[sets[0] - 1].text not in (";", "{", "}") or toks[sets[0] + 5].text != ";" or \
                not sets[0] < k or any(kind == "assigned" and g > sets[0]
                                       for kind, g in self._bare_uses(caller, v)):
            return None
        j, w = sets[0], toks[sets[0] + 4].text
        for g in range(j + 5, k):
            if toks[g].kind == "id" and toks[g + 1].text == "(" and \
                    not self.P.is_diag(toks[g].text) and \
                    any(toks[i].text == v for a, b in self._call_args(caller.file, g) or ()
                        for i in range(a, b)):
                return None
        d = self._detached_at(caller, w, j)
        if d is not None and d.startswith("new: ") and d == self._detached_at(caller, w, k):
            return d
        names = self.params(caller)
        ends = {f for spec in self.P.new_flags
                for f in list(spec["publish"]) + list(spec.get("shared_after", ()))}
        if w in names and not self._reassigned(caller, w) and \
                not any(toks[g].text in ends and toks[g + 1].text == "("
                        for g in range(caller.body_start + 1, k)) and \
                self._new_param(caller, names.index(w), set()):
            return "%s(), its parameter '%s' only ever given a new object" % (caller.name, w)
        return None

    def _new_param(self, fn, n, seen):
        """Parameter n of fn is private (private_params()) and every call
        of fn hands it an object a flag says is new (new_object_flags), or
        such a parameter of its own."""
        names = self.params(fn)
        if (fn.file, fn.name, n) in seen or fn.name in self.addr_taken or \
                fn.name in self.macro_used or \
                names[n] not in self.priv_params.get((fn.file, fn.name), {}):
            return False
        seen.add((fn.file, fn.name, n))
        sites = self.sites_of(fn)
        for (caller, _, k) in sites:
            r = self._arg_private(caller, k, n)
            if r is not None and r[0].startswith("new: "):
                continue
            args = self._call_args(caller.file, k) or ()
            v = self.src.toks[caller.file][args[n][0]].text \
                if n < len(args) and args[n][1] - args[n][0] == 1 else None
            names = self.params(caller)
            if v not in names or self._reassigned(caller, v) or \
                    not self._new_param(caller, names.index(v), seen):
                return False
        return bool(sites)


def _member_stored(toks, fn, p, m):
    """fn stores p->m, or takes its address."""
    for j in range(fn.body_start + 1, fn.body_end - 3):
        if toks[j].text == p and toks[j + 1].text == "->" and toks[j + 2].text == m and \
                toks[j - 1].text not in (".", "->") and \
                (toks[j - 1].text == "&" or toks[j + 3].text in
                 ("=", "+=", "-=", "|=", "&=", "++", "--")):
            return True
    return False
