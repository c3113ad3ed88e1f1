# SPDX-License-Identifier: GPL-2.0-only
"""Stage 3d, part of the contexts (contexts.py): accesses that one thread
makes one after the other.  The thread kthread_run() starts runs on one
CPU at a time, and so does a work item: two accesses reached only from
one such thread, or only from one work item's function to the struct
that embeds the work item, never run side by side.

Reads .src, .calls (callgraph.py), entry_points(), context_of() and
roots_of() (contexts.py), .P.work_items.  Sets nothing on the accesses;
pairs.py asks same_thread().
"""
import collections


class Threads:
    def same_thread(self, a, b):
        """Both accesses are reached only from one thread that
        kthread_run() starts (the same entry point, of kind 'thread'), or
        from one work item's function, to the struct that embeds the work
        item (_same_work_item())."""
        if self._same_work_item(a, b):
            return True
        entries = self.entry_points()
        for x in (a, b):
            # cheap first: the nearest entry point above each is a thread
            root = self.context_of(x.fn).split("(", 1)[0]
            if entries.get(root, ("",))[0] != "thread":
                return False
        ra, rb = self.roots_of(a.fn), self.roots_of(b.fn)
        if not ra or ra != rb or len(ra) != 1:
            return False
        (r,) = ra
        return self.entry_points().get(r, ("",))[0] == "thread"

    def _same_work_item(self, a, b):
        """Both accesses are to fields of a struct S and reached only from
        the function of a work item embedded in S (policies/ 'work_items':
        'INIT_WORK(&s->work, fn)'): a work item never runs on two CPUs at
        once, so the accesses its function makes to its own object come
        one after the other (another object's work item is another
        object)."""
        if a.struct != b.struct or not self.P.work_items:
            return False
        ra = self.roots_of(a.fn)
        if not ra or len(ra) != 1 or ra != self.roots_of(b.fn):
            return False
        (r,) = ra
        return self.work_items().get(r) == a.struct

    def work_items(self):
        """{function name: the struct that embeds the work item it is the
        function of}, for the functions every registration of which is a
        work item's (policies/ 'work_items'), all in one struct."""
        c = self.__dict__.get("_workitems")
        if c is not None:
            return c
        found = collections.defaultdict(set)
        for spec in self.P.work_items:
            for (caller, _, k) in self.calls.get(spec["call"], ()):
                args = self._call_args(caller.file, k) or []
                if max(spec["work"], spec["fn"]) >= len(args):
                    continue
                toks = self.src.toks[caller.file]
                fa, fb = args[spec["fn"]]
                if fb - fa != 1 or toks[fa].kind != "id":
                    continue
                wa, wb = args[spec["work"]]
                name = self.lock_name_of(caller.file, toks, wa, wb)
                found[toks[fa].text].add(name.split(".", 1)[0] if name and "." in name
                                         and not name.startswith("?") else None)
        c = self._workitems = {fn: next(iter(s)) for fn, s in found.items()
                               if len(s) == 1 and None not in s}
        return c
