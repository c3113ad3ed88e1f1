# SPDX-License-Identifier: GPL-2.0-only
"""Stage 3d, part of the contexts (contexts.py): accesses that one thread
makes one after the other.  The thread kthread_run() starts runs on one
CPU at a time, and so does a work item: two accesses reached only from
one such thread, or only from one work item's function to the struct
that embeds the work item, never run side by side.

A thread's lifetime (policies/ 'thread_lifetimes'): one thread per
object, kept in a field of the object (`x->tsk = kthread_run(fn, ...)`)
that the declared stop function reads to stop it, and started only while
none runs for that object.  An access its starter makes before the
start, on every path, comes before the thread exists, and so races with
none of the accesses reached only from that thread (not_started()).

Reads .src, .calls (callgraph.py), .accesses, entry_points(), context_of()
and roots_of() (contexts.py), .P.work_items, .P.thread_lifetimes.  Sets
nothing on the accesses; pairs.py asks same_thread() and not_started().
"""
import collections

from .contexts import _THREAD_CALLS
from .tokutil import _in_loop, _is_label


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
        found, names = collections.defaultdict(set), collections.defaultdict(set)
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
                names[toks[fa].text].add(name)
                found[toks[fa].text].add(name.split(".", 1)[0] if name and "." in name
                                         and not name.startswith("?") else None)
        c = self._workitems = {fn: next(iter(s)) for fn, s in found.items()
                               if len(s) == 1 and None not in s}
        # the member each is registered on ('S.work'), for workself.py
        self._workmembers = {fn: names[fn] for fn in c}
        return c

    def not_started(self, a, b):
        """One of a and b is reached only from a thread that
        policies/ 'thread_lifetimes' declares, and the other is made by a
        function that starts that thread, before the start on every path
        (_before_start()): the thread does not exist yet."""
        if not self.P.thread_lifetimes:
            return False
        for x, y in ((a, b), (b, a)):
            roots = self.roots_of(y.fn)
            if not roots or len(roots) != 1:
                continue
            (t,) = roots
            starts = self.thread_starts().get(t)
            if starts and self._before_start(x, starts):
                return True
        return False

    def _before_start(self, x, starts):
        """Access x is in a function that starts the thread, before
        every start there, none of them in a loop, and no goto after
        the first goes back to a label before x."""
        ks = [k for (f, name, k) in starts if (f, name) == (x.file, x.fn)]
        if not ks or x.tok is None or x.func is None or x.tok >= min(ks):
            return False
        toks = self.src.toks[x.file]
        lo, hi = x.func.body_start, x.func.body_end
        if any(_in_loop(toks, lo, k) for k in ks):
            return False
        labels = {toks[i].text for i in range(lo, x.tok) if _is_label(toks, i)}
        return not any(toks[i].text == "goto" and toks[i + 1].text in labels
                       for i in range(min(ks), hi))

    def thread_starts(self):
        """{thread function: [(file, starter, token of the start call)]}
        for the threads policies/ 'thread_lifetimes' declares, every start
        of which stores the task in a field (`x->f = kthread_run(fn, ..)`)
        that the declared stop function reads; a thread started
        otherwise, or by a function the thread itself reaches, has
        none."""
        c = self.__dict__.get("_threadstarts")
        if c is not None:
            return c
        c = self._threadstarts = {}
        for spec in self.P.thread_lifetimes:
            t = spec["thread"]
            stop = {(x.struct, x.field) for x in self.accesses
                    if x.fn == spec["stop"] and x.kind == "read"}
            starts = []
            for call in _THREAD_CALLS:
                for (caller, _, k) in self.calls.get(call, ()):
                    args = self._call_args(caller.file, k) or []
                    toks = self.src.toks[caller.file]
                    if args and args[0][1] - args[0][0] == 1 and toks[args[0][0]].text == t:
                        starts.append((caller, k, self._task_field(caller, k)))
            if starts and all(fld in stop and t not in (self.roots_of(cl.name) or {t})
                              for (cl, _, fld) in starts):
                c[t] = [(cl.file, cl.name, k) for (cl, k, _) in starts]
        return c

    def _task_field(self, caller, k):
        """(struct, field) the start call toks[k] stores its task in
        ('x->f = kthread_run(...)'), or None."""
        toks = self.src.toks[caller.file]
        if toks[k - 1].text != "=" or toks[k - 3].text not in ("->", "."):
            return None
        for x in self.accesses:
            if x.file == caller.file and x.tok == k - 2 and x.kind == "write":
                return (x.struct, x.field)
        return None
