# SPDX-License-Identifier: GPL-2.0-only
"""Stage 3b': the locks the caller of an ops table's method holds around
it (policies/ 'ops_entry_locks': the VFS holds i_rwsem around ->unlink,
s_umount and the freeze protection around ->freeze_fs).

callers.py gives a method the declared locks at entry; a method the
target also calls by its name keeps only those its callers hold too
(_unheld_ops_locks(): a file system's sync_fs method called by its own
ioctl runs without what the VFS holds).

Reads .src, .P and sites_of() (callgraph.py).
"""
import collections

from .callers import _TOP, _held_by_all
from .lockmodes import mode_name


class OpsEntry:
    def _ops_member_at(self, toks, i, members):
        """The function toks[i] registers when it is '.member = fn' of an ops
        table initialiser with member in members, else None."""
        t = toks[i]
        if t.kind == "id" and t.text in members and 0 < i < len(toks) - 3 and \
                toks[i - 1].text == "." and toks[i + 1].text == "=" and \
                toks[i + 2].kind == "id" and toks[i + 3].text in (",", "}") and \
                toks[i + 2].text in self.src.by_name:
            return toks[i + 2].text
        return None


    def ops_entry_members(self):
        """_ops_members() of the members policies/ gives entry locks (the
        sources and the policies only: scan.py has it found while spatch
        runs, SOURCE_CACHES)."""
        memo = self.__dict__.setdefault("_opsentrycache", {})
        if "members" not in memo:
            memo["members"] = self._ops_members(set(self.P.ops_entry_locks) |
                                                set(self.P.ops_table_locks))
        return memo["members"]

    def _ops_members(self, members):
        """fn name -> [(member, file, line)] for the '.member = fn' entries
        of ops tables whose member is in members."""
        out = collections.defaultdict(list)
        if not members:
            return out
        for f, toks in self.src.toks.items():
            for i, t in enumerate(toks):
                fn = self._ops_member_at(toks, i, members) if t.text in members else None
                if fn is not None:
                    out[fn].append((t.text, f, t.line, _table_name(toks, i)))
        return out

    def ops_locks_of(self, member, table):
        """[(spec, lock)]: the ops_entry_locks of a method registered as
        .member of the ops table named table (None: not known), with
        those declared for that table only ('tables')."""
        specs = [self.P.ops_entry_locks[member]] if member in self.P.ops_entry_locks else []
        specs += [c for c in self.P.ops_table_locks.get(member, ()) if table in c["tables"]]
        return [(c, lk) for c in specs for lk in [c] + list(c.get("also", ()))]


    def _unheld_ops_locks(self, ops_entry, entry):
        """{function key: the locks of its ops_entry_locks that a call
        the target makes to it does not hold}: the method is also called
        directly, by name, by a caller that does not hold what the VFS
        holds around the method (a file system's sync_fs method called
        by its own ioctl)."""
        out = {}
        clocks = list(self.P.container_locks.values())
        for name, regs in ops_entry.items():
            for fn in self.src.by_name.get(name, ()):
                # calls by its name (a call of the member, '->op(...)',
                # is the call the fact speaks of)
                sites = [x for x in self.sites_of(fn)
                         if self.src.toks[x[0].file][x[2] - 1].text not in ("->", ".")]
                if not sites:
                    continue
                common = _held_by_all(sites, entry, clocks)
                common = set() if common is _TOP else common
                for member, _, _, table in regs:
                    for _, lk in self.ops_locks_of(member, table):
                        n = mode_name(lk["lock"], lk)
                        if n not in common and not (n.endswith(":r") and n[:-2] in common):
                            out.setdefault((fn.file, fn.name), set()).add(n)
        return out


def _table_name(toks, i):
    """The name of the ops table whose initialiser holds toks[i] ('static
    const struct S name = { ... .member = fn, ... };'), or None."""
    depth = 0
    for k in range(i - 1, max(i - 2000, 0), -1):
        x = toks[k].text
        if x == "}":
            depth += 1
        elif x == "{":
            if depth == 0:
                return toks[k - 2].text if k >= 2 and toks[k - 1].text == "=" and \
                    toks[k - 2].kind == "id" else None
            depth -= 1
    return None
