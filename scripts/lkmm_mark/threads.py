# SPDX-License-Identifier: GPL-2.0-only
"""Stage 3d, part of the contexts (contexts.py): accesses that one thread
makes one after the other.  The thread kthread_run() starts runs on one
CPU at a time, and so does a work item: two accesses reached only from
one such thread, or only from one work item's function to the struct
that embeds the work item, never run side by side.

A thread's lifetime (policies/ 'thread_lifetimes'): the creation of a
thread orders everything its creator did before the kthread_run() (or
kthread_create(), which comes before the wake-up) before everything the
thread does.  So an access x a starter makes before the start and an
access y reached only from that thread cannot run side by side when
(not_started()):
  1. x is in a function that starts a thread of the group, before every
     start of the group's threads in it, on every path: no start in a
     loop, no goto after the first start back to a label above x;
  2. every entry point y is reached from is a thread of one declared
     group (a thread and the threads of its 'also', which may call it:
     a rescan thread that runs the scan thread's function), so every
     run of y is in a thread some start of the group began;
  3. no thread of the group reaches a starter (a thread restarting its
     own group is no earlier start);
  4. (the fact) while a starter makes an access before its start, no
     thread of the group runs for that object: the starters run before
     any (at mount) or after a stop that waited for the one that ran.
     The engine asks for evidence of that wait: every start keeps its
     task in a field of the object (`x->tsk = kthread_run(fn, ...)`) that
     the declared stop function reads to stop it, or (an entry with
     'held') every start is made holding that lock exclusively, a
     function the group's threads reach gives it back (the thread holds
     it until it ends) and the stop function takes it (waits for the
     thread to end).
A run of y then is in a thread started after x by the same run of the
starter (ordered by the creation) or by a later one (ordered by 4.),
never in one started before x that still runs.  What 4. cannot check is
the claim itself: a starter called where a thread of the group may still
run (a remount that skips the stop) breaks it, and so would a starter
that touches another object's field than the one its thread works on.

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
        """One of a and b is reached only from the threads of one group
        that policies/ 'thread_lifetimes' declares (a thread and its
        'also'), and the other is made by a function that starts one of
        them, before every start of the group's threads there, on every
        path (_before_start()): no thread of the group runs then, and one
        it starts later is created after it, which orders the access
        before everything the thread does."""
        if not self.P.thread_lifetimes:
            return False
        starts = self.thread_starts()
        for x, y in ((a, b), (b, a)):
            groups = {self._thread_groups.get(t) for t in self.roots_of(y.fn) or ()}
            if len(groups) != 1 or None in groups:
                continue
            (g,) = groups
            if self._before_start(x, [s for t in sorted(g) for s in starts[t]]):
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
        for the threads policies/ 'thread_lifetimes' declares, a group
        (a thread and its 'also') at a time: every start of each keeps
        the task in a field (`x->f = kthread_run(fn, ..)`) that the
        declared stop function reads, or, for an entry with 'held', is
        made holding that lock exclusively, which the stop function takes
        and a function the group's threads reach gives back; a group
        with a thread started otherwise, or by a function one of them
        reaches itself, has none.  Sets ._thread_groups (thread -> its
        group)."""
        c = self.__dict__.get("_threadstarts")
        if c is not None:
            return c
        c = self._threadstarts = {}
        self._thread_groups = {}
        for spec in self.P.thread_lifetimes:
            g = frozenset([spec["thread"]] + list(spec.get("also", ())))
            found = {t: self._starts_of(t) for t in g}
            if not all(found.values()) or not self._starts_kept(spec, g, found):
                continue
            for t in g:
                c[t] = [(cl.file, cl.name, k) for (cl, k) in found[t]]
                self._thread_groups[t] = g
        return c

    def _starts_of(self, t):
        """[(starter, token of the call)] of the kthread_run()s of t."""
        out = []
        for call in _THREAD_CALLS:
            for (caller, _, k) in self.calls.get(call, ()):
                args = self._call_args(caller.file, k) or []
                toks = self.src.toks[caller.file]
                if args and args[0][1] - args[0][0] == 1 and toks[args[0][0]].text == t:
                    out.append((caller, k))
        return out

    def _starts_kept(self, spec, g, found):
        """Every start of the group's threads is made by a function none
        of them reaches, and keeps its task where the stop function
        reads it, or holds the entry's 'held' lock (_start_held())."""
        held = spec.get("held")
        stop = set()
        if held is None:
            stop = {(x.struct, x.field) for x in self.accesses
                    if x.fn == spec["stop"] and x.kind == "read"}
        elif spec["stop"] not in self._lock_users(held, "acquire") or \
                not any((self.roots_of(fn) or frozenset()) & g for fn in self._lock_users(held, "release")):
            return False
        for t in g:
            for (cl, k) in found[t]:
                if (self.roots_of(cl.name) or g) & g:
                    return False
                if (self._task_field(cl, k) not in stop) if held is None \
                        else not self._start_held(cl, k, held):
                    return False
        return True

    def _start_held(self, caller, k, lock):
        """The lock flow of caller holds lock exclusively at the call toks[k]."""
        res = self.flows.get((caller.file, caller.name))
        return any(kk == k and lock in st.held for (kk, _, st) in (res.calls if res else ()))

    def _lock_users(self, lock, op):
        """Names of the functions that call a lock function (policies/
        'lock_functions') that takes (op 'acquire') or gives back
        ('release') lock."""
        names = set()
        for name, spec in self.P.lockfns.items():
            for sp in [spec] + list(spec.get("variants", ())):
                wf = sp.get("when_field") or [None, None]
                if sp.get("op") == op and lock in (sp.get("lock"), wf[1]):
                    names.add(name)
        return {caller.name for n in names for (caller, _, _) in self.calls.get(n, ())}

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
