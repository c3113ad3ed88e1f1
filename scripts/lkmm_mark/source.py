# SPDX-License-Identifier: GPL-2.0-only
"""The analysis' raw material: the sources and the accesses.

Source holds the tokens, functions, structs and typedefs of every file of
the target (read once, possibly in a thread beside spatch: commands.py);
Access is one plain access to a struct field as the facts pass found it,
and carries its verdict (action, rule, reason) once the analysis is done.
Reads nothing of the analysis; the analysis reads Source through .src and
fills its .accesses with Access (accesses.py).
"""
import collections
import os

from . import csrc


def _short(path):
    return os.path.basename(path)


STORE_MACROS = ("WRITE_ONCE", "smp_store_release", "smp_store_mb", "rcu_assign_pointer")
# bit operations that never change the word: tests, and the wait-queue
# calls, which only hash its address (wake_up_bit() stores nothing)
NON_STORE_BITOPS = ("test_bit", "wait_on_bit", "wake_up_bit")


class Access:
    __slots__ = ("file", "line", "col", "eline", "ecol", "fn", "field", "struct", "base",
                 "kind", "macro", "tok", "held", "ctx", "func", "exclusion", "action",
                 "rule", "reason", "test", "evidence", "struct_known", "tier", "pair",
                 "contexts", "lockset_reason", "candidate", "lockset_rule", "via", "body",
                 "read_races", "diag")

    def key(self):
        return (self.file, self.line, self.col, self.eline, self.ecol)

    def where(self):
        return "%s:%d" % (_short(self.file), self.line)

    def as_dict(self):
        d = {
            "file": self.file, "line": self.line, "column": self.col,
            "end_line": self.eline, "end_column": self.ecol, "function": self.fn,
            "struct": self.struct, "field": self.field, "access": self.kind,
            "base": self.base, "macro": self.macro,
            "locks_held": sorted("%s (%s)" % (k, v.text()) for k, v in (self.held or {}).items()),
            "action": self.action, "rule": self.rule, "reason": self.reason,
            "test_code": self.test,
        }
        if getattr(self, "evidence", None) == "holds-lock":
            d["comment"] = False        # a store under a lock: no "Unlocked write"
        if self.rule == "diagnostic-read" and getattr(self, "diag", None):
            # the diagnostic the value goes to, also where no call around
            # the load shows it (diagflow.py: through a local, a return
            # value or a struct filled for a tracepoint): the comment's use
            d["diag_call"] = self.diag
        if getattr(self, "via", None):
            # an access in the body of a macro or generated function
            # (accessors.py): the call, and where the body makes it
            d["via"] = {"call": self.via[0], "file": self.via[1], "line": self.via[2],
                        "column": self.via[3]}
        tier = getattr(self, "tier", None)
        if tier is not None:
            # the racing pair (pairs.py): its counterpart and both contexts
            d["tier"] = tier
            d["lockset_reason"] = self.lockset_reason
            b = self.pair
            if b is not None:
                d["counterpart"] = {"file": b.file, "line": b.line, "function": b.fn,
                                    "access": b.kind, "macro": b.macro}
                d["contexts"] = list(self.contexts)
                if getattr(self, "read_races", None):
                    d["read_races"] = True
            else:
                d["candidate"] = self.candidate
                d["lockset_rule"] = self.lockset_rule
        return d


class Source:
    """Tokens, functions, structs of every file in the target."""

    def __init__(self, tree, files):
        self.toks = {}
        self.text = {}
        self.funcs = {}          # (file, name) -> Function
        self.by_name = collections.defaultdict(list)
        self.structs = {}
        self.struct_files = {}
        self.typedefs = {}
        self.pos = {}            # file -> (line, col) -> token index (.get())
        self.file_structs = {}   # file -> the structs it defines
        self.macro_defs = None   # accessors.macro_defs() of every file, once
        self.unreadable = {}     # (file, function) -> (line, why it cannot be read)
        for f in files:
            with open(os.path.join(tree, f), errors="replace") as fh:
                text = fh.read()
            toks = csrc.tokenize(text)
            csrc.index_parens(toks)
            self.text[f] = text
            self.toks[f] = toks
            self.pos[f] = csrc.TokIndex(toks)
            for fn in csrc.find_functions(toks, f):
                if fn.broken:
                    # both branches of an #if around a brace are kept: the
                    # body cannot be read; listed as not analysed
                    self.unreadable[(f, fn.name)] = (fn.line, "its braces do not balance "
                                                     "(an #if around one of them)")
                    continue
                # '#ifdef X / f() {...} / #else / f() {} stub': keep the
                # larger definition
                old = self.funcs.get((f, fn.name))
                if old is not None:
                    if old.body_end - old.body_start >= fn.body_end - fn.body_start:
                        continue
                    self.by_name[fn.name].remove(old)
                self.funcs[(f, fn.name)] = fn
                self.by_name[fn.name].append(fn)
            csrc.parse_typedefs(toks, self.typedefs)
            local = {}
            csrc.parse_structs(toks, f, local)
            for s, members in local.items():
                if s not in self.structs or not self.structs[s]:
                    self.structs[s] = members
                    self.struct_files[s] = f
            self.file_structs[f] = local
        for local in self.file_structs.values():
            csrc.finish_structs(local, self.typedefs)

    def member(self, struct, field, file=None):
        """The member of struct; a struct that file defines itself (three
        .c files each define their own 'struct workspace') comes first."""
        s = self.file_structs.get(file, {}).get(struct) if file else None
        if not s:
            s = self.structs.get(struct)
        if s is None:
            return None
        return s.get(field)
