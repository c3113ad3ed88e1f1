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
                    out[fn].append((t.text, f, t.line))
        return out


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
                for member, _, _ in regs:
                    spec = self.P.ops_entry_locks[member]
                    for lk in [spec] + list(spec.get("also", ())):
                        n = mode_name(lk["lock"], lk)
                        if n not in common and not (n.endswith(":r") and n[:-2] in common):
                            out.setdefault((fn.file, fn.name), set()).add(n)
        return out
